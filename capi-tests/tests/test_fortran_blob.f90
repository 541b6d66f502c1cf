! Blobs through the Fortran module (dds_publish_blob, dds_wait_blob): each
! rank's own method-2 extra member on one directory; rank 0 publishes, every
! rank reads back a blob larger than the wrapper's first buffer and an empty
! one; a time-out and an oversized blob fail through `status=` with messages
! naming them.
program test_fortran_blob
  use, intrinsic :: iso_c_binding
  use mpi
  use ddstore
  implicit none

  type(dds_store_t) :: store
  integer(c_int8_t), allocatable :: big(:), got(:), over(:)
  character(len=64) :: dir
  integer :: rank, ierr, st, passed, failed, sums(2), i

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  passed = 0
  failed = 0
  dir = ''
  if (rank == 0) then
    write (dir, '(a, i0)') '/tmp/dds-fortran-blob.', getpid_()
    call execute_command_line('rm -rf ' // trim(dir))
  end if
  call MPI_Bcast(dir, len(dir), MPI_CHARACTER, 0, MPI_COMM_WORLD, ierr)

  call dds_create(store, MPI_COMM_WORLD, method=DDS_METHOD_SPLIT, role=DDS_ROLE_EXTRA, n_core=1, &
                  handshake_dir=trim(dir))
  allocate(big(10000))
  do i = 1, size(big)
    big(i) = int(mod(i * 7, 127), c_int8_t)
  end do
  if (rank == 0) then
    call dds_publish_blob(store, 'f/big', big)
    call dds_publish_blob(store, 'f/empty', big(1:0))
  end if
  call dds_wait_blob(store, 'f/big', got, 60000_c_int64_t)
  call expect(size(got) == size(big) .and. all(got == big), 'blob larger than the first buffer')
  call dds_wait_blob(store, 'f/empty', got)
  call expect(size(got) == 0, 'empty blob')
  call dds_wait_blob(store, 'f/never', got, 10_c_int64_t, status=st)
  call expect(st == DDS_ERR_TIMEOUT .and. index(dds_last_error_message(), "'f/never'") > 0, 'time-out')
  allocate(over(DDS_BLOB_MAX_BYTES + 1))
  over = 0
  call dds_publish_blob(store, 'f/over', over, status=st)
  call expect(st == DDS_ERR_INVALID_ARGUMENT .and. index(dds_last_error_message(), 'DDS_BLOB_MAX_BYTES') > 0, &
              'blob over DDS_BLOB_MAX_BYTES')
  call dds_destroy(store)

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) call execute_command_line('rm -rf ' // trim(dir))
  call MPI_Allreduce([passed, failed], sums, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, i0, a, i0, a)', 'test_fortran_blob: ', sums(1), ' passed, ', sums(2), ' failed'
  call MPI_Finalize(ierr)
  if (sums(2) /= 0) error stop 1

contains

  subroutine expect(ok, label)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: label
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
      print '(a, i0, a, a, a, a)', 'rank ', rank, ': failed: ', label, ': ', dds_last_error_message()
    end if
  end subroutine expect

  integer function getpid_()
    interface
      integer(c_int) function c_getpid() bind(C, name="getpid")
        import :: c_int
      end function c_getpid
    end interface
    getpid_ = int(c_getpid())
  end function getpid_
end program test_fortran_blob
