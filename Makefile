# libddstore: build, install, test, demo. See README.md.
#
#   make demo                 a 4-rank example on this machine (installs what it needs)
#   make test                 the whole test suite (installs what it needs)
#   make install PREFIX=DIR   library, headers, CMake package, pkg-config file
#   make header               regenerate include/ddstore.h after changing src/capi,
#                             then what scripts/gen-bindings.py writes from it
#                             (include/ddstore.f90, pyddstore/_constants.py)

PREFIX ?= /usr/local
# The MPI to build against, named by its C compiler wrapper (mpicc: the
# system's default; e.g. MPICC=mpicc.openmpi). mpi-sys and the CMake package
# both ask it.
MPICC ?= mpicc
export MPICC
# Cargo's output directory (one per MPI: the bindings differ).
TARGET_DIR ?= target
BUILD := build
# CMake build tree of the install step (cmake/CMakeLists.txt).
PKG_BUILD ?= $(BUILD)/pkg
TEST_PREFIX := $(CURDIR)/$(BUILD)/prefix
NP ?= 4

# All test traffic stays on this machine.
export FABRIC_IFACE ?= lo
export FI_TCP_IFACE ?= lo
export FI_SOCKETS_IFACE ?= lo
export UCX_TLS ?= self,sm

# Python: a virtual environment with numpy, pytest and mpi4py built against
# the system MPI (the binary wheel expects a library Debian does not ship).
VENV ?= $(CURDIR)/.venv

.PHONY: all deps build header install check test test-rust test-c test-sanitize test-python test-docs docs fuzz bench demo clean

# Seconds each fuzz target runs in `make test`, after replaying the committed
# corpus in fuzz/seeds (grown by earlier runs; `make fuzz FUZZ_SECONDS=60` to
# search longer).
FUZZ_SECONDS ?= 10

all: build

deps:
	./scripts/install-deps.sh

build:
	cargo build --release --target-dir $(TARGET_DIR)

header:
	DDSTORE_UPDATE_HEADER=1 cargo build --release --target-dir $(TARGET_DIR)
	python3 scripts/gen-bindings.py

# Libraries, headers, and the CMake package and pkg-config file, which
# CMake makes for the MPI of the build (cmake/CMakeLists.txt). Honours
# DESTDIR (staged installs). The static link line is what rustc reports for
# this build (cargo replays the note when nothing changed).
install: build
	libs=$$(cargo rustc --release --target-dir $(TARGET_DIR) --lib --crate-type staticlib -- \
	    --print native-static-libs 2>&1 | sed -n 's/^note: native-static-libs: //p' | tr ' ' ';'); \
	test -n "$$libs" || { echo "install: cargo did not report the native static libraries" >&2; exit 1; }; \
	mkdir -p $(PKG_BUILD); \
	cmake -S cmake -B $(PKG_BUILD) -DDDSTORE_LIB_DIR=$(abspath $(TARGET_DIR))/release \
	    -DMPI_C_COMPILER=$$(command -v $(MPICC)) "-DDDSTORE_STATIC_LIBS=$$libs" > $(PKG_BUILD)/configure.log 2>&1 \
	    || { cat $(PKG_BUILD)/configure.log >&2; exit 1; }
	DESTDIR="$(DESTDIR)" cmake --install $(PKG_BUILD) --prefix $(PREFIX) > $(PKG_BUILD)/install.log

# The C/C++/Fortran tests are a separate CMake project that find_package()s
# the installed library (in build/prefix), as a user's project would.
.PHONY: install-test-prefix gpu-bundle
# The carry directory for the device check (scripts/gpu-check.sh, docs/gpu.md).
gpu-bundle: install-test-prefix
	cmake -S capi-tests -B $(BUILD)/capi-tests -DCMAKE_PREFIX_PATH=$(TEST_PREFIX) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD)/capi-tests -j 2 --target test_gpu
	./scripts/gpu-bundle.sh

install-test-prefix:
	$(MAKE) --no-print-directory install PREFIX=$(TEST_PREFIX)

# A test aid preloaded into the MPICH test jobs (capi-tests/tests/yield_when_idle.c):
# a rank waiting in MPI yields its core when the node has more ranks than
# cores, which on a 2-core machine cuts the 3- to 16-rank runs several times.
# Timing only; not for the sanitizer, valgrind or Open MPI stages. See
# docs/dev/testing.md.
YIELD_AID := $(CURDIR)/$(BUILD)/yield/libdds_test_yield.so
$(YIELD_AID): capi-tests/tests/yield_when_idle.c
	mkdir -p $(@D)
	$(CC) -O2 -Wall -Wextra -Werror -shared -fPIC -o $@ $< -ldl

# Style gates first: formatting and clippy (warnings are errors).
.PHONY: lint
lint:
	python3 scripts/test_gen_bindings.py
	python3 scripts/gen-bindings.py --check
	cargo fmt --check
	cargo clippy --release --all-targets -- -D warnings

# The quick tier (CONTRIBUTING.md): lint, the Rust unit tests, the C tests
# labelled `quick` (core programs on 1-2 ranks) and the core Python files on
# 2 ranks. `make test` stays the complete suite.
QUICK_PYTEST := test_single.py test_get_fast.py test_multirank.py test_get_batch.py test_errors.py test_requests.py test_settings.py
.PHONY: check
check: deps lint install-test-prefix $(VENV)/.cffi $(YIELD_AID)
	@echo "=== make check (started $$(date -u +%H:%M:%S))"
	cargo test --release --lib
	cmake -S capi-tests -B $(BUILD)/capi-tests -DCMAKE_PREFIX_PATH=$(TEST_PREFIX) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DDDS_TEST_PRELOAD=$(YIELD_AID) > /dev/null
	cmake --build $(BUILD)/capi-tests -j 2
	cd $(BUILD)/capi-tests && ctest -L quick --output-on-failure --timeout 300
	$(VENV)/bin/python python-ctypes/pyddstore/_ffi_build.py python-ctypes > /dev/null
	cd python-ctypes && DDSTORE_LIBRARY=$(TEST_PREFIX)/lib/libddstore.so PYTHONPATH=$$PWD timeout 600 \
	    mpiexec -n 2 $(VENV)/bin/python -m pytest -p no:cacheprovider -q $(addprefix tests/,$(QUICK_PYTEST))
	@echo "=== make check passed ($$(date -u +%H:%M:%S))"

test-rust: lint
	cargo test --release --workspace

# The pkg-config consumers (shared, static) run on the staged tree only
# (check-staged-install.sh): the test prefix's ddstore.pc is the same file,
# which cmp checks, and the library the same build.
test-c: install-test-prefix $(YIELD_AID)
	./scripts/check-dev-shm.sh snapshot $(BUILD)/dev-shm-before-c.txt
	cmake -S capi-tests -B $(BUILD)/capi-tests -DCMAKE_PREFIX_PATH=$(TEST_PREFIX) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DDDS_TEST_PRELOAD=$(YIELD_AID)
	cmake --build $(BUILD)/capi-tests -j 2
	cd $(BUILD)/capi-tests && ctest --output-on-failure --timeout 600
	./scripts/check-staged-install.sh $(BUILD)
	cmp $(TEST_PREFIX)/lib/pkgconfig/ddstore.pc $(BUILD)/stage/usr/local/lib/pkgconfig/ddstore.pc
	./scripts/check-hugepages.sh $(BUILD)/capi-tests
	./scripts/check-dev-shm.sh check $(BUILD)/dev-shm-before-c.txt

# Method 1's interface choice across two simulated nodes (network
# namespaces, hydra through a launcher that enters them): needs root and
# namespaces, else it says SKIPPED loudly. See scripts/netns-iface.sh. The
# MPICH build runs under the MPICH 5 wheel's runtime (same ABI; Debian's 4.0.2
# often hangs in MPI_Finalize over UCX tcp), with the wheel's libfabric, which
# that runtime needs. Then method 0 in a mount namespace that hides
# libfabric (scripts/check-no-libfabric.sh; root, else SKIPPED).
MPIS := $(CURDIR)/$(BUILD)/mpis
.PHONY: test-netns
test-netns: install-test-prefix
	./scripts/mpis/install.sh $(MPIS) mpich
	LD_LIBRARY_PATH=$(MPIS)/mpich/lib/mpich MPI_ABI_LIB=$(MPIS)/mpich/lib/libmpi.so.12 \
	    MPIEXEC=$(MPIS)/mpich/bin/mpiexec ./scripts/netns-iface.sh $(TEST_PREFIX) $(BUILD)/netns
	./scripts/check-no-libfabric.sh $(TEST_PREFIX) $(BUILD)/no-libfabric

# The library built against Open MPI (beside MPICH) and its core C, C++ and
# Fortran tests under mpiexec.openmpi, the pkg-config consumers, a DESTDIR
# install. See scripts/test-openmpi.sh and docs/install.md.
.PHONY: test-openmpi
test-openmpi: install-test-prefix $(VENV)/.cffi
	PYTHON=$(VENV)/bin/python MPICH_LIB=$(TEST_PREFIX)/lib/libddstore.so ./scripts/test-openmpi.sh $(BUILD)/openmpi

# The MPIs of the big machines from PyPI (MPICH 5, Open MPI 5, Intel MPI):
# the library built against each and the core C tests on 2 ranks; the MPICH
# build unchanged under Intel MPI's runtime. A wheel that cannot be installed
# or run fails the stage. See scripts/mpis/test.sh and docs/portability.md.
.PHONY: test-mpis
test-mpis: install-test-prefix
	./scripts/mpis/test.sh $(TEST_PREFIX)

# The core C tests under AddressSanitizer + UBSan (the library rebuilt with
# -Zsanitizer=address in target/asan; SANITIZE_RUST=0 keeps the release
# build) and under valgrind memcheck, 2 ranks each; any report fails. Logs in
# build/sanitize-logs. See scripts/sanitize.sh and docs/guarantees.md.
test-sanitize: install-test-prefix
	./scripts/sanitize.sh $(TEST_PREFIX) all

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet numpy pytest hypothesis cffi wheel
	$(VENV)/bin/pip install --quiet --no-binary mpi4py mpi4py

# cffi (pyddstore's binding) and wheel (pip builds of python-ctypes without
# build isolation) for venvs made before they were in the list above.
$(VENV)/.cffi: $(VENV)/bin/python
	$(VENV)/bin/python -c 'import cffi, wheel' 2>/dev/null || $(VENV)/bin/pip install --quiet cffi wheel
	touch $@

# torch for pyddstore.torch and its tests, used on CPU. PyPI's Linux wheel is a
# CUDA build whose libtorch links the CUDA runtime even for CPU work, so the
# nvidia-* wheels are needed; triton (1 GB, torch.compile on GPUs) and
# cuda-bindings are not, hence --no-deps and this list, pinned for this torch.
TORCH_VERSION := 2.15.0
TORCH_DEPS := filelock 'typing-extensions>=4.13' 'sympy>=1.13.3' 'networkx>=2.5.1' jinja2 'fsspec>=0.8.5' \
	'cuda-toolkit[cublas,cudart,cufft,cufile,cupti,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.2.2' \
	nvidia-cudnn-cu13==9.26.0.51 nvidia-cusparselt-cu13==0.8.1 nvidia-nccl-cu13==2.30.7 \
	nvidia-nvshmem-cu13==3.7.2

$(VENV)/.torch-$(TORCH_VERSION): $(VENV)/bin/python
	$(VENV)/bin/pip install --quiet --no-deps torch==$(TORCH_VERSION)
	$(VENV)/bin/pip install --quiet $(TORCH_DEPS)
	$(VENV)/bin/python -c 'import torch, torch.distributed as d; assert d.is_gloo_available()'
	touch $@

test-python: install-test-prefix $(VENV)/.cffi $(VENV)/.torch-$(TORCH_VERSION) $(YIELD_AID)
	PYTHON=$(VENV)/bin/python DDSTORE_LIBRARY=$(TEST_PREFIX)/lib/libddstore.so DDSTORE_TEST_PRELOAD=$(YIELD_AID) \
	    python-ctypes/run-tests.sh
	CARGO_TARGET_DIR=$(abspath $(TARGET_DIR)) PYTHON=$(VENV)/bin/python \
	    python-ctypes/tests/scripts/check-pip-install.sh $(BUILD)/pip-install

# The library across simulated nodes (root, Linux namespaces): MPICH 5 from
# PyPI, the core C and Python tests on 2 nodes x 2 ranks and a subset on 4
# nodes x 2 ranks, launched by hydra and by a real Slurm (the job scripts of
# examples/slurm as shipped). Installs what it needs; without root or
# namespaces it is skipped, loudly (and `make test` says so at the end).
# See scripts/cluster/test-cluster.sh and docs/cluster.md.
.PHONY: test-cluster
test-cluster: $(VENV)/.cffi $(VENV)/.torch-$(TORCH_VERSION)
	VENV=$(VENV) CLUSTER_PYTHON=$(VENV)/bin/python ./scripts/cluster/test-cluster.sh

# The `rocm` feature built against Debian's HIP (libamdhip64-dev, from
# make deps) in its own target directory, its unit tests, and the GPU C
# tests that need no device run against it (scripts/rocm-check.sh).
ROCM_TARGET_DIR ?= $(BUILD)/rocm
.PHONY: test-rocm
test-rocm: install-test-prefix
	HIP_PATH=/usr cargo build --release --features rocm --target-dir $(ROCM_TARGET_DIR)
	HIP_PATH=/usr cargo test --release --features rocm --target-dir $(ROCM_TARGET_DIR) --lib gpu::
	cmake -S capi-tests -B $(BUILD)/capi-tests -DCMAKE_PREFIX_PATH=$(TEST_PREFIX) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD)/capi-tests -j 2 --target test_gpu test_gpudirect
	./scripts/rocm-check.sh $(ROCM_TARGET_DIR) $(BUILD)/capi-tests

# The staged GPU paths against a stand-in libcuda whose device memory faults
# on any host access (no GPU needed): routing, chunking, collective folding
# and the counters of staged reads. See docs/gpu.md.
.PHONY: test-staged
test-staged: install-test-prefix $(VENV)/.cffi
	PYTHON=$(VENV)/bin/python ./scripts/fake-cuda-check.sh

# The documentation site in build/docs (Sphinx + MyST; warnings are errors).
docs:
	VENV=$(VENV) ./docs/build.sh

# The site, plus the quick-start commands exactly as the pages show them.
test-docs: install-test-prefix $(VENV)/.cffi
	VENV=$(VENV) ./docs/build.sh
	VENV=$(VENV) ./docs/tools/test_quickstarts.sh $(TEST_PREFIX)

# cargo-fuzz targets for the pure parts (ownership, round planning, option
# and NIC-map parsing), each for a bounded time.
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz.sh

# /dev/shm is listed before and checked after: nothing the suite created
# (node-local segments, libfabric shm regions) may be left behind.
# Each stage prints when it starts, so a slow CI run shows where the time went.
TEST_STAGES = test-rust test-c test-netns test-openmpi test-mpis test-sanitize test-python test-cluster test-staged test-rocm test-docs fuzz
test: deps
	./scripts/check-dev-shm.sh snapshot $(BUILD)/dev-shm-before-test.txt
	@for stage in $(TEST_STAGES); do \
	  echo "=== make $$stage (started $$(date -u +%H:%M:%S))"; \
	  $(MAKE) --no-print-directory $$stage || exit 1; \
	done
	./scripts/check-dev-shm.sh check $(BUILD)/dev-shm-before-test.txt
	@if [ -f $(BUILD)/cluster/SKIPPED ]; then \
	  echo "=== NOTE: the multi-node stage (make test-cluster) was SKIPPED: $$(cat $(BUILD)/cluster/SKIPPED)"; fi
	@echo "=== make test passed ($$(date -u +%H:%M:%S))"

demo: deps install-test-prefix
	cmake -S capi-tests -B $(BUILD)/capi-tests -DCMAKE_PREFIX_PATH=$(TEST_PREFIX) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD)/capi-tests -j 2 --target demo
	mpiexec -n $(NP) $(BUILD)/capi-tests/demo

# The benchmark (2 ranks; about 14 minutes on an idle 2-core machine): the
# store against its transports' floors, the memory check (separate runs: a peak
# RSS cannot be reset), the same reads through pyddstore (about 2 minutes),
# epochs of a training loop against the in-memory limit (train_loop.py, a few
# minutes), then docs/dev/results.md and docs/dev/results.png. See
# docs/dev/performance.md. Run it on an otherwise idle machine; BENCH_ARGS passes
# options to the program (e.g. BENCH_ARGS="--sizes 3072,12800").
BENCH_ARGS ?=
# Options of the Python section (python-ctypes/bench/bench.py), e.g. PY_BENCH_ARGS=--quick.
PY_BENCH_ARGS ?=
# Options of the snapshot figure (python-ctypes/bench/snapshot.py), e.g. SNAP_BENCH_ARGS="--mib-per-rank 256".
SNAP_BENCH_ARGS ?=
# Options of the training-loop table (python-ctypes/bench/train_loop.py), e.g. TRAIN_BENCH_ARGS="--cases 3KiB --repeats 5".
TRAIN_BENCH_ARGS ?=
bench: deps install-test-prefix $(VENV)/.cffi
	cmake -S capi-tests -B $(BUILD)/capi-tests -DCMAKE_PREFIX_PATH=$(TEST_PREFIX) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD)/capi-tests -j 2 --target bench
	$(VENV)/bin/python -c 'import matplotlib' 2>/dev/null || $(VENV)/bin/pip install --quiet matplotlib
	@echo "load average before the run: $$(cat /proc/loadavg)"
	mkdir -p $(BUILD)/bench
	mpiexec -n 2 $(BUILD)/capi-tests/bench --out $(BUILD)/bench/results.jsonl $(BENCH_ARGS)
	for nl in 1 0; do for mode in add chunked; do \
	  mpiexec -n 2 $(BUILD)/capi-tests/bench --mem $$mode --mem-node-local $$nl \
	    --out $(BUILD)/bench/results.jsonl --append || exit 1; done; done
	./scripts/bench-mem-huge.sh $(BUILD)/capi-tests/bench $(BUILD)/bench/results.jsonl
	mpiexec -n 2 $(BUILD)/capi-tests/bench --overlap --out $(BUILD)/bench/results.jsonl --append
	mpiexec -bind-to core -n 2 $(BUILD)/capi-tests/bench --overlap --priorities batch \
	    --out $(BUILD)/bench/results.jsonl --append
	for bind in "" "-bind-to core"; do UCX_MM_FIFO_SIZE=512 mpiexec $$bind -n 2 $(BUILD)/capi-tests/bench --overlap \
	    --priorities batch --methods "mpi onesided" --out $(BUILD)/bench/results.jsonl --append || exit 1; done
	mpiexec -n 2 $(BUILD)/capi-tests/bench --ragged --out $(BUILD)/bench/results.jsonl --append
	$(VENV)/bin/python python-ctypes/pyddstore/_ffi_build.py python-ctypes > /dev/null
	DDSTORE_LIBRARY=$(TEST_PREFIX)/lib/libddstore.so mpiexec -n 2 $(VENV)/bin/python python-ctypes/bench/bench.py \
	    --out $(BUILD)/bench/python.jsonl $(PY_BENCH_ARGS)
	DDSTORE_LIBRARY=$(TEST_PREFIX)/lib/libddstore.so mpiexec -bind-to core -n 2 $(VENV)/bin/python \
	    python-ctypes/bench/bench.py --out $(BUILD)/bench/python.jsonl --overlap-only --append
	DDSTORE_LIBRARY=$(TEST_PREFIX)/lib/libddstore.so mpiexec -n 2 $(VENV)/bin/python python-ctypes/bench/snapshot.py \
	    --dir $(BUILD)/bench/snap --out $(BUILD)/bench/python.jsonl --append $(SNAP_BENCH_ARGS)
	DDSTORE_LIBRARY=$(TEST_PREFIX)/lib/libddstore.so mpiexec -n 2 $(VENV)/bin/python python-ctypes/bench/train_loop.py \
	    --out $(BUILD)/bench/python.jsonl --append $(TRAIN_BENCH_ARGS)
	$(VENV)/bin/python scripts/bench-report.py $(BUILD)/bench/results.jsonl --python $(BUILD)/bench/python.jsonl \
	    --md docs/dev/results.md --png docs/dev/results.png

# The 2-rank C benchmark across two simulated nodes, one rank each (root;
# the set-up of make test-cluster): method 0 in both batch modes and method 1
# over tcp next to their floors (MPI RMA gets, MPI_Alltoallv, raw fi_read),
# which then also cross the veth pair; records in build/bench/cluster.jsonl.
# BENCH_ARGS passes options to the program (e.g. BENCH_ARGS=--quick).
.PHONY: bench-cluster
bench-cluster:
	./scripts/cluster/test-cluster.sh bench $(BENCH_ARGS)

clean:
	rm -rf $(BUILD)
	cargo clean
