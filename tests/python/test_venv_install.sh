#!/usr/bin/env bash
# The README's Python install, as a Python user does it: a virtual environment of the `python3` on
# PATH, `pip install` of this checkout (build isolation on: pip fetches the pinned build tools and
# tqdm from PyPI), then vLLM's quick-start and a chat on the real SmolLM2-135M-Instruct from
# scripts/models.sh, run from outside the source tree so that the installed package is the one
# imported. Fails (never skips) when the model is missing.
#
#   test_venv_install.sh SOURCE_DIR WORK_DIR
#
# VELLUM_PIP_BUILD_DIR / VELLUM_PIP_CMAKE_ARGS (setup.py) pass through: ctest gives the test build's
# own flags, so that ccache serves the engine's objects instead of a second full build.
set -euo pipefail
src="$(cd "$1" && pwd)"
work="$2"
model="${VELLUM_MODELS_DIR:-$src/build/models/real}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
  echo "FAIL: $model is missing: run scripts/models.sh (or set VELLUM_MODELS_DIR)" >&2
  exit 1
fi

rm -rf "$work/venv"
mkdir -p "$work"
echo "venv of $(command -v python3) ($(python3 --version))"
python3 -m venv "$work/venv"
start=$SECONDS
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$src"
echo "pip install took $((SECONDS - start)) s"

cd "$work"
"$work/venv/bin/python" - "$model" <<'EOF'
import pathlib
import sys

import vellum
from vellum import LLM, SamplingParams

installed = pathlib.Path(vellum.__file__).resolve()
assert "site-packages" in installed.parts, f"imported {installed}, not the installed package"
print("vellum from", installed.parent)

# vLLM's quick-start, as written (sampled), then greedy answers to check.
prompts = ["Hello, my name is", "The capital of France is"]
sampling_params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=32)
llm = LLM(model=sys.argv[1], max_model_len=2048)
outputs = llm.generate(prompts, sampling_params)
for output in outputs:
    print(repr(output.prompt), "->", repr(output.outputs[0].text))
    assert output.outputs[0].token_ids, "no tokens generated"

greedy = SamplingParams(temperature=0, max_tokens=32)
chat = llm.chat([{"role": "user", "content": "What is the capital of France?"}], greedy)
answer = chat[0].outputs[0].text
print("chat:", repr(answer))
assert "Paris" in answer, f"SmolLM2 should name Paris, got {answer!r}"
EOF
