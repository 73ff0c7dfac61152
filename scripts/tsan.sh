#!/usr/bin/env bash
# ThreadSanitizer pass, run by scripts/test.sh (CI). Builds build/tsan with -fsanitize=thread on
# the threaded layers (engine client, server, bench-serve client; the compute kernels stay
# uninstrumented, see cmake/VellumWarnings.cmake), limited to the four test binaries below and
# the libraries they link, and runs:
#   - the EngineClient tests (engine thread, request streams, many submitting threads),
#   - the server's in-process tests (HTTP threads, SSE, disconnects, hostile clients),
#   - the bench-serve client tests (client threads, SSE parsing).
# Any data race fails the run (halt_on_error); scripts/tsan.supp lists the suppressed reports
# (uninstrumented OpenMP and deliberate descriptor scans) and why. Needs the shared test models
# for the engine and server tests (they skip without them, or fail under VELLUM_REQUIRE_MODELS=1).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=${JOBS:-$(nproc)}
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVELLUM_TSAN=ON -DVELLUM_WERROR=ON \
  -DVELLUM_BUILD_BENCH=OFF "-DVELLUM_TEST_LAYERS=engine;server;benchserve" "${launcher[@]}" \
  >/dev/null
cmake --build build/tsan -j "$jobs" --target engine_tests server_http_tests \
  server_hostile_input_tests benchserve_tests

export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp ${TSAN_OPTIONS:-}"
# One OpenMP thread: the uninstrumented kernels then run on the calling thread only.
export OMP_NUM_THREADS=1
build/tsan/tests/engine/engine_tests --gtest_filter='EngineClient.*'
build/tsan/tests/server/server_http_tests
build/tsan/tests/server/server_hostile_input_tests
build/tsan/tests/benchserve/benchserve_tests
echo "tsan: no data race found"
