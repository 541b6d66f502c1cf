#!/usr/bin/env bash
# `pip install ./python-ctypes` as the whole Python install (docs/install.md):
# pip builds libddstore with cargo and bundles it, and the Python quick start
# then runs on 2 ranks with no DDSTORE_LIBRARY, from outside the source tree.
# The same for a wheel made by `pip wheel ./python-ctypes`, installed apart.
#
#   PYTHON=/path/to/venv/bin/python python-ctypes/tests/scripts/check-pip-install.sh OUT_DIR
#
# CARGO_TARGET_DIR (default: the repository's target/) is reused, so cargo
# only checks that the build is current. Installs go to OUT_DIR (pip
# --target), never into the venv itself. Exits non-zero on any failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pkg=$(cd "$here/../.." && pwd)
root=$(cd "$pkg/.." && pwd)
out=${1:?usage: check-pip-install.sh OUT_DIR}
PYTHON=${PYTHON:-python3}
MPIEXEC=${MPIEXEC:-mpiexec}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
export UCX_TLS=self,sm FABRIC_IFACE=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
unset DDSTORE_LIBRARY PYTHONPATH
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Build isolation fetches setuptools, wheel and cffi from the package index;
# a venv that has them builds without it (faster, and offline).
iso=()
"$PYTHON" -c 'import setuptools, wheel, cffi' 2>/dev/null && iso=(--no-build-isolation)

check() {  # check WHAT SITE_DIR
    local what=$1 site=$2
    echo "=== $what: import and the Python quick start (2 ranks, no DDSTORE_LIBRARY)"
    (cd "$out" && PYTHONPATH="$site" "$PYTHON" -c "
import pyddstore, pyddstore._lib as lib
path = pyddstore.library_path()
assert path.startswith('$site/pyddstore/'), f'loaded {path}, not the bundled copy'
assert lib.FFI_SOURCE == 'generated', lib.FFI_SOURCE
import pyddstore._core as core
assert core._Getter is not None, 'pyddstore._fastcall (optional, built where a C compiler works) is missing'
print('$what: pyddstore', pyddstore.__version__, 'loads', path)")
    cp "$here/quickstart.py" "$out/quickstart.py"
    (cd "$out" && PYTHONPATH="$site" timeout 300 "$MPIEXEC" -n 2 "$PYTHON" -m mpi4py quickstart.py)
}

echo "=== pip install ./python-ctypes (cargo build --release, CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
"$PYTHON" -m pip install --quiet --no-deps "${iso[@]}" --target "$out/site" "$pkg"
check "pip install" "$out/site"

echo "=== pip wheel ./python-ctypes, then pip install of the wheel elsewhere"
"$PYTHON" -m pip wheel --quiet --no-deps "${iso[@]}" -w "$out/wheel" "$pkg"
whl=$(ls "$out"/wheel/pyddstore-*.whl)
case "$whl" in *-none-any.whl) echo "check-pip-install: $whl is tagged pure Python but carries libddstore.so" >&2; exit 1;; esac
"$PYTHON" -m pip install --quiet --no-deps --target "$out/from-wheel" "$whl"
check "wheel $(basename "$whl")" "$out/from-wheel"
echo "pip install checks passed"
