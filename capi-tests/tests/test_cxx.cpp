// The C++ wrapper (ddstore.hpp) on 1, 2 or 4 ranks: exceptions carry the
// status and the library's message, Store is move-only and destroys its
// handle exactly once, typed add/init/update/get/get_batch work for every
// item size across all ranks, and info/profile report what happened.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "ddstore.hpp"

namespace {

int rank = 0, nranks = 1, n_pass = 0, n_fail = 0;

void expect(bool ok, const char* what, int line) {
  if (ok) {
    n_pass++;
  } else {
    n_fail++;
    std::fprintf(stderr, "rank %d test_cxx.cpp:%d: expected %s\n", rank, line, what);
  }
}
#define EXPECT(cond) expect((cond), #cond, __LINE__)

// Runs `f`, which must throw ddstore::Error with `want` and a message
// containing `part`.
template <class F>
void expect_error(F f, dds_status want, const char* part, int line) {
  try {
    f();
    n_fail++;
    std::fprintf(stderr, "rank %d test_cxx.cpp:%d: no exception; expected %s\n", rank, line,
                 dds_status_string(want));
  } catch (const ddstore::Error& e) {
    bool ok = e.status() == want && std::strstr(e.what(), part) != nullptr;
    if (ok) {
      n_pass++;
    } else {
      n_fail++;
      std::fprintf(stderr, "rank %d test_cxx.cpp:%d: got %s \"%s\"; expected %s with \"%s\"\n", rank, line,
                   e.status_name(), e.what(), dds_status_string(want), part);
    }
  }
}
#define EXPECT_ERROR(stmt, want, part) expect_error([&] { stmt; }, (want), (part), __LINE__)

// Rows per rank differ so that shard boundaries are uneven.
int64_t rows_of(int r) { return 2 + r; }
int64_t first_row_of(int r) {
  int64_t g = 0;
  for (int i = 0; i < r; i++) g += rows_of(i);
  return g;
}
int64_t total_rows() { return first_row_of(nranks); }

// A trivially copyable 8-byte item type.
struct Pair {
  float a, b;
  bool operator==(const Pair& o) const { return a == o.a && b == o.b; }
};

// Value of element c of global row g of a variable tagged `tag`, in type T.
template <class T>
T value(int tag, int64_t g, int64_t c) {
  return static_cast<T>(tag * 1000 + g * 10 + c);
}
template <>
Pair value<Pair>(int tag, int64_t g, int64_t c) {
  return Pair{static_cast<float>(tag * 1000 + g * 10 + c), -static_cast<float>(g)};
}

template <class T>
std::vector<T> rows(int tag, int64_t g0, int64_t n, int64_t elems) {
  std::vector<T> v;
  for (int64_t r = 0; r < n; r++)
    for (int64_t c = 0; c < elems; c++) v.push_back(value<T>(tag, g0 + r, c));
  return v;
}

// add (vector overload), then every rank reads every row singly and all rows
// as one reversed batch, through each overload.
template <class T>
void typed_roundtrip(ddstore::Store& s, const char* name, int tag) {
  const int64_t elems = 3, total = total_rows();
  s.add(name, rows<T>(tag, first_row_of(rank), rows_of(rank), elems), elems);
  s.epoch_begin();
  for (int64_t g = 0; g < total; g++) {
    T row[3] = {};
    s.get(name, row, g, 1);
    bool ok = true;
    for (int c = 0; c < 3; c++) ok = ok && row[c] == value<T>(tag, g, c);
    EXPECT(ok);
  }
  std::vector<int64_t> idx;
  for (int64_t g = total - 1; g >= 0; g--) idx.push_back(g);
  std::vector<T> want;
  for (int64_t g : idx) {
    auto r = rows<T>(tag, g, 1, elems);
    want.insert(want.end(), r.begin(), r.end());
  }
  std::vector<T> got;
  s.get_batch(name, got, idx);
  EXPECT(got == want);
  std::vector<T> buf(want.size());
  s.get_batch(name, buf.data(), idx.data(), static_cast<int64_t>(idx.size()));
  EXPECT(buf == want);
  std::vector<T> buf2(want.size());
  s.get_batch(name, ddstore::Span<T>(buf2), ddstore::Span<const int64_t>(idx));
  EXPECT(buf2 == want);
  s.epoch_end();
}

void test_typed() {
  ddstore::Store s(MPI_COMM_WORLD);
  typed_roundtrip<int8_t>(s, "i8", 1);
  typed_roundtrip<int16_t>(s, "i16", 2);
  typed_roundtrip<int32_t>(s, "i32", 3);
  typed_roundtrip<float>(s, "f32", 4);
  typed_roundtrip<int64_t>(s, "i64", 5);
  typed_roundtrip<double>(s, "f64", 6);
  typed_roundtrip<Pair>(s, "pair", 7);
  EXPECT(s.info("i8").item_size == 1 && s.info("i16").item_size == 2 && s.info("pair").item_size == 8);
}

// init<T> then update<T> (pointer and vector overloads), with rank 0 holding
// no rows when there are several ranks.
void test_init_update() {
  ddstore::Store s(MPI_COMM_WORLD);
  const int64_t elems = 2;
  int64_t mine = (nranks > 1 && rank == 0) ? 0 : 4;
  int64_t first = (nranks > 1) ? 4 * (rank - 1) : 0;
  if (nranks > 1 && rank == 0) first = 0;
  int64_t total = 4 * (nranks > 1 ? nranks - 1 : 1);
  s.init<double>("u", mine, elems);
  ddstore::VarInfo info = s.info("u");
  EXPECT(info.total_rows == total && info.local_rows == mine && info.row_elems == elems && info.item_size == 8 &&
         info.row_bytes == 16 && info.n_ranks == nranks && info.method == DDS_METHOD_MPI &&
         info.transport == "mpi-rma");
  std::vector<double> zero;
  s.get("u", zero, total - 1, 1);
  EXPECT(zero.size() == 2 && zero[0] == 0.0 && zero[1] == 0.0);
  MPI_Barrier(MPI_COMM_WORLD);
  if (mine) {
    auto data = rows<double>(9, first, mine, elems);
    s.update("u", data.data(), 0, 1);  // row 0 from a pointer
    s.update("u", std::vector<double>(data.begin() + elems, data.end()), 1);  // rows 1..3
  }
  s.epoch_begin();
  std::vector<double> all;
  std::vector<int64_t> idx;
  for (int64_t g = 0; g < total; g++) idx.push_back(g);
  s.get_batch("u", all, idx);
  EXPECT(all == rows<double>(9, 0, total, elems));
  s.epoch_end();
}

void test_errors() {
  ddstore::Store s(MPI_COMM_WORLD);
  s.add("v", rows<double>(1, first_row_of(rank), rows_of(rank), 4), 4);
  const int64_t total = total_rows();
  std::vector<double> row(4);
  std::vector<float> frow(8);

  EXPECT_ERROR(s.get("nope", row.data(), 0, 1), DDS_ERR_UNKNOWN_VARIABLE, "'nope'");
  EXPECT_ERROR(s.get("v", row.data(), total, 1), DDS_ERR_INDEX_OUT_OF_RANGE, "out of range");
  EXPECT_ERROR(s.get("v", row.data(), -1, 1), DDS_ERR_INDEX_OUT_OF_RANGE, "'v'");
  // float has 4 bytes, the variable 8: refused even though 8 floats = 4 doubles in bytes.
  EXPECT_ERROR(s.get("v", frow.data(), 0, 1), DDS_ERR_MISMATCH, "8-byte items");
  EXPECT_ERROR(s.update("v", frow, 0), DDS_ERR_MISMATCH, "T is 4 bytes");
  EXPECT_ERROR(s.update("v", row.data(), rows_of(rank), 1), DDS_ERR_INDEX_OUT_OF_RANGE, "shard");
  EXPECT_ERROR(s.epoch_end(), DDS_ERR_BAD_STATE, "no epoch is open");
  // Collective errors: every rank throws, even when only one rank is wrong.
  EXPECT_ERROR(s.add("v", rows<double>(1, 0, 1, 4), 4), DDS_ERR_DUPLICATE_VARIABLE, "'v'");
  std::vector<double> odd(rank == 0 ? 7 : 8);  // rank 0: not whole rows of 4
  EXPECT_ERROR(s.add("w", odd, 4), DDS_ERR_MISMATCH, "");
  // DDSTORE_BATCH_MODE=onesided: each rank's get_batch is its own, errors included.
  const char* bm = std::getenv("DDSTORE_BATCH_MODE");
  const bool collective = !(bm && (std::string(bm) == "onesided" || std::string(bm) == "one-sided"));
  std::vector<int64_t> idx = {0, rank == 0 ? total : total - 1};  // rank 0 asks for a row past the end
  std::vector<double> got;
  if (collective || rank == 0) {
    EXPECT_ERROR(s.get_batch("v", got, idx), DDS_ERR_INDEX_OUT_OF_RANGE, "out of range");
  } else {
    s.get_batch("v", got, idx);
  }
  idx = {0, total - 1};
  if (rank == 0) {  // rank 0 reads the wrong type: every rank's get_batch fails
    std::vector<float> fgot;
    EXPECT_ERROR(s.get_batch("v", fgot, idx), DDS_ERR_MISMATCH, "8-byte items");
  } else if (collective) {
    // The other ranks learn rank 0's real cause (dds_fail_collective).
    EXPECT_ERROR(s.get_batch("v", got, idx), DDS_ERR_MISMATCH, "rank 0: dds_get_batch: variable 'v' holds 8-byte items");
  }
  if (rank == 0) {  // rank 0 names an unknown variable
    EXPECT_ERROR(s.get_batch("nope", got, idx), DDS_ERR_UNKNOWN_VARIABLE, "'nope'");
  } else if (collective) {
    EXPECT_ERROR(s.get_batch("v", got, idx), DDS_ERR_UNKNOWN_VARIABLE, "rank 0: dds_get_batch: no variable named 'nope'");
  }
  // A name with a NUL byte would reach C cut short ("v"): refused, locally
  // and in collectives (every rank fails with rank 0's cause).
  const std::string nul("v\0x", 3);
  EXPECT_ERROR(s.get(nul, row.data(), 0, 1), DDS_ERR_INVALID_ARGUMENT, "NUL byte at offset 1");
  EXPECT_ERROR(s.info(nul), DDS_ERR_INVALID_ARGUMENT, "NUL byte");
  EXPECT_ERROR(s.update(nul, row.data(), 0, 1), DDS_ERR_INVALID_ARGUMENT, "NUL byte");
  EXPECT_ERROR(s.add(rank == 0 ? nul : std::string("v2"), rows<double>(1, 0, 1, 4), 4), DDS_ERR_INVALID_ARGUMENT,
               rank == 0 ? "NUL byte" : "rank 0: variable name 'v\\0...' holds a NUL byte");
  EXPECT_ERROR(s.get_batch(nul, got, idx), DDS_ERR_INVALID_ARGUMENT, "NUL byte");
  EXPECT_ERROR(s.remove(nul), DDS_ERR_INVALID_ARGUMENT, "NUL byte");
  EXPECT_ERROR(s.info("v2"), DDS_ERR_UNKNOWN_VARIABLE, "'v2'");
  // The store still works after all that.
  s.get_batch("v", got, idx);
  auto want = rows<double>(1, 0, 1, 4);
  auto last = rows<double>(1, total - 1, 1, 4);
  want.insert(want.end(), last.begin(), last.end());
  EXPECT(got == want);
  s.get("v", row, total - 1, 1);
  EXPECT(row == last);

  // Snapshots: "v" saved and loaded into a second store, every row equal;
  // a NUL in a name fails the call on every rank; an unknown name.
  {
    int tag = rank == 0 ? static_cast<int>(getpid()) : 0;
    MPI_Bcast(&tag, 1, MPI_INT, 0, MPI_COMM_WORLD);
    const std::string dir = "snap-cxx-" + std::to_string(tag);
    s.save(dir, {"v"});
    EXPECT_ERROR(s.save(dir, {nul}), DDS_ERR_INVALID_ARGUMENT, "NUL byte");
    ddstore::Store t(MPI_COMM_WORLD);
    EXPECT_ERROR(t.load(dir, {"w"}), DDS_ERR_UNKNOWN_VARIABLE, "no variable named 'w' in snapshot");
    t.load(dir);
    std::vector<double> a, b;
    bool same = true;
    for (int64_t g = 0; g < total; g++) {
      s.get("v", a, g, 1);
      t.get("v", b, g, 1);
      same = same && a == b;
    }
    EXPECT(same);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) EXPECT(std::system(("rm -rf '" + dir + "'").c_str()) == 0);
  }

  // An empty Store refuses every call.
  ddstore::Store empty;
  EXPECT(!empty);
  EXPECT_ERROR(empty.info("v"), DDS_ERR_INVALID_ARGUMENT, "NULL");
  EXPECT_ERROR(empty.settings(), DDS_ERR_INVALID_ARGUMENT, "empty");
  // Settings: the store's (method 0, core, a resolved batch mode) and the
  // defaults, which a store created with default options matches.
  ddstore::Settings mine_s = s.settings(), defaults = ddstore::Store::default_settings();
  EXPECT(mine_s.method == DDS_METHOD_MPI && mine_s.role == DDS_ROLE_CORE && mine_s.batch_mode != DDS_BATCH_ENV &&
         mine_s.gpu != DDS_GPU_ENV);
  EXPECT(defaults.batch_mode == mine_s.batch_mode && defaults.profiling == mine_s.profiling &&
         std::string(defaults.handshake_dir) == mine_s.handshake_dir);
  // Error is a std::runtime_error.
  try {
    s.info("missing");
    EXPECT(false);
  } catch (const std::runtime_error& e) {
    EXPECT(std::strstr(e.what(), "dds_info") != nullptr && std::strstr(e.what(), "'missing'") != nullptr);
  }
}

void test_moves() {
  ddstore::Store a(MPI_COMM_WORLD);
  a.add("m", rows<int32_t>(3, first_row_of(rank), rows_of(rank), 1), 1);
  dds_store* h = a.handle();
  ddstore::Store b(std::move(a));
  EXPECT(!a && a.handle() == nullptr && b.handle() == h);
  EXPECT(b.info("m").total_rows == total_rows());

  // Move assignment destroys the target's old store (collective).
  ddstore::Store c(MPI_COMM_WORLD);
  dds_store* old = c.handle();
  c = std::move(b);
  EXPECT(!b && c.handle() == h);
  dds_var_info raw{};
  raw.struct_size = sizeof raw;
  EXPECT(dds_info(old, "m", &raw) == DDS_ERR_BAD_STATE);  // the old handle is gone
  EXPECT(dds_info(h, "m", &raw) == DDS_OK && raw.total_rows == total_rows());

  // Self-move leaves the store alone.
  ddstore::Store& c_ref = c;
  c = std::move(c_ref);
  EXPECT(c.handle() == h);

  // A vector of stores: moves on reallocation, never double-destroys.
  {
    std::vector<ddstore::Store> stores;
    for (int i = 0; i < 3; i++) stores.emplace_back(MPI_COMM_WORLD);
    stores[2].init<float>("x", 1, 1);
    EXPECT(stores[2].info("x").total_rows == nranks);
  }

  // destroy() is explicit and leaves an empty Store; destroying again is a no-op.
  c.destroy();
  EXPECT(!c);
  EXPECT(dds_info(h, "m", &raw) == DDS_ERR_BAD_STATE);
  c.destroy();
  // release() hands the handle over.
  ddstore::Store d(MPI_COMM_WORLD);
  dds_store* raw_h = d.release();
  EXPECT(!d && raw_h != nullptr);
  EXPECT(dds_destroy(raw_h) == DDS_OK);
  // a and b were moved from: their destructors must not destroy anything.
}

void test_profile() {
  ddstore::Store s(MPI_COMM_WORLD);
  s.add("p", rows<double>(4, first_row_of(rank), rows_of(rank), 2), 2);
  ddstore::Counters before = s.profile("p");
  EXPECT(before.calls == 0 && before.rows == 0 && before.bytes == 0);
  double row[2];
  for (int64_t g = 0; g < total_rows(); g++) s.get("p", row, g, 1);
  std::vector<double> got;
  s.get_batch("p", got, std::vector<int64_t>{0, 1, 0});
  ddstore::Counters after = s.profile("p");
  uint64_t n = static_cast<uint64_t>(total_rows());
  EXPECT(after.calls == n + 1 && after.rows == n + 3 && after.bytes == (n + 3) * 16);
  EXPECT(after.rows_local + after.rows_remote == after.rows);
  EXPECT(after.struct_size == sizeof(ddstore::Counters));
  EXPECT_ERROR(s.profile("nope"), DDS_ERR_UNKNOWN_VARIABLE, "'nope'");
}


// Non-blocking batches (ddstore::Request): several in flight, waited for in
// reverse, one left to its destructor, an empty one; typed errors at start
// (on every rank for a collective store) and the read's error at wait.
void test_requests() {
  ddstore::Store s(MPI_COMM_WORLD);
  const int64_t total = total_rows();
  s.add("q", rows<double>(7, first_row_of(rank), rows_of(rank), 2), 2);
  std::vector<std::vector<int64_t>> idx(4);
  std::vector<std::vector<double>> out(4);
  std::vector<ddstore::Request> reqs;
  for (int k = 0; k < 4; k++) {
    for (int64_t g = 0; g < total; g++) idx[k].push_back((g * (k + 1) + rank) % total);
    reqs.push_back(s.get_batch_start("q", out[k], idx[k]));
  }
  for (int k = 3; k >= 0; k--) {
    reqs[k].wait();
    EXPECT(!reqs[k] && reqs[k].done());
    std::vector<double> want;
    for (int64_t g : idx[k]) {
      auto r = rows<double>(7, g, 1, 2);
      want.insert(want.end(), r.begin(), r.end());
    }
    EXPECT(out[k] == want);
  }
  EXPECT_ERROR(reqs[0].wait(), DDS_ERR_BAD_STATE, "empty");
  std::vector<double> raw(2 * static_cast<std::size_t>(total));
  std::vector<int64_t> all;
  for (int64_t g = 0; g < total; g++) all.push_back(g);
  {
    ddstore::Request r = s.get_batch_start("q", raw.data(), all.data(), total);
    (void)r;  // the destructor waits
  }
  EXPECT(raw == rows<double>(7, 0, total, 2));
  std::vector<int64_t> bad{total};
  std::vector<double> one;
  EXPECT_ERROR(ddstore::Request r = s.get_batch_start("q", one, bad), DDS_ERR_INDEX_OUT_OF_RANGE, "out of range");
  std::vector<float> wrong;
  EXPECT_ERROR(ddstore::Request r = s.get_batch_start("q", wrong, all), DDS_ERR_MISMATCH, "");
  // A wrong type on rank 0 only, in the collective mode: the wrapper stands
  // in for dds_get_batch_start (DDS_CALL_GET_BATCH_START), so every rank
  // fails with rank 0's cause rather than a call mismatch.
  const char* bm = std::getenv("DDSTORE_BATCH_MODE");
  const bool collective = !(bm && (std::string(bm) == "onesided" || std::string(bm) == "one-sided"));
  if (nranks > 1 && collective) {
    if (rank == 0)
      EXPECT_ERROR(ddstore::Request r = s.get_batch_start("q", wrong, all), DDS_ERR_MISMATCH, "");
    else
      EXPECT_ERROR(ddstore::Request r = s.get_batch_start("q", raw.data(), all.data(), total), DDS_ERR_MISMATCH,
                   "dds_get_batch_start: rank 0:");
  }
}

}  // namespace

// Ragged variables: rank r holds r + 2 samples of r + i rows (0 included)
// of 3 doubles; every sample read back in reverse order, with repeats.
void test_ragged() {
  ddstore::Store s(MPI_COMM_WORLD);
  auto value = [](int64_t g, int64_t k) { return static_cast<double>(g * 1000 + k); };
  std::vector<int64_t> lengths;
  std::vector<double> data;
  int64_t first = 0;
  for (int q = 0; q < rank; q++) first += q + 2;
  for (int i = 0; i < rank + 2; i++) {
    lengths.push_back(i == 0 ? 0 : rank + i);
    for (int64_t k = 0; k < lengths.back() * 3; k++) data.push_back(value(first + i, k));
  }
  s.add_ragged("rag", data, lengths, 3);
  int64_t total = 0;
  for (int q = 0; q < nranks; q++) total += q + 2;
  std::vector<int64_t> idx;
  for (int64_t g = total - 1; g >= 0; g--) idx.push_back(g);
  idx.push_back(1);
  idx.push_back(1);
  std::vector<double> out;
  std::vector<int64_t> lens = s.get_ragged_batch("rag", out, idx);
  EXPECT(lens.size() == idx.size());
  bool ok = true;
  std::size_t at = 0;
  for (std::size_t i = 0; i < idx.size(); i++)
    for (int64_t k = 0; k < lens[i] * 3; k++) ok = ok && at < out.size() && out[at++] == value(idx[i], k);
  EXPECT(ok && at == out.size());
  // Wrong item type: refused on every rank (collective in method 0).
  std::vector<float> wrong;
  expect_error([&] { s.get_ragged_batch("rag", wrong, idx); }, DDS_ERR_MISMATCH, "rag", __LINE__);
  // A destination one byte short names the bytes needed.
  int64_t one[1] = {1};
  std::vector<char> small(s.ragged_lengths("rag", {1})[0] * 24 + 1);
  std::size_t need = small.size() - 1;
  expect_error([&] { s.get_ragged_batch_raw("rag", small.data(), need - 1, one, 1, nullptr); }, DDS_ERR_MISMATCH,
               (std::to_string(need) + " bytes are needed").c_str(), __LINE__);
  EXPECT(s.get_ragged_batch_raw("rag", small.data(), small.size(), one, 1, nullptr) == need);
}

// Blobs through a method-2 extra member (local; no fabric is opened): rank 0
// publishes, every rank reads it back, also past the first 4 KiB buffer.
void test_blobs() {
  char dir[64] = "";
  if (rank == 0) {
    std::snprintf(dir, sizeof dir, "/tmp/dds-cxx-blob.XXXXXX");
    if (!mkdtemp(dir)) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  ddstore::Options o;
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_EXTRA;
  o.n_core = 1;
  o.handshake_dir = dir;
  ddstore::Store s(MPI_COMM_NULL, o);
  std::vector<unsigned char> big(10000);
  for (std::size_t i = 0; i < big.size(); i++) big[i] = static_cast<unsigned char>(i * 13);
  if (rank == 0) {
    s.publish_blob("cxx/big", big.data(), big.size());
    s.publish_blob("cxx/empty", nullptr, 0);
  }
  EXPECT(s.wait_blob("cxx/big", 30000) == big);
  EXPECT(s.wait_blob("cxx/empty", 30000).empty());
  EXPECT_ERROR(s.wait_blob("cxx/never", 10), DDS_ERR_TIMEOUT, "no blob 'cxx/never'");
  EXPECT_ERROR(s.publish_blob("cxx/over", big.data(), DDS_BLOB_MAX_BYTES + 1), DDS_ERR_INVALID_ARGUMENT,
               "DDS_BLOB_MAX_BYTES");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) EXPECT(std::system((std::string("rm -rf ") + dir).c_str()) == 0);
}

int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  EXPECT(!ddstore::Store::version().empty());
  try {
    test_typed();
    test_init_update();
    test_errors();
    test_moves();
    test_profile();
    test_ragged();
    test_requests();
    test_blobs();
  } catch (const ddstore::Error& e) {
    std::fprintf(stderr, "rank %d: unexpected %s: %s\n", rank, e.status_name(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  int counts[2] = {n_pass, n_fail}, sums[2];
  MPI_Allreduce(counts, sums, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("test_cxx on %d ranks: %d passed, %d failed\n", nranks, sums[0], sums[1]);
  MPI_Finalize();
  return sums[1] ? 1 : 0;
}
