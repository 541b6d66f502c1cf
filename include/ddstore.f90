! libddstore Fortran module: `use ddstore`.
!
! Two layers, in one module:
!  * the raw interface: every dds_* function of ddstore.h as a bind(C)
!    interface named c_dds_* (same arguments as in C: 0-based rows, byte
!    sizes, c_ptr buffers and NUL-terminated names), the constants, and the
!    bind(C) types c_dds_options, c_dds_var_info, c_dds_counters and c_dds_settings that
!    mirror the C structs field by field;
!  * friendly wrappers, named like the C functions (dds_create, dds_add,
!    dds_get, ...), which take Fortran arrays and strings.
!
! Conventions of the friendly wrappers:
!  * Row numbers count from 1. Global rows of a variable are 1 .. total_rows;
!    the local rows of this rank's shard (dds_update) are 1 .. local_rows.
!    The wrappers subtract 1 before calling the library. Messages written by
!    the library itself still count from 0; the wrappers say so in the text
!    when a message is about row numbers.
!  * Row numbers, row counts and elements per row are integer(c_int64_t).
!  * Arrays: integer(c_int8_t), integer(c_int32_t), integer(c_int64_t),
!    real(c_float) or real(c_double), of rank 1 or 2; the array's type gives
!    the item size and must match the variable's (else DDS_ERR_MISMATCH).
!    A 2-D array A(elems, rows) holds one row of the variable per column:
!    A(:, j) is a row, so size(A, 1) must equal the variable's elements per
!    row and size(A, 2) is the number of rows. A 1-D array holds whole rows
!    one after another (for one-element rows, one row per element).
!  * Names are trimmed of trailing blanks and NUL-terminated for the library.
!  * The communicator is the plain integer handle (`use mpi`, or mpif.h);
!    with `use mpi_f08`, pass comm%MPI_VAL.
!  * Every wrapper has an optional last argument `status`. When present it
!    receives DDS_OK or the error status; when absent, a failure stops the
!    program with `error stop` and the library's message.
!    dds_last_error_message() returns the message of the last failed wrapper
!    call on this thread (thread-private under OpenMP).
!  * Collective calls (dds_create, dds_destroy, dds_init, dds_add,
!    dds_epoch_begin/end, and dds_get_batch with method 0) must be made by
!    every rank of the store; when they fail, they fail on every rank.
!
! This file is compiled by the user's Fortran compiler (the installed CMake
! package does it for target ddstore::fortran); link with -lddstore.
module ddstore
  use, intrinsic :: iso_c_binding
  implicit none
  private

  ! ---------------------------------------------------------------------
  ! Constants (values from ddstore.h)
  ! ---------------------------------------------------------------------
  integer(c_int), parameter, public :: DDS_OK = 0
  integer(c_int), parameter, public :: DDS_ERR_INVALID_ARGUMENT = 1
  integer(c_int), parameter, public :: DDS_ERR_UNKNOWN_VARIABLE = 2
  integer(c_int), parameter, public :: DDS_ERR_DUPLICATE_VARIABLE = 3
  integer(c_int), parameter, public :: DDS_ERR_INDEX_OUT_OF_RANGE = 4
  integer(c_int), parameter, public :: DDS_ERR_MISMATCH = 5
  integer(c_int), parameter, public :: DDS_ERR_BAD_STATE = 6
  integer(c_int), parameter, public :: DDS_ERR_UNSUPPORTED = 7
  integer(c_int), parameter, public :: DDS_ERR_MPI = 8
  integer(c_int), parameter, public :: DDS_ERR_FABRIC = 9
  integer(c_int), parameter, public :: DDS_ERR_GPU = 10
  integer(c_int), parameter, public :: DDS_ERR_TIMEOUT = 11
  integer(c_int), parameter, public :: DDS_ERR_NO_MEMORY = 12
  integer(c_int), parameter, public :: DDS_ERR_IO = 13
  integer(c_int), parameter, public :: DDS_ERR_INTERNAL = 14

  integer(c_int32_t), parameter, public :: DDS_METHOD_MPI = 0
  integer(c_int32_t), parameter, public :: DDS_METHOD_FABRIC = 1
  integer(c_int32_t), parameter, public :: DDS_METHOD_SPLIT = 2
  integer(c_int32_t), parameter, public :: DDS_ROLE_CORE = 0
  integer(c_int32_t), parameter, public :: DDS_ROLE_EXTRA = 1
  integer(c_int32_t), parameter, public :: DDS_CALL_ADD = 1
  integer(c_int32_t), parameter, public :: DDS_CALL_GET_BATCH = 2
  integer(c_int32_t), parameter, public :: DDS_CALL_REMOVE = 3
  integer(c_int32_t), parameter, public :: DDS_CALL_EPOCH_BEGIN = 4
  integer(c_int32_t), parameter, public :: DDS_CALL_EPOCH_END = 5
  integer(c_int32_t), parameter, public :: DDS_CALL_WAIT_EXTRAS = 6
  integer(c_int32_t), parameter, public :: DDS_CALL_ADD_RAGGED = 7
  integer(c_int32_t), parameter, public :: DDS_CALL_GET_RAGGED_BATCH = 8
  integer(c_int32_t), parameter, public :: DDS_CALL_RAGGED_LENGTHS = 9
  integer(c_int32_t), parameter, public :: DDS_CALL_GET_BATCH_START = 10
  integer(c_int32_t), parameter, public :: DDS_CALL_SAVE = 11
  integer(c_int32_t), parameter, public :: DDS_CALL_LOAD = 12
  integer(c_int32_t), parameter, public :: DDS_GPU_ENV = -1
  integer(c_int32_t), parameter, public :: DDS_GPU_OFF = 0
  integer(c_int32_t), parameter, public :: DDS_GPU_AUTO = 1
  integer(c_int32_t), parameter, public :: DDS_GPU_REQUIRE = 2
  integer(c_int32_t), parameter, public :: DDS_BATCH_ENV = -1
  integer(c_int32_t), parameter, public :: DDS_BATCH_COLLECTIVE = 0
  integer(c_int32_t), parameter, public :: DDS_BATCH_ONESIDED = 1
  integer(c_int32_t), parameter, public :: DDS_SETTINGS_PATH_BYTES = 4096
  integer(c_int32_t), parameter, public :: DDS_MEM_HOST = 0
  integer(c_int32_t), parameter, public :: DDS_MEM_CUDA = 1
  integer(c_int32_t), parameter, public :: DDS_MEM_ROCM = 2
  integer(c_int32_t), parameter, public :: DDS_PATH_HOST_ONLY = 0
  integer(c_int32_t), parameter, public :: DDS_PATH_STAGED = 1
  integer(c_int32_t), parameter, public :: DDS_PATH_GPUDIRECT = 2
  integer(c_int32_t), parameter, public :: DDS_PATH_REFUSED = 3

  ! ---------------------------------------------------------------------
  ! bind(C) mirrors of the C structs (unsigned C fields are signed here)
  ! ---------------------------------------------------------------------
  type, bind(C), public :: c_dds_options
    integer(c_int32_t) :: struct_size = 0
    integer(c_int32_t) :: method = 0
    integer(c_int32_t) :: role = 0
    integer(c_int32_t) :: width = 0
    integer(c_int32_t) :: n_core = 0
    type(c_ptr) :: handshake_dir = c_null_ptr
    type(c_ptr) :: fabric_provider = c_null_ptr
    type(c_ptr) :: fabric_iface = c_null_ptr
    type(c_ptr) :: nic_map = c_null_ptr
    integer(c_int32_t) :: gpu = -1
    integer(c_int32_t) :: gpu_staging = -1
    integer(c_int32_t) :: batch_mode = -1
  end type c_dds_options

  type, bind(C), public :: c_dds_var_info
    integer(c_int32_t) :: struct_size = 0
    integer(c_int32_t) :: item_size = 0
    integer(c_int64_t) :: total_rows = 0
    integer(c_int64_t) :: local_rows = 0
    integer(c_int64_t) :: row_elems = 0
    integer(c_int64_t) :: row_bytes = 0
    integer(c_int32_t) :: method = 0
    integer(c_int32_t) :: n_ranks = 0
    character(kind=c_char) :: transport(64) = c_null_char
    integer(c_int32_t) :: node_local = 0
    integer(c_int32_t) :: node_ranks = 0
    integer(c_int32_t) :: device_path = 0
    integer(c_int32_t) :: is_ragged = 0
    integer(c_int64_t) :: total_samples = 0
    integer(c_int64_t) :: local_samples = 0
    integer(c_int64_t) :: total_items = 0
  end type c_dds_var_info

  type, bind(C), public :: c_dds_counters
    integer(c_int32_t) :: struct_size = 0
    integer(c_int32_t) :: profiling = 0
    integer(c_int64_t) :: calls = 0
    integer(c_int64_t) :: rows = 0
    integer(c_int64_t) :: bytes = 0
    integer(c_int64_t) :: rows_local = 0
    integer(c_int64_t) :: rows_remote = 0
    integer(c_int64_t) :: lock_wait_ns = 0
    integer(c_int64_t) :: mr_ns = 0
    integer(c_int64_t) :: mr_miss = 0
    integer(c_int64_t) :: read_ns = 0
    integer(c_int64_t) :: cq_ns = 0
    integer(c_int64_t) :: req_bytes_sent = 0
    integer(c_int64_t) :: req_bytes_recv = 0
  end type c_dds_counters

  type, bind(C), public :: c_dds_settings
    integer(c_int32_t) :: struct_size = 0
    integer(c_int32_t) :: method = 0
    integer(c_int32_t) :: role = 0
    integer(c_int32_t) :: batch_mode = 0
    integer(c_int32_t) :: gpu = 0
    integer(c_int32_t) :: gpu_staging = 0
    integer(c_int32_t) :: profiling = 0
    integer(c_int32_t) :: node_local = 0
    integer(c_int32_t) :: mpi_progress = 0
    character(kind=c_char) :: handshake_dir(DDS_SETTINGS_PATH_BYTES) = c_null_char
  end type c_dds_settings

  ! ---------------------------------------------------------------------
  ! Friendly types
  ! ---------------------------------------------------------------------

  ! A store handle. Create it with dds_create and release it with dds_destroy
  ! (collective); it is not destroyed automatically. `handle` is the C
  ! pointer, for the c_dds_* functions.
  type, public :: dds_store_t
    type(c_ptr) :: handle = c_null_ptr
  end type dds_store_t

  ! A batched read in flight (dds_get_batch_start); dds_wait releases it.
  type, public :: dds_request_t
    type(c_ptr) :: handle = c_null_ptr
  end type dds_request_t

  ! What dds_info returns about a variable.
  type, public :: dds_var_info_t
    integer :: item_size = 0                  ! bytes per element (1, 2, 4 or 8)
    integer(c_int64_t) :: total_rows = 0      ! rows of the whole variable
    integer(c_int64_t) :: local_rows = 0      ! rows held by this rank
    integer(c_int64_t) :: row_elems = 0       ! elements per row
    integer(c_int64_t) :: row_bytes = 0       ! bytes per row
    integer :: method = 0                     ! DDS_METHOD_* of the store
    integer :: n_ranks = 0                    ! ranks holding shards
    character(len=64) :: transport = ''       ! e.g. "mpi-rma"
    logical :: node_local = .false.           ! same-node owners' rows copied directly
    integer :: node_ranks = 0                 ! ranks whose rows are copied directly
    integer :: device_path = 0                ! DDS_PATH_*: how rows reach device buffers
  end type dds_var_info_t

  ! What dds_store_settings returns: what a store runs with once its options
  ! and the environment are resolved.
  type, public :: dds_settings_t
    integer :: method = 0                     ! DDS_METHOD_*
    integer :: role = 0                       ! DDS_ROLE_*
    integer :: batch_mode = 0                 ! DDS_BATCH_COLLECTIVE or DDS_BATCH_ONESIDED
    integer :: gpu = 0                        ! DDS_GPU_OFF, DDS_GPU_AUTO or DDS_GPU_REQUIRE
    logical :: gpu_staging = .false.          ! device buffers staged through host memory
    logical :: profiling = .false.            ! DDSTORE_PROFILE timers run
    logical :: node_local = .false.           ! same-node rows read from shared memory
    logical :: mpi_progress = .false.         ! the method-0 progress thread runs
    character(len=:), allocatable :: handshake_dir
  end type dds_settings_t

  ! What dds_profile returns: per-variable read counters; times in ns,
  ! which advance only while profiling is on (DDSTORE_PROFILE=1).
  type, public :: dds_counters_t
    logical :: profiling = .false.
    integer(c_int64_t) :: calls = 0, rows = 0, bytes = 0
    integer(c_int64_t) :: rows_local = 0, rows_remote = 0
    integer(c_int64_t) :: lock_wait_ns = 0, mr_ns = 0, mr_miss = 0
    integer(c_int64_t) :: read_ns = 0, cq_ns = 0
    ! Method-0 collective batches: bytes of requests (counts, indices) sent and received.
    integer(c_int64_t) :: req_bytes_sent = 0, req_bytes_recv = 0
  end type dds_counters_t

  ! ---------------------------------------------------------------------
  ! Raw interface: one bind(C) interface per function of ddstore.h
  ! ---------------------------------------------------------------------
  public :: c_dds_version, c_dds_status_string, c_dds_last_error, c_dds_options_init
  public :: c_dds_create, c_dds_destroy, c_dds_epoch_begin, c_dds_epoch_end, c_dds_join
  public :: c_dds_init, c_dds_add, c_dds_update, c_dds_info, c_dds_profile
  public :: c_dds_get, c_dds_get_batch, c_dds_register_recv, c_dds_unregister_recv
  public :: c_dds_join_expect, c_dds_remove, c_dds_extra_done, c_dds_wait_extras
  public :: c_dds_get_stream, c_dds_get_batch_stream, c_dds_pointer_kind, c_dds_gpu_available
  public :: c_dds_fail_collective
  public :: c_dds_get_batch_start, c_dds_request_test, c_dds_request_wait, c_dds_request_free
  public :: c_dds_store_settings
  public :: c_dds_save, c_dds_load
  public :: c_dds_add_ragged, c_dds_ragged_lengths, c_dds_get_ragged_batch, c_dds_join_ragged

  interface
    function c_dds_version() bind(C, name="dds_version") result(s)
      import :: c_ptr
      type(c_ptr) :: s
    end function c_dds_version

    function c_dds_status_string(status) bind(C, name="dds_status_string") result(s)
      import :: c_ptr, c_int32_t
      integer(c_int32_t), value :: status
      type(c_ptr) :: s
    end function c_dds_status_string

    function c_dds_last_error() bind(C, name="dds_last_error") result(s)
      import :: c_ptr
      type(c_ptr) :: s
    end function c_dds_last_error

    function c_dds_options_init(options) bind(C, name="dds_options_init") result(st)
      import :: c_int, c_dds_options
      type(c_dds_options), intent(inout) :: options
      integer(c_int) :: st
    end function c_dds_options_init

    ! `options` may be omitted (NULL: the defaults).
    function c_dds_create(comm_f, options, out) bind(C, name="dds_create") result(st)
      import :: c_int, c_ptr, c_dds_options
      integer(c_int), value :: comm_f
      type(c_dds_options), intent(in), optional :: options
      type(c_ptr), intent(out) :: out
      integer(c_int) :: st
    end function c_dds_create

    function c_dds_destroy(store) bind(C, name="dds_destroy") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: store
      integer(c_int) :: st
    end function c_dds_destroy

    function c_dds_epoch_begin(store) bind(C, name="dds_epoch_begin") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: store
      integer(c_int) :: st
    end function c_dds_epoch_begin

    function c_dds_epoch_end(store) bind(C, name="dds_epoch_end") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: store
      integer(c_int) :: st
    end function c_dds_epoch_end

    function c_dds_join(store, name) bind(C, name="dds_join") result(st)
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int) :: st
    end function c_dds_join

    function c_dds_join_expect(store, name, row_elems, item_size) bind(C, name="dds_join_expect") result(st)
      import :: c_int, c_ptr, c_char, c_int64_t, c_int32_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int64_t), value :: row_elems
      integer(c_int32_t), value :: item_size
      integer(c_int) :: st
    end function c_dds_join_expect

    function c_dds_remove(store, name) bind(C, name="dds_remove") result(st)
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int) :: st
    end function c_dds_remove

    function c_dds_save(store, dir, names, n_names) bind(C, name="dds_save") result(st)
      import :: c_int, c_ptr, c_char, c_int64_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: dir(*)
      type(c_ptr), value :: names
      integer(c_int64_t), value :: n_names
      integer(c_int) :: st
    end function c_dds_save

    function c_dds_load(store, dir, names, n_names) bind(C, name="dds_load") result(st)
      import :: c_int, c_ptr, c_char, c_int64_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: dir(*)
      type(c_ptr), value :: names
      integer(c_int64_t), value :: n_names
      integer(c_int) :: st
    end function c_dds_load

    function c_dds_extra_done(store) bind(C, name="dds_extra_done") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: store
      integer(c_int) :: st
    end function c_dds_extra_done

    function c_dds_wait_extras(store, n_extras, timeout_ms) bind(C, name="dds_wait_extras") result(st)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: store
      integer(c_int64_t), value :: n_extras, timeout_ms
      integer(c_int) :: st
    end function c_dds_wait_extras

    function c_dds_init(store, name, local_rows, row_elems, item_size) bind(C, name="dds_init") result(st)
      import :: c_int, c_ptr, c_char, c_int64_t, c_int32_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int64_t), value :: local_rows, row_elems
      integer(c_int32_t), value :: item_size
      integer(c_int) :: st
    end function c_dds_init

    function c_dds_add(store, name, data, data_bytes, local_rows, row_elems, item_size) &
        bind(C, name="dds_add") result(st)
      import :: c_int, c_ptr, c_char, c_size_t, c_int64_t, c_int32_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: data
      integer(c_size_t), value :: data_bytes
      integer(c_int64_t), value :: local_rows, row_elems
      integer(c_int32_t), value :: item_size
      integer(c_int) :: st
    end function c_dds_add

    function c_dds_update(store, name, data, data_bytes, local_row) bind(C, name="dds_update") result(st)
      import :: c_int, c_ptr, c_char, c_size_t, c_int64_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: data
      integer(c_size_t), value :: data_bytes
      integer(c_int64_t), value :: local_row
      integer(c_int) :: st
    end function c_dds_update

    function c_dds_info(store, name, out) bind(C, name="dds_info") result(st)
      import :: c_int, c_ptr, c_char, c_dds_var_info
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_dds_var_info), intent(inout) :: out
      integer(c_int) :: st
    end function c_dds_info

    function c_dds_store_settings(store, out) bind(C, name="dds_store_settings") result(st)
      import :: c_int, c_ptr, c_dds_settings
      type(c_ptr), value :: store
      type(c_dds_settings), intent(inout) :: out
      integer(c_int) :: st
    end function c_dds_store_settings

    function c_dds_profile(store, name, out) bind(C, name="dds_profile") result(st)
      import :: c_int, c_ptr, c_char, c_dds_counters
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_dds_counters), intent(inout) :: out
      integer(c_int) :: st
    end function c_dds_profile

    function c_dds_get(store, name, dst, dst_bytes, start, count) bind(C, name="dds_get") result(st)
      import :: c_int, c_ptr, c_char, c_size_t, c_int64_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: dst
      integer(c_size_t), value :: dst_bytes
      integer(c_int64_t), value :: start, count
      integer(c_int) :: st
    end function c_dds_get

    function c_dds_get_batch(store, name, dst, dst_bytes, indices, n) bind(C, name="dds_get_batch") result(st)
      import :: c_int, c_ptr, c_char, c_size_t, c_int64_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: dst
      integer(c_size_t), value :: dst_bytes
      type(c_ptr), value :: indices
      integer(c_int64_t), value :: n
      integer(c_int) :: st
    end function c_dds_get_batch

    ! Non-blocking batches: start, test, wait, free.
    function c_dds_get_batch_start(store, name, dst, dst_bytes, indices, n, req) &
        bind(C, name="dds_get_batch_start") result(st)
      import :: c_int, c_ptr, c_char, c_size_t, c_int64_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: dst
      integer(c_size_t), value :: dst_bytes
      type(c_ptr), value :: indices
      integer(c_int64_t), value :: n
      type(c_ptr), intent(out) :: req
      integer(c_int) :: st
    end function c_dds_get_batch_start

    function c_dds_request_test(req, done) bind(C, name="dds_request_test") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: req
      integer(c_int), intent(out) :: done
      integer(c_int) :: st
    end function c_dds_request_test

    function c_dds_request_wait(req) bind(C, name="dds_request_wait") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: req
      integer(c_int) :: st
    end function c_dds_request_wait

    function c_dds_request_free(req) bind(C, name="dds_request_free") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: req
      integer(c_int) :: st
    end function c_dds_request_free

    ! Ragged variables (docs/ragged.md): samples of lengths(i) rows each.
    function c_dds_add_ragged(store, name, data, data_bytes, lengths, n_samples, row_elems, item_size) &
        bind(C, name="dds_add_ragged") result(st)
      import :: c_int, c_ptr, c_char, c_size_t, c_int64_t, c_int32_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: data
      integer(c_size_t), value :: data_bytes
      type(c_ptr), value :: lengths
      integer(c_int64_t), value :: n_samples, row_elems
      integer(c_int32_t), value :: item_size
      integer(c_int) :: st
    end function c_dds_add_ragged

    function c_dds_ragged_lengths(store, name, indices, n, lengths) bind(C, name="dds_ragged_lengths") result(st)
      import :: c_int, c_ptr, c_char, c_int64_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: indices
      integer(c_int64_t), value :: n
      type(c_ptr), value :: lengths
      integer(c_int) :: st
    end function c_dds_ragged_lengths

    function c_dds_get_ragged_batch(store, name, dst, dst_bytes, indices, n, lengths, bytes_read) &
        bind(C, name="dds_get_ragged_batch") result(st)
      import :: c_int, c_ptr, c_char, c_size_t, c_int64_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: dst
      integer(c_size_t), value :: dst_bytes
      type(c_ptr), value :: indices
      integer(c_int64_t), value :: n
      type(c_ptr), value :: lengths, bytes_read
      integer(c_int) :: st
    end function c_dds_get_ragged_batch

    function c_dds_join_ragged(store, name) bind(C, name="dds_join_ragged") result(st)
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int) :: st
    end function c_dds_join_ragged

    ! Takes part in collective `call` (DDS_CALL_*) with this rank's failure.
    function c_dds_fail_collective(store, call, name, status, message) &
        bind(C, name="dds_fail_collective") result(st)
      import :: c_int, c_ptr, c_char, c_int32_t
      type(c_ptr), value :: store
      integer(c_int32_t), value :: call
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int32_t), value :: status
      character(kind=c_char), intent(in) :: message(*)
      integer(c_int) :: st
    end function c_dds_fail_collective

    ! Stream-ordered reads: `stream` is a CUstream (c_null_ptr: as dds_get).
    function c_dds_get_stream(store, name, dst, dst_bytes, start, count, stream) &
        bind(C, name="dds_get_stream") result(st)
      import :: c_int, c_ptr, c_char, c_size_t, c_int64_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: dst
      integer(c_size_t), value :: dst_bytes
      integer(c_int64_t), value :: start, count
      type(c_ptr), value :: stream
      integer(c_int) :: st
    end function c_dds_get_stream

    function c_dds_get_batch_stream(store, name, dst, dst_bytes, indices, n, stream) &
        bind(C, name="dds_get_batch_stream") result(st)
      import :: c_int, c_ptr, c_char, c_size_t, c_int64_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: dst
      integer(c_size_t), value :: dst_bytes
      type(c_ptr), value :: indices
      integer(c_int64_t), value :: n
      type(c_ptr), value :: stream
      integer(c_int) :: st
    end function c_dds_get_batch_stream

    function c_dds_pointer_kind(ptr, kind, device) bind(C, name="dds_pointer_kind") result(st)
      import :: c_int, c_ptr, c_int32_t
      type(c_ptr), value :: ptr
      integer(c_int32_t), intent(out) :: kind, device
      integer(c_int) :: st
    end function c_dds_pointer_kind

    function c_dds_gpu_available(n_devices) bind(C, name="dds_gpu_available") result(st)
      import :: c_int, c_int32_t
      integer(c_int32_t), intent(out) :: n_devices
      integer(c_int) :: st
    end function c_dds_gpu_available

    function c_dds_register_recv(store, name, buf, bytes) bind(C, name="dds_register_recv") result(st)
      import :: c_int, c_ptr, c_char, c_size_t
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: buf
      integer(c_size_t), value :: bytes
      integer(c_int) :: st
    end function c_dds_register_recv

    function c_dds_unregister_recv(store, name, buf) bind(C, name="dds_unregister_recv") result(st)
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: store
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: buf
      integer(c_int) :: st
    end function c_dds_unregister_recv

    ! From the C library, to copy C strings.
    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function c_strlen
  end interface

  ! ---------------------------------------------------------------------
  ! Friendly interface
  ! ---------------------------------------------------------------------
  public :: dds_create, dds_destroy, dds_epoch_begin, dds_epoch_end, dds_join
  public :: dds_remove, dds_extra_done, dds_wait_extras
  ! Snapshots (collective): names absent means every variable.
  public :: dds_save, dds_load
  public :: dds_init, dds_add, dds_update, dds_get, dds_get_batch
  public :: dds_register_recv, dds_unregister_recv, dds_info, dds_profile, dds_store_settings
  public :: dds_version, dds_status_string, dds_last_error_message
  ! Ragged variables: real(c_double) samples, rows of size(a, 1) values;
  ! sample numbers are 1-based, as rows are.
  public :: dds_add_ragged, dds_get_ragged_batch
  interface dds_add_ragged
    module procedure add_ragged_r8_2d
  end interface dds_add_ragged
  interface dds_get_ragged_batch
    module procedure get_ragged_batch_r8_2d
  end interface dds_get_ragged_batch

  ! Generic interfaces: one specific per array type and rank (see the end of
  ! the module); they differ only in the declaration of the array.
  interface dds_add
    module procedure add_i1_1d, add_i4_1d, add_i8_1d, add_r4_1d, add_r8_1d
    module procedure add_i1_2d, add_i4_2d, add_i8_2d, add_r4_2d, add_r8_2d
  end interface dds_add
  interface dds_update
    module procedure update_i1_1d, update_i4_1d, update_i8_1d, update_r4_1d, update_r8_1d
    module procedure update_i1_2d, update_i4_2d, update_i8_2d, update_r4_2d, update_r8_2d
  end interface dds_update
  interface dds_get
    module procedure get_i1_1d, get_i4_1d, get_i8_1d, get_r4_1d, get_r8_1d
    module procedure get_i1_2d, get_i4_2d, get_i8_2d, get_r4_2d, get_r8_2d
  end interface dds_get
  interface dds_get_batch
    module procedure get_batch_i1_1d, get_batch_i4_1d, get_batch_i8_1d, get_batch_r4_1d
    module procedure get_batch_r8_1d
    module procedure get_batch_i1_2d, get_batch_i4_2d, get_batch_i8_2d, get_batch_r4_2d
    module procedure get_batch_r8_2d
  end interface dds_get_batch
  ! Non-blocking dds_get_batch: the array must keep its storage (TARGET,
  ! not reallocated, not read) until dds_wait returns.
  public :: dds_get_batch_start, dds_wait, dds_test
  interface dds_get_batch_start
    module procedure get_batch_start_i1_1d, get_batch_start_i4_1d, get_batch_start_i8_1d, get_batch_start_r4_1d
    module procedure get_batch_start_r8_1d
    module procedure get_batch_start_i1_2d, get_batch_start_i4_2d, get_batch_start_i8_2d, get_batch_start_r4_2d
    module procedure get_batch_start_r8_2d
  end interface dds_get_batch_start
  interface dds_register_recv
    module procedure register_recv_i1_1d, register_recv_i4_1d, register_recv_i8_1d
    module procedure register_recv_r4_1d, register_recv_r8_1d
    module procedure register_recv_i1_2d, register_recv_i4_2d, register_recv_i8_2d
    module procedure register_recv_r4_2d, register_recv_r8_2d
  end interface dds_register_recv
  interface dds_unregister_recv
    module procedure unregister_recv_i1_1d, unregister_recv_i4_1d, unregister_recv_i8_1d
    module procedure unregister_recv_r4_1d, unregister_recv_r8_1d
    module procedure unregister_recv_i1_2d, unregister_recv_i4_2d, unregister_recv_i8_2d
    module procedure unregister_recv_r4_2d, unregister_recv_r8_2d
  end interface dds_unregister_recv
  interface dds_init
    module procedure init_i1, init_i4, init_i8, init_r4, init_r8
  end interface dds_init

  ! Message of the last failed wrapper call; one per thread under OpenMP.
  character(len=4096), save :: last_msg = ''
  integer, save :: last_len = 0
  !$omp threadprivate(last_msg, last_len)

  character(len=*), parameter :: ZERO_BASED_NOTE = &
    ' [row numbers in this message count from 0, as in C: add 1 for Fortran row numbers]'

contains

  ! =====================================================================
  ! Library
  ! =====================================================================

  ! Version of the library, e.g. "0.1.0".
  function dds_version() result(v)
    character(len=:), allocatable :: v
    v = from_c(c_dds_version())
  end function dds_version

  ! Name of a status, e.g. "DDS_ERR_MISMATCH".
  function dds_status_string(status) result(s)
    integer, intent(in) :: status
    character(len=:), allocatable :: s
    s = from_c(c_dds_status_string(int(status, c_int32_t)))
  end function dds_status_string

  ! Message of the last failed wrapper call on this thread ('' if none).
  function dds_last_error_message() result(s)
    character(len=:), allocatable :: s
    s = last_msg(1:last_len)
  end function dds_last_error_message

  ! =====================================================================
  ! Store lifetime
  ! =====================================================================

  ! Creates a store over communicator `comm` (integer handle; with mpi_f08
  ! pass comm%MPI_VAL). Collective. Options left out take the library's
  ! defaults (method 0, all ranks in one group, strings from the environment).
  ! batch_mode (DDS_BATCH_COLLECTIVE or DDS_BATCH_ONESIDED; default
  ! DDSTORE_BATCH_MODE, else collective) comes after status: pass it by keyword.
  subroutine dds_create(store, comm, method, role, width, n_core, handshake_dir, &
                        fabric_provider, fabric_iface, nic_map, status, batch_mode)
    type(dds_store_t), intent(out) :: store
    integer, intent(in) :: comm
    integer, intent(in), optional :: method, role, width, n_core
    character(len=*), intent(in), optional :: handshake_dir, fabric_provider, fabric_iface, nic_map
    integer, intent(out), optional :: status
    integer, intent(in), optional :: batch_mode
    type(c_dds_options) :: opts
    ! The option strings must stay allocated until c_dds_create returns.
    character(kind=c_char), allocatable, target :: hs(:), fp(:), fi(:), nm(:)
    type(c_ptr) :: h
    integer(c_int) :: st

    st = c_dds_options_init(opts)
    if (st == DDS_OK) then
      if (present(method)) opts%method = int(method, c_int32_t)
      if (present(role)) opts%role = int(role, c_int32_t)
      if (present(width)) opts%width = int(width, c_int32_t)
      if (present(n_core)) opts%n_core = int(n_core, c_int32_t)
      if (present(batch_mode)) opts%batch_mode = int(batch_mode, c_int32_t)
      if (present(handshake_dir)) then
        hs = c_chars(handshake_dir)
        opts%handshake_dir = c_loc(hs)
      end if
      if (present(fabric_provider)) then
        fp = c_chars(fabric_provider)
        opts%fabric_provider = c_loc(fp)
      end if
      if (present(fabric_iface)) then
        fi = c_chars(fabric_iface)
        opts%fabric_iface = c_loc(fi)
      end if
      if (present(nic_map)) then
        nm = c_chars(nic_map)
        opts%nic_map = c_loc(nm)
      end if
      h = c_null_ptr
      st = c_dds_create(int(comm, c_int), opts, h)
      store%handle = h
    end if
    call finish(st, status)
  end subroutine dds_create

  ! Destroys a store and everything in it. Collective (method 0). Destroying
  ! a store that was never created does nothing. The handle is cleared.
  subroutine dds_destroy(store, status)
    type(dds_store_t), intent(inout) :: store
    integer, intent(out), optional :: status
    integer(c_int) :: st
    st = c_dds_destroy(store%handle)
    store%handle = c_null_ptr
    call finish(st, status)
  end subroutine dds_destroy

  ! Opens a read epoch: makes updates visible and synchronises the ranks.
  subroutine dds_epoch_begin(store, status)
    type(dds_store_t), intent(in) :: store
    integer, intent(out), optional :: status
    call finish(c_dds_epoch_begin(store%handle), status)
  end subroutine dds_epoch_begin

  ! Closes the read epoch.
  subroutine dds_epoch_end(store, status)
    type(dds_store_t), intent(in) :: store
    integer, intent(out), optional :: status
    call finish(c_dds_epoch_end(store%handle), status)
  end subroutine dds_epoch_end

  ! Method 2 extra member: attaches to a variable published by the core job.
  subroutine dds_join(store, name, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer, intent(out), optional :: status
    call finish(c_dds_join(store%handle, c_chars(name)), status)
  end subroutine dds_join

  ! Frees variable `name` (collective on core members; local on method-2 extras).
  subroutine dds_remove(store, name, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer, intent(out), optional :: status
    call finish(c_dds_remove(store%handle, c_chars(name)), status)
  end subroutine dds_remove

  ! Saves `names` (absent: every variable) to snapshot directory `dir`.
  subroutine dds_save(store, dir, names, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: dir
    character(len=*), intent(in), optional :: names(:)
    integer, intent(out), optional :: status
    call snapshot_call(store, dir, .false., names, status)
  end subroutine dds_save

  ! Loads `names` (absent: every variable of the snapshot) from `dir`,
  ! re-sharded evenly over the store's ranks.
  subroutine dds_load(store, dir, names, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: dir
    character(len=*), intent(in), optional :: names(:)
    integer, intent(out), optional :: status
    call snapshot_call(store, dir, .true., names, status)
  end subroutine dds_load

  subroutine snapshot_call(store, dir, load, names, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: dir
    logical, intent(in) :: load
    character(len=*), intent(in), optional :: names(:)
    integer, intent(out), optional :: status
    ! Each name NUL-terminated in its own row, and the C array of pointers.
    character(kind=c_char), allocatable, target :: buf(:, :)
    type(c_ptr), allocatable, target :: ptrs(:)
    type(c_ptr) :: list
    integer :: i, j, n, w
    n = 0
    w = 1
    if (present(names)) then
      n = size(names)
      w = len(names) + 1
    end if
    allocate(buf(w, max(n, 1)), ptrs(max(n, 1)))
    buf = c_null_char
    do i = 1, n
      do j = 1, len_trim(names(i))
        buf(j, i) = names(i)(j:j)
      end do
      ptrs(i) = c_loc(buf(1, i))
    end do
    list = c_null_ptr
    if (n > 0) list = c_loc(ptrs(1))
    if (load) then
      call finish(c_dds_load(store%handle, c_chars(dir), list, int(n, c_int64_t)), status)
    else
      call finish(c_dds_save(store%handle, c_chars(dir), list, int(n, c_int64_t)), status)
    end if
  end subroutine snapshot_call

  ! Method-2 extra member: announces it has finished reading.
  subroutine dds_extra_done(store, status)
    type(dds_store_t), intent(in) :: store
    integer, intent(out), optional :: status
    call finish(c_dds_extra_done(store%handle), status)
  end subroutine dds_extra_done

  ! Method-2 core (collective): waits until n_extras extra stores are done;
  ! timeout_ms < 0 (the default) means DDSTORE_HANDSHAKE_TIMEOUT_S.
  subroutine dds_wait_extras(store, n_extras, timeout_ms, status)
    type(dds_store_t), intent(in) :: store
    integer, intent(in) :: n_extras
    integer(c_int64_t), intent(in), optional :: timeout_ms
    integer, intent(out), optional :: status
    integer(c_int64_t) :: t
    t = -1
    if (present(timeout_ms)) t = timeout_ms
    call finish(c_dds_wait_extras(store%handle, int(n_extras, c_int64_t), t), status)
  end subroutine dds_wait_extras

  ! =====================================================================
  ! Queries
  ! =====================================================================

  ! Describes variable `name`.
  subroutine dds_info(store, name, info, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    type(dds_var_info_t), intent(out) :: info
    integer, intent(out), optional :: status
    type(c_dds_var_info) :: raw
    integer(c_int) :: st
    integer :: i
    raw%struct_size = int(c_sizeof(raw), c_int32_t)
    st = c_dds_info(store%handle, c_chars(name), raw)
    if (st == DDS_OK) then
      info%item_size = int(raw%item_size)
      info%total_rows = raw%total_rows
      info%local_rows = raw%local_rows
      info%row_elems = raw%row_elems
      info%row_bytes = raw%row_bytes
      info%method = int(raw%method)
      info%n_ranks = int(raw%n_ranks)
      info%node_local = raw%node_local /= 0
      info%node_ranks = int(raw%node_ranks)
      info%device_path = int(raw%device_path)
      do i = 1, size(raw%transport)
        if (raw%transport(i) == c_null_char) exit
        info%transport(i:i) = raw%transport(i)
      end do
    end if
    call finish(st, status)
  end subroutine dds_info

  ! Reads the counters of variable `name`.
  subroutine dds_profile(store, name, counters, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    type(dds_counters_t), intent(out) :: counters
    integer, intent(out), optional :: status
    type(c_dds_counters) :: raw
    integer(c_int) :: st
    raw%struct_size = int(c_sizeof(raw), c_int32_t)
    st = c_dds_profile(store%handle, c_chars(name), raw)
    if (st == DDS_OK) then
      counters%profiling = raw%profiling /= 0
      counters%calls = raw%calls
      counters%rows = raw%rows
      counters%bytes = raw%bytes
      counters%rows_local = raw%rows_local
      counters%rows_remote = raw%rows_remote
      counters%lock_wait_ns = raw%lock_wait_ns
      counters%mr_ns = raw%mr_ns
      counters%mr_miss = raw%mr_miss
      counters%read_ns = raw%read_ns
      counters%cq_ns = raw%cq_ns
      counters%req_bytes_sent = raw%req_bytes_sent
      counters%req_bytes_recv = raw%req_bytes_recv
    end if
    call finish(st, status)
  end subroutine dds_profile

  ! The settings `store` runs with, its options and the environment
  ! resolved; for a store never created (a null handle), what a store
  ! created now with default options would use (needs no MPI).
  subroutine dds_store_settings(store, settings, status)
    type(dds_store_t), intent(in) :: store
    type(dds_settings_t), intent(out) :: settings
    integer, intent(out), optional :: status
    type(c_dds_settings) :: raw
    integer(c_int) :: st
    integer :: i, n
    raw%struct_size = int(c_sizeof(raw), c_int32_t)
    st = c_dds_store_settings(store%handle, raw)
    if (st == DDS_OK) then
      settings%method = int(raw%method)
      settings%role = int(raw%role)
      settings%batch_mode = int(raw%batch_mode)
      settings%gpu = int(raw%gpu)
      settings%gpu_staging = raw%gpu_staging /= 0
      settings%profiling = raw%profiling /= 0
      settings%node_local = raw%node_local /= 0
      settings%mpi_progress = raw%mpi_progress /= 0
      n = 0
      do while (n < size(raw%handshake_dir))
        if (raw%handshake_dir(n + 1) == c_null_char) exit
        n = n + 1
      end do
      allocate(character(len=n) :: settings%handshake_dir)
      do i = 1, n
        settings%handshake_dir(i:i) = raw%handshake_dir(i)
      end do
    end if
    call finish(st, status)
  end subroutine dds_store_settings

  ! =====================================================================
  ! Workers behind the generic interfaces. `p` is the array's address
  ! (c_null_ptr when it is empty), `nelems` its number of elements,
  ! `isz` its item size in bytes, `what` its type for messages, and `cols`
  ! its first extent for a 2-D array (-1 for a 1-D array).
  ! =====================================================================

  subroutine init_any(store, name, local_rows, row_elems, isz, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: local_rows, row_elems
    integer, intent(in) :: isz
    integer, intent(out), optional :: status
    call finish(c_dds_init(store%handle, c_chars(name), local_rows, row_elems, int(isz, c_int32_t)), status)
  end subroutine init_any

  ! Collective. A size that is not whole rows is left to the library, which
  ! fails the call on every rank together.
  subroutine add_any(store, name, p, nelems, isz, row_elems, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), intent(in) :: nelems, row_elems
    integer, intent(in) :: isz
    integer, intent(out), optional :: status
    integer(c_int64_t) :: rows
    rows = 0
    if (row_elems > 0) rows = nelems / row_elems
    call finish(c_dds_add(store%handle, c_chars(name), p, nbytes(nelems, isz), rows, row_elems, &
                          int(isz, c_int32_t)), status)
  end subroutine add_any

  subroutine update_any(store, name, p, nelems, isz, what, cols, local_row, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name, what
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), intent(in) :: nelems, cols, local_row
    integer, intent(in) :: isz
    integer, intent(out), optional :: status
    type(c_dds_var_info) :: info
    character(len=:), allocatable :: msg
    integer(c_int) :: st
    call checked_info('dds_update', store, name, isz, what, cols, info, st, msg)
    if (st /= DDS_OK) then
      call finish(st, status, msg)
      return
    end if
    st = c_dds_update(store%handle, c_chars(name), p, nbytes(nelems, isz), local_row - 1)
    call finish(st, status, rows_note=.true.)
  end subroutine update_any

  ! Reads as many rows as the array holds, from global row `start`.
  subroutine get_any(store, name, p, nelems, isz, what, cols, start, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name, what
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), intent(in) :: nelems, cols, start
    integer, intent(in) :: isz
    integer, intent(out), optional :: status
    type(c_dds_var_info) :: info
    character(len=:), allocatable :: msg
    integer(c_int) :: st
    call checked_info('dds_get', store, name, isz, what, cols, info, st, msg)
    if (st == DDS_OK) then   ! (nested: Fortran does not short-circuit .and.)
      if (mod(nelems, info%row_elems) /= 0) then
        st = DDS_ERR_MISMATCH
        msg = "dds_get: the array has " // itoa(nelems) // " elements, not a whole number of rows of '" // &
              trim(name) // "' (" // itoa(info%row_elems) // " elements each)"
      end if
    end if
    if (st /= DDS_OK) then
      call finish(st, status, msg)
      return
    end if
    st = c_dds_get(store%handle, c_chars(name), p, nbytes(nelems, isz), start - 1, nelems / info%row_elems)
    call finish(st, status, rows_note=.true.)
  end subroutine get_any

  ! Collective with method 0, so every rank must reach c_dds_get_batch even
  ! when its own arguments are wrong: a rank whose array does not fit the
  ! variable asks for its rows with a zero-byte destination, which the
  ! library refuses on every rank together (DDS_ERR_MISMATCH).
  subroutine batch_any(store, name, p, nelems, isz, what, cols, rows, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name, what
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), intent(in) :: nelems, cols
    integer, intent(in) :: isz
    integer(c_int64_t), intent(in) :: rows(:)
    integer, intent(out), optional :: status
    integer(c_int64_t), allocatable, target :: idx(:)
    type(c_dds_var_info) :: info
    character(len=:), allocatable :: msg
    type(c_ptr) :: pidx
    integer(c_int64_t) :: n
    integer(c_int) :: st, local_st

    n = size(rows, kind=c_int64_t)
    allocate(idx(n))
    idx(:) = rows - 1_c_int64_t
    pidx = c_null_ptr
    if (n > 0) pidx = c_loc(idx)
    call checked_info('dds_get_batch', store, name, isz, what, cols, info, local_st, msg)
    if (local_st == DDS_OK .or. (local_st == DDS_ERR_MISMATCH .and. n == 0)) then
      st = c_dds_get_batch(store%handle, c_chars(name), p, nbytes(nelems, isz), pidx, n)
      call finish(st, status, rows_note=.true.)
    else
      ! Every rank fails together, learning this rank's cause.
      st = c_dds_fail_collective(store%handle, DDS_CALL_GET_BATCH, c_chars(name), int(local_st, c_int32_t), &
                                 c_chars(msg))
      if (st == local_st) then
        call finish(st, status, msg)          ! our own explanation, without the rank prefix
      else
        call finish(st, status, rows_note=.true.)
      end if
    end if
  end subroutine batch_any

  subroutine batch_start_any(store, name, p, nelems, isz, what, cols, rows, req, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name, what
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), intent(in) :: nelems, cols
    integer, intent(in) :: isz
    integer(c_int64_t), intent(in) :: rows(:)
    type(dds_request_t), intent(out) :: req
    integer, intent(out), optional :: status
    integer(c_int64_t), allocatable, target :: idx(:)
    type(c_dds_var_info) :: info
    character(len=:), allocatable :: msg
    type(c_ptr) :: pidx
    integer(c_int64_t) :: n
    integer(c_int) :: st, local_st

    n = size(rows, kind=c_int64_t)
    allocate(idx(n))
    idx(:) = rows - 1_c_int64_t
    pidx = c_null_ptr
    if (n > 0) pidx = c_loc(idx)
    call checked_info('dds_get_batch_start', store, name, isz, what, cols, info, local_st, msg)
    if (local_st == DDS_OK .or. (local_st == DDS_ERR_MISMATCH .and. n == 0)) then
      st = c_dds_get_batch_start(store%handle, c_chars(name), p, nbytes(nelems, isz), pidx, n, req%handle)
      call finish(st, status, rows_note=.true.)
    else
      ! Every rank fails together, learning this rank's cause.
      st = c_dds_fail_collective(store%handle, DDS_CALL_GET_BATCH_START, c_chars(name), int(local_st, c_int32_t), &
                                 c_chars(msg))
      if (st == local_st) then
        call finish(st, status, msg)          ! our own explanation, without the rank prefix
      else
        call finish(st, status, rows_note=.true.)
      end if
    end if
  end subroutine batch_start_any

  ! Waits for a request of dds_get_batch_start and releases it; status is the read's.
  subroutine dds_wait(req, status)
    type(dds_request_t), intent(inout) :: req
    integer, intent(out), optional :: status
    integer(c_int) :: st
    st = c_dds_request_wait(req%handle)
    req%handle = c_null_ptr
    call finish(st, status, rows_note=.true.)
  end subroutine dds_wait

  ! done = .true. once the request's read has completed (never blocks).
  subroutine dds_test(req, done, status)
    type(dds_request_t), intent(in) :: req
    logical, intent(out) :: done
    integer, intent(out), optional :: status
    integer(c_int) :: st, d
    d = 0
    st = c_dds_request_test(req%handle, d)
    done = d /= 0
    call finish(st, status)
  end subroutine dds_test

  subroutine register_any(store, name, p, nelems, isz, contiguous, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), intent(in) :: nelems
    integer, intent(in) :: isz
    logical, intent(in) :: contiguous
    integer, intent(out), optional :: status
    type(c_dds_var_info) :: info
    if (.not. contiguous) then
      call finish(DDS_ERR_INVALID_ARGUMENT, status, "dds_register_recv: the array for '" // trim(name) // &
                  "' is not contiguous; register a whole array or a contiguous section")
    else if (nelems == 0) then
      ! Nothing to register; only check the name.
      info%struct_size = int(c_sizeof(info), c_int32_t)
      call finish(c_dds_info(store%handle, c_chars(name), info), status)
    else
      call finish(c_dds_register_recv(store%handle, c_chars(name), p, nbytes(nelems, isz)), status)
    end if
  end subroutine register_any

  subroutine unregister_any(store, name, p, nelems, contiguous, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), intent(in) :: nelems
    logical, intent(in) :: contiguous
    integer, intent(out), optional :: status
    type(c_dds_var_info) :: info
    if (.not. contiguous) then
      call finish(DDS_ERR_INVALID_ARGUMENT, status, "dds_unregister_recv: the array for '" // trim(name) // &
                  "' is not contiguous, so it cannot have been registered")
    else if (nelems == 0) then
      info%struct_size = int(c_sizeof(info), c_int32_t)
      call finish(c_dds_info(store%handle, c_chars(name), info), status)
    else
      call finish(c_dds_unregister_recv(store%handle, c_chars(name), p), status)
    end if
  end subroutine unregister_any

  ! Looks variable `name` up and checks that an array of `isz`-byte items
  ! (and, for a 2-D array, `cols` elements per column) fits its rows.
  ! On failure `st` is the status and `msg` the explanation.
  subroutine checked_info(op, store, name, isz, what, cols, info, st, msg)
    character(len=*), intent(in) :: op, name, what
    type(dds_store_t), intent(in) :: store
    integer, intent(in) :: isz
    integer(c_int64_t), intent(in) :: cols
    type(c_dds_var_info), intent(out) :: info
    integer(c_int), intent(out) :: st
    character(len=:), allocatable, intent(out) :: msg
    character(len=:), allocatable :: lib

    msg = ''
    info%struct_size = int(c_sizeof(info), c_int32_t)
    if (index(name, c_null_char) > 0) then
      ! C would see the name cut short at the NUL, naming another variable.
      st = DDS_ERR_INVALID_ARGUMENT
      msg = op // ": variable name '" // name(1:index(name, c_null_char) - 1) // "\0...' holds a NUL character"
      return
    end if
    st = c_dds_info(store%handle, c_chars(name), info)
    if (st /= DDS_OK) then
      ! Name the function the caller called, not the lookup behind it.
      lib = from_c(c_dds_last_error())
      if (index(lib, 'dds_info: ') == 1) lib = lib(len('dds_info: ') + 1:)
      msg = op // ': ' // lib
    else if (info%item_size /= isz) then
      st = DDS_ERR_MISMATCH
      msg = op // ": variable '" // trim(name) // "' holds " // itoa(int(info%item_size, c_int64_t)) // &
            "-byte items but the array is " // what // " (" // itoa(int(isz, c_int64_t)) // "-byte items)"
    else if (cols >= 0 .and. cols /= info%row_elems) then
      st = DDS_ERR_MISMATCH
      msg = op // ": variable '" // trim(name) // "' has rows of " // itoa(info%row_elems) // &
            " elements but the array's first extent is " // itoa(cols) // &
            " (a 2-D array A(elems, rows) holds one row per column)"
    end if
  end subroutine checked_info

  ! Ends every wrapper: records the message of a failure, then hands the
  ! status to the caller or, without `status`, stops the program.
  subroutine finish(st, status, msg, rows_note)
    integer(c_int), intent(in) :: st
    integer, intent(out), optional :: status
    character(len=*), intent(in), optional :: msg        ! the wrapper's own message
    logical, intent(in), optional :: rows_note           ! the call took row numbers
    character(len=:), allocatable :: text

    if (st /= DDS_OK) then
      if (present(msg)) then
        text = msg
      else
        text = from_c(c_dds_last_error())
        if (present(rows_note)) then
          if (rows_note .and. (st == DDS_ERR_INDEX_OUT_OF_RANGE .or. index(text, 'shard') > 0)) &
            text = text // ZERO_BASED_NOTE
        end if
      end if
      last_len = min(len(text), len(last_msg))
      last_msg = text
    end if
    if (present(status)) then
      status = int(st)
    else if (st /= DDS_OK) then
      ! (Built first: gfortran 12 crashes on a concatenation in ERROR STOP.)
      text = 'ddstore: ' // dds_status_string(int(st)) // ': ' // last_msg(1:last_len)
      error stop text
    end if
  end subroutine finish

  ! =====================================================================
  ! Helpers
  ! =====================================================================

  ! A Fortran string, trailing blanks removed, as a NUL-terminated C string.
  pure function c_chars(s) result(a)
    character(len=*), intent(in) :: s
    character(kind=c_char), allocatable :: a(:)
    integer :: i, n
    n = len_trim(s)
    allocate(a(n + 1))
    do i = 1, n
      a(i) = s(i:i)
    end do
    a(n + 1) = c_null_char
  end function c_chars

  ! A copy of the NUL-terminated C string at `p` ('' for NULL).
  function from_c(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
      s = ''
      return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function from_c

  ! Bytes of `nelems` items of `isz` bytes.
  pure function nbytes(nelems, isz) result(b)
    integer(c_int64_t), intent(in) :: nelems
    integer, intent(in) :: isz
    integer(c_size_t) :: b
    b = int(nelems, c_size_t) * int(isz, c_size_t)
  end function nbytes

  pure function itoa(i) result(s)
    integer(c_int64_t), intent(in) :: i
    character(len=:), allocatable :: s
    character(len=24) :: buf
    write (buf, '(i0)') i
    s = trim(buf)
  end function itoa

  ! =====================================================================
  ! Specific procedures of the generic interfaces, one per array type and
  ! rank. They only take the array's address and size and call a worker.
  ! =====================================================================

  ! ---- dds_add ----
  subroutine add_i1_1d(store, name, a, row_elems, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), contiguous, target, intent(in) :: a(:)
    integer(c_int64_t), intent(in), optional :: row_elems
    integer, intent(out), optional :: status
    integer(c_int64_t) :: elems
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    elems = 1
    if (present(row_elems)) elems = row_elems
    call add_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, elems, status)
  end subroutine add_i1_1d

  subroutine add_i4_1d(store, name, a, row_elems, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), contiguous, target, intent(in) :: a(:)
    integer(c_int64_t), intent(in), optional :: row_elems
    integer, intent(out), optional :: status
    integer(c_int64_t) :: elems
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    elems = 1
    if (present(row_elems)) elems = row_elems
    call add_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, elems, status)
  end subroutine add_i4_1d

  subroutine add_i8_1d(store, name, a, row_elems, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), contiguous, target, intent(in) :: a(:)
    integer(c_int64_t), intent(in), optional :: row_elems
    integer, intent(out), optional :: status
    integer(c_int64_t) :: elems
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    elems = 1
    if (present(row_elems)) elems = row_elems
    call add_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, elems, status)
  end subroutine add_i8_1d

  subroutine add_r4_1d(store, name, a, row_elems, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), contiguous, target, intent(in) :: a(:)
    integer(c_int64_t), intent(in), optional :: row_elems
    integer, intent(out), optional :: status
    integer(c_int64_t) :: elems
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    elems = 1
    if (present(row_elems)) elems = row_elems
    call add_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, elems, status)
  end subroutine add_r4_1d

  subroutine add_r8_1d(store, name, a, row_elems, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), contiguous, target, intent(in) :: a(:)
    integer(c_int64_t), intent(in), optional :: row_elems
    integer, intent(out), optional :: status
    integer(c_int64_t) :: elems
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    elems = 1
    if (present(row_elems)) elems = row_elems
    call add_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, elems, status)
  end subroutine add_r8_1d

  subroutine add_i1_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), contiguous, target, intent(in) :: a(:, :)
    integer, intent(out), optional :: status
    integer(c_int64_t) :: elems
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    elems = size(a, 1, c_int64_t)
    call add_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, elems, status)
  end subroutine add_i1_2d

  subroutine add_i4_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), contiguous, target, intent(in) :: a(:, :)
    integer, intent(out), optional :: status
    integer(c_int64_t) :: elems
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    elems = size(a, 1, c_int64_t)
    call add_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, elems, status)
  end subroutine add_i4_2d

  subroutine add_i8_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), contiguous, target, intent(in) :: a(:, :)
    integer, intent(out), optional :: status
    integer(c_int64_t) :: elems
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    elems = size(a, 1, c_int64_t)
    call add_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, elems, status)
  end subroutine add_i8_2d

  subroutine add_r4_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), contiguous, target, intent(in) :: a(:, :)
    integer, intent(out), optional :: status
    integer(c_int64_t) :: elems
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    elems = size(a, 1, c_int64_t)
    call add_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, elems, status)
  end subroutine add_r4_2d

  subroutine add_r8_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), contiguous, target, intent(in) :: a(:, :)
    integer, intent(out), optional :: status
    integer(c_int64_t) :: elems
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    elems = size(a, 1, c_int64_t)
    call add_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, elems, status)
  end subroutine add_r8_2d

  ! ---- ragged variables ----
  ! Registers this rank's samples: a(:, j) is one row; sample i is the next
  ! lengths(i) rows. Collective.
  subroutine add_ragged_r8_2d(store, name, a, lengths, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), contiguous, target, intent(in) :: a(:, :)
    integer(c_int64_t), contiguous, target, intent(in) :: lengths(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p, pl
    p = c_null_ptr
    pl = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    if (size(lengths) > 0) pl = c_loc(lengths)
    call finish(c_dds_add_ragged(store%handle, c_chars(name), p, nbytes(size(a, kind=c_int64_t), 8), pl, &
                                 size(lengths, kind=c_int64_t), size(a, 1, c_int64_t), 8_c_int32_t), status)
  end subroutine add_ragged_r8_2d

  ! Reads samples(:) (1-based, any order, repeats) back to back into a
  ! (allocated here: rows of the variable's width) and their lengths.
  ! Collective when dds_get_batch is (the lengths, then the rows).
  subroutine get_ragged_batch_r8_2d(store, name, samples, a, lengths, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: samples(:)
    real(c_double), allocatable, target, intent(out) :: a(:, :)
    integer(c_int64_t), allocatable, target, intent(out) :: lengths(:)
    integer, intent(out), optional :: status
    integer(c_int64_t), allocatable, target :: idx(:)
    type(c_dds_var_info) :: info
    type(c_ptr) :: pidx, plen, p
    integer(c_int64_t) :: n
    integer(c_int) :: st
    n = size(samples, kind=c_int64_t)
    allocate(idx(n), lengths(n))
    idx(:) = samples - 1_c_int64_t
    pidx = c_null_ptr
    plen = c_null_ptr
    if (n > 0) then
      pidx = c_loc(idx)
      plen = c_loc(lengths)
    end if
    st = c_dds_ragged_lengths(store%handle, c_chars(name), pidx, n, plen)
    if (st /= DDS_OK) then
      allocate(a(0, 0))
      call finish(st, status)
      return
    end if
    info%struct_size = int(c_sizeof(info), c_int32_t)
    st = c_dds_info(store%handle, c_chars(name), info)
    if (st == DDS_OK .and. info%item_size /= 8) then
      allocate(a(0, 0))
      st = c_dds_fail_collective(store%handle, DDS_CALL_GET_RAGGED_BATCH, c_chars(name), &
                                 int(DDS_ERR_MISMATCH, c_int32_t), &
                                 c_chars("dds_get_ragged_batch: '" // trim(name) // "' holds " // &
                                         itoa(int(info%item_size, c_int64_t)) // &
                                         "-byte items, not real(c_double)"))
      call finish(st, status)
      return
    end if
    allocate(a(info%row_elems, sum(lengths)))
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    st = c_dds_get_ragged_batch(store%handle, c_chars(name), p, nbytes(size(a, kind=c_int64_t), 8), pidx, n, &
                                plen, c_null_ptr)
    call finish(st, status)
  end subroutine get_ragged_batch_r8_2d

  ! ---- dds_update ----
  subroutine update_i1_1d(store, name, a, local_row, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), contiguous, target, intent(in) :: a(:)
    integer(c_int64_t), intent(in) :: local_row
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call update_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int8_t)', &
                    -1_c_int64_t, local_row, status)
  end subroutine update_i1_1d

  subroutine update_i4_1d(store, name, a, local_row, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), contiguous, target, intent(in) :: a(:)
    integer(c_int64_t), intent(in) :: local_row
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call update_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int32_t)', &
                    -1_c_int64_t, local_row, status)
  end subroutine update_i4_1d

  subroutine update_i8_1d(store, name, a, local_row, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), contiguous, target, intent(in) :: a(:)
    integer(c_int64_t), intent(in) :: local_row
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call update_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int64_t)', &
                    -1_c_int64_t, local_row, status)
  end subroutine update_i8_1d

  subroutine update_r4_1d(store, name, a, local_row, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), contiguous, target, intent(in) :: a(:)
    integer(c_int64_t), intent(in) :: local_row
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call update_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_float)', &
                    -1_c_int64_t, local_row, status)
  end subroutine update_r4_1d

  subroutine update_r8_1d(store, name, a, local_row, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), contiguous, target, intent(in) :: a(:)
    integer(c_int64_t), intent(in) :: local_row
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call update_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_double)', &
                    -1_c_int64_t, local_row, status)
  end subroutine update_r8_1d

  subroutine update_i1_2d(store, name, a, local_row, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), contiguous, target, intent(in) :: a(:, :)
    integer(c_int64_t), intent(in) :: local_row
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call update_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int8_t)', &
                    size(a, 1, c_int64_t), local_row, status)
  end subroutine update_i1_2d

  subroutine update_i4_2d(store, name, a, local_row, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), contiguous, target, intent(in) :: a(:, :)
    integer(c_int64_t), intent(in) :: local_row
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call update_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int32_t)', &
                    size(a, 1, c_int64_t), local_row, status)
  end subroutine update_i4_2d

  subroutine update_i8_2d(store, name, a, local_row, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), contiguous, target, intent(in) :: a(:, :)
    integer(c_int64_t), intent(in) :: local_row
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call update_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int64_t)', &
                    size(a, 1, c_int64_t), local_row, status)
  end subroutine update_i8_2d

  subroutine update_r4_2d(store, name, a, local_row, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), contiguous, target, intent(in) :: a(:, :)
    integer(c_int64_t), intent(in) :: local_row
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call update_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_float)', &
                    size(a, 1, c_int64_t), local_row, status)
  end subroutine update_r4_2d

  subroutine update_r8_2d(store, name, a, local_row, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), contiguous, target, intent(in) :: a(:, :)
    integer(c_int64_t), intent(in) :: local_row
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call update_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_double)', &
                    size(a, 1, c_int64_t), local_row, status)
  end subroutine update_r8_2d

  ! ---- dds_get ----
  subroutine get_i1_1d(store, name, a, start, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: start
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call get_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int8_t)', &
                 -1_c_int64_t, start, status)
  end subroutine get_i1_1d

  subroutine get_i4_1d(store, name, a, start, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: start
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call get_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int32_t)', &
                 -1_c_int64_t, start, status)
  end subroutine get_i4_1d

  subroutine get_i8_1d(store, name, a, start, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: start
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call get_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int64_t)', &
                 -1_c_int64_t, start, status)
  end subroutine get_i8_1d

  subroutine get_r4_1d(store, name, a, start, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: start
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call get_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_float)', &
                 -1_c_int64_t, start, status)
  end subroutine get_r4_1d

  subroutine get_r8_1d(store, name, a, start, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: start
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call get_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_double)', &
                 -1_c_int64_t, start, status)
  end subroutine get_r8_1d

  subroutine get_i1_2d(store, name, a, start, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: start
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call get_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int8_t)', &
                 size(a, 1, c_int64_t), start, status)
  end subroutine get_i1_2d

  subroutine get_i4_2d(store, name, a, start, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: start
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call get_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int32_t)', &
                 size(a, 1, c_int64_t), start, status)
  end subroutine get_i4_2d

  subroutine get_i8_2d(store, name, a, start, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: start
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call get_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int64_t)', &
                 size(a, 1, c_int64_t), start, status)
  end subroutine get_i8_2d

  subroutine get_r4_2d(store, name, a, start, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: start
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call get_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_float)', &
                 size(a, 1, c_int64_t), start, status)
  end subroutine get_r4_2d

  subroutine get_r8_2d(store, name, a, start, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: start
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call get_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_double)', &
                 size(a, 1, c_int64_t), start, status)
  end subroutine get_r8_2d

  ! ---- dds_get_batch ----
  subroutine get_batch_i1_1d(store, name, a, rows, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: rows(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int8_t)', &
                   -1_c_int64_t, rows, status)
  end subroutine get_batch_i1_1d

  subroutine get_batch_i4_1d(store, name, a, rows, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: rows(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int32_t)', &
                   -1_c_int64_t, rows, status)
  end subroutine get_batch_i4_1d

  subroutine get_batch_i8_1d(store, name, a, rows, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: rows(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int64_t)', &
                   -1_c_int64_t, rows, status)
  end subroutine get_batch_i8_1d

  subroutine get_batch_r4_1d(store, name, a, rows, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: rows(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_float)', &
                   -1_c_int64_t, rows, status)
  end subroutine get_batch_r4_1d

  subroutine get_batch_r8_1d(store, name, a, rows, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: rows(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_double)', &
                   -1_c_int64_t, rows, status)
  end subroutine get_batch_r8_1d

  subroutine get_batch_i1_2d(store, name, a, rows, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: rows(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int8_t)', &
                   size(a, 1, c_int64_t), rows, status)
  end subroutine get_batch_i1_2d

  subroutine get_batch_i4_2d(store, name, a, rows, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: rows(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int32_t)', &
                   size(a, 1, c_int64_t), rows, status)
  end subroutine get_batch_i4_2d

  subroutine get_batch_i8_2d(store, name, a, rows, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: rows(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int64_t)', &
                   size(a, 1, c_int64_t), rows, status)
  end subroutine get_batch_i8_2d

  subroutine get_batch_r4_2d(store, name, a, rows, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: rows(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_float)', &
                   size(a, 1, c_int64_t), rows, status)
  end subroutine get_batch_r4_2d

  subroutine get_batch_r8_2d(store, name, a, rows, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: rows(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_double)', &
                   size(a, 1, c_int64_t), rows, status)
  end subroutine get_batch_r8_2d

  ! ---- dds_get_batch_start ----
  subroutine get_batch_start_i1_1d(store, name, a, rows, req, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: rows(:)
    type(dds_request_t), intent(out) :: req
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_start_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int8_t)', &
                   -1_c_int64_t, rows, req, status)
  end subroutine get_batch_start_i1_1d

  subroutine get_batch_start_i4_1d(store, name, a, rows, req, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: rows(:)
    type(dds_request_t), intent(out) :: req
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_start_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int32_t)', &
                   -1_c_int64_t, rows, req, status)
  end subroutine get_batch_start_i4_1d

  subroutine get_batch_start_i8_1d(store, name, a, rows, req, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: rows(:)
    type(dds_request_t), intent(out) :: req
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_start_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int64_t)', &
                   -1_c_int64_t, rows, req, status)
  end subroutine get_batch_start_i8_1d

  subroutine get_batch_start_r4_1d(store, name, a, rows, req, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: rows(:)
    type(dds_request_t), intent(out) :: req
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_start_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_float)', &
                   -1_c_int64_t, rows, req, status)
  end subroutine get_batch_start_r4_1d

  subroutine get_batch_start_r8_1d(store, name, a, rows, req, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), contiguous, target, intent(inout) :: a(:)
    integer(c_int64_t), intent(in) :: rows(:)
    type(dds_request_t), intent(out) :: req
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_start_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_double)', &
                   -1_c_int64_t, rows, req, status)
  end subroutine get_batch_start_r8_1d

  subroutine get_batch_start_i1_2d(store, name, a, rows, req, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: rows(:)
    type(dds_request_t), intent(out) :: req
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_start_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int8_t)', &
                   size(a, 1, c_int64_t), rows, req, status)
  end subroutine get_batch_start_i1_2d

  subroutine get_batch_start_i4_2d(store, name, a, rows, req, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: rows(:)
    type(dds_request_t), intent(out) :: req
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_start_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int32_t)', &
                   size(a, 1, c_int64_t), rows, req, status)
  end subroutine get_batch_start_i4_2d

  subroutine get_batch_start_i8_2d(store, name, a, rows, req, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: rows(:)
    type(dds_request_t), intent(out) :: req
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_start_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'integer(c_int64_t)', &
                   size(a, 1, c_int64_t), rows, req, status)
  end subroutine get_batch_start_i8_2d

  subroutine get_batch_start_r4_2d(store, name, a, rows, req, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: rows(:)
    type(dds_request_t), intent(out) :: req
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_start_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_float)', &
                   size(a, 1, c_int64_t), rows, req, status)
  end subroutine get_batch_start_r4_2d

  subroutine get_batch_start_r8_2d(store, name, a, rows, req, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), contiguous, target, intent(inout) :: a(:, :)
    integer(c_int64_t), intent(in) :: rows(:)
    type(dds_request_t), intent(out) :: req
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0) p = c_loc(a)
    call batch_start_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, 'real(c_double)', &
                   size(a, 1, c_int64_t), rows, req, status)
  end subroutine get_batch_start_r8_2d

  ! ---- dds_register_recv ----
  subroutine register_recv_i1_1d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), target, intent(inout) :: a(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call register_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, is_contiguous(a), status)
  end subroutine register_recv_i1_1d

  subroutine register_recv_i4_1d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), target, intent(inout) :: a(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call register_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, is_contiguous(a), status)
  end subroutine register_recv_i4_1d

  subroutine register_recv_i8_1d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), target, intent(inout) :: a(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call register_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, is_contiguous(a), status)
  end subroutine register_recv_i8_1d

  subroutine register_recv_r4_1d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), target, intent(inout) :: a(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call register_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, is_contiguous(a), status)
  end subroutine register_recv_r4_1d

  subroutine register_recv_r8_1d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), target, intent(inout) :: a(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call register_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, is_contiguous(a), status)
  end subroutine register_recv_r8_1d

  subroutine register_recv_i1_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), target, intent(inout) :: a(:, :)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call register_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, is_contiguous(a), status)
  end subroutine register_recv_i1_2d

  subroutine register_recv_i4_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), target, intent(inout) :: a(:, :)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call register_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, is_contiguous(a), status)
  end subroutine register_recv_i4_2d

  subroutine register_recv_i8_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), target, intent(inout) :: a(:, :)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call register_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, is_contiguous(a), status)
  end subroutine register_recv_i8_2d

  subroutine register_recv_r4_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), target, intent(inout) :: a(:, :)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call register_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, is_contiguous(a), status)
  end subroutine register_recv_r4_2d

  subroutine register_recv_r8_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), target, intent(inout) :: a(:, :)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call register_any(store, name, p, size(a, kind=c_int64_t), storage_size(a) / 8, is_contiguous(a), status)
  end subroutine register_recv_r8_2d

  ! ---- dds_unregister_recv ----
  subroutine unregister_recv_i1_1d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), target, intent(inout) :: a(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call unregister_any(store, name, p, size(a, kind=c_int64_t), is_contiguous(a), status)
  end subroutine unregister_recv_i1_1d

  subroutine unregister_recv_i4_1d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), target, intent(inout) :: a(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call unregister_any(store, name, p, size(a, kind=c_int64_t), is_contiguous(a), status)
  end subroutine unregister_recv_i4_1d

  subroutine unregister_recv_i8_1d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), target, intent(inout) :: a(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call unregister_any(store, name, p, size(a, kind=c_int64_t), is_contiguous(a), status)
  end subroutine unregister_recv_i8_1d

  subroutine unregister_recv_r4_1d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), target, intent(inout) :: a(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call unregister_any(store, name, p, size(a, kind=c_int64_t), is_contiguous(a), status)
  end subroutine unregister_recv_r4_1d

  subroutine unregister_recv_r8_1d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), target, intent(inout) :: a(:)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call unregister_any(store, name, p, size(a, kind=c_int64_t), is_contiguous(a), status)
  end subroutine unregister_recv_r8_1d

  subroutine unregister_recv_i1_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int8_t), target, intent(inout) :: a(:, :)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call unregister_any(store, name, p, size(a, kind=c_int64_t), is_contiguous(a), status)
  end subroutine unregister_recv_i1_2d

  subroutine unregister_recv_i4_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int32_t), target, intent(inout) :: a(:, :)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call unregister_any(store, name, p, size(a, kind=c_int64_t), is_contiguous(a), status)
  end subroutine unregister_recv_i4_2d

  subroutine unregister_recv_i8_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), target, intent(inout) :: a(:, :)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call unregister_any(store, name, p, size(a, kind=c_int64_t), is_contiguous(a), status)
  end subroutine unregister_recv_i8_2d

  subroutine unregister_recv_r4_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_float), target, intent(inout) :: a(:, :)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call unregister_any(store, name, p, size(a, kind=c_int64_t), is_contiguous(a), status)
  end subroutine unregister_recv_r4_2d

  subroutine unregister_recv_r8_2d(store, name, a, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    real(c_double), target, intent(inout) :: a(:, :)
    integer, intent(out), optional :: status
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(a) > 0 .and. is_contiguous(a)) p = c_loc(a)
    call unregister_any(store, name, p, size(a, kind=c_int64_t), is_contiguous(a), status)
  end subroutine unregister_recv_r8_2d

  ! ---- dds_init (the mold's type gives the item size) ----
  subroutine init_i1(store, name, local_rows, row_elems, mold, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: local_rows, row_elems
    integer(c_int8_t), intent(in) :: mold
    integer, intent(out), optional :: status
    call init_any(store, name, local_rows, row_elems, storage_size(mold) / 8, status)
  end subroutine init_i1

  subroutine init_i4(store, name, local_rows, row_elems, mold, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: local_rows, row_elems
    integer(c_int32_t), intent(in) :: mold
    integer, intent(out), optional :: status
    call init_any(store, name, local_rows, row_elems, storage_size(mold) / 8, status)
  end subroutine init_i4

  subroutine init_i8(store, name, local_rows, row_elems, mold, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: local_rows, row_elems
    integer(c_int64_t), intent(in) :: mold
    integer, intent(out), optional :: status
    call init_any(store, name, local_rows, row_elems, storage_size(mold) / 8, status)
  end subroutine init_i8

  subroutine init_r4(store, name, local_rows, row_elems, mold, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: local_rows, row_elems
    real(c_float), intent(in) :: mold
    integer, intent(out), optional :: status
    call init_any(store, name, local_rows, row_elems, storage_size(mold) / 8, status)
  end subroutine init_r4

  subroutine init_r8(store, name, local_rows, row_elems, mold, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: local_rows, row_elems
    real(c_double), intent(in) :: mold
    integer, intent(out), optional :: status
    call init_any(store, name, local_rows, row_elems, storage_size(mold) / 8, status)
  end subroutine init_r8
end module ddstore
