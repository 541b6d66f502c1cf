#!/usr/bin/env bash
# Runs the build-and-run commands of the quick-start pages exactly as the
# pages show them: docs/quickstart-*.md include the marked regions of this
# file, so a command that stops working fails this test, not a reader.
#
#   docs/tools/test_quickstarts.sh PREFIX        # C, C++, Fortran
#   VENV=.venv docs/tools/test_quickstarts.sh PREFIX   # ... and Python
#
# PREFIX is an installed libddstore (`make install PREFIX=...`). VENV, if
# set, is a virtual environment with numpy and mpi4py (built against the
# same MPI); pyddstore is taken from this source tree. Traffic stays on this
# machine. Each program runs on 4 ranks, as the pages say.
set -euo pipefail

PREFIX=$(cd "${1:?usage: $0 PREFIX (an installed libddstore)}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "${VENV:-}" ]; then VENV=$(cd "$VENV" && pwd); fi
export FABRIC_IFACE=${FABRIC_IFACE:-lo} FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_SOCKETS_IFACE=${FI_SOCKETS_IFACE:-lo}
export UCX_TLS=${UCX_TLS:-self,sm}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cp "$ROOT/capi-tests/examples/demo.c" "$ROOT/capi-tests/examples/example_simulation.cpp" "$ROOT/capi-tests/examples/example_fortran.f90" .
passed=0

step() { echo "=== quick start: $1"; }

step C
# [snippet:c-build]
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
mpicc -o demo demo.c $(pkg-config --cflags --libs ddstore)
mpiexec -n 4 ./demo
# [end-snippet]
passed=$((passed + 1))

step C++
# [snippet:cpp-build]
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
mpicxx -std=c++17 -o example_simulation example_simulation.cpp $(pkg-config --cflags --libs ddstore)
mpiexec -n 4 ./example_simulation
# [end-snippet]
passed=$((passed + 1))

if command -v mpif90 >/dev/null; then
  step Fortran
  # [snippet:fortran-build]
  export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
  mpif90 -c $(pkg-config --variable=includedir ddstore)/ddstore.f90    # the module: ddstore.mod, ddstore.o
  mpif90 -o example_fortran example_fortran.f90 ddstore.o $(pkg-config --libs ddstore)
  mpiexec -n 4 ./example_fortran
  # [end-snippet]
  passed=$((passed + 1))
else
  echo "=== quick start: Fortran skipped (no mpif90)"
fi

if [ -n "${VENV:-}" ]; then
  step Python
  cp "$ROOT/python-ctypes/tests/scripts/quickstart.py" .
  export PATH="$VENV/bin:$PATH"                                  # `python` is the venv's
  export PYTHONPATH="$ROOT/python-ctypes${PYTHONPATH:+:$PYTHONPATH}"  # pyddstore from this tree
  # [snippet:python-run]
  export DDSTORE_LIBRARY=$PREFIX/lib/libddstore.so
  mpiexec -n 4 python -m mpi4py quickstart.py
  # [end-snippet]
  passed=$((passed + 1))
fi

echo "quick starts: $passed passed, 0 failed"
