! A small "simulation" using the Fortran module (with `use mpi_f08`).
!
! Every rank owns a contiguous block of mesh cells (a different number per
! rank). Each time step it computes a pressure (one real(c_double) per cell)
! and a velocity (three real(c_float) per cell) and publishes them in the
! store: the variables are created once with dds_init and rewritten with
! dds_update every step. After each step every rank reads random cells of
! every field from all ranks, with dds_get and dds_get_batch, and checks each
! value against the formula that produced it. Cells (rows) count from 1.
program example_fortran
  use, intrinsic :: iso_c_binding
  use mpi_f08
  use ddstore
  implicit none

  integer, parameter :: NSTEPS = 4
  integer(c_int64_t), parameter :: NCOMP = 3
  integer(c_int64_t), parameter :: NBATCH = 64

  type(dds_store_t) :: store
  type(dds_request_t) :: req
  logical :: done
  type(dds_var_info_t) :: info
  real(c_double), allocatable :: p(:)
  real(c_double), allocatable, target :: pb(:)
  real(c_float), allocatable :: v(:, :), vb(:, :)
  integer(c_int64_t), allocatable :: ids(:), cells(:)
  real(c_double) :: p1(1)
  real(c_float) :: v1(NCOMP)
  integer(c_int64_t) :: n, first, total, i, g, half, cid(1)
  integer(c_int64_t) :: seed
  integer :: rank, nranks, step, k, c, st, passed, failed, sums(2)

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  passed = 0
  failed = 0
  seed = 12345 + 977 * rank

  ! This rank's cells are first .. first + n - 1 (global, 1-based).
  n = 40 + 13 * rank
  call MPI_Exscan(n, first, 1, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0) first = 0           ! MPI_Exscan leaves rank 0's result undefined
  first = first + 1
  call MPI_Allreduce(n, total, 1, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD)

  ! [snippet:fortran-quickstart]
  ! Collective: a store over all ranks (method 0, MPI RMA). mpi_f08 users pass
  ! comm%MPI_VAL; with `use mpi` pass the integer communicator itself.
  call dds_create(store, MPI_COMM_WORLD%MPI_VAL)

  ! Collective: each rank declares its n rows once. The mold argument gives
  ! the element type; nothing is read from it.
  call dds_init(store, 'pressure', n, 1_c_int64_t, 0.0_c_double)   ! n rows of 1 double
  call dds_init(store, 'velocity', n, NCOMP, 0.0_c_float)          ! n rows of 3 floats

  ! A variable can also be added from data: one integer(c_int64_t) per cell.
  ids = [(first + i - 1, i = 1, n)]
  call dds_add(store, 'cell_id', ids)

  allocate(p(n), v(NCOMP, n))   ! v(:, i) is the velocity of local cell i: one row per column
  allocate(cells(NBATCH), pb(NBATCH), vb(NCOMP, NBATCH))
  do step = 1, NSTEPS
    do i = 1, n
      p(i) = pressure(step, first + i - 1)
      do c = 1, int(NCOMP)
        v(c, i) = velocity(step, first + i - 1, c)
      end do
    end do
    ! Local writes into this rank's shard; local rows count from 1.
    half = n / 2
    call dds_update(store, 'pressure', p, 1_c_int64_t)
    call dds_update(store, 'velocity', v(:, 1:half), 1_c_int64_t)         ! rows 1 .. half
    call dds_update(store, 'velocity', v(:, half + 1:n), half + 1)        ! the rest

    call dds_epoch_begin(store)   ! collective: every rank's updates are now visible

    ! One row at a time, from any rank (one-sided).
    do k = 1, 10
      g = random_cell()
      call dds_get(store, 'pressure', p1, g)    ! as many rows as the array holds: 1
      call dds_get(store, 'velocity', v1, g)
      call dds_get(store, 'cell_id', cid, g)
      call expect(p1(1) == pressure(step, g) .and. cid(1) == g, 'pressure', step, g)
      call expect(all(v1 == [(velocity(step, g, c), c = 1, int(NCOMP))]), 'velocity', step, g)
    end do

    ! Many rows at once, any owners, any order (collective with method 0).
    do k = 1, int(NBATCH)
      cells(k) = random_cell()
    end do
    call dds_get_batch(store, 'pressure', pb, cells)   ! pb(k) = pressure of cells(k)
    call dds_get_batch(store, 'velocity', vb, cells)   ! vb(:, k) = velocity of cells(k)
    do k = 1, int(NBATCH)
      call expect(pb(k) == pressure(step, cells(k)), 'batched pressure', step, cells(k))
      call expect(all(vb(:, k) == [(velocity(step, cells(k), c), c = 1, int(NCOMP))]), &
                  'batched velocity', step, cells(k))
    end do

    call dds_epoch_end(store)     ! collective: nobody updates while others still read
  end do
  ! [end-snippet]

  ! [snippet:fortran-overlap]
  ! Non-blocking: start the read, compute, then wait (collective to start with
  ! method 0's default batch mode). pb must keep its storage until dds_wait.
  do k = 1, int(NBATCH)
    cells(k) = random_cell()
  end do
  call dds_get_batch_start(store, 'pressure', pb, cells, req)
  call dds_test(req, done)       ! never blocks; done may be either here
  call dds_wait(req, status=st)  ! the rows are in pb now
  ! [end-snippet]
  call expect(st == DDS_OK, 'dds_wait', NSTEPS, 0_c_int64_t)
  do k = 1, int(NBATCH)
    call expect(pb(k) == pressure(NSTEPS, cells(k)), 'non-blocking pressure', NSTEPS, cells(k))
  end do
  call dds_wait(req, status=st)  ! a request waited for is gone
  call expect(st == DDS_ERR_INVALID_ARGUMENT, 'second dds_wait', NSTEPS, 0_c_int64_t)

  ! [snippet:fortran-errors]
  ! With status= a failure returns its status; without it, the program stops
  ! with the library's message.
  call dds_get(store, 'pressure', p1, total + 1, status=st)   ! one past the last row
  if (st /= DDS_OK .and. rank == 0) then
    ! st is DDS_ERR_INDEX_OUT_OF_RANGE; the message names the variable and the row
    print '(a, a, a, a)', 'expected error: ', dds_status_string(st), ': ', dds_last_error_message()
  end if
  ! [end-snippet]
  call expect(st == DDS_ERR_INDEX_OUT_OF_RANGE, 'error on a row past the end', NSTEPS, total + 1)

  call dds_info(store, 'velocity', info)
  call expect(info%total_rows == total .and. info%local_rows == n .and. info%row_elems == NCOMP .and. &
              info%item_size == 4, 'dds_info', NSTEPS, 0_c_int64_t)
  if (rank == 0) print '(a, a, a, i0, a, i0, a, i0, a, a)', 'libddstore ', dds_version(), ': ', NSTEPS, &
    ' steps, ', total, ' cells over ', nranks, ' ranks, transport ', trim(info%transport)
  call dds_destroy(store)

  call MPI_Allreduce([passed, failed], sums, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0) print '(a, i0, a, i0, a, i0, a)', 'example_fortran on ', nranks, ' ranks: ', &
    sums(1), ' passed, ', sums(2), ' failed'
  call MPI_Finalize()
  if (sums(2) /= 0) error stop 1

contains

  ! The fields as functions of (step, global cell, component); exact in
  ! their kinds, so reads can be compared with ==.
  pure function pressure(step, cell) result(x)
    integer, intent(in) :: step
    integer(c_int64_t), intent(in) :: cell
    real(c_double) :: x
    x = 1.0e5_c_double + 1000.0_c_double * step + 0.25_c_double * real(cell, c_double)
  end function pressure

  pure function velocity(step, cell, comp) result(x)
    integer, intent(in) :: step, comp
    integer(c_int64_t), intent(in) :: cell
    real(c_float) :: x
    x = real(1000 * step + cell, c_float) + 0.25_c_float * real(comp, c_float)
  end function velocity

  ! A global cell in 1 .. total (a small linear congruential generator).
  function random_cell() result(cell)
    integer(c_int64_t) :: cell
    seed = mod(seed * 1103515245_c_int64_t + 12345_c_int64_t, 2147483648_c_int64_t)
    cell = 1 + mod(seed / 65536, total)
  end function random_cell

  subroutine expect(ok, what, step, cell)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer, intent(in) :: step
    integer(c_int64_t), intent(in) :: cell
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
      print '(a, i0, a, i0, a, a, a, i0, a)', 'rank ', rank, ' step ', step, ': ', what, ' of cell ', cell, &
        ' is wrong'
    end if
  end subroutine expect
end program example_fortran
