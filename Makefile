# rinfer — the two commands most people need:
#   make run    install what is missing, build, run the main job on the default model
#   make test   install what is missing, build, run every test (what CI runs)
# Variables: MODEL=/path/to/hf-or-rinfer-dir  THREADS=N  BUILD=build  PRESET=tinyllama-1.1b

BUILD ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
PRESET ?= tinyllama-1.1b
MODEL ?=
THREADS ?= 0
PROMPT ?= Once upon a time
TESTDATA ?= $(abspath ../shared/testdata)

FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=

# Debian packages rinfer builds and tests with.
APT_PACKAGES := build-essential cmake ninja-build pkg-config git nlohmann-json3-dev libcli11-dev \
                libsentencepiece-dev libpcre2-dev libgtest-dev libgmock-dev libbenchmark-dev \
                libcpp-httplib-dev openmpi-bin libopenmpi-dev procps
# `make fuzz` only: clang and its libFuzzer runtime (libclang_rt.fuzzer).
FUZZ_APT_PACKAGES := clang libclang-rt-14-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps deps-fuzz build test run bench asan fuzz fuzz-build fuzz-replay clean

all: build

# Installs only what is missing, so it is quick (and offline) when all is there.
deps: PKGS = $(APT_PACKAGES)
deps-fuzz: PKGS = $(APT_PACKAGES) $(FUZZ_APT_PACKAGES)
deps deps-fuzz:
	@missing=""; for p in $(PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DRINFER_TESTDATA_DIR=$(TESTDATA) $(CMAKE_EXTRA)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# ASan + UBSan build of everything, tests included.
asan:
	$(MAKE) test BUILD=build-asan BUILD_TYPE=Debug CMAKE_EXTRA=-DRINFER_SANITIZE=ON

# libFuzzer targets (fuzz/, docs/fuzzing.md), built with clang in their own
# folder: `make fuzz FUZZ_SECONDS=600 FUZZ_TARGETS="openai config"` runs each
# for that long and prints its executions; `make fuzz-replay` replays the
# seeds and fuzz/regressions/ and runs each target 10 s. (`make test` replays
# fuzz/regressions/ without clang: the fuzz_replay.* tests.)
$(FUZZ_BUILD)/build.ninja:
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang \
	  -DCMAKE_CXX_COMPILER=clang++ -DRINFER_FUZZ=ON -DRINFER_BUILD_TESTS=OFF -DRINFER_BUILD_BENCH=OFF \
	  -DRINFER_TESTDATA_DIR=$(TESTDATA)

fuzz-build: deps-fuzz $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all

fuzz: fuzz-build
	TESTDATA=$(TESTDATA) bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-replay: fuzz-build
	TESTDATA=$(TESTDATA) bash fuzz/run.sh --replay $(FUZZ_BUILD) $(FUZZ_TARGETS)

run: build
	@bash scripts/run_default.sh "$(BUILD)/bin/rinfer" "$(MODEL)" "$(PRESET)" "$(THREADS)" "$(PROMPT)"

clean:
	rm -rf $(BUILD) build-asan $(FUZZ_BUILD)
