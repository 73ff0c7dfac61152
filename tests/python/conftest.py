"""Fixtures of the Python package's tests (run by ctest, see CMakeLists.txt here).

The package is imported from the build (PYTHONPATH set by ctest). Models: a tiny llama that
`vellum make-model` writes (always available), and the shared test models (../shared/models or
$VELLUM_TEST_MODELS; tests that need them skip with a message when they are absent).
"""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
KV_BYTES = 64 << 20  # a small KV cache: these models are tiny and the CI machine is shared
# One compute thread: ctest runs test files side by side on a shared 2-core machine, where
# OpenMP barriers over more threads than free cores slow everything down.
ENGINE = {"kv_cache_memory_bytes": KV_BYTES, "num_threads": 1}


def vellum_cli() -> str:
    cli = os.environ.get("VELLUM_CLI", str(REPO / "build/ci/src/cli/vellum"))
    if not os.access(cli, os.X_OK):
        pytest.fail(f"the vellum program is not at {cli}; build it or set VELLUM_CLI")
    return cli


def shared_model(name: str) -> str:
    root = pathlib.Path(os.environ.get("VELLUM_TEST_MODELS", REPO.parent / "shared" / "models"))
    path = root / name
    if not path.exists():
        why = f"{path} is absent (set VELLUM_TEST_MODELS to the shared test models)"
        if os.environ.get("VELLUM_REQUIRE_MODELS") == "1":
            pytest.fail(f"VELLUM_REQUIRE_MODELS=1: {why}")
        pytest.skip(why)
    return str(path)


def make_model(path: pathlib.Path, *args: str) -> str:
    subprocess.run(
        [vellum_cli(), "make-model", "--shape", "tiny", "--dtype", "f32", "--seed", "0",
         "--output", str(path), *args],
        check=True, capture_output=True)
    return str(path)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """A small llama with seeded random weights and the built-in vocabulary."""
    return make_model(tmp_path_factory.mktemp("models") / "tiny.gguf")


@pytest.fixture(scope="session")
def stories_model() -> str:
    return shared_model("stories260K.gguf")


@pytest.fixture(scope="session")
def chat_model(tmp_path_factory) -> str:
    """A tiny llama with Phi-3's vocabulary and chat template (tokenizer.chat_template)."""
    vocab = shared_model("vocab/ggml-vocab-phi-3.gguf")
    return make_model(tmp_path_factory.mktemp("models") / "tiny-phi3-vocab.gguf",
                      "--vocab-from", vocab)


@pytest.fixture(scope="module")
def llm(tiny_model):
    from vellum import LLM

    return LLM(model=tiny_model, **ENGINE)


def cli_generate(model: str, prompt: str, max_tokens: int) -> list[int]:
    """Greedy token ids from `vellum generate --json`."""
    import json

    out = subprocess.run(
        [vellum_cli(), "generate", "--model", model, "--prompt", prompt, "--max-tokens",
         str(max_tokens), "--temperature", "0", "--ignore-eos", "--json", "--kv-cache-memory",
         "64MiB", "--threads", "1"],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["generated_token_ids"]
