# Thin wrapper over CMake. `make demo` and `make test` are the two commands the
# README opens with; both install what is missing first.
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_GEN  := -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all deps build asan test unit e2e demo clean format

all: build

deps:
	@scripts/deps.sh

$(BUILD)/Makefile: | deps
	cmake -S . -B $(BUILD) $(CMAKE_GEN)

build: deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD_ASAN)/Makefile: | deps
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DCUBE_SANITIZE=ON -DCUBE_E2E=OFF

asan: deps $(BUILD_ASAN)/Makefile
	cmake --build $(BUILD_ASAN) -j $(JOBS)

# The e2e suites mostly wait (tests/CMakeLists.txt): twice as many at once
# as there are CPUs.
E2E_JOBS   ?= $(shell echo $$(( $(JOBS) * 2 )))

# Every test: the unit suite, then the e2e suites on the normal build, then
# the unit suite again under ASan+UBSan.
test: build asan
	cd $(BUILD) && { ctest --output-on-failure -L unit -j $(JOBS); u=$$?; \
	  ctest --output-on-failure -L e2e -j $(E2E_JOBS) && [ $$u = 0 ]; }
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -L unit -j $(JOBS)

unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit -j $(JOBS)

e2e: build
	cd $(BUILD) && ctest --output-on-failure -L e2e -j $(E2E_JOBS)

demo: build
	scripts/demo.sh $(BUILD)/cube

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
