#!/usr/bin/env bash
# Resumed training chains (docs/pytorch.md, "Resuming a training run"), each
# job a separate mpiexec launch of torch_resume.py:
#   uninterrupted on 1 and on 2 ranks, the 1-rank run saving its state
#   after step 11 of 24 (epoch 1, batch 3) as it goes on;
#   stopped after step 11 on 2 ranks (reads of the next batches in flight);
#   each state resumed by new jobs: 1 -> 1, 1 -> 2, 2 -> 2, 2 -> 1, 2 -> 4
#   ranks, with prefetch 0 and 2; every resumed job but 1 -> 1 loads the
#   dataset from the snapshot the stopped job saved (DistDataset.save /
#   from_snapshot), 1 -> 1 builds it from the source again. (A separate stopped job on 1 rank would
#   add a launch, about 10 s of CPU for torch's imports, and nothing else:
#   the state saved is the same; the stop itself is the 2-rank one.)
# Every run must train on the same global sample order and end with bitwise
# equal weights (the script's gradient sum does not depend on the rank count).
#
#   PYTHON=... MPIEXEC=... torch_resume.sh        (run-tests.sh sets PYTHONPATH)

set -eu
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
MPIEXEC=${MPIEXEC:-mpiexec}
T=${DDSTORE_TEST_TIMEOUT:-300}
export UCX_TLS=self,sm FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
d=$(mktemp -d "${TMPDIR:-/tmp}/pyddstore-resume.XXXXXX")
trap 'rm -rf "$d"' EXIT

job() { local n=$1; shift; echo "--- $n rank(s): torch_resume.py $*"; timeout "$T" "$MPIEXEC" -n "$n" "$PYTHON" torch_resume.py "$@"; }

job 1 "$d/ref1.npz" --prefetch 2 --save-at 11 "$d/ck1"
job 2 "$d/ref2.npz" --prefetch 0
job 2 "$d/stop2.npz" --prefetch 2 --stop-after 11 "$d/ck2"
job 1 "$d/r1to1.npz" --prefetch 0 --resume "$d/ck1" --from-source
job 2 "$d/r1to2.npz" --prefetch 2 --resume "$d/ck1"
job 2 "$d/r2to2.npz" --prefetch 0 --resume "$d/ck2"
job 1 "$d/r2to1.npz" --prefetch 2 --resume "$d/ck2"
job 4 "$d/r2to4.npz" --prefetch 2 --resume "$d/ck2"

"$PYTHON" - "$d" <<'EOF'
import sys
import numpy as np
d = sys.argv[1]
ref = np.load(f"{d}/ref1.npz")
order = ref["order"]
# Every epoch visits each of the 61 samples once.
assert len(order) == 3 * 61 and all(sorted(order[e * 61:(e + 1) * 61]) == list(range(61)) for e in range(3))
bad = []
for name in ("ref2", "r1to1", "r1to2", "r2to2", "r2to1", "r2to4"):
    r = np.load(f"{d}/{name}.npz")
    if not np.array_equal(r["order"], order):
        first = next(i for i, (a, b) in enumerate(zip(r["order"], order)) if a != b) if len(r["order"]) == len(order) else None
        bad.append(f"{name}: sample order differs (length {len(r['order'])} vs {len(order)}, first difference at {first})")
    elif r["weights"].tobytes() != ref["weights"].tobytes():
        bad.append(f"{name}: weights differ from the uninterrupted run (max |diff| {np.abs(r['weights'] - ref['weights']).max()})")
r = np.load(f"{d}/stop2.npz")
assert r["step"] == 11 and np.array_equal(r["order"], order[:len(r["order"])]), "stop2"
if bad:
    sys.exit("torch_resume: FAILED\n  " + "\n  ".join(bad))
print("torch_resume: every resumed chain matches the uninterrupted run (order and weights bitwise)")
EOF
