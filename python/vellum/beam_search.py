"""Outputs of LLM.beam_search (vllm.beam_search)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from .outputs import SampleLogprobs


@dataclass
class BeamSearchSequence:
    """One beam: `tokens` holds the prompt and the generated ids, `text` the generated text."""

    tokens: list[int]
    logprobs: SampleLogprobs = field(default_factory=list)  # not reported by Vellum: empty
    cum_logprob: float = 0.0
    text: Optional[str] = None
    finish_reason: Optional[str] = None
    stop_reason: Union[int, str, None] = None


@dataclass
class BeamSearchOutput:
    """The best `beam_width` beams of one prompt, best first."""

    sequences: list[BeamSearchSequence]
