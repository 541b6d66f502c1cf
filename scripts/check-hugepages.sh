#!/usr/bin/env bash
# Node-local segments in huge pages, for real (make test-c; needs root):
#
#   scripts/check-hugepages.sh BUILD_DIR     (BUILD_DIR holds test_hugepages)
#
# Mounts a temporary tmpfs with huge=advise and temporary hugetlbfs mounts
# (raising vm.nr_hugepages by what they need), runs test_hugepages on 4 ranks
# with DDSTORE_SHM_DIR there (every row of every rank read and checked; the
# program checks /proc/self/smaps of its segment mappings), and compares the
# growth of VmPTE with 4 KiB pages against huge pages:
#   1. tmpfs huge=advise, DDSTORE_HUGEPAGES=off   -> 4 KiB pages (the baseline)
#   2. same tmpfs, auto                           -> THP (ShmemPmdMapped > 0)
#   3. hugetlbfs with pages for every segment     -> KernelPageSize 2048 kB
#      (method 0, then method 1 over libfabric shm)
#   4. hugetlbfs with pages for 6 of 8 segments, auto    -> 6 there, 2 in /dev/shm
#   5. the same, DDSTORE_HUGEPAGES=require        -> DDS_ERR_NO_MEMORY on every rank
# After each run the directory must be empty and no huge page reserved.
# The trap unmounts and restores vm.nr_hugepages. Without root it fails when
# CI=true and skips (saying so) otherwise.
set -euo pipefail
build=${1:?usage: check-hugepages.sh BUILD_DIR}
prog=$build/test_hugepages
np=4
say() { echo "check-hugepages: $*"; }
if [ "$(id -u)" != 0 ]; then
  if [ "${CI:-}" = true ]; then say "FAIL: must run as root in CI (it mounts tmpfs and hugetlbfs)"; exit 1; fi
  say "SKIPPED: not root (it mounts tmpfs and hugetlbfs); nothing was checked"
  exit 0
fi
[ -x "$prog" ] || { say "FAIL: no $prog (build capi-tests first)"; exit 1; }
export FABRIC_IFACE=${FABRIC_IFACE:-lo} FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_SOCKETS_IFACE=${FI_SOCKETS_IFACE:-lo}
export UCX_TLS=${UCX_TLS:-self,sm}
unset DDSTORE_NODE_LOCAL DDSTORE_TEST_NODE_LOCAL_WIDTH DDSTORE_HUGEPAGES DDSTORE_SHM_DIR

# One run at a time on a machine (vm.nr_hugepages is global): a lock on this
# script itself, so nothing is left behind.
exec 9<"${BASH_SOURCE[0]}"
flock 9
nr=/proc/sys/vm/nr_hugepages
old_nr=$(cat $nr)
top=$(mktemp -d /tmp/ddstore-huge.XXXXXX)
mounts=()
cleanup() {
  local rc=$?
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" || true; done
  echo "$old_nr" >$nr || true
  rm -rf "$top"
  [ "$(cat $nr)" = "$old_nr" ] || { say "FAIL: vm.nr_hugepages is $(cat $nr), was $old_nr"; rc=1; }
  exit $rc
}
trap cleanup EXIT

# Huge pages of 2 MiB: 8 MiB segments, 2 variables on each of 4 ranks.
page_kb=$(awk '/^Hugepagesize:/ {print $2}' /proc/meminfo)
[ "$page_kb" = 2048 ] || { say "FAIL: default huge page size is ${page_kb} kB, the test expects 2048"; exit 1; }
all_pages=$((2 * np * 4))  # 8 segments of 4 pages
some_pages=$((all_pages - 2 * 4))  # room for 6 of the 8 segments
hp_file=/sys/kernel/mm/hugepages/hugepages-2048kB
echo $((old_nr + all_pages + some_pages)) >$nr
have=$(cat $nr)
[ "$have" -ge $((old_nr + all_pages + some_pages)) ] || { say "FAIL: the kernel gave $have huge pages of $((old_nr + all_pages + some_pages)) asked"; exit 1; }

mkfs() {  # mkfs NAME TYPE OPTIONS
  mkdir -p "$top/$1"
  mount -t "$2" -o "$3" none "$top/$1"
  mounts+=("$top/$1")
}
mkfs thp tmpfs huge=advise,size=256m,mode=1777
mkfs huge hugetlbfs "pagesize=2M,size=$((all_pages * 2))M,mode=1777"
mkfs some hugetlbfs "pagesize=2M,size=$((some_pages * 2))M,mode=1777"

resv0=$(cat $hp_file/resv_hugepages)
out=$top/out.txt
# run NAME DIR HUGEPAGES ARGS...: runs the program, checks what it left behind
run() {
  local name=$1 dir=$2 huge=$3
  shift 3
  local t0=$SECONDS
  if ! DDSTORE_SHM_DIR=$dir DDSTORE_HUGEPAGES=$huge timeout 120 mpiexec -n $np "$prog" "$@" >"$out" 2>&1; then
    cat "$out"
    say "FAIL: $name (${DDS_TEST_METHOD:+DDS_TEST_METHOD=$DDS_TEST_METHOD }DDSTORE_SHM_DIR=$dir DDSTORE_HUGEPAGES=$huge $prog $*)"
    exit 1
  fi
  grep -E "^($name|require:|test_hugepages)" "$out" | sed 's/^/  /' || true
  local left
  left=$(find "$dir" -mindepth 1 -maxdepth 1)  # whole: `| head` could SIGPIPE find under pipefail
  [ -z "$left" ] || { say "FAIL: $name left files in $dir: $left"; exit 1; }
  [ "$(cat $hp_file/resv_hugepages)" = "$resv0" ] || { say "FAIL: $name left huge pages reserved"; exit 1; }
  pte=$(awk '/^VMPTE_DELTA_KB/ {print $2}' "$out")
  say "ok: $name${DDS_TEST_METHOD:+, method $DDS_TEST_METHOD} ($((SECONDS - t0)) s, VmPTE grew by at most $pte kB per rank)"
}

run small "$top/thp" off small
pte_small=$pte
run thp "$top/thp" auto thp
pte_thp=$pte
run hugetlb "$top/huge" auto hugetlb
pte_hugetlb=$pte
# The same shards registered with libfabric (method 1) instead of an MPI window.
DDS_TEST_METHOD=1 DDSTORE_FABRIC=shm run hugetlb "$top/huge" auto hugetlb
run mixed "$top/some" auto mixed 6
run require "$top/some" require require
grep -q "short by" "$out" || { say "FAIL: require's message names no shortfall"; exit 1; }

# Page tables: 8 segments of 8 MiB mapped by each rank cost 128 kB with 4 KiB
# pages and next to nothing with 2 MiB pages (the rest is the MPI library's).
for c in thp:$pte_thp hugetlb:$pte_hugetlb; do
  v=${c#*:}
  [ $((2 * v)) -lt "$pte_small" ] || { say "FAIL: VmPTE +$v kB with ${c%%:*} is not under half of +$pte_small kB with 4 KiB pages"; exit 1; }
done
say "PASS: THP and hugetlbfs segments mapped with huge pages (VmPTE +$pte_thp / +$pte_hugetlb kB against +$pte_small kB with 4 KiB pages); auto falls back, require fails on every rank"
