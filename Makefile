# Thin wrapper over CMake. The two set-up commands: `make demo` and `make test`.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
# The suites run JOBS processes at once, each with an OpenMP team per kernel: there teams sized
# by the load average (OMP_DYNAMIC=true; kiln's default is exact teams, for one program on the
# machine) keep a barrier from waiting on a thread another process holds the core from.
SHARED_OMP = OMP_DYNAMIC=true

.PHONY: all deps build demo test test-fast test-asan valgrind valgrind-quick clean fuzz fuzz-build mutate install python

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/kiln demo

# libkiln.so and libkiln.a, kiln.h, kiln.pc (pkg-config) and the CMake package, under PREFIX.
PREFIX ?= /usr/local
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# python/kiln with this build's libkiln.so inside, ready for `pip install ./python`.
python: build
	@rm -f python/kiln/libkiln.so*
	@cp -L $(BUILD)/libkiln.so python/kiln/libkiln.so.0

# Every test, then every test again under ASan+UBSan.
test: build
	@cd $(BUILD) && $(SHARED_OMP) ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory test-asan

test-fast: build
	@cd $(BUILD) && $(SHARED_OMP) ctest --output-on-failure -j $(JOBS)

test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 KILN_SANITIZED=1 $(SHARED_OMP) ctest --output-on-failure -j $(JOBS)

# Documented memcheck run (not part of `make test`: slow). The CMake project does not
# include(CTest), so the checker is named here. The cpu backend compiles through
# scripts/cc-valgrind (SSE only: valgrind cannot run AVX-512 and gets AVX NaN compares
# wrong). VALGRIND_TESTS picks tests by regex (ctest -R); valgrind-quick is a
# representative subset that runs in under a minute.
VALGRIND ?= $(shell command -v valgrind)
VALGRIND_TESTS ?= .
VALGRIND_QUICK = te/|graph/test_shapes|runtime/test_ref|plan/test_plan$$|onnx/test_import
MEMCHECK = KILN_CC=$(CURDIR)/scripts/cc-valgrind ctest -T memcheck --overwrite MemoryCheckCommand="$(VALGRIND)" --overwrite MemoryCheckCommandOptions="--leak-check=full --error-exitcode=1 --suppressions=$(CURDIR)/scripts/valgrind.supp" -j $(JOBS)
valgrind: build
	@test -n "$(VALGRIND)" || { echo "valgrind not found (apt-get install valgrind)"; exit 1; }
	@cd $(BUILD) && $(MEMCHECK) -R '$(VALGRIND_TESTS)'

valgrind-quick: build
	@test -n "$(VALGRIND)" || { echo "valgrind not found (apt-get install valgrind)"; exit 1; }
	@cd $(BUILD) && $(MEMCHECK) -R '$(VALGRIND_QUICK)'

# libFuzzer target for the ONNX loader (clang, ASan+UBSan): builds $(FUZZ_BUILD)/fuzz_onnx,
# seeds $(FUZZ_BUILD)/corpus from ../shared's node tests and shared models, runs FUZZ_SECONDS (CI: 60).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SRC = fuzz/fuzz_onnx.c $(wildcard src/base/*.c) $(wildcard src/graph/*.c)
fuzz-build: deps
	@mkdir -p $(FUZZ_BUILD)/proto
	@cp /usr/include/onnx/onnx.proto $(FUZZ_BUILD)/proto/onnx.proto
	@protoc-c --proto_path=$(FUZZ_BUILD)/proto --c_out=$(FUZZ_BUILD)/proto $(FUZZ_BUILD)/proto/onnx.proto
	@clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -Iinclude -Isrc -I$(FUZZ_BUILD)/proto $(FUZZ_SRC) $(FUZZ_BUILD)/proto/onnx.pb-c.c \
	  -l:libprotobuf-c.a -lm -o $(FUZZ_BUILD)/fuzz_onnx

fuzz: fuzz-build
	@fuzz/make-seeds $(FUZZ_BUILD)/corpus
	@$(FUZZ_BUILD)/fuzz_onnx -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -print_final_stats=1 \
	  $(FUZZ_BUILD)/corpus

# Mutation campaign (fuzz/mutate-models, python3): structure-aware mutants of the shared models
# and a sample of node tests, each run by the ASan build (built here when missing, as test-asan
# does) with a time and memory limit, for MUTATE_SECONDS (CI: 90). Fails on a crash, sanitizer
# report, leak or non-zero exit without a message; findings go to $(MUTATE_DIR)/findings, the
# summary to $(MUTATE_DIR)/summary.md. MUTATE_SEED picks the mutants (the same seed, the same ones).
MUTATE_SECONDS ?= 90
MUTATE_SEED ?= 1
MUTATE_DIR ?= $(ASAN_BUILD)/mutate
mutate: deps
	@command -v python3 >/dev/null || { echo "make mutate: needs python3 (apt-get install python3)"; exit 1; }
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@rm -rf $(MUTATE_DIR)/findings
	@[ -d "$${KILN_SHARED_DIR:-../shared}/models" ] || { echo "make mutate: no $${KILN_SHARED_DIR:-../shared}/models to mutate; skipped"; exit 0; }; \
	$(SHARED_OMP) fuzz/mutate-models --seconds $(MUTATE_SECONDS) --seed $(MUTATE_SEED) --jobs $(JOBS) --kiln $(ASAN_BUILD)/kiln \
	  --keep $(MUTATE_DIR)/findings --summary $(MUTATE_DIR)/summary.md


clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
