# The README's two commands. Everything else is CMake (build/), driven from here.
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)

.PHONY: run test deps build asan valgrind bench demo clean

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

# The daemon-level integration tests with kvtierd under valgrind memcheck.
valgrind: build
	tools/valgrind-daemon.sh $(BUILD)

bench: build
	$(BUILD)/bin/kvtier bench

# Engine A prefills, engine B (another process) reuses its prefix through kvtierd.
demo: build
	tools/minillm/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-asan
