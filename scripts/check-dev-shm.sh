#!/usr/bin/env bash
# What the test suite leaves in /dev/shm (`make test`, `make test-c`):
#
#   scripts/check-dev-shm.sh snapshot FILE   list /dev/shm into FILE (before the suite)
#   scripts/check-dev-shm.sh check FILE      fail if the suite left anything (after it)
#
# The suite's files are libddstore's node-local segments ("ddstore.<pid>.<n>")
# and libfabric shm regions ("<pid>:<n>:<n>"), both named after the process
# that created them. `check` reports every such file that was not in the
# snapshot and whose process is gone (a live process may be another job
# using them), so files that were there before, or that belong to unrelated
# programs, never fail it. A rank that dies without cleaning up is the usual
# cause; a test that kills ranks must remove their files (test_fabric_dead).
set -euo pipefail
mode=${1:?usage: check-dev-shm.sh snapshot|check FILE}
file=${2:?usage: check-dev-shm.sh snapshot|check FILE}
shm=${DEV_SHM:-/dev/shm}
list() { (cd "$shm" && find . -maxdepth 1 -type f -printf '%f\n' | LC_ALL=C sort) || true; }
case $mode in
  snapshot)
    mkdir -p "$(dirname "$file")"
    list >"$file"
    ;;
  check)
    [ -f "$file" ] || { echo "check-dev-shm: no snapshot $file (run the snapshot step first)"; exit 2; }
    left=()
    while IFS= read -r name; do
      case $name in
        ddstore.*) pid=${name#ddstore.}; pid=${pid%%.*} ;;
        [0-9]*:*) pid=${name%%:*} ;;
        *) continue ;;
      esac
      [[ $pid =~ ^[0-9]+$ ]] || continue
      [ -d "/proc/$pid" ] && continue
      left+=("$name")
    done < <(LC_ALL=C comm -13 "$file" <(list))
    if [ ${#left[@]} -gt 0 ]; then
      echo "check-dev-shm: FAIL: the test suite left ${#left[@]} file(s) in $shm (their processes are gone):"
      for n in "${left[@]}"; do ls -l "$shm/$n" 2>/dev/null || echo "  $n"; done
      exit 1
    fi
    echo "check-dev-shm: PASS: nothing of the suite's left in $shm"
    ;;
  *) echo "usage: check-dev-shm.sh snapshot|check FILE"; exit 2 ;;
esac
