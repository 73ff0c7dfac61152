#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with Debian's clang (ASan + UBSan + libFuzzer, in
# build/fuzz) and runs each for a bounded time on a copy of its seed corpus in
# fuzz/corpus/<target>/. Exits non-zero on the first crash, leak, timeout or out-of-memory;
# libFuzzer leaves the input as crash-*/timeout-*/oom-* in build/fuzz/findings/<target>/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET (default 20)] [TARGET...]
# The mutation seed is fixed (VELLUM_FUZZ_SEED, default 1) so that a test run explores the same
# inputs each time and CI does not fail at random; set VELLUM_FUZZ_SEED=0 for a fresh random seed
# when hunting (then add what a crash found to fuzz/corpus/<target>/ with the fix).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-20}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(gguf_fuzzer openai_request_fuzzer jinja_fuzzer tokenizer_fuzzer sse_fuzzer
           cli_input_fuzzer)
fi

clang_cc=$(command -v clang-14 || command -v clang || true)
clang_cxx=$(command -v clang++-14 || command -v clang++ || true)
if [ -z "$clang_cc" ] || [ -z "$clang_cxx" ]; then
  echo "fuzz: clang is missing; scripts/setup.sh installs it" >&2
  exit 1
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$clang_cc" -DCMAKE_CXX_COMPILER="$clang_cxx" "${launcher[@]}" \
  -DVELLUM_FUZZ=ON -DVELLUM_BUILD_TESTS=OFF -DVELLUM_BUILD_BENCH=OFF >/dev/null
cmake --build build/fuzz -j "$(nproc)" --target "${targets[@]}"

status=0
for target in "${targets[@]}"; do
  corpus=build/fuzz/corpus/$target
  findings=build/fuzz/findings/$target
  rm -rf "$corpus" "$findings"
  mkdir -p "$corpus" "$findings"
  cp -r "fuzz/corpus/$target/." "$corpus/"
  dict=()
  if [ -f "fuzz/$target.dict" ]; then dict=(-dict="fuzz/$target.dict"); fi
  echo "fuzz: $target for ${seconds}s"
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
       UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
       "build/fuzz/fuzz/$target" "$corpus" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
         -seed="${VELLUM_FUZZ_SEED:-1}" \
         -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
         -artifact_prefix="$findings/" >"$findings/log.txt" 2>&1; then
    echo "fuzz: $target FAILED; the input is in $findings, the log:" >&2
    tail -n 60 "$findings/log.txt" >&2
    status=1
  else
    grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$findings/log.txt" |
      sed "s/^/fuzz: $target /"
  fi
done
exit $status
