# Thin wrapper over scripts/ and CMake. `make run` and `make test` work on a fresh machine.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
MODEL ?= smollm2
PROMPT ?= The meaning of life is

.PHONY: all setup configure build run test test-tsan bench model clean

all: build

setup:
	bash scripts/setup.sh

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

model:
	bash tools/fetch_model.sh

run: build model
	$(BUILD)/bin/hybridgen generate -m $(MODEL) -p "$(PROMPT)" -n 64 --temp 0 --stats

test: build model
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

# ThreadSanitizer build of the concurrent parts: the thread pool and the hybrid pipeline (host
# workers running the next layer while the device runs this one).
TSAN_TESTS = test_thread_pool test_host_stage test_hybrid_pipeline test_hybrid_exactness
test-tsan: setup
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHG_TSAN=ON -DHG_CUDA=OFF
	cmake --build $(BUILD)-tsan -j $(JOBS) --target $(TSAN_TESTS)
	set -e; for t in $(TSAN_TESTS); do \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" $(BUILD)-tsan/bin/$$t --gtest_filter='-*SmolLM2*'; \
	done

bench: build model
	bash scripts/bench.sh

clean:
	rm -rf $(BUILD) $(BUILD)-tsan
