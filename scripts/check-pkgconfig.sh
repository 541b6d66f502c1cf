#!/usr/bin/env bash
# Builds the demo with nothing but `cc $(pkg-config --cflags --libs ddstore)`
# against an installed prefix and runs it on 2 ranks: the plain-Makefile
# consumer path; then links it statically against libddstore.a with
# `pkg-config --static` (the native libraries cargo reported, and the MPI's
# own module through Requires.private) and runs that too.
# Usage: [MPICC=mpicc.openmpi MPIEXEC="mpiexec.openmpi --oversubscribe"] scripts/check-pkgconfig.sh PREFIX
set -euo pipefail
prefix=${1:?usage: $0 PREFIX}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# MPI's own flags come from its compiler wrapper; ours from pkg-config.
mpicc=${MPICC:-mpicc}
mpiexec=${MPIEXEC:-mpiexec}
mpi_flags=$($mpicc -show | cut -d' ' -f2-)
# shellcheck disable=SC2046,SC2086
cc -std=c11 -Wall -Wextra -Werror -o "$out/demo" capi-tests/examples/demo.c $(pkg-config --cflags --libs ddstore) $mpi_flags
$mpiexec -n 2 "$out/demo" | tail -1
# Static: libddstore.a itself, then what pkg-config --static adds.
# shellcheck disable=SC2046,SC2086
cc -std=c11 -Wall -Wextra -Werror -o "$out/demo_static" capi-tests/examples/demo.c $(pkg-config --cflags ddstore) \
    "$prefix/lib/libddstore.a" $(pkg-config --static --libs-only-other --libs-only-L ddstore | sed 's/-Wl,-rpath,[^ ]*//') \
    $(pkg-config --static --libs-only-l ddstore | sed 's/-lddstore//') $mpi_flags
if ldd "$out/demo_static" | grep libddstore >/dev/null; then
    echo "pkg-config static build: linked libddstore.so instead of libddstore.a" >&2; exit 1
fi
$mpiexec -n 2 "$out/demo_static" | tail -1
echo "pkg-config consumer builds (shared, static): 2 passed, 0 failed"
