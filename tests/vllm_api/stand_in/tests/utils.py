# SPDX-License-Identifier: Apache-2.0
"""A stand-in for vLLM's tests/utils.py: RemoteOpenAIServer starts `vellum serve` instead of
`vllm serve`, with the test's flags, on the model named by $VELLUM_VLLM_API_MODEL, served under the
test's model name. Only what the HTTP-only test files use is here."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import openai
import requests

# vLLM's extra flags for ROCm GPUs; none here.
ROCM_EXTRA_ARGS: list[str] = []

# vLLM flags that only steer a GPU (CUDA graphs, the share of GPU memory, GPU kernels). They have no
# meaning on a CPU engine, so the stand-in drops them rather than teach Vellum to accept and ignore
# them; every other flag reaches `vellum serve`, which refuses what it does not know.
GPU_ONLY_FLAGS_WITH_VALUE = {"--gpu-memory-utilization"}
GPU_ONLY_FLAGS = {"--enforce-eager"}


def get_open_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _without_gpu_only_flags(args: list[str]) -> list[str]:
    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            continue
        name = arg.split("=", 1)[0].replace("_", "-")
        if name in GPU_ONLY_FLAGS:
            continue
        if name in GPU_ONLY_FLAGS_WITH_VALUE:
            skip_value = "=" not in arg
            continue
        kept.append(arg)
    return kept


def _flag_value(args: list[str], *names: str) -> str | None:
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


class RemoteOpenAIServer:
    DUMMY_API_KEY = "token-abc123"

    def __init__(self, model: str, vllm_serve_args: list[str], *, env_dict=None, seed: int = 0,
                 auto_port: bool = True, max_wait_seconds: float | None = None,
                 override_hf_configs=None) -> None:
        if override_hf_configs is not None:
            raise RuntimeError("the stand-in does not pass --hf-overrides to vellum serve")
        args = list(vllm_serve_args)
        if auto_port:
            if "-p" in args or "--port" in args:
                raise ValueError("You have manually specified the port when `auto_port=True`.")
            args += ["--port", str(get_open_port())]
        if seed is not None:
            if "--seed" in args:
                raise ValueError(f"You have manually specified the seed when `seed={seed}`.")
            args += ["--seed", str(seed)]
        self.host = _flag_value(args, "--host") or "127.0.0.1"
        self.port = int(_flag_value(args, "--port", "-p"))
        self.root_path = _flag_value(args, "--root-path") or ""
        api_key = _flag_value(args, "--api-key")
        if api_key:
            self.DUMMY_API_KEY = api_key

        vellum = os.environ["VELLUM_BIN"]
        model_file = os.environ["VELLUM_VLLM_API_MODEL"]
        command = [vellum, "serve", model_file, "--served-model-name", model,
                   *_without_gpu_only_flags(args)]
        env = os.environ.copy()
        env.update(env_dict or {})
        print("Launching vellum serve:", " ".join(command), flush=True)
        self.proc = subprocess.Popen(command, env=env, stdout=sys.stdout, stderr=sys.stderr,
                                     start_new_session=True)
        try:
            self._wait_for_server(max_wait_seconds or 240)
        except Exception:
            self._shutdown()
            raise

    def _wait_for_server(self, timeout: float) -> None:
        start = time.time()
        url = self.url_for("health")
        while True:
            try:
                if requests.get(url, timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"vellum serve exited with {self.proc.returncode} at startup")
            if time.time() - start > timeout:
                raise RuntimeError("vellum serve failed to start in time")
            time.sleep(0.2)

    def _shutdown(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self._shutdown()

    @property
    def url_root(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url_for(self, *parts: str) -> str:
        path = "/".join(part.strip("/") for part in parts if part)
        return f"{self.url_root}/{path}"

    def get_client(self, **kwargs):
        kwargs.setdefault("timeout", 600)
        return openai.OpenAI(base_url=self.url_for("v1"), api_key=self.DUMMY_API_KEY,
                             max_retries=0, **kwargs)

    def get_async_client(self, **kwargs):
        kwargs.setdefault("timeout", 600)
        return openai.AsyncOpenAI(base_url=self.url_for("v1"), api_key=self.DUMMY_API_KEY,
                                  max_retries=0, **kwargs)
