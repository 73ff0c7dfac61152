"""LLMEngine: add requests, step, collect outputs (vllm.LLMEngine), over the C++ LLMEngine.

Driven by one thread. step() releases the GIL while the engine schedules, runs the model and
samples, so other Python threads keep running.
"""

from __future__ import annotations

import random
from typing import Any, Iterable, Optional, Union

from . import _C
from .engine_args import EngineArgs
from .inputs import Prompt, parse_prompt
from .outputs import RequestOutput, convert_request_output
from .sampling_params import BeamSearchParams, SamplingParams
from .tokenizer import Tokenizer


class TokenTexts:
    """decoded_token of logprobs: each id decoded alone, special tokens kept (vLLM's), cached."""

    def __init__(self, engine: Union[_C.LLMEngine, _C.EngineClient]) -> None:
        self._engine = engine
        self._cache: dict[int, str] = {}

    def __call__(self, token_id: int) -> str:
        text = self._cache.get(token_id)
        if text is None:
            text = self._engine.decode([token_id], False)
            self._cache[token_id] = text
        return text


class RequestPreparer:
    """What LLMEngine and AsyncLLM do before a request reaches the C++ engine: check the prompt,
    validate the parameters, apply truncate_prompt_tokens and the engine-wide seed."""

    def __init__(self, engine: Union[_C.LLMEngine, _C.EngineClient], seed: Optional[int]) -> None:
        self._engine = engine
        # Requests without a seed of their own draw one from this generator, so that a run with
        # the same engine seed and the same requests samples the same tokens.
        self._rng = random.Random(seed) if seed is not None else None

    def prepare(
        self, prompt: Any, params: Union[SamplingParams, BeamSearchParams, _C.SamplingParams]
    ) -> tuple[Prompt, _C.SamplingParams]:
        parsed = parse_prompt(prompt)
        if isinstance(params, (SamplingParams, BeamSearchParams)):
            cpp = params._to_cpp()
        elif isinstance(params, _C.SamplingParams):
            cpp = params
        else:
            raise TypeError(
                f"params must be a vellum.SamplingParams, got {type(params).__name__} (pooling "
                f"models are not supported)"
            )
        if self._rng is not None and cpp.seed is None and not cpp.is_greedy():
            cpp.seed = self._rng.getrandbits(62)  # room for n > 1 children's seed + i
        if cpp.truncate_prompt_tokens is not None:
            parsed = self._truncate(parsed, cpp.truncate_prompt_tokens)
        return parsed, cpp

    def _truncate(self, parsed: Prompt, keep: int) -> Prompt:
        max_model_len = self._engine.max_model_len()
        if keep == -1:
            keep = max_model_len
        if keep > max_model_len:
            raise ValueError(
                f"truncate_prompt_tokens value ({keep}) is greater than max_model_len "
                f"({max_model_len}). Please, select a smaller truncation size."
            )
        ids = parsed.engine_prompt
        if isinstance(ids, str):
            ids = self._engine.encode(ids, True, False)
        if len(ids) <= keep:
            return parsed
        return Prompt(list(ids[len(ids) - keep :]), parsed.text, parsed.cache_salt)


class LLMEngine:
    """vLLM's LLMEngine: ``from_engine_args``, ``add_request``, ``step``, ``abort_request``."""

    def __init__(self, engine_args: EngineArgs) -> None:
        config = engine_args.create_engine_config()
        self.engine_args = engine_args
        self._engine = _C.LLMEngine.create(config)
        self._prepare = RequestPreparer(self._engine, engine_args.seed)
        self._token_texts = TokenTexts(self._engine)
        self._tokenizer = Tokenizer(self._engine)
        # Unfinished requests -> the prompt text to report (None: the engine's).
        self._requests: dict[str, Optional[str]] = {}

    @classmethod
    def from_engine_args(cls, engine_args: EngineArgs, **_: Any) -> "LLMEngine":
        return cls(engine_args)

    def add_request(
        self,
        request_id: str,
        prompt: Any,
        params: Union[SamplingParams, BeamSearchParams, _C.SamplingParams],
        arrival_time: Optional[float] = None,
        lora_request: None = None,
        tokenization_kwargs: Optional[dict[str, Any]] = None,
        trace_headers: Optional[dict[str, str]] = None,
        priority: int = 0,
    ) -> None:
        """Queues a request. Raises ValueError with vLLM's message when it is invalid."""
        if lora_request is not None:
            raise ValueError("LoRA adapters are not supported by Vellum; remove lora_request")
        if tokenization_kwargs:
            raise ValueError("tokenization_kwargs are not supported; use truncate_prompt_tokens")
        if not isinstance(request_id, str):
            raise TypeError(f"request_id must be a str, got {type(request_id).__name__}")
        if request_id in self._requests:
            raise ValueError(f"Request id {request_id} already running.")
        parsed, cpp = self._prepare.prepare(prompt, params)
        error = self._engine.add_request(
            request_id, parsed.engine_prompt, cpp, priority, parsed.cache_salt
        )
        if error is not None:
            raise ValueError(error)
        self._requests[request_id] = parsed.text

    def step(self) -> list[RequestOutput]:
        """Runs one engine step (GIL released) and returns the outputs it produced."""
        return self._step(False)

    def _step(self, raw: bool) -> list[Any]:
        # raw: the engine's own outputs (_C.RequestOutput), for beam search and draining.
        outputs = []
        for out in self._engine.step():
            text = self._requests.get(out.request_id)
            if out.finished:
                self._requests.pop(out.request_id, None)
            outputs.append(out if raw else convert_request_output(out, self._token_texts, text))
        return outputs

    def abort_request(self, request_id: Union[str, Iterable[str]]) -> None:
        """Aborts requests wherever they are; each one's final output (finish_reason "abort")
        comes from the next step(). Unknown ids are ignored."""
        ids = [request_id] if isinstance(request_id, str) else list(request_id)
        for rid in ids:
            self._engine.abort_request(rid)

    def has_unfinished_requests(self) -> bool:
        return self._engine.has_unfinished_requests()

    def get_num_unfinished_requests(self) -> int:
        return len(self._requests)

    def get_tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def get_diff_sampling_param(self) -> dict[str, Any]:
        """The sampling fields the model's generation_config.json sets (temperature, top_p, top_k,
        min_p, repetition_penalty, max_tokens from max_new_tokens); empty with
        generation_config="vllm" or a GGUF file."""
        return dict(self._engine.diff_sampling_params())

    def get_stats(self) -> _C.EngineStats:
        """Running / waiting counts, KV cache usage, prefix cache and token counters."""
        return self._engine.stats()

    @property
    def max_model_len(self) -> int:
        return self._engine.max_model_len()

    def _cpp_engine(self) -> _C.LLMEngine:
        return self._engine
