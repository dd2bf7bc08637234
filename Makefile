# Thin wrapper over scripts/ and CMake. `make run` and `make test` work on a fresh machine.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
MODEL ?= smollm2
PROMPT ?= The meaning of life is

.PHONY: all setup configure build run test test-tsan san-configure test-asan fuzz-smoke bench model models check-paths clean

all: build

setup:
	bash scripts/setup.sh

CONFIGURE = cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: setup
	$(CONFIGURE)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

model:
	bash tools/fetch_model.sh

# Every real model the tests use: SmolLM2 (98 MB) and Qwen2.5-0.5B (491 MB), once, into the cache.
models:
	bash tools/fetch_model.sh all

# `make run` installs only what the build needs and builds only the CLI (not the tests and
# benchmarks), as `--target llama-cli` does.
run: model
	bash scripts/setup.sh --build-only
	$(CONFIGURE)
	cmake --build $(BUILD) -j $(JOBS) --target hybridgen
	$(BUILD)/bin/hybridgen generate -m $(MODEL) -p "$(PROMPT)" -n 64 --temp 0 --stats

# Every test through ctest, then one line that says which tests were skipped and why.
test: build models
	cd $(BUILD) && { ctest --output-on-failure -j $(JOBS) --timeout 900 --output-junit ctest-junit.xml; rc=$$?; \
	  python3 $(CURDIR)/scripts/skip_summary.py ctest-junit.xml; exit $$rc; }

# Every repository path named in a comment or a document exists; nothing points outside the repository.
check-paths:
	python3 scripts/check_paths.py

# ThreadSanitizer build of the concurrent parts: the thread pool and the hybrid pipeline (host
# workers running the next layer while the device runs this one), the interrupt watcher, and the
# server under load (HTTP threads, the batcher's engine thread, clients that hang up).
TSAN_TESTS = test_thread_pool test_host_stage test_hybrid_pipeline test_hybrid_exactness test_interrupt_scope test_serve_batcher
test-tsan: setup
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHG_TSAN=ON -DHG_CUDA=OFF
	cmake --build $(BUILD)-tsan -j $(JOBS) --target $(TSAN_TESTS)
	set -e; for t in $(TSAN_TESTS); do \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" $(BUILD)-tsan/bin/$$t --gtest_filter='-*SmolLM2*:Qwen25.*'; \
	done
	cmake --build $(BUILD)-tsan -j $(JOBS) --target hybridgen
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" python3 tests/e2e/test_serve.py load \
	  --bin $(BUILD)-tsan/bin/hybridgen --clients 8 --requests 6

# One sanitizer build serves test-asan and fuzz-smoke: clang, AddressSanitizer + UBSan on
# everything, libFuzzer coverage in the library, CUDA off. (clang compiles it about 3x faster than
# GCC's -fsanitize=address; `-DHG_ASAN=ON` alone also builds with GCC.)
SAN_BUILD = $(BUILD)-san
san-configure: setup
	CC=clang CXX=clang++ cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHG_ASAN=ON \
	  -DHG_FUZZ=ON -DHG_CUDA=OFF

# Every test under ASan + UBSan (the CUDA tests on the emulated device, whose fibers tell ASan of
# every stack switch), leaks checked at exit, except the end-to-end runs of the
# real models (suites SmolLM2 and Qwen25, the SmolLM2 hybrid pipeline cases and the RULER
# run on SmolLM2: minutes each without ASan, several times that with it); they run in `make test`. Loading and tokenizing the
# real file (GgufReal, GgufSmolLM2) stays in. Sched.DelayedHostStageRunsThePlansItsSchedulerMakes
# is left out too: a real decode whose host stage sleeps 80 ms a layer for 30 steps, slow under
# ASan (the scheduler's switches on given timings, SlowScanSwitchesToPreAndBack and
# SlowHostLeavesPreThatCostsMore, stay in); and
# ThreadPool.RefusedThreadIsAnErrorNotAnAbort, whose child lowers RLIMIT_AS below what ASan's
# shadow memory needs (it runs in make test and under TSan). And SlurmCluster: a real one-node
# Slurm runs a sweep as a job array, its cancel-and-requeue timed against real task lengths; the
# sharding and merging code it drives runs under the sanitizers in test_sweep_shard(_cli). And the
# CUDA kernel tests' second and third fiber orders (CudaEmuOrder) and the end-to-end tests again at
# each CPU kernel level (CpuLevel): the same code as their first run. The server's load test runs
# after them at a third of its size (8 clients x 6 requests; 16 x 20 takes 9 minutes under ASan).
ASAN_EXCLUDE = ^Serve\.load$$|^SmolLM2\.|^Qwen25\.|SmolLM2HybridExact|SmolLM2Selected|^CpuLevel\.|PasskeySmolLM2|RulerSmolLM2|Sched\.DelayedHostStage|ThreadPool\.RefusedThread|^SlurmCluster\.|^CudaEmuOrder\.
# The tests on the emulated CUDA device (EMU_TESTS) run in a second pass without
# detect_stack_use_after_return: with it ASan maps a fake stack for every fiber, one per CUDA
# thread, and those tests take a hundred times longer; every other check stays on.
EMU_TESTS = Cuda|DeviceCopies
ASAN_CHECKS = detect_leaks=1:strict_string_checks=1:check_initialization_order=1
test-asan: san-configure model
	cmake --build $(SAN_BUILD) -j $(JOBS)
	cd $(SAN_BUILD) && \
	  ASAN_OPTIONS="$(ASAN_CHECKS):detect_stack_use_after_return=1" \
	  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
	  ctest --output-on-failure -j $(JOBS) --timeout 1800 -E '$(ASAN_EXCLUDE)|$(EMU_TESTS)'
	cd $(SAN_BUILD) && \
	  ASAN_OPTIONS="$(ASAN_CHECKS):detect_stack_use_after_return=0" \
	  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
	  ctest --output-on-failure -j $(JOBS) --timeout 1800 -R '$(EMU_TESTS)' -E '$(ASAN_EXCLUDE)'
	ASAN_OPTIONS="$(ASAN_CHECKS):detect_stack_use_after_return=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
	  python3 tests/e2e/test_serve.py load --bin $(SAN_BUILD)/bin/hybridgen --clients 8 --requests 6

# libFuzzer targets (tests/fuzz/), each run FUZZ_SECONDS from its committed seed corpus
# (tests/fuzz/corpus/<target>/); new inputs go to $(SAN_BUILD)/corpus/<target>/, crashes to
# $(SAN_BUILD)/artifacts/. Long runs by hand: see README (Tests).
FUZZ_TARGETS = fuzz_gguf fuzz_prefill_state fuzz_safetensors fuzz_hf_config fuzz_policy_yaml fuzz_ids_json fuzz_tokenizer_json fuzz_tokenizer_encode fuzz_sweep_yaml fuzz_sweep_merge
FUZZ_SECONDS ?= 30
fuzz-smoke: san-configure
	cmake --build $(SAN_BUILD) -j $(JOBS) --target $(FUZZ_TARGETS)
	set -e; mkdir -p $(SAN_BUILD)/artifacts; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(SAN_BUILD)/corpus/$$t; \
	  $(SAN_BUILD)/bin/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix=$(SAN_BUILD)/artifacts/$$t- \
	    $(SAN_BUILD)/corpus/$$t tests/fuzz/corpus/$$t; \
	done

bench: build model
	bash scripts/bench.sh

clean:
	rm -rf $(BUILD) $(BUILD)-tsan $(BUILD)-san
