#!/usr/bin/env bash
# Runs vLLM's own black-box OpenAI-server tests (tests/entrypoints/openai/ of vLLM's pinned source
# distribution) against `vellum serve` on SmolLM2-135M-Instruct, through a stand-in for vLLM's
# RemoteOpenAIServer (stand_in/tests/utils.py). Nothing of vLLM is committed or installed as a
# package: the sdist is downloaded (sha256-pinned) into the work folder and only its tests are used.
#
#   tests/vllm_api/run.sh [FILE...]      # files relative to tests/entrypoints/openai/;
#                                        # default: the list in tests/vllm_api/files.txt
# Environment:
#   VELLUM_BIN            the vellum program (default build/ci/src/cli/vellum)
#   VELLUM_MODELS_DIR     where scripts/models.sh put the real models (default build/models/real)
#   VLLM_API_WORK         work folder (default build/vllm_api)
#   VLLM_SDIST            a local vllm-0.33.0.tar.gz to use instead of downloading it
#   VLLM_API_TEST_TIMEOUT seconds one test may take (default 300): vLLM's tests were written for
#                         Qwen3 on a GPU, which stops on its own; SmolLM2 on 2 cores may generate
#                         to the context limit where a test sets no max_tokens
# Writes $VLLM_API_WORK/report.md (one line per test: passed, failed, or expected to fail and why,
# from tests/vllm_api/expected_failures.txt) and exits non-zero when a test that is not listed there
# fails, or a listed one passes (the list must then shrink).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="${VLLM_API_WORK:-$root/build/vllm_api}"
export VELLUM_BIN="${VELLUM_BIN:-$root/build/ci/src/cli/vellum}"
models="${VELLUM_MODELS_DIR:-$root/build/models/real}"
export VELLUM_VLLM_API_MODEL="$models/SmolLM2-135M-Instruct.Q4_1.gguf"

version=0.33.0
sdist_url="https://files.pythonhosted.org/packages/f7/25/aa5684e9c59d6fc75f78926b7f15e8d9adc7de2d9e6e7575b80776ad8169/vllm-$version.tar.gz"
sdist_sha256=f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112

[[ -x "$VELLUM_BIN" ]] || { echo "error: $VELLUM_BIN is not built (cmake --build build/ci)" >&2; exit 1; }
[[ -f "$VELLUM_VLLM_API_MODEL" ]] || {
  echo "error: $VELLUM_VLLM_API_MODEL is missing: run scripts/models.sh" >&2; exit 1; }
mkdir -p "$work"

sdist="${VLLM_SDIST:-$work/vllm-$version.tar.gz}"
if [[ ! -f "$sdist" ]]; then
  # pip download cannot fetch it: it builds the package's metadata, which needs CUDA's torch.
  echo "downloading vLLM $version's source distribution (47 MB) for its tests"
  curl -fsSL --retry 3 -o "$sdist.part" "$sdist_url"
  mv "$sdist.part" "$sdist"
fi
echo "$sdist_sha256  $sdist" | sha256sum -c --quiet - ||
  { echo "error: $sdist does not have the pinned sha256" >&2; exit 1; }

venv="$work/venv"
stamp="$venv/requirements.sha256"
if [[ ! -x "$venv/bin/pytest" ]] || ! sha256sum --quiet -c "$stamp" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet -r "$here/requirements.txt"
  (cd "$here" && sha256sum "$PWD/requirements.txt") > "$stamp"
fi

# The test tree: vLLM's tests/entrypoints/ with the stand-in's tests/utils.py and conftest.py.
tree="$work/tree"
rm -rf "$tree"
mkdir -p "$tree"
tar -xzf "$sdist" -C "$tree" --strip-components=1 "vllm-$version/tests/entrypoints"
cp -r "$here/stand_in/." "$tree/"

if (($# > 0)); then
  files=("$@")
else
  mapfile -t files < <(grep -v '^\s*\(#\|$\)' "$here/files.txt")
fi
cd "$tree"
rm -f "$work"/junit-*.xml  # the report covers this run's files only
status=0
for file in "${files[@]}"; do
  name="${file//\//_}"
  echo "== $file"
  timeout 3600 "$venv/bin/python" -m pytest -q -p no:cacheprovider -o console_output_style=classic \
    --timeout "${VLLM_API_TEST_TIMEOUT:-300}" \
    --junitxml="$work/junit-${name%.py}.xml" "tests/entrypoints/openai/$file" \
    > "$work/log-${name%.py}.txt" 2>&1 || true
  tail -n 1 "$work/log-${name%.py}.txt"
done
"$venv/bin/python" "$here/report.py" --expected "$here/expected_failures.txt" \
  --out "$work/report.md" "$work"/junit-*.xml || status=$?
echo "report: $work/report.md"
exit "$status"
