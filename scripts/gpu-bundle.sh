#!/usr/bin/env bash
# Assembles build/gpu-bundle: what scripts/gpu-check.sh needs on a GPU machine
# that has CUDA, PyTorch and Python but neither our build nor MPI/libfabric:
#   lib/  libddstore.so (stripped) and every shared object it needs outside
#         glibc (libmpich, libfabric, UCX and their dependencies), UCX modules
#   bin/  mpiexec.hydra + hydra_pmi_proxy, and the C test test_gpu
# Carry it with the working tree (one path, under 64 MiB):  carry: ["build/gpu-bundle"]
# Usage: scripts/gpu-bundle.sh   (after `make install-test-prefix` and the capi-tests build)
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/gpu-bundle
lib=build/prefix/lib/libddstore.so.0
test_bin=build/capi-tests/test_gpu
[ -e "$lib" ] || { echo "gpu-bundle: $lib missing: run make install-test-prefix" >&2; exit 1; }
[ -x "$test_bin" ] || { echo "gpu-bundle: $test_bin missing: build capi-tests (make test-c)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/lib" "$out/bin"

# glibc and the loader come from the GPU machine; everything else travels.
skip='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|linux-vdso|libresolv)\.so'
copy_deps() {
    ldd "$1" | awk '/=> \//{print $1, $3}' | while read -r name path; do
        [[ $name =~ $skip ]] && continue
        [ -e "$out/lib/$name" ] && continue
        cp -L "$path" "$out/lib/$name"
        chmod u+w "$out/lib/$name"
        strip --strip-debug "$out/lib/$name" 2>/dev/null || true
    done
}
cp -L "$lib" "$out/lib/libddstore.so.0"
strip --strip-debug "$out/lib/libddstore.so.0"
ln -sf libddstore.so.0 "$out/lib/libddstore.so"
copy_deps "$out/lib/libddstore.so.0"

# UCX loads its transports from <dir of libucs>/ucx.
ucx_dir=$(dirname "$(ldd "$lib" | awk '/libucs/{print $3}')")/ucx
if [ -d "$ucx_dir" ]; then
    mkdir -p "$out/lib/ucx"
    for m in "$ucx_dir"/*.so.0; do
        cp -L "$m" "$out/lib/ucx/"
        copy_deps "$m"
    done
    strip --strip-debug "$out"/lib/ucx/*.so.0 2>/dev/null || true
fi
# libfabric providers built as plugins, if any.
fi_dir=$(dirname "$(ldd "$lib" | awk '/libfabric/{print $3}')")/libfabric
if [ -d "$fi_dir" ]; then
    cp -rL "$fi_dir" "$out/lib/libfabric"
fi

for b in mpiexec.hydra hydra_pmi_proxy; do
    p=$(command -v "$b") || { echo "gpu-bundle: $b not found" >&2; exit 1; }
    cp -L "$p" "$out/bin/$b"
    copy_deps "$p"
done
ln -sf mpiexec.hydra "$out/bin/mpiexec"
cp "$test_bin" "$out/bin/test_gpu"
copy_deps "$test_bin"

# pyddstore's binding is cffi (with pycparser: the source tree there has no
# generated module, so cffi parses include/ddstore.h). The GPU machine's Python
# may lack it and cannot reach a package index: wheels for the CPython versions
# it may have; scripts/gpu-check.sh unpacks the matching one if needed.
mkdir -p "$out/wheels"
for v in 3.9 3.10 3.11 3.12 3.13; do
    python3 -m pip download --quiet --only-binary=:all: --no-deps --python-version "$v" \
        --platform manylinux2014_x86_64 -d "$out/wheels" cffi
done
python3 -m pip download --quiet --only-binary=:all: --no-deps -d "$out/wheels" pycparser

size=$(du -sm "$out" | cut -f1)
echo "gpu-bundle: $out is ${size} MiB ($(ls "$out/lib" | wc -l) libraries)"
if [ "$size" -ge 60 ]; then
    echo "gpu-bundle: too large to carry (limit 64 MiB with the working tree)" >&2
    exit 1
fi
