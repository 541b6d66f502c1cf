// libddstore C++ wrapper: header-only, C++17, over the C API of ddstore.h.
//
//   #include "ddstore.hpp"          // includes <mpi.h> and ddstore.h
//   ddstore::Store store(MPI_COMM_WORLD);
//   store.add("pressure", p.data(), n_cells, 1);
//   store.get("pressure", row.data(), global_row, 1);
//
// Conventions (the same as the C API):
//  * global row indices are 0-based int64_t; local rows (update) too;
//  * a variable is a table of rows of `elems` elements of type T; buffers are
//    row-major: row r starts at element r * elems;
//  * T must be trivially copyable and 1, 2, 4 or 8 bytes, and typed reads and
//    writes check that sizeof(T) equals the variable's item size;
//  * every failure throws ddstore::Error, which carries the dds_status and
//    the library's message;
//  * collective calls (constructor, destroy, add, init, epoch_begin/end and,
//    with method 0 in the collective batch mode, get_batch) must be made by
//    every rank of the store; they fail, and throw, on every rank together.
//    With Options::batch_mode = DDS_BATCH_ONESIDED (or methods 1 and 2)
//    get_batch is one-sided and thread-safe; errors stay on their rank.
//
// Store owns its handle and is move-only; its destructor calls dds_destroy,
// which is collective for method 0, so let every rank's Store go out of
// scope at the same point (or call destroy() explicitly) and before
// MPI_Finalize where possible (after it, only local memory is released).
#ifndef DDSTORE_HPP
#define DDSTORE_HPP

#include <mpi.h>

#include "ddstore.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ddstore {

// A failed libddstore call: what() is the library's message, which names the
// function and what was wrong; status() is the dds_status.
class Error : public std::runtime_error {
 public:
  Error(dds_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  dds_status status() const noexcept { return status_; }
  // The status's name, e.g. "DDS_ERR_MISMATCH".
  const char* status_name() const noexcept { return dds_status_string(static_cast<int32_t>(status_)); }

 private:
  dds_status status_;
};

// Options of the Store constructor; unset strings are read from the
// environment (see dds_options in ddstore.h).
struct Options {
  int32_t method = DDS_METHOD_MPI;  // DDS_METHOD_MPI, DDS_METHOD_FABRIC or DDS_METHOD_SPLIT
  int32_t role = DDS_ROLE_CORE;     // method 2: DDS_ROLE_CORE or DDS_ROLE_EXTRA
  int32_t width = 0;                // ranks per group; 0: one group of all ranks
  int32_t n_core = 0;               // method 2 extra members: ranks of the core job
  std::optional<std::string> handshake_dir;
  std::optional<std::string> fabric_provider;
  std::optional<std::string> fabric_iface;
  std::optional<std::string> nic_map;
  int32_t gpu = DDS_GPU_ENV;  // DDS_GPU_ENV (DDSTORE_GPU), _OFF, _AUTO or _REQUIRE
  int32_t gpu_staging = -1;   // -1: DDSTORE_GPU_STAGING; 0 refuse device buffers; 1 stage them
  // Method 0 get_batch: DDS_BATCH_ENV (DDSTORE_BATCH_MODE, default collective),
  // DDS_BATCH_COLLECTIVE (every rank calls) or DDS_BATCH_ONESIDED (no matching
  // calls, thread-safe). The same on every rank.
  int32_t batch_mode = DDS_BATCH_ENV;
};

// What Store::info returns about a variable.
struct VarInfo {
  int32_t item_size = 0;   // bytes per element
  int64_t total_rows = 0;  // rows of the whole variable
  int64_t local_rows = 0;  // rows held by this rank
  int64_t row_elems = 0;   // elements per row
  int64_t row_bytes = 0;   // bytes per row
  int32_t method = 0;      // DDS_METHOD_* of the store
  int32_t n_ranks = 0;     // ranks holding shards
  std::string transport;   // e.g. "mpi-rma"
  int32_t device_path = 0; // DDS_PATH_* : how rows reach device buffers
};

// What Store::profile returns (see dds_counters in ddstore.h).
using Counters = dds_counters;

// What Store::settings and Store::default_settings return (see dds_settings).
using Settings = dds_settings;

// A pointer and a number of elements (C++17 has no std::span).
template <class T>
struct Span {
  T* ptr = nullptr;
  std::size_t len = 0;

  Span() = default;
  Span(T* p, std::size_t n) : ptr(p), len(n) {}
  template <class U, class = std::enable_if_t<std::is_same_v<std::remove_const_t<T>, U>>>
  Span(std::vector<U>& v) : ptr(v.data()), len(v.size()) {}
  template <class U, class = std::enable_if_t<std::is_const_v<T> && std::is_same_v<std::remove_const_t<T>, U>>>
  Span(const std::vector<U>& v) : ptr(v.data()), len(v.size()) {}
  template <class U, std::size_t N, class = std::enable_if_t<std::is_same_v<std::remove_const_t<T>, U>>>
  Span(std::array<U, N>& a) : ptr(a.data()), len(N) {}

  T* data() const noexcept { return ptr; }
  std::size_t size() const noexcept { return len; }
};

namespace detail {

// Throws the error of the last failed call on this thread.
[[noreturn]] inline void fail(dds_status s) { throw Error(s, dds_last_error()); }

inline void check(dds_status s) {
  if (s != DDS_OK) fail(s);
}

template <class T>
constexpr void check_item_type() {
  static_assert(std::is_trivially_copyable_v<T>, "ddstore: T must be trivially copyable");
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "ddstore: sizeof(T) must be 1, 2, 4 or 8 (use the *_raw functions for other row layouts)");
}

// Bytes of `n` items of `size` bytes; 0 for a negative count (the library
// then reports the negative count itself), SIZE_MAX when the product does
// not fit (the library then reports the size mismatch).
inline std::size_t bytes_of(int64_t n, std::size_t size) {
  if (n <= 0) return 0;
  const auto un = static_cast<std::size_t>(n);
  return size != 0 && un > SIZE_MAX / size ? SIZE_MAX : un * size;
}

// A name holding a NUL byte would reach C cut short, naming another variable.
inline std::optional<Error> name_error(const std::string& name) {
  const std::size_t at = name.find('\0');
  if (at == std::string::npos) return std::nullopt;
  return Error(DDS_ERR_INVALID_ARGUMENT,
               "variable name '" + name.substr(0, at) + "\\0...' holds a NUL byte at offset " + std::to_string(at));
}

// The C string of `name` for a local call; throws for a name C cannot hold.
inline const char* local_name(const std::string& name) {
  if (auto err = name_error(name)) throw *err;
  return name.c_str();
}

}  // namespace detail

// One batched read in flight (Store::get_batch_start). Move-only. wait()
// returns once the rows are in place and throws the read's error; the
// destructor of a request not waited for waits for it (the destination is
// written until then) and drops its status. done() never blocks.
class Request {
 public:
  Request() noexcept = default;
  explicit Request(dds_request* r) noexcept : r_(r) {}
  ~Request() { dds_request_free(std::exchange(r_, nullptr)); }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  Request(Request&& other) noexcept : r_(std::exchange(other.r_, nullptr)) {}
  Request& operator=(Request&& other) noexcept {
    if (this != &other) {
      dds_request_free(std::exchange(r_, other.r_));
      other.r_ = nullptr;
    }
    return *this;
  }

  // True once the read has completed (wait() then returns at once). A
  // request already waited for (or empty) is done.
  bool done() const {
    if (!r_) return true;
    int d = 0;
    detail::check(dds_request_test(r_, &d));
    return d != 0;
  }
  // Waits for the read; throws its error. The request is empty afterwards.
  void wait() {
    if (!r_) throw Error(DDS_ERR_BAD_STATE, "ddstore::Request::wait: the request is empty (already waited for)");
    detail::check(dds_request_wait(std::exchange(r_, nullptr)));
  }
  explicit operator bool() const noexcept { return r_ != nullptr; }

 private:
  dds_request* r_ = nullptr;
};

class Store {
 public:
  // An empty store (no handle); every call on it fails with
  // DDS_ERR_INVALID_ARGUMENT. Assign a created Store to it.
  Store() noexcept = default;

  // Creates a store over `comm` (collective). The store works on its own
  // duplicate of the communicator.
  explicit Store(MPI_Comm comm, const Options& options = Options()) {
    dds_options o;
    detail::check(dds_options_init(&o));
    o.method = options.method;
    o.role = options.role;
    o.width = options.width;
    o.n_core = options.n_core;
    if (options.handshake_dir) o.handshake_dir = options.handshake_dir->c_str();
    if (options.fabric_provider) o.fabric_provider = options.fabric_provider->c_str();
    if (options.fabric_iface) o.fabric_iface = options.fabric_iface->c_str();
    if (options.nic_map) o.nic_map = options.nic_map->c_str();
    o.gpu = options.gpu;
    o.gpu_staging = options.gpu_staging;
    o.batch_mode = options.batch_mode;
    detail::check(dds_create_comm(comm, &o, &h_));
  }

  // Destroys the store (collective for method 0); errors are ignored here,
  // call destroy() to see them.
  ~Store() { reset(); }

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  Store(Store&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  // Destroys this store's current handle (collective) and takes other's.
  Store& operator=(Store&& other) noexcept {
    if (this != &other) {
      reset();
      h_ = std::exchange(other.h_, nullptr);
    }
    return *this;
  }

  // Destroys the store now (collective for method 0) and throws on failure.
  // The Store is empty afterwards, even when it throws.
  void destroy() {
    dds_store* h = std::exchange(h_, nullptr);
    detail::check(dds_destroy(h));
  }

  // The C handle, for calls into ddstore.h; still owned by this Store.
  dds_store* handle() const noexcept { return h_; }
  // Gives up ownership: the caller must dds_destroy the returned handle.
  dds_store* release() noexcept { return std::exchange(h_, nullptr); }
  explicit operator bool() const noexcept { return h_ != nullptr; }

  static std::string version() { return dds_version(); }

  // What a store created now with default options would use (the
  // environment as the library reads it); needs no MPI.
  static Settings default_settings() {
    Settings out{};
    out.struct_size = sizeof out;
    detail::check(dds_store_settings(nullptr, &out));
    return out;
  }

  // ---- variables (collective) ----

  // Registers `name` from `rows` rows of `elems` elements at `data` (copied).
  template <class T>
  void add(const std::string& name, const T* data, int64_t rows, int64_t elems) {
    detail::check_item_type<T>();
    std::size_t bytes = rows > 0 && elems > 0 ? detail::bytes_of(rows * elems, sizeof(T)) : 0;
    detail::check(dds_add(h_, collective_name(DDS_CALL_ADD, name), data, bytes, rows, elems, static_cast<int32_t>(sizeof(T))));
  }

  // Registers `name` from a vector of whole rows of `elems` elements (the
  // library refuses a size that is not whole rows, on every rank).
  template <class T>
  void add(const std::string& name, const std::vector<T>& data, int64_t elems) {
    detail::check_item_type<T>();
    int64_t rows = elems > 0 ? static_cast<int64_t>(data.size()) / elems : 0;
    detail::check(dds_add(h_, collective_name(DDS_CALL_ADD, name), data.data(), data.size() * sizeof(T), rows, elems,
                          static_cast<int32_t>(sizeof(T))));
  }

  // Registers `name` with `rows` zero-filled rows of `elems` items of type T.
  template <class T>
  void init(const std::string& name, int64_t rows, int64_t elems) {
    detail::check_item_type<T>();
    detail::check(dds_init(h_, collective_name(DDS_CALL_ADD, name), rows, elems, static_cast<int32_t>(sizeof(T))));
  }

  // Untyped registration: `data_bytes` must be rows x elems x item_size.
  void add_raw(const std::string& name, const void* data, std::size_t data_bytes, int64_t rows, int64_t elems,
               int32_t item_size) {
    detail::check(dds_add(h_, collective_name(DDS_CALL_ADD, name), data, data_bytes, rows, elems, item_size));
  }

  // ---- local writes ----

  // Writes `count` rows from `src` into this rank's shard from local row
  // `local_row` (0-based). Visible to readers after a barrier or epoch_begin.
  template <class T>
  void update(const std::string& name, const T* src, int64_t local_row, int64_t count) {
    VarInfo v = typed_info<T>(name, "dds_update");
    detail::check(
        dds_update(h_, detail::local_name(name), src, detail::bytes_of(count, static_cast<std::size_t>(v.row_bytes)), local_row));
  }

  // Writes whole rows from a vector, starting at local row `local_row`.
  template <class T>
  void update(const std::string& name, const std::vector<T>& src, int64_t local_row = 0) {
    typed_info<T>(name, "dds_update");
    detail::check(dds_update(h_, detail::local_name(name), src.data(), src.size() * sizeof(T), local_row));
  }

  void update_raw(const std::string& name, const void* src, std::size_t bytes, int64_t local_row) {
    detail::check(dds_update(h_, detail::local_name(name), src, bytes, local_row));
  }

  // ---- reads ----

  // Reads `count` rows from global row `start` (inside one rank's shard)
  // into `dst`, which must hold count x elements-per-row items.
  template <class T>
  void get(const std::string& name, T* dst, int64_t start, int64_t count) {
    VarInfo v = typed_info<T>(name, "dds_get");
    detail::check(
        dds_get(h_, detail::local_name(name), dst, detail::bytes_of(count, static_cast<std::size_t>(v.row_bytes)), start, count));
  }

  // The same into a vector, resized to count x elements-per-row.
  template <class T>
  void get(const std::string& name, std::vector<T>& dst, int64_t start, int64_t count) {
    VarInfo v = typed_info<T>(name, "dds_get");
    dst.resize(count > 0 ? static_cast<std::size_t>(count * v.row_elems) : 0);
    detail::check(dds_get(h_, detail::local_name(name), dst.data(), dst.size() * sizeof(T), start, count));
  }

  void get_raw(const std::string& name, void* dst, std::size_t bytes, int64_t start, int64_t count) {
    detail::check(dds_get(h_, detail::local_name(name), dst, bytes, start, count));
  }

  // Stream-ordered reads (a CUstream / cudaStream_t, or nullptr): see
  // dds_get_stream and dds_get_batch_stream. `dst` may be device memory.
  void get_stream_raw(const std::string& name, void* dst, std::size_t bytes, int64_t start, int64_t count,
                      void* stream) {
    detail::check(dds_get_stream(h_, detail::local_name(name), dst, bytes, start, count, stream));
  }

  void get_batch_stream_raw(const std::string& name, void* dst, std::size_t bytes, const int64_t* idx, int64_t n,
                            void* stream) {
    detail::check(dds_get_batch_stream(h_, collective_name(DDS_CALL_GET_BATCH, name), dst, bytes, idx, n, stream));
  }

  // Reads rows idx[0..n) into dst (row i of dst receives global row idx[i]);
  // dst must hold n x elements-per-row items. Collective for method 0.
  template <class T>
  void get_batch(const std::string& name, T* dst, const int64_t* idx, int64_t n) {
    batch<T>(name, dst, n > 0 ? -1 : 0, idx, n);
  }

  // The same with spans; dst.size() must be idx.size() x elements-per-row.
  template <class T>
  void get_batch(const std::string& name, Span<T> dst, Span<const int64_t> idx) {
    static_assert(!std::is_const_v<T>, "ddstore: get_batch needs a writable destination");
    batch<T>(name, dst.data(), static_cast<int64_t>(dst.size()), idx.data(), static_cast<int64_t>(idx.size()));
  }

  // The same into a vector, resized to idx.size() x elements-per-row.
  template <class T>
  void get_batch(const std::string& name, std::vector<T>& dst, const std::vector<int64_t>& idx) {
    batch<T>(name, &dst, 0, idx.data(), static_cast<int64_t>(idx.size()));
  }

  void get_batch_raw(const std::string& name, void* dst, std::size_t bytes, const int64_t* idx, int64_t n) {
    detail::check(dds_get_batch(h_, collective_name(DDS_CALL_GET_BATCH, name), dst, bytes, idx, n));
  }

  // Starts reading rows idx[0..n) into dst (as get_batch) and returns at once;
  // dst must stay valid until the Request is waited for (or destroyed). The
  // indices are copied. Errors of the arguments throw here, errors of the
  // read from Request::wait. Collective for method 0 in the collective batch
  // mode (every rank starts the same requests in the same order).
  template <class T>
  [[nodiscard]] Request get_batch_start(const std::string& name, T* dst, const int64_t* idx, int64_t n) {
    std::optional<Error> err;
    VarInfo v = try_typed_info<T>(name, "dds_get_batch_start", err);
    const bool ok = !err || (err->status() == DDS_ERR_MISMATCH && n == 0);
    if (!ok) fail_collective(DDS_CALL_GET_BATCH_START, name, *err);
    return get_batch_start_raw(name, dst, n > 0 ? detail::bytes_of(n, static_cast<std::size_t>(v.row_bytes)) : 0, idx, n);
  }

  template <class T>
  [[nodiscard]] Request get_batch_start(const std::string& name, std::vector<T>& dst, const std::vector<int64_t>& idx) {
    static_assert(!std::is_const_v<T>, "ddstore: get_batch_start needs a writable destination");
    std::optional<Error> err;
    VarInfo v = try_typed_info<T>(name, "dds_get_batch_start", err);
    if (err && !(err->status() == DDS_ERR_MISMATCH && idx.empty())) fail_collective(DDS_CALL_GET_BATCH_START, name, *err);
    dst.resize(static_cast<std::size_t>(idx.size()) * static_cast<std::size_t>(v.row_elems));
    return get_batch_start_raw(name, dst.data(), dst.size() * sizeof(T), idx.data(), static_cast<int64_t>(idx.size()));
  }

  [[nodiscard]] Request get_batch_start_raw(const std::string& name, void* dst, std::size_t bytes, const int64_t* idx,
                                            int64_t n) {
    dds_request* r = nullptr;
    detail::check(dds_get_batch_start(h_, collective_name(DDS_CALL_GET_BATCH, name), dst, bytes, idx, n, &r));
    return Request(r);
  }

  // Ragged variables (docs/ragged.md). Registers this rank's samples:
  // sample i is lengths[i] rows of `elems` items of T, all rows back to back
  // in `data`. Collective.
  template <class T>
  void add_ragged(const std::string& name, const std::vector<T>& data, const std::vector<int64_t>& lengths,
                  int64_t elems) {
    detail::check_item_type<T>();
    detail::check(dds_add_ragged(h_, collective_name(DDS_CALL_ADD_RAGGED, name), data.data(),
                                 data.size() * sizeof(T), lengths.data(), static_cast<int64_t>(lengths.size()), elems,
                                 static_cast<int32_t>(sizeof(T))));
  }

  // Lengths (rows) of samples idx. Collective when get_batch is.
  std::vector<int64_t> ragged_lengths(const std::string& name, const std::vector<int64_t>& idx) {
    std::vector<int64_t> lengths(idx.size());
    detail::check(dds_ragged_lengths(h_, collective_name(DDS_CALL_RAGGED_LENGTHS, name), idx.data(),
                                     static_cast<int64_t>(idx.size()), lengths.data()));
    return lengths;
  }

  // Reads samples idx (any order, repeats) back to back into dst, resized to
  // their items; returns their lengths. Collective when get_batch is (two
  // collective calls: the lengths, then the rows).
  template <class T>
  std::vector<int64_t> get_ragged_batch(const std::string& name, std::vector<T>& dst, const std::vector<int64_t>& idx) {
    static_assert(!std::is_const_v<T>, "ddstore: get_ragged_batch needs a writable destination");
    std::vector<int64_t> lengths = ragged_lengths(name, idx);
    std::optional<Error> err;
    VarInfo v = try_typed_info<T>(name, "dds_get_ragged_batch", err);
    if (err) fail_collective(DDS_CALL_GET_RAGGED_BATCH, name, *err);
    int64_t rows = 0;
    for (int64_t l : lengths) rows += l;
    dst.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(v.row_elems));
    detail::check(dds_get_ragged_batch(h_, name.c_str(), dst.data(), dst.size() * sizeof(T), idx.data(),
                                       static_cast<int64_t>(idx.size()), lengths.data(), nullptr));
    return lengths;
  }

  // Raw form: dst of `bytes` bytes (at least the samples' bytes); lengths
  // (idx.size() entries) may be null. Returns the bytes written.
  std::size_t get_ragged_batch_raw(const std::string& name, void* dst, std::size_t bytes, const int64_t* idx, int64_t n,
                                   int64_t* lengths) {
    std::size_t got = 0;
    detail::check(
        dds_get_ragged_batch(h_, collective_name(DDS_CALL_GET_RAGGED_BATCH, name), dst, bytes, idx, n, lengths, &got));
    return got;
  }

  // Registers `n` items at `buf` as a destination for reads of `name`; reads
  // into any part of it then need no memory registration (methods 1 and 2).
  template <class T>
  void register_recv(const std::string& name, T* buf, std::size_t n) {
    detail::check_item_type<T>();
    detail::check(dds_register_recv(h_, detail::local_name(name), buf, n * sizeof(T)));
  }

  template <class T>
  void register_recv(const std::string& name, std::vector<T>& buf) {
    register_recv(name, buf.data(), buf.size());
  }

  // Removes the registration that starts at `buf`.
  void unregister_recv(const std::string& name, const void* buf) {
    detail::check(dds_unregister_recv(h_, detail::local_name(name), const_cast<void*>(buf)));
  }

  // ---- queries and epochs ----

  VarInfo info(const std::string& name) const {
    dds_var_info raw{};
    raw.struct_size = sizeof raw;
    detail::check(dds_info(h_, detail::local_name(name), &raw));
    return to_info(raw);
  }

  // The settings this store runs with (its options over the environment).
  Settings settings() const {
    if (!h_) throw Error(DDS_ERR_INVALID_ARGUMENT, "dds_store_settings: this Store is empty (NULL handle)");
    Settings out{};
    out.struct_size = sizeof out;
    detail::check(dds_store_settings(h_, &out));
    return out;
  }

  Counters profile(const std::string& name) const {
    Counters c{};
    c.struct_size = sizeof c;
    detail::check(dds_profile(h_, detail::local_name(name), &c));
    return c;
  }

  // Collective: makes updates visible and synchronises the ranks.
  void epoch_begin() { detail::check(dds_epoch_begin(h_)); }
  void epoch_end() { detail::check(dds_epoch_end(h_)); }

  // Method 2 extra member: attaches to a variable of the core job.
  void join(const std::string& name) { detail::check(dds_join(h_, detail::local_name(name))); }
  // As join, and checks the row shape (elements per row, item size).
  void join(const std::string& name, int64_t row_elems, int32_t item_size) {
    detail::check(dds_join_expect(h_, detail::local_name(name), row_elems, item_size));
  }
  // Frees one variable (collective for core members; local for extras).
  void remove(const std::string& name) { detail::check(dds_remove(h_, collective_name(DDS_CALL_REMOVE, name))); }

  // ---- snapshots (collective; docs/snapshots.md) ----

  // Saves `names` (empty: every variable) to snapshot directory `dir`,
  // atomically replacing an older snapshot there.
  void save(const std::string& dir, const std::vector<std::string>& names = {}) {
    auto c = snapshot_args(DDS_CALL_SAVE, dir, names);
    detail::check(dds_save(h_, dir.c_str(), c.data(), static_cast<int64_t>(c.size())));
  }
  // Loads `names` (empty: every variable of the snapshot) from `dir`,
  // re-sharded evenly over this store's ranks.
  void load(const std::string& dir, const std::vector<std::string>& names = {}) {
    auto c = snapshot_args(DDS_CALL_LOAD, dir, names);
    detail::check(dds_load(h_, dir.c_str(), c.data(), static_cast<int64_t>(c.size())));
  }
  // Method 2: an extra member announces it is done; the core waits for n of them.
  void extra_done() { detail::check(dds_extra_done(h_)); }
  void wait_extras(int64_t n_extras, int64_t timeout_ms = -1) {
    detail::check(dds_wait_extras(h_, n_extras, timeout_ms));
  }

  // Method 2 (core or extra; local): opaque bytes under a name in the
  // hand-shake directory (at most DDS_BLOB_MAX_BYTES), for another job.
  void publish_blob(const std::string& name, const void* data, size_t len) {
    detail::check(dds_publish_blob(h_, detail::local_name(name), data, len));
  }
  // Waits for blob `name` (timeout_ms < 0: DDSTORE_HANDSHAKE_TIMEOUT_S) and returns its bytes.
  std::vector<unsigned char> wait_blob(const std::string& name, int64_t timeout_ms = -1) {
    std::vector<unsigned char> buf(4096);
    for (;;) {
      size_t len = 0;
      dds_status st = dds_wait_blob(h_, detail::local_name(name), buf.data(), buf.size(), &len, timeout_ms);
      if (st == DDS_OK) {
        buf.resize(len);
        return buf;
      }
      if (st != DDS_ERR_INVALID_ARGUMENT || len <= buf.size()) detail::check(st);
      buf.resize(len);  // too small: the blob's length is known now
    }
  }

 private:
  dds_store* h_ = nullptr;

  // Destroys the handle, if any, ignoring errors (used where throwing is not allowed).
  void reset() noexcept {
    if (h_) (void)dds_destroy(std::exchange(h_, nullptr));
  }

  static VarInfo to_info(const dds_var_info& raw) {
    VarInfo v;
    v.item_size = raw.item_size;
    v.total_rows = raw.total_rows;
    v.local_rows = raw.local_rows;
    v.row_elems = raw.row_elems;
    v.row_bytes = raw.row_bytes;
    v.method = raw.method;
    v.n_ranks = raw.n_ranks;
    std::size_t n = 0;
    while (n < sizeof raw.transport && raw.transport[n] != '\0') n++;
    v.transport.assign(raw.transport, n);
    v.device_path = raw.device_path;
    return v;
  }

  // Fails collective `call` (DDS_CALL_*) on every rank together with this
  // rank's error `err`, then throws: `err` itself when it is the status the
  // ranks agreed on, else the error of the lower rank that failed too.
  [[noreturn]] void fail_collective(int32_t call, const std::string& name, const Error& err) {
    const dds_status s = dds_fail_collective(h_, call, name.c_str(), err.status(), err.what());
    if (s == err.status()) throw err;
    detail::fail(s);
  }

  // The C strings of a save or load's names; a directory or name C cannot
  // hold fails the call on every rank.
  std::vector<const char*> snapshot_args(int32_t call, const std::string& dir, const std::vector<std::string>& names) {
    if (dir.find('\0') != std::string::npos)
      fail_collective(call, "", Error(DDS_ERR_INVALID_ARGUMENT, "snapshot directory holds a NUL byte"));
    std::vector<const char*> c;
    for (const auto& n : names) c.push_back(collective_name(call, n));
    return c;
  }

  // The C string of `name` for collective `call`; a name C cannot hold
  // fails the call on every rank.
  const char* collective_name(int32_t call, const std::string& name) {
    if (auto err = detail::name_error(name)) fail_collective(call, name, *err);
    return name.c_str();
  }

  // Looks `name` up for typed call `op`; on failure `err` receives the
  // error to throw (the lookup's message, renamed after `op`, or a type
  // mismatch) and the returned info is meaningless.
  template <class T>
  VarInfo try_typed_info(const std::string& name, const char* op, std::optional<Error>& err) const {
    detail::check_item_type<T>();
    dds_var_info raw{};
    raw.struct_size = sizeof raw;
    if (auto bad = detail::name_error(name)) {
      err = bad;
      return VarInfo();
    }
    dds_status s = dds_info(h_, name.c_str(), &raw);
    if (s != DDS_OK) {
      std::string msg = dds_last_error();
      const std::string prefix = "dds_info: ";
      if (msg.compare(0, prefix.size(), prefix) == 0) msg.erase(0, prefix.size());
      err.emplace(s, std::string(op) + ": " + msg);
      return VarInfo();
    }
    if (raw.item_size != static_cast<int32_t>(sizeof(T))) {
      err.emplace(DDS_ERR_MISMATCH, std::string(op) + ": variable '" + name + "' holds " +
                                        std::to_string(raw.item_size) + "-byte items but T is " +
                                        std::to_string(sizeof(T)) + " bytes");
    }
    return to_info(raw);
  }

  template <class T>
  VarInfo typed_info(const std::string& name, const char* op) const {
    std::optional<Error> err;
    VarInfo v = try_typed_info<T>(name, op, err);
    if (err) throw *err;
    return v;
  }

  // get_batch for every overload. `dst` is either a T* holding `dst_len`
  // items (-1: as many as the batch needs), or a std::vector<T> to resize.
  // Collective batches (method 0's default mode), so a rank whose own arguments are wrong
  // (unknown name, wrong T) fails the call on every rank together
  // (dds_fail_collective) and throws its own, more precise, error.
  template <class T, class Dst>
  void batch(const std::string& name, Dst* dst, int64_t dst_len, const int64_t* idx, int64_t n) {
    std::optional<Error> err;
    VarInfo v = try_typed_info<T>(name, "dds_get_batch", err);
    const bool ok = !err || (err->status() == DDS_ERR_MISMATCH && n == 0);  // an empty batch moves nothing
    if (!ok) fail_collective(DDS_CALL_GET_BATCH, name, *err);
    T* out;
    std::size_t bytes;
    if constexpr (std::is_same_v<Dst, std::vector<T>>) {  // the vector overload
      dst->resize(n > 0 ? static_cast<std::size_t>(n * v.row_elems) : 0);
      out = dst->data();
      bytes = dst->size() * sizeof(T);
    } else {
      out = dst;
      bytes = dst_len < 0 ? detail::bytes_of(n, static_cast<std::size_t>(v.row_bytes))
                          : static_cast<std::size_t>(dst_len) * sizeof(T);
    }
    detail::check(dds_get_batch(h_, collective_name(DDS_CALL_GET_BATCH, name), out, bytes, idx, n));
  }
};

}  // namespace ddstore

#endif  // DDSTORE_HPP
