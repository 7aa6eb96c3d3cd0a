# memsim — top-level entry points. `make demo` and `make test` work on a fresh Debian 12 (as root).
BUILD ?= build
JOBS ?= $(shell nproc)
APT_PACKAGES := g++ cmake make libboost-graph-dev libtbb-dev nlohmann-json3-dev libgtest-dev \
  libgmock-dev libcli11-dev libbenchmark-dev python3 python3-torch python3-torchvision python3-onnx \
  libonnx-dev libprotobuf-dev protobuf-compiler \
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pandas python3-matplotlib python3-pytest \
  jupyter-nbconvert python3-nbformat python3-ipykernel jupyter-client chromium

.PHONY: all deps build install demo test bench validate clean

# `make`: the CLI, the libraries, the tests and the Python module (build/python, docs/python.md).
all: build

# Installs only the Debian packages that are missing.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

# The Python packages memsim and memsim_export into Debian's dist-packages (PREFIX=/usr/local:
# /usr/local/lib/python3.X/dist-packages, on /usr/bin/python3's path).
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX) --component python

demo: build
	./$(BUILD)/memsim run graphs/resnet50.json --batch 32 --optimizer adam --gpu V100-16GB

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	./$(BUILD)/memsim_bench

validate: build
	python3 tools/validate.py --memsim $(BUILD)/memsim --out docs/validation.md

clean:
	rm -rf $(BUILD)
