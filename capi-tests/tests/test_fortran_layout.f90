! The Fortran module's bind(C) types and constants against the C header:
! sizes and field offsets of c_dds_options, c_dds_var_info, c_dds_counters,
! c_dds_settings
! (computed here with c_sizeof and c_loc) must equal sizeof/offsetof from C
! (fortran_layout.c), and every constant must have the C value and name.
! Needs no MPI.
program test_fortran_layout
  use, intrinsic :: iso_c_binding
  use ddstore
  implicit none

  interface
    function c_layout(out, cap) bind(C, name="dds_test_c_layout") result(n)
      import :: c_int64_t, c_int32_t
      integer(c_int64_t), intent(out) :: out(*)
      integer(c_int32_t), value :: cap
      integer(c_int32_t) :: n
    end function c_layout
  end interface

  type(c_dds_options), target :: o
  type(c_dds_var_info), target :: v
  type(c_dds_counters), target :: c
  type(c_dds_settings), target :: g
  integer(c_int64_t) :: want(200), got(200)
  character(len=40) :: what(200)
  integer :: n, nc, i, passed, failed

  n = 0
  call fact('sizeof(dds_options)', int(c_sizeof(o), c_int64_t))
  call fact('dds_options.struct_size', off(c_loc(o%struct_size), c_loc(o)))
  call fact('dds_options.method', off(c_loc(o%method), c_loc(o)))
  call fact('dds_options.role', off(c_loc(o%role), c_loc(o)))
  call fact('dds_options.width', off(c_loc(o%width), c_loc(o)))
  call fact('dds_options.n_core', off(c_loc(o%n_core), c_loc(o)))
  call fact('dds_options.handshake_dir', off(c_loc(o%handshake_dir), c_loc(o)))
  call fact('dds_options.fabric_provider', off(c_loc(o%fabric_provider), c_loc(o)))
  call fact('dds_options.fabric_iface', off(c_loc(o%fabric_iface), c_loc(o)))
  call fact('dds_options.nic_map', off(c_loc(o%nic_map), c_loc(o)))
  call fact('dds_options.gpu', off(c_loc(o%gpu), c_loc(o)))
  call fact('dds_options.gpu_staging', off(c_loc(o%gpu_staging), c_loc(o)))
  call fact('dds_options.batch_mode', off(c_loc(o%batch_mode), c_loc(o)))

  call fact('sizeof(dds_var_info)', int(c_sizeof(v), c_int64_t))
  call fact('dds_var_info.struct_size', off(c_loc(v%struct_size), c_loc(v)))
  call fact('dds_var_info.item_size', off(c_loc(v%item_size), c_loc(v)))
  call fact('dds_var_info.total_rows', off(c_loc(v%total_rows), c_loc(v)))
  call fact('dds_var_info.local_rows', off(c_loc(v%local_rows), c_loc(v)))
  call fact('dds_var_info.row_elems', off(c_loc(v%row_elems), c_loc(v)))
  call fact('dds_var_info.row_bytes', off(c_loc(v%row_bytes), c_loc(v)))
  call fact('dds_var_info.method', off(c_loc(v%method), c_loc(v)))
  call fact('dds_var_info.n_ranks', off(c_loc(v%n_ranks), c_loc(v)))
  call fact('dds_var_info.transport', off(c_loc(v%transport), c_loc(v)))
  call fact('sizeof(dds_var_info.transport)', int(size(v%transport), c_int64_t))
  call fact('dds_var_info.node_local', off(c_loc(v%node_local), c_loc(v)))
  call fact('dds_var_info.node_ranks', off(c_loc(v%node_ranks), c_loc(v)))
  call fact('dds_var_info.is_ragged', off(c_loc(v%is_ragged), c_loc(v)))
  call fact('dds_var_info.total_samples', off(c_loc(v%total_samples), c_loc(v)))
  call fact('dds_var_info.local_samples', off(c_loc(v%local_samples), c_loc(v)))
  call fact('dds_var_info.total_items', off(c_loc(v%total_items), c_loc(v)))

  call fact('sizeof(dds_counters)', int(c_sizeof(c), c_int64_t))
  call fact('dds_counters.struct_size', off(c_loc(c%struct_size), c_loc(c)))
  call fact('dds_counters.profiling', off(c_loc(c%profiling), c_loc(c)))
  call fact('dds_counters.calls', off(c_loc(c%calls), c_loc(c)))
  call fact('dds_counters.rows', off(c_loc(c%rows), c_loc(c)))
  call fact('dds_counters.bytes', off(c_loc(c%bytes), c_loc(c)))
  call fact('dds_counters.rows_local', off(c_loc(c%rows_local), c_loc(c)))
  call fact('dds_counters.rows_remote', off(c_loc(c%rows_remote), c_loc(c)))
  call fact('dds_counters.lock_wait_ns', off(c_loc(c%lock_wait_ns), c_loc(c)))
  call fact('dds_counters.mr_ns', off(c_loc(c%mr_ns), c_loc(c)))
  call fact('dds_counters.mr_miss', off(c_loc(c%mr_miss), c_loc(c)))
  call fact('dds_counters.read_ns', off(c_loc(c%read_ns), c_loc(c)))
  call fact('dds_counters.cq_ns', off(c_loc(c%cq_ns), c_loc(c)))
  call fact('dds_counters.req_bytes_sent', off(c_loc(c%req_bytes_sent), c_loc(c)))
  call fact('dds_counters.req_bytes_recv', off(c_loc(c%req_bytes_recv), c_loc(c)))
  call fact('dds_counters.batch_mode', off(c_loc(c%batch_mode), c_loc(c)))
  call fact('dds_counters.batch_checks', off(c_loc(c%batch_checks), c_loc(c)))
  call fact('dds_counters.batch_calls_onesided', off(c_loc(c%batch_calls_onesided), c_loc(c)))

  call fact('sizeof(dds_settings)', int(c_sizeof(g), c_int64_t))
  call fact('dds_settings.struct_size', off(c_loc(g%struct_size), c_loc(g)))
  call fact('dds_settings.method', off(c_loc(g%method), c_loc(g)))
  call fact('dds_settings.role', off(c_loc(g%role), c_loc(g)))
  call fact('dds_settings.batch_mode', off(c_loc(g%batch_mode), c_loc(g)))
  call fact('dds_settings.gpu', off(c_loc(g%gpu), c_loc(g)))
  call fact('dds_settings.gpu_staging', off(c_loc(g%gpu_staging), c_loc(g)))
  call fact('dds_settings.profiling', off(c_loc(g%profiling), c_loc(g)))
  call fact('dds_settings.node_local', off(c_loc(g%node_local), c_loc(g)))
  call fact('dds_settings.mpi_progress', off(c_loc(g%mpi_progress), c_loc(g)))
  call fact('dds_settings.handshake_dir', off(c_loc(g%handshake_dir), c_loc(g)))
  call fact('sizeof(dds_settings.handshake_dir)', int(size(g%handshake_dir), c_int64_t))
  call fact('DDS_SETTINGS_PATH_BYTES', int(DDS_SETTINGS_PATH_BYTES, c_int64_t))

  call fact('DDS_OK', int(DDS_OK, c_int64_t))
  call fact('DDS_ERR_INVALID_ARGUMENT', int(DDS_ERR_INVALID_ARGUMENT, c_int64_t))
  call fact('DDS_ERR_UNKNOWN_VARIABLE', int(DDS_ERR_UNKNOWN_VARIABLE, c_int64_t))
  call fact('DDS_ERR_DUPLICATE_VARIABLE', int(DDS_ERR_DUPLICATE_VARIABLE, c_int64_t))
  call fact('DDS_ERR_INDEX_OUT_OF_RANGE', int(DDS_ERR_INDEX_OUT_OF_RANGE, c_int64_t))
  call fact('DDS_ERR_MISMATCH', int(DDS_ERR_MISMATCH, c_int64_t))
  call fact('DDS_ERR_BAD_STATE', int(DDS_ERR_BAD_STATE, c_int64_t))
  call fact('DDS_ERR_UNSUPPORTED', int(DDS_ERR_UNSUPPORTED, c_int64_t))
  call fact('DDS_ERR_MPI', int(DDS_ERR_MPI, c_int64_t))
  call fact('DDS_ERR_FABRIC', int(DDS_ERR_FABRIC, c_int64_t))
  call fact('DDS_ERR_GPU', int(DDS_ERR_GPU, c_int64_t))
  call fact('DDS_ERR_TIMEOUT', int(DDS_ERR_TIMEOUT, c_int64_t))
  call fact('DDS_ERR_NO_MEMORY', int(DDS_ERR_NO_MEMORY, c_int64_t))
  call fact('DDS_ERR_IO', int(DDS_ERR_IO, c_int64_t))
  call fact('DDS_ERR_INTERNAL', int(DDS_ERR_INTERNAL, c_int64_t))
  call fact('DDS_METHOD_MPI', int(DDS_METHOD_MPI, c_int64_t))
  call fact('DDS_METHOD_FABRIC', int(DDS_METHOD_FABRIC, c_int64_t))
  call fact('DDS_METHOD_SPLIT', int(DDS_METHOD_SPLIT, c_int64_t))
  call fact('DDS_ROLE_CORE', int(DDS_ROLE_CORE, c_int64_t))
  call fact('DDS_ROLE_EXTRA', int(DDS_ROLE_EXTRA, c_int64_t))
  call fact('DDS_BATCH_ENV', int(DDS_BATCH_ENV, c_int64_t))
  call fact('DDS_BATCH_COLLECTIVE', int(DDS_BATCH_COLLECTIVE, c_int64_t))
  call fact('DDS_BATCH_ONESIDED', int(DDS_BATCH_ONESIDED, c_int64_t))
  call fact('DDS_BATCH_AUTO', int(DDS_BATCH_AUTO, c_int64_t))

  call fact('sizeof(int) = c_int', int(c_sizeof(0_c_int), c_int64_t))
  call fact('sizeof(size_t) = c_size_t', int(c_sizeof(0_c_size_t), c_int64_t))
  call fact('sizeof(void*) = c_ptr', int(c_sizeof(c_null_ptr), c_int64_t))
  call fact('sizeof(enum dds_status) = c_int', int(c_sizeof(0_c_int), c_int64_t))

  passed = 0
  failed = 0
  nc = int(c_layout(want, int(size(want), c_int32_t)))
  if (nc /= n) then
    print '(a, i0, a, i0, a)', 'the C helper has ', nc, ' facts, this test ', n, ': update both together'
    failed = failed + 1
  end if
  do i = 1, min(n, nc)
    if (got(i) /= want(i)) then
      print '(a, a, i0, a, i0)', trim(what(i)), ': Fortran ', got(i), ', C ', want(i)
      failed = failed + 1
    else
      passed = passed + 1
    end if
  end do

  ! dds_options_init fills the Fortran struct with the C size in struct_size.
  o%struct_size = -1
  call check(c_dds_options_init(o) == DDS_OK .and. o%struct_size == c_sizeof(o), 'dds_options_init struct_size')
  call check(.not. c_associated(o%handshake_dir) .and. o%method == DDS_METHOD_MPI .and. o%width == 0, &
             'dds_options_init defaults')
  ! Every status has the name the module's constants suggest.
  call check(dds_status_string(DDS_OK) == 'DDS_OK', 'name of DDS_OK')
  call check(dds_status_string(DDS_ERR_MISMATCH) == 'DDS_ERR_MISMATCH', 'name of DDS_ERR_MISMATCH')
  call check(dds_status_string(DDS_ERR_INTERNAL) == 'DDS_ERR_INTERNAL', 'name of DDS_ERR_INTERNAL')
  call check(len(dds_version()) > 0, 'dds_version')

  print '(a, i0, a, i0, a)', 'test_fortran_layout: ', passed, ' passed, ', failed, ' failed'
  if (failed /= 0) error stop 1

contains

  subroutine fact(name, value)
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: value
    n = n + 1
    what(n) = name
    got(n) = value
  end subroutine fact

  ! Byte offset of a field from the start of its struct.
  function off(field, base) result(d)
    type(c_ptr), intent(in) :: field, base
    integer(c_int64_t) :: d
    d = int(transfer(field, 0_c_intptr_t) - transfer(base, 0_c_intptr_t), c_int64_t)
  end function off

  subroutine check(ok, label)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: label
    if (.not. ok) then
      print '(a, a)', 'failed: ', label
      failed = failed + 1
    else
      passed = passed + 1
    end if
  end subroutine check
end program test_fortran_layout
