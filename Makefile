# Thin wrapper over scripts/ and CMake. `make run` and `make test` work on a fresh machine.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
MODEL ?= smollm2
PROMPT ?= The meaning of life is

.PHONY: all setup configure build run test test-tsan test-asan fuzz-smoke bench model clean

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
TSAN_TESTS = test_thread_pool test_hybrid_pipeline test_hybrid_exactness
test-tsan: setup
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHG_TSAN=ON -DHG_CUDA=OFF
	cmake --build $(BUILD)-tsan -j $(JOBS) --target $(TSAN_TESTS)
	set -e; for t in $(TSAN_TESTS); do \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" $(BUILD)-tsan/bin/$$t --gtest_filter='-*SmolLM2*'; \
	done

# AddressSanitizer + UndefinedBehaviorSanitizer build of every non-GPU test (CUDA off), leaks
# checked at exit. ASan makes the code ~2-3x slower; the SmolLM2 end-to-end cases (a real 135M
# model, minutes each even without ASan) are left to `make test`, everything else runs.
ASAN_EXCLUDE = SmolLM2
test-asan: setup model
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHG_ASAN=ON -DHG_CUDA=OFF
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && \
	  ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1" \
	  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
	  ctest --output-on-failure -j $(JOBS) --timeout 1800 -E '$(ASAN_EXCLUDE)'

# libFuzzer targets (tests/fuzz/, clang, ASan + UBSan), each run FUZZ_SECONDS from its committed
# seed corpus (tests/fuzz/corpus/<target>/); new inputs go to $(BUILD)-fuzz/corpus/<target>/ and
# crashes to $(BUILD)-fuzz/artifacts/. Long runs by hand: see README (Tests).
FUZZ_TARGETS = fuzz_gguf fuzz_safetensors fuzz_hf_config fuzz_policy_yaml fuzz_ids_json fuzz_tokenizer_json fuzz_tokenizer_encode
FUZZ_SECONDS ?= 30
fuzz-smoke: setup
	CC=clang CXX=clang++ cmake -S . -B $(BUILD)-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHG_FUZZ=ON -DHG_CUDA=OFF
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	set -e; mkdir -p $(BUILD)-fuzz/artifacts; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(BUILD)-fuzz/corpus/$$t; \
	  $(BUILD)-fuzz/bin/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix=$(BUILD)-fuzz/artifacts/$$t- \
	    $(BUILD)-fuzz/corpus/$$t tests/fuzz/corpus/$$t; \
	done

bench: build model
	bash scripts/bench.sh

clean:
	rm -rf $(BUILD) $(BUILD)-tsan $(BUILD)-asan $(BUILD)-fuzz
