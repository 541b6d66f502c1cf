! Error paths of the Fortran module (`use mpi`, integer communicator): bad
! row numbers, unknown names, arrays of the wrong kind or shape, misuse of
! epochs and handles. Each failing call must return the right status through
! `status=` and leave a message (dds_last_error_message) that names what was
! wrong; afterwards the store must still return every row intact.
! Collective calls must fail on every rank even when one rank is wrong.
!
! With the argument "error-stop" the program instead makes one failing call
! without `status=`, which must stop it with the library's message (ctest
! checks the output).
program test_fortran_errors
  use, intrinsic :: iso_c_binding
  use mpi
  use ddstore
  implicit none

  integer(c_int64_t), parameter :: ELEMS = 4
  type(dds_store_t) :: store, stale, none
  type(dds_var_info_t) :: info
  type(dds_settings_t) :: settings, defaults
  type(dds_counters_t) :: counters
  real(c_double), allocatable :: empty(:, :)
  integer(c_int64_t), allocatable :: none_idx(:)
  real(c_double), allocatable :: mine(:, :), row2(:, :), two(:, :), bad2(:, :), flat(:)
  real(c_float) :: frow(8)
  real(c_double), target :: big(ELEMS, 6)
  real(c_float), target :: fstart(8)
  type(dds_request_t) :: req
  integer(c_int64_t), allocatable :: idx(:)
  integer(c_int64_t) :: total, first, g
  integer :: rank, nranks, ierr, st, passed, failed, sums(2)
  character(len=32) :: arg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  passed = 0
  failed = 0

  ! Rank r holds 3 + r rows; element c of global row g (1-based) is 100 g + c.
  first = 1
  do g = 0, rank - 1
    first = first + rows_of(int(g))
  end do
  total = 0
  do g = 0, nranks - 1
    total = total + rows_of(int(g))
  end do
  allocate(mine(ELEMS, rows_of(rank)))
  call fill(mine, first)

  call dds_create(store, MPI_COMM_WORLD)
  call dds_add(store, 'v', mine)

  call get_command_argument(1, arg)
  if (arg == 'error-stop') then
    ! No status=: this must stop the program with the message.
    allocate(row2(ELEMS, 1))
    call dds_get(store, 'nope', row2, 1_c_int64_t)
    print '(a)', 'still running after a failed call without status='
    call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  end if

  allocate(row2(ELEMS, 1), two(ELEMS, 2), bad2(2, 2), flat(6))
  flat = 0
  frow = 0
  bad2 = 0

  ! ---- bad row numbers (1-based: valid rows are 1 .. total) ----
  call dds_get(store, 'v', row2, total + 1, status=st)
  call expect_err(st, DDS_ERR_INDEX_OUT_OF_RANGE, "'v'", 'get past the last row')
  call expect_err(st, DDS_ERR_INDEX_OUT_OF_RANGE, 'out of range', 'get past the last row (message)')
  call expect_err(st, DDS_ERR_INDEX_OUT_OF_RANGE, 'count from 0', 'get past the last row (0-based note)')
  ! A NUL inside the name would reach C cut short, naming 'v'.
  call dds_get(store, 'v' // c_null_char // 'x', row2, 1_c_int64_t, status=st)
  call expect_err(st, DDS_ERR_INVALID_ARGUMENT, 'holds a NUL character', 'get with a NUL in the name')
  call dds_get(store, 'v', row2, 0_c_int64_t, status=st)
  call expect_err(st, DDS_ERR_INDEX_OUT_OF_RANGE, 'out of range', 'get of row 0')
  if (nranks > 1) then
    ! Two rows across the end of rank 0's shard: dds_get reads inside one shard.
    call dds_get(store, 'v', two, rows_of(0), status=st)
    call expect_err(st, DDS_ERR_INVALID_ARGUMENT, 'shard', 'get across a shard end')
  end if
  call dds_update(store, 'v', row2, rows_of(rank) + 1, status=st)
  call expect_err(st, DDS_ERR_INDEX_OUT_OF_RANGE, 'shard', 'update past the local rows')
  call dds_update(store, 'v', row2, 0_c_int64_t, status=st)
  call expect_err(st, DDS_ERR_INDEX_OUT_OF_RANGE, "'v'", 'update of local row 0')

  ! ---- unknown names ----
  call dds_get(store, 'nope', row2, 1_c_int64_t, status=st)
  call expect_err(st, DDS_ERR_UNKNOWN_VARIABLE, "dds_get: no variable named 'nope'", 'get of an unknown name')
  call dds_update(store, 'nope', row2, 1_c_int64_t, status=st)
  call expect_err(st, DDS_ERR_UNKNOWN_VARIABLE, "dds_update: no variable named 'nope'", 'update of an unknown name')
  call dds_info(store, 'nope', info, status=st)
  call expect_err(st, DDS_ERR_UNKNOWN_VARIABLE, "'nope'", 'info of an unknown name')
  call dds_register_recv(store, 'nope', big, status=st)
  call expect_err(st, DDS_ERR_UNKNOWN_VARIABLE, "'nope'", 'register_recv of an unknown name')
  ! Trailing blanks are not part of the name.
  call dds_info(store, 'v      ', info, status=st)
  call expect(st == DDS_OK .and. info%total_rows == total, 'trailing blanks are trimmed')

  ! ---- wrong kind or shape ----
  ! 8 floats are as many bytes as one row of 4 doubles, but the kind is wrong.
  call dds_get(store, 'v', frow, 1_c_int64_t, status=st)
  call expect_err(st, DDS_ERR_MISMATCH, '8-byte items', 'get into real(c_float)')
  call expect_err(st, DDS_ERR_MISMATCH, 'real(c_float)', 'get into real(c_float) (type named)')
  call dds_update(store, 'v', frow, 1_c_int64_t, status=st)
  call expect_err(st, DDS_ERR_MISMATCH, 'real(c_float)', 'update from real(c_float)')
  call dds_get(store, 'v', bad2, 1_c_int64_t, status=st)
  call expect_err(st, DDS_ERR_MISMATCH, 'first extent is 2', 'get into A(2, rows) for rows of 4')
  call dds_get(store, 'v', flat, 1_c_int64_t, status=st)
  call expect_err(st, DDS_ERR_MISMATCH, 'not a whole number of rows', 'get into 6 elements')

  ! ---- epochs, handles ----
  call dds_epoch_end(store, status=st)
  call expect_err(st, DDS_ERR_BAD_STATE, 'no epoch is open', 'epoch_end without epoch_begin')
  call dds_epoch_begin(store)
  call dds_epoch_begin(store, status=st)
  call expect_err(st, DDS_ERR_BAD_STATE, 'already open', 'epoch_begin twice')
  call dds_epoch_end(store)
  call dds_info(none, 'v', info, status=st)
  call expect_err(st, DDS_ERR_INVALID_ARGUMENT, 'NULL', 'a store never created')

  ! ---- settings: the store's, and the defaults (a store never created) ----
  call dds_store_settings(store, settings)
  call expect(settings%method == DDS_METHOD_MPI .and. settings%role == DDS_ROLE_CORE .and. &
              (settings%batch_mode >= DDS_BATCH_COLLECTIVE .and. settings%batch_mode <= DDS_BATCH_AUTO) .and. &
              settings%gpu /= DDS_GPU_ENV .and. len(settings%handshake_dir) > 0, 'dds_store_settings of the store')
  call dds_store_settings(none, defaults)
  call expect(defaults%handshake_dir == settings%handshake_dir .and. defaults%batch_mode == settings%batch_mode &
              .and. (defaults%profiling .eqv. settings%profiling), 'dds_store_settings defaults match the store')

  ! ---- receive registration ----
  call dds_register_recv(store, 'v', big(:, 1:6:2), status=st)
  call expect_err(st, DDS_ERR_INVALID_ARGUMENT, 'not contiguous', 'register a strided section')
  call dds_register_recv(store, 'v', big)
  call dds_register_recv(store, 'v', big)       ! the same buffer again: a no-op
  call dds_register_recv(store, 'v', big(:, 2:3), status=st)
  call expect_err(st, DDS_ERR_INVALID_ARGUMENT, 'overlaps', 'register an overlapping buffer')
  call dds_unregister_recv(store, 'v', big)
  call dds_unregister_recv(store, 'v', big, status=st)
  call expect_err(st, DDS_ERR_INVALID_ARGUMENT, 'not registered', 'unregister twice')
  call dds_unregister_recv(store, 'v', big(:, 1:6:2), status=st)
  call expect_err(st, DDS_ERR_INVALID_ARGUMENT, 'cannot have been registered', 'unregister a strided section')

  ! ---- collective calls fail on every rank, even if one rank is wrong ----
  call dds_add(store, 'v', mine, status=st)
  call expect_err(st, DDS_ERR_DUPLICATE_VARIABLE, "'v'", 'add of an existing name')
  if (rank == 0) then
    call dds_add(store, 'w', flat(1:5), row_elems=ELEMS, status=st)   ! not whole rows
  else
    call dds_add(store, 'w', flat(1:4), row_elems=ELEMS, status=st)
  end if
  call expect_err(st, DDS_ERR_MISMATCH, "'w'", 'add of a partial row on rank 0')
  call dds_init(store, 'neg', -1_c_int64_t, ELEMS, 0.0_c_double, status=st)
  call expect_err(st, DDS_ERR_INVALID_ARGUMENT, 'negative', 'init with negative rows')

  allocate(idx(2))
  idx = [1_c_int64_t, total]
  if (rank == 0) idx(2) = total + 1
  call dds_get_batch(store, 'v', two, idx, status=st)
  call expect_err(st, DDS_ERR_INDEX_OUT_OF_RANGE, 'out of range', 'batch with a bad row on rank 0')
  idx = [1_c_int64_t, total]
  if (rank == 0) then
    call dds_get_batch(store, 'v', frow, idx(1:1), status=st)
    call expect_err(st, DDS_ERR_MISMATCH, 'real(c_float)', 'batch into real(c_float) on rank 0')
  else
    call dds_get_batch(store, 'v', two, idx, status=st)
    call expect_err(st, DDS_ERR_MISMATCH, "rank 0: dds_get_batch: variable 'v' holds 8-byte items", &
                    'batch failing because rank 0 is wrong, with its cause')
  end if
  if (rank == 0) then
    call dds_get_batch(store, 'nope', two, idx, status=st)
    call expect_err(st, DDS_ERR_UNKNOWN_VARIABLE, "'nope'", 'batch of an unknown name on rank 0')
  else
    call dds_get_batch(store, 'v', two, idx, status=st)
    call expect_err(st, DDS_ERR_UNKNOWN_VARIABLE, "rank 0: dds_get_batch: no variable named 'nope'", &
                    'batch failing because rank 0 named nothing, with its cause')
  end if
  ! The same through dds_get_batch_start: rank 0 stands in for that call
  ! (DDS_CALL_GET_BATCH_START), so every rank fails with rank 0's cause
  ! rather than a collective call mismatch (issue 35).
  if (rank == 0) then
    call dds_get_batch_start(store, 'v', fstart, idx(1:1), req, status=st)
    call expect_err(st, DDS_ERR_MISMATCH, 'real(c_float)', 'batch start into real(c_float) on rank 0')
  else
    call dds_get_batch_start(store, 'v', big(:, 1:2), idx, req, status=st)
    call expect_err(st, DDS_ERR_MISMATCH, "rank 0: dds_get_batch_start: variable 'v' holds 8-byte items", &
                    'batch start failing because rank 0 is wrong, with its cause')
  end if

  if (rank == 0) then
    call dds_get_batch(store, 'v', bad2, idx, status=st)
    call expect_err(st, DDS_ERR_MISMATCH, 'first extent', 'batch into A(2, rows) on rank 0')
  else
    call dds_get_batch(store, 'v', two, idx, status=st)
    call expect_err(st, DDS_ERR_MISMATCH, '', 'batch failing because rank 0 has the wrong shape')
  end if

  ! ---- the store still works ----
  call expect_intact()
  call dds_info(store, 'v', info)
  call expect(info%total_rows == total .and. info%local_rows == rows_of(rank) .and. &
              info%row_elems == ELEMS .and. info%item_size == 8 .and. info%n_ranks == nranks .and. &
              info%transport == 'mpi-rma', 'dds_info after the errors')
  if (rank == 0) call expect(index(dds_last_error_message(), 'first extent') > 0, &
                             'the last message is kept after successes')

  ! ---- edge cases: a rank without rows, empty batches, registered reads, counters ----
  allocate(empty(ELEMS, 0), none_idx(0))
  if (rank == 1) then
    call dds_add(store, 'z', empty)              ! rank 1 holds no rows of 'z'
  else
    call dds_add(store, 'z', mine)
  end if
  call dds_info(store, 'z', info)
  call expect(info%total_rows == total - rows_of(1) .and. info%local_rows == merge(0_c_int64_t, rows_of(rank), &
              rank == 1), 'a rank with zero rows')
  if (mod(rank, 2) == 1) then
    call dds_get_batch(store, 'z', empty, none_idx, status=st)   ! odd ranks ask for nothing
    call expect(st == DDS_OK, 'an empty batch')
  else
    call dds_get_batch(store, 'z', two, [1_c_int64_t, info%total_rows], status=st)
    call expect(st == DDS_OK .and. two(1, 1) == 101.0_c_double, 'a batch while others ask nothing')
  end if
  call dds_register_recv(store, 'v', big)
  call dds_get(store, 'v', big(:, 2:3), 1_c_int64_t)   ! into a slice of the registered buffer
  call fill(two, 1_c_int64_t)
  call expect(all(big(:, 2:3) == two), 'a read into a registered buffer')
  call dds_unregister_recv(store, 'v', big)
  call dds_profile(store, 'v', counters)
  call expect(counters%calls > 0 .and. counters%rows >= counters%calls .and. &
              counters%rows_local + counters%rows_remote == counters%rows .and. &
              counters%bytes == counters%rows * ELEMS * 8, 'dds_profile')

  ! ---- a destroyed store is refused ----
  stale = store
  call dds_destroy(store)
  call dds_info(stale, 'v', info, status=st)
  call expect_err(st, DDS_ERR_BAD_STATE, 'not a live store', 'info on a destroyed store')
  call dds_destroy(store)   ! the handle was cleared: a no-op

  call MPI_Allreduce([passed, failed], sums, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, i0, a, i0, a, i0, a)', 'test_fortran_errors on ', nranks, ' ranks: ', &
    sums(1), ' passed, ', sums(2), ' failed'
  call MPI_Finalize(ierr)
  if (sums(2) /= 0) error stop 1

contains

  pure function rows_of(r) result(n)
    integer, intent(in) :: r
    integer(c_int64_t) :: n
    n = 3 + r
  end function rows_of

  subroutine fill(a, g0)
    real(c_double), intent(out) :: a(:, :)
    integer(c_int64_t), intent(in) :: g0
    integer :: j, c
    do j = 1, size(a, 2)
      do c = 1, size(a, 1)
        a(c, j) = 100.0_c_double * real(g0 + j - 1, c_double) + real(c, c_double)
      end do
    end do
  end subroutine fill

  ! Every row reads back as written: one by one, and all as one batch.
  subroutine expect_intact()
    real(c_double), allocatable :: got(:, :), want(:, :)
    integer(c_int64_t), allocatable :: rows(:)
    integer(c_int64_t) :: r
    allocate(got(ELEMS, total), want(ELEMS, 1), rows(total))
    rows = [(total + 1 - r, r = 1, total)]
    call dds_get_batch(store, 'v', got, rows)
    do r = 1, total
      call fill(want, rows(r))
      call expect(all(got(:, r) == want(:, 1)), 'batched row after errors')
      call dds_get(store, 'v', row2, r)
      call fill(want, r)
      call expect(all(row2(:, 1) == want(:, 1)), 'row after errors')
    end do
  end subroutine expect_intact

  subroutine expect(ok, label)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: label
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
      print '(a, i0, a, a)', 'rank ', rank, ': failed: ', label
    end if
  end subroutine expect

  ! Status `st` must be `want` and the message must contain `part`.
  subroutine expect_err(st, want, part, label)
    integer, intent(in) :: st, want
    character(len=*), intent(in) :: part, label
    if (st == want .and. index(dds_last_error_message(), part) > 0) then
      passed = passed + 1
    else
      failed = failed + 1
      print '(a, i0, a, a, a, a, a, a, a, a, a)', 'rank ', rank, ': failed: ', label, ': got ', &
        dds_status_string(st), ' "', dds_last_error_message(), '", expected ', dds_status_string(want), &
        ' with "' // part // '"'
    end if
  end subroutine expect_err
end program test_fortran_errors
