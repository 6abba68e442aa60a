# Thin wrapper over CMake. The two set-up commands: `make demo` and `make test`.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)

.PHONY: all deps build demo test test-fast test-asan valgrind clean

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/kiln demo

# Every test, then every test again under ASan+UBSan.
test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory test-asan

test-fast: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 KILN_SANITIZED=1 ctest --output-on-failure -j $(JOBS)

# Documented memcheck run (not part of `make test`: slow).
valgrind: build
	@cd $(BUILD) && ctest -T memcheck --overwrite MemoryCheckCommandOptions="--leak-check=full --error-exitcode=1" -j $(JOBS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
