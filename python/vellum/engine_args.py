"""EngineArgs: vLLM's engine options, mapped onto Vellum's EngineConfig (vellum/config.h)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from typing import Optional, Union

from . import _C

_GIB = 1 << 30


@dataclass
class EngineArgs:
    """Options of LLM(...) and LLMEngine.from_engine_args (vLLM's names and meanings).

    None means Vellum's default. Options that only make sense on a GPU or for features Vellum
    does not implement are refused with a ValueError when set to anything but their neutral value.
    """

    # a GGUF file, a Hugging Face model directory, or a repo id in the local Hugging Face cache
    # (HF_HUB_CACHE / HF_HOME; read offline, as vLLM with HF_HUB_OFFLINE=1)
    model: str = ""
    # the GGUF to load from a directory or cached repo holding several (transformers' gguf_file)
    gguf_file: Optional[str] = None
    # a Hugging Face directory (tokenizer.json), a tokenizer.json or a GGUF file; None: the model's
    tokenizer: Optional[str] = None
    tokenizer_mode: str = "auto"
    skip_tokenizer_init: bool = False  # token-id prompts only, no output text
    load_format: str = "auto"  # auto | gguf | safetensors
    # auto: the model directory's generation_config.json; vllm: none; or a directory holding one
    generation_config: str = "auto"
    trust_remote_code: bool = False  # model files run no code here; accepted for compatibility
    # bitwise the same logits whatever shares a request's step (slower prefill and batches)
    batch_invariant: bool = False
    dtype: str = "auto"  # auto | bfloat16 | float16 | float32
    # auto | fp32 | fp16 | bf16 | q8_0 | q4_0 | fp8 (= fp8_e4m3) | fp8_e5m2 (also f32, float32, ...)
    kv_cache_dtype: str = "auto"
    # K or V storage alone (llama.cpp's --cache-type-k / --cache-type-v); None: kv_cache_dtype
    cache_type_k: Optional[str] = None
    cache_type_v: Optional[str] = None
    kv_cache_rotate_k: str = "auto"  # Hadamard-rotated K: auto (on for q4_0 K) | on | off
    max_model_len: Optional[int] = None  # default: the model's context length
    block_size: Optional[int] = None  # tokens per KV cache block (128, vLLM's CPU default)
    enable_prefix_caching: Optional[bool] = None  # True
    disable_hybrid_kv_cache_manager: bool = False  # one KV block table for all layers
    swap_space: Optional[float] = None  # GiB of host memory for preemption by swap (0)
    preemption_mode: Optional[str] = None  # recompute | swap
    kv_cache_memory_bytes: Optional[int] = None  # KV cache budget in bytes
    kv_cache_fraction: Optional[float] = None  # or a fraction of the available memory (0.5)
    num_gpu_blocks_override: Optional[int] = None  # exact number of KV blocks
    max_num_seqs: Optional[int] = None  # 256
    max_num_batched_tokens: Optional[int] = None  # max(2048, max_num_seqs)
    enable_chunked_prefill: Optional[bool] = None  # True
    long_prefill_token_threshold: Optional[int] = None
    scheduling_policy: str = "fcfs"  # fcfs | priority
    seed: Optional[int] = None  # seeds every request that has no seed of its own
    num_threads: Optional[int] = None  # compute threads (default: the physical cores)
    served_model_name: Optional[str] = None
    max_logprobs: int = 20
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    quantization: Optional[str] = None  # None or "gguf": the file's own weight types are used
    gpu_memory_utilization: Optional[float] = None
    enforce_eager: Optional[bool] = None  # CUDA graphs do not exist here; accepted, no effect
    disable_log_stats: bool = True
    # speculative decoding, vLLM's keys: {"method": "ngram", "num_speculative_tokens": 4,
    # "prompt_lookup_min": 2, "prompt_lookup_max": 5} or {"method": "suffix"}; a dict or its JSON
    speculative_config: Optional[Union[dict, str]] = None

    def create_engine_config(self) -> _C.EngineConfig:
        """The C++ EngineConfig; raises ValueError for what Vellum does not implement."""
        self._refuse_unsupported()
        c = _C.EngineConfig()
        c.model.model = os.fspath(self.model)
        c.model.dtype = self.dtype
        if self.gguf_file is not None:
            c.model.gguf_file = os.fspath(self.gguf_file)
        if self.tokenizer is not None:
            c.model.tokenizer = os.fspath(self.tokenizer)
        c.model.skip_tokenizer_init = bool(self.skip_tokenizer_init)
        c.model.load_format = self.load_format
        c.model.generation_config = os.fspath(self.generation_config)
        c.model.batch_invariant = bool(self.batch_invariant)
        c.model.max_logprobs = self.max_logprobs
        if self.max_model_len is not None:
            c.model.max_model_len = self.max_model_len
        if self.served_model_name is not None:
            c.model.served_model_name = self.served_model_name
        c.cache.cache_dtype = _KV_DTYPES.get(self.kv_cache_dtype, self.kv_cache_dtype)
        if self.cache_type_k is not None:
            c.cache.cache_type_k = _KV_DTYPES.get(self.cache_type_k, self.cache_type_k)
        if self.cache_type_v is not None:
            c.cache.cache_type_v = _KV_DTYPES.get(self.cache_type_v, self.cache_type_v)
        c.cache.kv_cache_rotate_k = self.kv_cache_rotate_k
        if self.block_size is not None:
            c.cache.block_size = self.block_size
        if self.enable_prefix_caching is not None:
            c.cache.enable_prefix_caching = self.enable_prefix_caching
        c.cache.disable_hybrid_kv_cache_manager = self.disable_hybrid_kv_cache_manager
        if self.swap_space is not None:
            if self.swap_space < 0:
                raise ValueError(f"swap_space must be >= 0 GiB, got {self.swap_space}")
            c.cache.swap_space_bytes = int(self.swap_space * _GIB)
        if self.kv_cache_memory_bytes is not None:
            if self.kv_cache_memory_bytes <= 0:
                raise ValueError(
                    f"kv_cache_memory_bytes must be > 0, got {self.kv_cache_memory_bytes}"
                )
            c.cache.kv_cache_memory_bytes = self.kv_cache_memory_bytes
        if self.kv_cache_fraction is not None:
            if not 0.0 < self.kv_cache_fraction <= 1.0:
                raise ValueError(f"kv_cache_fraction must be in (0, 1], got {self.kv_cache_fraction}")
            c.cache.kv_cache_fraction = self.kv_cache_fraction
        if self.num_gpu_blocks_override is not None:
            c.cache.num_blocks_override = self.num_gpu_blocks_override
        if self.max_num_seqs is not None:
            c.scheduler.max_num_seqs = self.max_num_seqs
        if self.max_num_batched_tokens is not None:
            c.scheduler.max_num_batched_tokens = self.max_num_batched_tokens
        if self.enable_chunked_prefill is not None:
            c.scheduler.enable_chunked_prefill = self.enable_chunked_prefill
        if self.long_prefill_token_threshold is not None:
            c.scheduler.long_prefill_token_threshold = self.long_prefill_token_threshold
        c.scheduler.policy = self.scheduling_policy
        if self.preemption_mode is not None:
            c.scheduler.preemption_mode = self.preemption_mode
        if self.num_threads is not None:
            c.parallel.num_threads = self.num_threads
        if self.speculative_config is not None:
            spec = self.speculative_config
            if isinstance(spec, dict):
                spec = json.dumps(spec)
            elif not isinstance(spec, str):
                raise ValueError(
                    "speculative_config must be a dict (vLLM's keys, e.g. {'method': 'ngram', "
                    f"'num_speculative_tokens': 4}}) or its JSON text, got {type(spec).__name__}"
                )
            c.speculative_config = spec
        return c

    def _refuse_unsupported(self) -> None:
        if not self.model:
            raise ValueError(
                "model is required: the path of a GGUF file or a Hugging Face model directory")
        if self.tokenizer_mode not in ("auto", "slow"):
            raise ValueError(
                f"tokenizer_mode={self.tokenizer_mode!r} is not supported; Vellum has one "
                f"tokenizer implementation (leave tokenizer_mode='auto')"
            )
        if self.load_format not in ("auto", "gguf", "safetensors"):
            raise ValueError(
                f"load_format={self.load_format!r} is not supported; use 'auto', 'gguf' or "
                f"'safetensors'"
            )
        if self.tensor_parallel_size != 1 or self.pipeline_parallel_size != 1:
            raise ValueError(
                "tensor_parallel_size / pipeline_parallel_size > 1 are not supported by Vellum's "
                "Python package: it runs one process; leave them at 1"
            )
        if self.quantization not in (None, "gguf"):
            raise ValueError(
                f"quantization={self.quantization!r} is not supported: Vellum runs each GGUF "
                f"tensor in its own type; leave quantization unset"
            )
        if self.gpu_memory_utilization is not None:
            raise ValueError(
                "gpu_memory_utilization is a GPU option and Vellum runs on the CPU: size the KV "
                "cache with kv_cache_memory_bytes=... (bytes) or kv_cache_fraction=... instead"
            )
        if not isinstance(self.max_logprobs, int) or self.max_logprobs < -1:
            raise ValueError(
                f"max_logprobs must be a non-negative integer or -1 (the whole vocabulary), got "
                f"{self.max_logprobs!r}"
            )
        if self.seed is not None and not isinstance(self.seed, int):
            raise TypeError(f"seed must be an integer or None, got {type(self.seed).__name__}")

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in fields(cls)}


# vLLM spells KV cache dtypes "fp16" / "bfloat16" / ...; the engine takes these names.
_KV_DTYPES = {"fp32": "f32", "fp16": "f16", "half": "f16", "float": "f32"}


@dataclass
class AsyncEngineArgs(EngineArgs):
    """EngineArgs for AsyncLLM (vLLM's AsyncEngineArgs)."""
