# The README's two commands. Everything else is CMake (build/), driven from here.
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)

.PHONY: run test deps build asan tsan valgrind fuzz bench demo clean

run: build
	@$(BUILD)/bin/kvtierd $(ARGS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

deps:
	@tools/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DKVT_WERROR=ON
	cmake --build $(BUILD) -j$(JOBS)

# Unit and integration tests again under ASan + UBSan.
asan: deps
	cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DKVT_SANITIZE=ON -DKVT_WERROR=ON
	cmake --build $(BUILD)-asan -j$(JOBS)
	cd $(BUILD)-asan && ctest --output-on-failure -j$(JOBS) -L 'unit|integration'

# The client library and kvtierd under ThreadSanitizer, through the tests whose clients run
# threads (test_stress: 8 threads a client) or many processes at once (test_ipc, test_tenants),
# the nvme tier with its pinning thread (test_nvme), kvtierd's own-curve worker (test_policyctl),
# the loop and the tier workers sharing a slow tier's lock (test_tiers_devices), the nvme
# engine with reads riding its write streams on both backends (test_nvme_stream, and its _pio
# run: the pread/pwrite threads), and kvtierd started and stopped in-process with its threads,
# many times (fuzz_daemon). A report fails the test (exit 66). librocksdb is not instrumented:
# tools/tsan.supp says why it is suppressed.
TSAN_TESTS = test_stress test_ipc test_tenants test_nvme test_policyctl test_tiers_devices \
	test_nvme_stream fuzz_daemon
TSAN_RUNS = $(TSAN_TESTS) test_nvme_stream_pio
tsan: deps
	cmake -S . -B $(BUILD)-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVT_TSAN=ON -DKVT_WERROR=ON
	cmake --build $(BUILD)-tsan -j$(JOBS) --target kvtierd kvtier $(TSAN_TESTS)
	cd $(BUILD)-tsan && TSAN_OPTIONS="suppressions=$(CURDIR)/tools/tsan.supp halt_on_error=1 exitcode=66" \
		ctest --output-on-failure -j$(JOBS) -R '^($(subst $(eval) ,|,$(TSAN_RUNS)))$$'

# The daemon-level integration tests with kvtierd under valgrind memcheck.
valgrind: build
	tools/valgrind-daemon.sh $(BUILD)

# The decoders, every policy through the simulator, then kvtierd's dispatcher, tiers and
# restarts in-process (a clang build of everything with libFuzzer's coverage, in
# $(BUILD)-fuzz/daemon), under libFuzzer, FUZZ_SECONDS each (default 60).
FUZZ_SECONDS ?= 60
FUZZ_CC = clang -g -O1 -D_GNU_SOURCE -DKVT_LIBFUZZER -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -I. -Iinclude
fuzz: deps
	mkdir -p $(BUILD)-fuzz/corpus $(BUILD)-fuzz/corpus-sim $(BUILD)-fuzz/corpus-daemon
	cp -n tests/fuzz/corpus/* $(BUILD)-fuzz/corpus/
	cp -n tests/fuzz/corpus-sim/* $(BUILD)-fuzz/corpus-sim/
	cp -n tests/fuzz/corpus-daemon/* $(BUILD)-fuzz/corpus-daemon/
	$(FUZZ_CC) tests/fuzz/fuzz_decode.c core/chunk.c core/keys.c core/options.c core/util.c \
		core/log.c core/errors.c ipc/proto.c ipc/sockpath.c -lxxhash -o $(BUILD)-fuzz/fuzz_decode
	$(FUZZ_CC) -Itools/sim tests/fuzz/fuzz_sim.c $(filter-out %/main.c %/bench_policy.c \
		%/bench_quota.c,$(wildcard tools/sim/*.c)) policy/*.c core/*.c -lxxhash -lm -lpthread \
		-o $(BUILD)-fuzz/fuzz_sim
	$(BUILD)-fuzz/fuzz_decode -max_total_time=$(FUZZ_SECONDS) $(BUILD)-fuzz/corpus
	$(BUILD)-fuzz/fuzz_sim -max_total_time=$(FUZZ_SECONDS) $(BUILD)-fuzz/corpus-sim
	CC=clang cmake -S . -B $(BUILD)-fuzz/daemon -DCMAKE_BUILD_TYPE=Debug -DKVT_SANITIZE=ON \
		-DKVT_LIBFUZZER=ON -DKVT_WITH_CUDA=OFF
	cmake --build $(BUILD)-fuzz/daemon -j$(JOBS) --target fuzz_daemon
	$(BUILD)-fuzz/daemon/tests/fuzz_daemon -max_total_time=$(FUZZ_SECONDS) -timeout=60 \
		$(BUILD)-fuzz/corpus-daemon

bench: build
	$(BUILD)/bin/kvtier bench

# Engine A prefills, engine B (another process) reuses its prefix through kvtierd.
demo: build
	tools/minillm/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-asan
