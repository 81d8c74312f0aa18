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

# Debian packages rinfer builds and tests with.
APT_PACKAGES := build-essential cmake ninja-build pkg-config git nlohmann-json3-dev libcli11-dev \
                libsentencepiece-dev libpcre2-dev libgtest-dev libgmock-dev libbenchmark-dev \
                libcpp-httplib-dev openmpi-bin libopenmpi-dev procps
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build test run bench asan clean

all: build

# Installs only what is missing, so it is quick (and offline) when all is there.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
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

run: build
	@bash scripts/run_default.sh "$(BUILD)/bin/rinfer" "$(MODEL)" "$(PRESET)" "$(THREADS)" "$(PROMPT)"

clean:
	rm -rf $(BUILD) build-asan
