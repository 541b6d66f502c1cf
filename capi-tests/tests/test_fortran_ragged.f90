! Ragged variables through the Fortran module: rank r holds r + 2 samples
! (sample i of the rank: r + i - 1 rows of 2 values; the first is empty);
! every rank reads every sample back in reverse order, plus a repeat, and
! checks each value; a wrong item type fails on every rank with status;
! dds_save and dds_load (by name) give back the same samples.
program test_fortran_ragged
  use, intrinsic :: iso_c_binding
  use mpi
  use ddstore
  implicit none

  type(dds_store_t) :: store, store2
  real(c_double), allocatable :: a(:, :), got(:, :), got2(:, :)
  integer(c_int64_t), allocatable :: lengths(:), lens(:), lens2(:), samples(:)
  character(len=64) :: snap
  integer(c_int64_t) :: first, total, g, k, i, col
  integer :: rank, nranks, ierr, q, st, passed, failed, sums(2), tot(2)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  passed = 0
  failed = 0
  call dds_create(store, MPI_COMM_WORLD)

  first = 0
  do q = 0, rank - 1
    first = first + q + 2
  end do
  total = 0
  do q = 0, nranks - 1
    total = total + q + 2
  end do
  allocate(lengths(rank + 2))
  do i = 1, rank + 2
    lengths(i) = rank + i - 1
    if (i == 1) lengths(i) = 0
  end do
  allocate(a(2, sum(lengths)))
  col = 0
  do i = 1, rank + 2
    do k = 1, lengths(i)
      col = col + 1
      a(1, col) = value(first + i, k, 1)
      a(2, col) = value(first + i, k, 2)
    end do
  end do
  call dds_add_ragged(store, "rag", a, lengths)

  allocate(samples(total + 1))
  do g = 1, total
    samples(g) = total - g + 1
  end do
  samples(total + 1) = 2
  call dds_get_ragged_batch(store, "rag", samples, got, lens)
  col = 0
  do i = 1, size(samples)
    call expect(lens(i) == expected_length(samples(i)))
    do k = 1, lens(i)
      col = col + 1
      call expect(got(1, col) == value(samples(i), k, 1) .and. got(2, col) == value(samples(i), k, 2))
    end do
  end do
  call expect(col == size(got, 2))
  ! A sample past the end: DDS_ERR_INDEX_OUT_OF_RANGE, with status.
  call dds_get_ragged_batch(store, "rag", [total + 1_c_int64_t], got, lens, status=st)
  call expect(st == DDS_ERR_INDEX_OUT_OF_RANGE)
  ! Snapshots: saved, loaded by name into a second store, read back alike;
  ! an unknown name fails with status on every rank.
  write (snap, '(a, i0)') 'snap-fortran-np', nranks
  call dds_save(store, trim(snap))
  call dds_create(store2, MPI_COMM_WORLD)
  call dds_load(store2, trim(snap), names=[character(len=4) :: 'rag', 'nope'], status=st)
  call expect(st == DDS_ERR_UNKNOWN_VARIABLE)
  call dds_load(store2, trim(snap), names=['rag'])
  call dds_get_ragged_batch(store, "rag", samples, got, lens)
  call dds_get_ragged_batch(store2, "rag", samples, got2, lens2)
  call expect(all(lens2 == lens) .and. all(got2 == got))
  call dds_destroy(store2)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) call execute_command_line('rm -rf ' // trim(snap))
  call dds_destroy(store)

  sums = [passed, failed]
  call MPI_Allreduce(sums, tot, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, i0, a, i0, a, i0, a)', 'test_fortran_ragged on ', nranks, ' ranks: ', tot(1), &
    ' passed, ', tot(2), ' failed'
  call MPI_Finalize(ierr)
  if (tot(2) /= 0) error stop 1

contains

  pure function value(sample, row, comp) result(v)
    integer(c_int64_t), intent(in) :: sample, row
    integer, intent(in) :: comp
    real(c_double) :: v
    v = real(sample * 1000 + row * 10 + comp, c_double)
  end function value

  ! Length of 1-based global sample g: find its rank and position.
  function expected_length(g) result(l)
    integer(c_int64_t), intent(in) :: g
    integer(c_int64_t) :: l, f
    integer :: r
    f = 0
    do r = 0, nranks - 1
      if (g <= f + r + 2) then
        l = r + (g - f) - 1
        if (g - f == 1) l = 0
        return
      end if
      f = f + r + 2
    end do
    l = -1
  end function expected_length

  subroutine expect(ok)
    logical, intent(in) :: ok
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
      print '(a, i0, a)', 'rank ', rank, ': a check failed'
    end if
  end subroutine expect
end program test_fortran_ragged
