// A small "simulation" using the C++ wrapper (ddstore.hpp).
//
// Every rank owns a contiguous block of mesh cells (a different number per
// rank). Each time step it computes two fields on its cells and publishes
// them in the store: a pressure (one double per cell) and a velocity (three
// floats per cell). The variables are created once with init() and rewritten
// with update() every step. After each step every rank reads random cells of
// every field from all ranks, with get() and get_batch(), and checks each
// value against the formula that produced it.
#include <cstdio>
#include <random>
#include <vector>

#include "ddstore.hpp"

namespace {

constexpr int kSteps = 4;
constexpr int64_t kVelComps = 3;

// Cells owned by `rank`: uneven on purpose.
int64_t cells_of(int rank) { return 40 + 13 * rank; }

// The fields as functions of (step, global cell, component). The values are
// exact in their types, so reads can be compared with ==.
double pressure(int step, int64_t cell) { return 1.0e5 + 1000.0 * step + 0.25 * static_cast<double>(cell); }
float velocity(int step, int64_t cell, int64_t comp) {
  return static_cast<float>(1000 * step + cell) + 0.25f * static_cast<float>(comp);
}

int n_pass = 0, n_fail = 0;

void expect(bool ok, const char* what, int rank, int step, int64_t cell) {
  if (ok) {
    n_pass++;
  } else {
    n_fail++;
    std::fprintf(stderr, "rank %d step %d: %s of cell %lld is wrong\n", rank, step, what, static_cast<long long>(cell));
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  // Global numbering: this rank's cells are first_cell .. first_cell + n - 1.
  const int64_t n = cells_of(rank);
  int64_t first_cell = 0, total = 0;
  MPI_Exscan(&n, &first_cell, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) first_cell = 0;  // MPI_Exscan leaves rank 0's result undefined
  MPI_Allreduce(&n, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);

  try {
    // [snippet:cpp-quickstart]
    ddstore::Store store(MPI_COMM_WORLD);  // method 0 (MPI RMA) over all ranks

    // Collective: every rank declares its share of each variable once.
    store.init<double>("pressure", n, 1);          // n rows of 1 double
    store.init<float>("velocity", n, kVelComps);   // n rows of 3 floats

    std::vector<double> p(n);
    std::vector<float> v(n * kVelComps);  // row-major: cell i is v[3i .. 3i+2]
    std::mt19937_64 rng(1234 + rank);
    std::uniform_int_distribution<int64_t> any_cell(0, total - 1);

    for (int step = 0; step < kSteps; step++) {
      for (int64_t i = 0; i < n; i++) {
        p[i] = pressure(step, first_cell + i);
        for (int64_t c = 0; c < kVelComps; c++) v[i * kVelComps + c] = velocity(step, first_cell + i, c);
      }
      // Local writes into this rank's shard; local rows count from 0.
      store.update("pressure", p);
      store.update("velocity", v.data(), 0, n / 2);                        // first half...
      store.update("velocity", v.data() + (n / 2) * kVelComps, n / 2, n - n / 2);  // ...then the rest

      store.epoch_begin();  // collective: every rank's updates are now visible

      // One row at a time, from any rank (one-sided).
      for (int k = 0; k < 10; k++) {
        int64_t g = any_cell(rng);
        double pg;
        float vg[kVelComps];
        store.get("pressure", &pg, g, 1);
        store.get("velocity", vg, g, 1);
        expect(pg == pressure(step, g), "pressure", rank, step, g);
        for (int64_t c = 0; c < kVelComps; c++) expect(vg[c] == velocity(step, g, c), "velocity", rank, step, g);
      }

      // Many rows at once, any owners, any order (collective with method 0).
      std::vector<int64_t> cells(64);
      for (auto& g : cells) g = any_cell(rng);
      std::vector<double> pb;
      std::vector<float> vb;
      store.get_batch("pressure", pb, cells);  // resized to 64 x 1
      store.get_batch("velocity", vb, cells);  // resized to 64 x 3
      for (size_t i = 0; i < cells.size(); i++) {
        expect(pb[i] == pressure(step, cells[i]), "batched pressure", rank, step, cells[i]);
        for (int64_t c = 0; c < kVelComps; c++)
          expect(vb[i * kVelComps + c] == velocity(step, cells[i], c), "batched velocity", rank, step, cells[i]);
      }

      store.epoch_end();  // collective: nobody updates while others still read
    }
    // [end-snippet]

    // [snippet:cpp-errors]
    bool threw = false;
    try {
      double x;
      store.get("pressure", &x, total, 1);  // one past the last row (rows are 0 .. total-1)
    } catch (const ddstore::Error& e) {
      // e.status() is DDS_ERR_INDEX_OUT_OF_RANGE; e.what() names the function,
      // the variable and the row.
      threw = e.status() == DDS_ERR_INDEX_OUT_OF_RANGE;
      if (rank == 0) std::printf("expected error: %s: %s\n", e.status_name(), e.what());
    }
    // [end-snippet]
    expect(threw, "error on a row past the end", rank, kSteps - 1, total);

    // A whole shard of the next rank in one get() (rows inside one shard).
    int peer = (rank + 1) % size;
    int64_t peer_first = 0;
    for (int r = 0; r < peer; r++) peer_first += cells_of(r);
    std::vector<float> shard;
    store.get("velocity", shard, peer_first, cells_of(peer));
    for (int64_t i = 0; i < cells_of(peer); i++)
      for (int64_t c = 0; c < kVelComps; c++)
        expect(shard[i * kVelComps + c] == velocity(kSteps - 1, peer_first + i, c), "shard velocity", rank,
               kSteps - 1, peer_first + i);

    // The same batch through the span overload, into a buffer registered once.
    std::vector<int64_t> every(total);
    for (int64_t g = 0; g < total; g++) every[g] = total - 1 - g;
    std::vector<double> all(total);
    store.register_recv("pressure", all);
    store.get_batch("pressure", ddstore::Span<double>(all), ddstore::Span<const int64_t>(every));
    store.unregister_recv("pressure", all.data());
    for (int64_t i = 0; i < total; i++)
      expect(all[i] == pressure(kSteps - 1, every[i]), "registered pressure", rank, kSteps - 1, every[i]);

    ddstore::VarInfo info = store.info("velocity");
    expect(info.total_rows == total && info.local_rows == n && info.row_elems == kVelComps && info.item_size == 4,
           "info", rank, kSteps - 1, 0);
    if (rank == 0)
      std::printf("libddstore %s: %d steps, %lld cells over %d ranks, transport %s\n",
                  ddstore::Store::version().c_str(), kSteps, static_cast<long long>(total), size,
                  info.transport.c_str());
    store.destroy();
  } catch (const ddstore::Error& e) {
    std::fprintf(stderr, "rank %d: %s: %s\n", rank, e.status_name(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  int counts[2] = {n_pass, n_fail}, sums[2];
  MPI_Allreduce(counts, sums, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("example_simulation on %d ranks: %d passed, %d failed\n", size, sums[0], sums[1]);
  MPI_Finalize();
  return sums[1] ? 1 : 0;
}
