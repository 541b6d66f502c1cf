#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time (FUZZ_SECONDS each, default
# 60), starting from the committed corpus in fuzz/seeds/<target> (replayed
# first: every input that ever found new coverage). cargo-fuzz needs
# nightly features; RUSTC_BOOTSTRAP=1 enables them on the stable toolchain (the address-sanitizer runtime ships with it).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${FUZZ_SECONDS:-60}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --quiet
export RUSTC_BOOTSTRAP=1
# The crate's MPI_Finalize (src/capi/finalize.rs) keeps libmpi, and with it
# UCX, linked into the targets; UCX's memory hooks patch mmap at load time,
# which crashes under AddressSanitizer before any input (as in sanitize.sh).
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none
failed=0
targets=$(cargo fuzz list)
for t in $targets; do
  # Committed seeds (e.g. real record files) join the working corpus.
  corpus=()
  if [[ -d seeds/$t ]]; then
    mkdir -p "corpus/$t"
    corpus=("corpus/$t" "seeds/$t")
  fi
  if cargo fuzz run "$t" "${corpus[@]}" -- -max_total_time="$seconds" >"/tmp/ddstore-fuzz-$t.log" 2>&1; then
    echo "fuzz $t: $(grep -E '^Done' "/tmp/ddstore-fuzz-$t.log" | tail -1)"
  else
    failed=$((failed + 1))
    echo "fuzz $t: FAILED (see /tmp/ddstore-fuzz-$t.log and fuzz/artifacts/$t)"
    tail -20 "/tmp/ddstore-fuzz-$t.log"
  fi
done
n=$(echo "$targets" | wc -w)
echo "fuzz: $((n - failed)) passed, $failed failed"
exit $((failed > 0))
