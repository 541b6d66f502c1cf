#!/usr/bin/env bash
# Runs the pyddstore tests under MPI: pytest on 1, 2 and 4 ranks, then the
# stand-alone scripts (HydraGNN-style program, free after MPI_Finalize).
#
#   PYTHON=/path/to/venv/bin/python DDSTORE_LIBRARY=/path/to/libddstore.so ./run-tests.sh
#
# PYTHON needs numpy, pytest and mpi4py (built against the MPI that
# libddstore links). The package is tested from this source tree.
# Exits non-zero if any run fails.

set -u
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
MPIEXEC=${MPIEXEC:-mpiexec}
TIMEOUT=${DDSTORE_TEST_TIMEOUT:-900}   # seconds per mpiexec run; a hang fails, not blocks

# Test traffic stays on this machine.
export UCX_TLS=self,sm FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1

failed=()

run() {
    local what=$1; shift
    echo "=== $what"
    if ! timeout "$TIMEOUT" "$@"; then
        failed+=("$what")
    fi
}

"$PYTHON" -c 'import numpy, pytest, mpi4py' || { echo "run-tests.sh: $PYTHON lacks numpy/pytest/mpi4py" >&2; exit 2; }
"$PYTHON" -c 'import pyddstore; print("pyddstore", pyddstore.__version__, "using", pyddstore.library_path())' \
    || { echo "run-tests.sh: cannot load libddstore (set DDSTORE_LIBRARY)" >&2; exit 2; }

for n in 1 2 4; do
    run "pytest, $n rank(s)" "$MPIEXEC" -n "$n" "$PYTHON" -m pytest -p no:cacheprovider -q tests
done
# The scripts run once per available method among 0 and 1 (method 2 needs a
# hand-shake directory, which HydraGNN-style code does not pass).
methods=$(timeout 300 "$MPIEXEC" -n 1 "$PYTHON" -c \
    'import sys; sys.path.insert(0, "tests"); from helpers import METHODS; print(*[m for m in METHODS if m < 2])') \
    || { failed+=("finding the available methods"); methods=0; }
echo "=== methods served by the library (scripts): $methods"
for m in $methods; do
    for n in 1 2 4; do
        run "hydragnn_style.py, method $m, $n rank(s)" \
            env HYDRAGNN_DDSTORE_METHOD="$m" "$MPIEXEC" -n "$n" "$PYTHON" tests/scripts/hydragnn_style.py
    done
    for n in 1 2; do
        run "free_after_finalize.py, method $m, $n rank(s)" \
            env PYDDSTORE_TEST_METHOD="$m" "$MPIEXEC" -n "$n" "$PYTHON" tests/scripts/free_after_finalize.py
    done
done

if ((${#failed[@]})); then
    printf 'FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "all pyddstore tests passed"
