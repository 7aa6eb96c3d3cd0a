# memsim — top-level entry points. `make demo` and `make test` work on a fresh Debian 12 (as root).
BUILD ?= build
JOBS ?= $(shell nproc)
APT_PACKAGES := g++ cmake make libboost-graph-dev libtbb-dev nlohmann-json3-dev libgtest-dev \
  libgmock-dev libcli11-dev libbenchmark-dev libyaml-cpp-dev libtomlplusplus-dev python3 python3-torch python3-torchvision python3-onnx \
  libonnx-dev libprotobuf-dev protobuf-compiler \
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pandas python3-matplotlib python3-pytest \
  jupyter-nbconvert python3-nbformat python3-ipykernel jupyter-client chromium \
  slurmctld slurmd slurm-client munge libtcmalloc-minimal4 python3-venv ccache

# What the CLI alone needs (`make demo`): a compiler, CMake and the libraries the memsim binary
# links; no Python, PyTorch, test or browser packages.
CLI_PACKAGES := g++ cmake make libboost-graph-dev libtbb-dev nlohmann-json3-dev libcli11-dev \
  libyaml-cpp-dev libtomlplusplus-dev ccache

# The PyTorch 2.x environment (.venv, from Debian's python3 -m venv): torch 2.13 and the packaging
# tools of the wheel test. Reinstalled only when REQUIREMENTS differs from the copy in the venv.
VENV ?= .venv
REQUIREMENTS := requirements/torch2.txt
# ccache when it is installed (make deps installs it): the wheel test's build reuses these objects.
CCACHE = $$(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# clang + compiler-rt (libFuzzer, ASan, UBSan): only `make fuzz` and `make test-sanitize` need them.
CLANG_PACKAGES := clang-14 libclang-rt-14-dev
FUZZ_BUILD ?= build-fuzz
SANITIZE_BUILD ?= build-sanitize
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := graph_json_fuzz snapshot_fuzz alloc_conf_fuzz pipeline_fuzz onnx_import_fuzz

.PHONY: all deps deps-cli deps-clang build install demo test bench validate fuzz sanitize-smoke test-sanitize robustness-doc clean

# `make`: the CLI, the libraries, the tests and the Python module (build/python, docs/python.md).
all: build

# Installs only the Debian packages that are missing, then the venv if its requirements changed.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi
	@if [ -z "$(VENV_SKIP)" ] && ! cmp -s $(REQUIREMENTS) $(VENV)/requirements.installed; then \
	  echo "setting up $(VENV) from $(REQUIREMENTS)"; \
	  /usr/bin/python3 -m venv --clear $(VENV) && $(VENV)/bin/pip install -q -r $(REQUIREMENTS) && \
	  cp $(REQUIREMENTS) $(VENV)/requirements.installed; \
	fi

deps-clang: deps
	@$(MAKE) --no-print-directory deps APT_PACKAGES="$(CLANG_PACKAGES)"

# Only the Debian packages of CLI_PACKAGES that are missing (no venv).
deps-cli:
	@$(MAKE) --no-print-directory deps APT_PACKAGES="$(CLI_PACKAGES)" VENV_SKIP=1

# Every part on (a build directory that `make demo` configured with the CLI only is reconfigured).
FULL_BUILD := -DMEMSIM_BUILD_TESTS=ON -DMEMSIM_BUILD_BENCHMARKS=ON -DMEMSIM_BUILD_PYTHON=ON

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(FULL_BUILD) $(CCACHE)
	cmake --build $(BUILD) -j $(JOBS)

# The Python packages memsim and memsim_export into Debian's dist-packages (PREFIX=/usr/local:
# /usr/local/lib/python3.X/dist-packages, on /usr/bin/python3's path).
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX) --component python

# Installs only what the CLI needs (deps-cli), builds only the CLI, then runs one example.
demo: deps-cli
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMEMSIM_BUILD_TESTS=OFF -DMEMSIM_BUILD_BENCHMARKS=OFF \
	  -DMEMSIM_BUILD_PYTHON=OFF $(CCACHE)
	cmake --build $(BUILD) -j $(JOBS) --target memsim
	./$(BUILD)/memsim run graphs/resnet50.json --batch 32 --optimizer adam --gpu V100-16GB

test: build sanitize-smoke
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	./$(BUILD)/memsim_bench

validate: build
	python3 tools/validate.py --memsim $(BUILD)/memsim --out docs/validation.md

# libFuzzer targets (fuzz/) under ASan+UBSan, each run for FUZZ_SECONDS (default 60 s).
fuzz: deps-clang
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Release -DMEMSIM_FUZZ=ON \
	  -DMEMSIM_BUILD_TESTS=OFF -DMEMSIM_BUILD_BENCHMARKS=OFF -DMEMSIM_BUILD_PYTHON=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZ_TARGETS)
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Part of `make test`: the readers of hostile input (graph files, snapshots, alloc-conf), built as
# the ASan+UBSan fuzz targets, run once over every seed and test input (no fuzzing; 3 min of CPU).
SMOKE_TARGETS := graph_json_fuzz snapshot_fuzz alloc_conf_fuzz pipeline_fuzz
sanitize-smoke: deps-clang
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Release -DMEMSIM_FUZZ=ON \
	  -DMEMSIM_BUILD_TESTS=OFF -DMEMSIM_BUILD_BENCHMARKS=OFF -DMEMSIM_BUILD_PYTHON=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(SMOKE_TARGETS)
	fuzz/regress.sh $(FUZZ_BUILD)

# The unit tests and CLI tests built by clang under ASan+UBSan in a separate build directory
# (docs/robustness.md: what it costs and which subset CI runs).
test-sanitize: deps-clang
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(SANITIZE_BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DMEMSIM_SANITIZE=ON -DMEMSIM_BUILD_BENCHMARKS=OFF -DMEMSIM_BUILD_PYTHON=OFF
	cmake --build $(SANITIZE_BUILD) -j $(JOBS) --target memsim memsim_tests
	cd $(SANITIZE_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -E '^(export\.|onnx\.roundtrip|python\.)'

# docs/robustness.md from the regression inputs in tests/data/robustness and fuzz/results.tsv.
robustness-doc: build
	python3 tools/robustness_report.py --memsim $(BUILD)/memsim --out docs/robustness.md

clean:
	rm -rf $(BUILD) $(BUILD)-wheel $(FUZZ_BUILD) $(SANITIZE_BUILD)
