#!/usr/bin/env bash
# The memory check of `make bench` with the node-local segments on a tmpfs
# mounted with huge=advise (transparent huge pages for the library's
# MADV_HUGEPAGE), beside the default /dev/shm runs:
#
#   scripts/bench-mem-huge.sh BENCH OUT.jsonl     (BENCH: the bench program)
#
# Needs root (it mounts the tmpfs, and unmounts it in a trap); otherwise it
# says so and adds nothing (docs/dev/results.md then lists the row as not run).
set -euo pipefail
bench=${1:?usage: bench-mem-huge.sh BENCH OUT.jsonl}
out=${2:?usage: bench-mem-huge.sh BENCH OUT.jsonl}
if [ "$(id -u)" != 0 ]; then
  echo "bench-mem-huge: skipped (not root: cannot mount a huge=advise tmpfs)"
  exit 0
fi
dir=$(mktemp -d /tmp/ddstore-bench-thp.XXXXXX)
cleanup() { umount "$dir" 2>/dev/null || true; rmdir "$dir" 2>/dev/null || true; }
trap cleanup EXIT
# Two ranks' 1 GiB shards, and room to spare.
mount -t tmpfs -o huge=advise,size=3g,mode=1777 none "$dir"
DDSTORE_SHM_DIR=$dir mpiexec -n 2 "$bench" --mem add --mem-node-local 1 --out "$out" --append
