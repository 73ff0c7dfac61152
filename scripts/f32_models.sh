#!/usr/bin/env bash
# The fidelity tests' ctest fixture: makes the F32 copies of the real models (every tensor
# dequantized, as `llama-quantize --allow-requantize IN OUT F32` does) with Vellum's own
# quantizer, the way ../shared/models/real/README.md made the references' F32 runs.
#
#   scripts/f32_models.sh VELLUM_BINARY
#
#   in:  $VELLUM_MODELS_DIR (default build/models/real; scripts/models.sh fills it)
#   out: $VELLUM_F32_MODELS_DIR (default the same folder)
#        SmolLM2-135M-Instruct.Q4_1.gguf -> SmolLM2-135M-Instruct.F32.gguf
#        gemma-3-270m-q4_k_m.gguf        -> gemma-3-270m-f32.gguf
#
# A copy newer than both its input and the vellum binary is kept. Each copy is written under a
# temporary name and renamed, so a reader never sees half a file. Exits 1, saying what is missing,
# when an input is absent or the quantizer fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
vellum="${1:?usage: $0 VELLUM_BINARY}"
in_dir="${VELLUM_MODELS_DIR:-$root/build/models/real}"
out_dir="${VELLUM_F32_MODELS_DIR:-$in_dir}"
if [ ! -x "$vellum" ]; then
  echo "f32_models.sh: $vellum is not an executable: build the vellum target first" >&2
  exit 1
fi

tmp=""
trap '[ -z "$tmp" ] || rm -f "$tmp"' EXIT

# make_copy IN_NAME OUT_NAME
make_copy() {
  local in="$in_dir/$1" out="$out_dir/$2"
  if [ ! -f "$in" ]; then
    echo "f32_models.sh: $in not found: run scripts/models.sh (or set VELLUM_MODELS_DIR)" >&2
    exit 1
  fi
  if [ -f "$out" ] && [ "$out" -nt "$in" ] && [ "$out" -nt "$vellum" ]; then
    echo "$out is up to date"
    return
  fi
  mkdir -p "$out_dir"
  tmp="${out%.gguf}.tmp$$.gguf"
  "$vellum" quantize --allow-requantize "$in" "$tmp" F32
  mv -f "$tmp" "$out"
  tmp=""
  echo "wrote $out"
}

make_copy SmolLM2-135M-Instruct.Q4_1.gguf SmolLM2-135M-Instruct.F32.gguf
make_copy gemma-3-270m-q4_k_m.gguf gemma-3-270m-f32.gguf
