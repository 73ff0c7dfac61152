#!/usr/bin/env bash
# Installs what is missing, builds Vellum with warnings as errors, and runs the whole test suite:
# first the bookkeeping layers' unit tests under ASan + UBSan, then every test of the normal build.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
jobs=$(nproc)
# A test that needs a shared or real model fails instead of skipping when the model is missing:
# CI must not pass vacuously because a download did not happen (tests/test_util.h).
export VELLUM_REQUIRE_MODELS=1

# Both builds run with VELLUM_INVARIANTS=ON: the KV cache manager and scheduler check their
# invariants after every mutation although NDEBUG is set (a define on the core library only, so
# it costs no extra build; the engine tests take a few seconds longer).

# Sanitizer pass over the layers that are pure data structures and parsers (fast to build and run),
# the serving benchmark's HTTP client (threads, SSE parsing) and the structured-output grammar
# engine (parsers of untrusted schemas, regexes and grammars).
sanitized="common;gguf;core;sampling;structured;benchserve"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVELLUM_WERROR=ON \
  -DVELLUM_SANITIZE=ON -DVELLUM_INVARIANTS=ON -DVELLUM_BUILD_BENCH=OFF \
  "-DVELLUM_TEST_LAYERS=$sanitized"
cmake --build build/asan -j "$jobs" --target common_tests gguf_tests core_tests scheduler_tests \
  sampling_tests structured_tests benchserve_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs"

# ThreadSanitizer pass over the threaded layers (engine client, server, bench-serve client):
# its own build dir build/tsan, limited to four test binaries and their libraries
# (scripts/tsan.sh). Measured on the 2-core Zen 4 machine: the build 525 s user + 49 s system
# CPU (about 5 minutes of 2 cores), the tests 23 s.
scripts/tsan.sh

# libFuzzer pass (clang, its own build dir build/fuzz): each target runs 20 s from its seed corpus
# in fuzz/corpus/ (about 2 minutes in all); a crash, hang or leak fails the run.
scripts/fuzz.sh "${VELLUM_FUZZ_SECONDS:-20}"

# The whole suite, normal build (engine tests included, with the invariant checks on). Through
# ccache, so that the virtual-environment install test (tests/python/test_venv_install.sh), which
# builds the Python package again with these flags, takes its objects from the cache; the
# directory is not hashed so that its build folder may differ.
export CCACHE_NOHASHDIR=1
cmake -S . -B build/ci -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVELLUM_WERROR=ON \
  -DVELLUM_INVARIANTS=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
cmake --build build/ci -j "$jobs"
ctest --test-dir build/ci --output-on-failure -j "$jobs"
