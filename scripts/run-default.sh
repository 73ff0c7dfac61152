#!/usr/bin/env bash
# The README's main command: installs what is missing, builds the `vellum` program, makes a small
# llama model with seeded random weights (the default model; no download), and generates text
# from it through the paged KV cache. Pass a GGUF path as $1 to use another model.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DVELLUM_BUILD_TESTS=OFF \
  -DVELLUM_BUILD_BENCH=OFF
cmake --build build/release -j "$(nproc)" --target vellum

model="${1:-build/models/tiny-f32.gguf}"
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  build/release/src/cli/vellum make-model --shape tiny --dtype f32 --seed 0 --output "$model"
fi
build/release/src/cli/vellum generate --model "$model" \
  --prompt "Once upon a time" --prompt "The little dog" \
  --max-tokens 32 --temperature 0 --kv-cache-memory 256MiB

# With the shared test models beside the checkout, also show a real trained model's text.
if [ $# -eq 0 ] && [ -f ../shared/models/stories260K.gguf ]; then
  build/release/src/cli/vellum generate --model ../shared/models/stories260K.gguf \
    --prompt "Once upon a time" --max-tokens 48 --temperature 0 --kv-cache-memory 64MiB
fi
