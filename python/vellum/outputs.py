"""RequestOutput, CompletionOutput and Logprob with vLLM's attributes (vllm.outputs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from . import _C


@dataclass
class Logprob:
    """The logprob of one token at one position, its rank (1 = most likely) and its text."""

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


# One dict per generated position: token id -> Logprob (the sampled token and the top-k).
SampleLogprobs = list[dict[int, Logprob]]
# One entry per prompt position; the first is None (the first token has no logprob).
PromptLogprobs = list[Optional[dict[int, Logprob]]]


@dataclass
class CompletionOutput:
    """One generated sequence of a request (vllm.CompletionOutput)."""

    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[SampleLogprobs]
    finish_reason: Optional[str] = None  # "stop", "length", "abort", "repetition", None
    stop_reason: Union[int, str, None] = None  # the stop string or token id that ended it
    lora_request: None = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestMetrics:
    """Timestamps of a request (seconds on the engine's monotonic clock)."""

    arrival_time: float
    first_scheduled_time: Optional[float]
    first_token_time: Optional[float]
    last_token_time: float
    finished_time: Optional[float]
    time_in_queue: Optional[float]
    inter_token_latencies: list[float] = field(default_factory=list, repr=False)
    num_generation_tokens: int = 0


@dataclass
class RequestOutput:
    """The output of one request (vllm.RequestOutput)."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: Optional[list[int]]
    prompt_logprobs: Optional[PromptLogprobs]
    outputs: list[CompletionOutput]
    finished: bool
    metrics: Optional[RequestMetrics] = None
    lora_request: None = None
    encoder_prompt: None = None
    encoder_prompt_token_ids: None = None
    num_cached_tokens: Optional[int] = None


TokenDecoder = Callable[[int], str]


def _position(lp: _C.TokenLogprobs, decode: TokenDecoder) -> dict[int, Logprob]:
    # vLLM's order: the sampled (or prompt) token first, then the top-k with ranks 1..k.
    entries = {lp.token_id: Logprob(lp.logprob, lp.rank, decode(lp.token_id))}
    for rank, (token_id, logprob) in enumerate(lp.top, start=1):
        entries[token_id] = Logprob(logprob, rank, decode(token_id))
    return entries


def _optional_time(t: float) -> Optional[float]:
    return t if t > 0.0 else None


def convert_metrics(m: _C.RequestMetrics) -> RequestMetrics:
    first_scheduled = _optional_time(m.first_scheduled_time)
    return RequestMetrics(
        arrival_time=m.arrival_time,
        first_scheduled_time=first_scheduled,
        first_token_time=_optional_time(m.first_token_time),
        last_token_time=m.last_token_time,
        finished_time=_optional_time(m.finished_time),
        time_in_queue=None if first_scheduled is None else first_scheduled - m.arrival_time,
        inter_token_latencies=list(m.inter_token_latencies),
        num_generation_tokens=m.num_generation_tokens,
    )


def convert_completion(c: _C.CompletionOutput, decode: TokenDecoder) -> CompletionOutput:
    logprobs = c.logprobs
    stop_reason: Union[int, str, None] = c.stop_reason_text
    if stop_reason is None:
        stop_reason = c.stop_reason_token
    return CompletionOutput(
        index=c.index,
        text=c.text,
        token_ids=list(c.token_ids),
        # vLLM reports it only when logprobs were requested.
        cumulative_logprob=None if logprobs is None else c.cumulative_logprob,
        logprobs=None if logprobs is None else [_position(lp, decode) for lp in logprobs],
        finish_reason=c.finish_reason,
        stop_reason=stop_reason,
    )


def convert_request_output(
    out: _C.RequestOutput, decode: TokenDecoder, prompt: Optional[str] = None
) -> RequestOutput:
    """vLLM's RequestOutput from the engine's; `prompt` overrides the prompt text (chat)."""
    prompt_logprobs: Optional[PromptLogprobs] = None
    if out.prompt_logprobs is not None:
        prompt_logprobs = [None]
        prompt_logprobs.extend(_position(lp, decode) for lp in out.prompt_logprobs)
    text = prompt if prompt is not None else out.prompt
    return RequestOutput(
        request_id=out.request_id,
        prompt=text if text else None,
        prompt_token_ids=list(out.prompt_token_ids),
        prompt_logprobs=prompt_logprobs,
        outputs=[convert_completion(c, decode) for c in out.outputs],
        finished=out.finished,
        metrics=convert_metrics(out.metrics),
        num_cached_tokens=out.num_cached_tokens,
    )
