#!/usr/bin/env bash
# Builds the demo with nothing but `cc $(pkg-config --cflags --libs ddstore)`
# against an installed prefix and runs it on 2 ranks: the plain-Makefile
# consumer path. Usage: scripts/check-pkgconfig.sh PREFIX
set -euo pipefail
prefix=${1:?usage: $0 PREFIX}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# MPI's own flags come from its compiler wrapper; ours from pkg-config.
mpi_flags=$(mpicc -show | cut -d' ' -f2-)
# shellcheck disable=SC2046,SC2086
cc -std=c11 -Wall -Wextra -Werror -o "$out/demo" capi-tests/demo.c $(pkg-config --cflags --libs ddstore) $mpi_flags
mpiexec -n 2 "$out/demo" | tail -1
echo "pkg-config consumer build: 1 passed, 0 failed"
