"""SamplingParams and BeamSearchParams with vLLM's fields, defaults and validation.

The rules and their messages live once, in C++ (``SamplingParams::validate`` in
src/sampling/sampling_params.cc); this class checks the Python types vLLM checks, hands the
values to that validation, and raises its message as ``ValueError``.
"""

from __future__ import annotations

import enum
import json as _json
from dataclasses import dataclass
from typing import Any, Optional, Union

from . import _C


class RequestOutputKind(enum.Enum):
    """What each RequestOutput of a request carries (vLLM's RequestOutputKind)."""

    CUMULATIVE = 0  # everything generated so far
    DELTA = 1  # only what is new since the previous output
    FINAL_ONLY = 2  # one output, when the request finishes


_KIND_TO_C = {
    RequestOutputKind.CUMULATIVE: _C.RequestOutputKind.CUMULATIVE,
    RequestOutputKind.DELTA: _C.RequestOutputKind.DELTA,
    RequestOutputKind.FINAL_ONLY: _C.RequestOutputKind.FINAL_ONLY,
}


class SamplingType(enum.IntEnum):
    GREEDY = 0
    RANDOM = 1
    RANDOM_SEED = 2


@dataclass
class RepetitionDetectionParams:
    """Finish a request (finish_reason "repetition") when its output repeats a pattern."""

    max_pattern_size: int = 0
    min_pattern_size: int = 0
    min_count: int = 0


@dataclass
class StructuredOutputsParams:
    """Constrained decoding (vllm.sampling_params.StructuredOutputsParams): exactly one of
    ``json`` (a JSON Schema, as a dict or JSON text), ``regex``, ``choice``, ``grammar`` (GBNF)
    or ``json_object``; the output is then valid against it."""

    json: Optional[Union[str, dict]] = None
    regex: Optional[str] = None
    choice: Optional[list[str]] = None
    grammar: Optional[str] = None
    json_object: Optional[bool] = None
    disable_any_whitespace: bool = False

    def _to_cpp(self) -> _C.StructuredOutputsParams:
        c = _C.StructuredOutputsParams()
        if self.json is not None:
            c.json = self.json if isinstance(self.json, str) else _json.dumps(self.json)
        if self.regex is not None:
            c.regex = self.regex
        if self.choice is not None:
            if isinstance(self.choice, str) or not all(isinstance(x, str) for x in self.choice):
                raise TypeError("structured_outputs.choice must be a list of strings")
            c.choice = list(self.choice)
        if self.grammar is not None:
            c.grammar = self.grammar
        c.json_object = bool(self.json_object)
        c.disable_any_whitespace = bool(self.disable_any_whitespace)
        return c


# vLLM fields whose feature Vellum does not implement: refused when set, never ignored.
_UNSUPPORTED = {
    "logits_processors": "custom logits processors (Python callables) are not supported",
    "guided_decoding": "guided decoding (structured outputs) is not supported",
    "extra_args": "extra_args are not supported",
    "thinking_token_budget": "thinking_token_budget is not supported",
}

_INT_FIELDS = ("min_tokens",)
_FLOAT_FIELDS = (
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "temperature",
    "top_p",
    "min_p",
)
_BOOL_FIELDS = (
    "ignore_eos",
    "detokenize",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "include_stop_str_in_output",
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_int_list(name: str, values: Any, what: str = "integers") -> list[int]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list of {what}, got {type(values).__name__}")
    values = list(values)
    if not all(_is_int(v) for v in values):
        raise ValueError(f"{name} must contain only integers")
    return values


class SamplingParams:
    """How one request is sampled (vllm.SamplingParams).

    Construction validates like vLLM and raises its messages as ``ValueError`` (wrong types as
    ``TypeError``), and applies vLLM's adjustments: a single ``stop`` string becomes a list, a
    ``seed`` of -1 means none, temperatures in (0, 0.01) are raised to 0.01, and greedy sampling
    (temperature 0) turns top_p / top_k / min_p off.
    """

    def __init__(
        self,
        n: int = 1,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repetition_penalty: float = 1.0,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        min_p: float = 0.0,
        seed: Optional[int] = None,
        stop: Optional[Union[str, list[str]]] = None,
        stop_token_ids: Optional[list[int]] = None,
        ignore_eos: bool = False,
        max_tokens: Optional[int] = 16,
        min_tokens: int = 0,
        logprobs: Optional[int] = None,
        prompt_logprobs: Optional[int] = None,
        detokenize: bool = True,
        skip_special_tokens: bool = True,
        spaces_between_special_tokens: bool = True,
        include_stop_str_in_output: bool = False,
        truncate_prompt_tokens: Optional[int] = None,
        output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE,
        logit_bias: Optional[dict[int, float]] = None,
        allowed_token_ids: Optional[list[int]] = None,
        bad_words: Optional[list[str]] = None,
        logprob_token_ids: Optional[list[int]] = None,
        repetition_detection: Optional[RepetitionDetectionParams] = None,
        structured_outputs: Optional[StructuredOutputsParams] = None,
        **unsupported: Any,
    ) -> None:
        for name, value in unsupported.items():
            if name not in _UNSUPPORTED:
                raise TypeError(f"SamplingParams got an unexpected keyword argument '{name}'")
            if value is not None:
                raise ValueError(f"{name}: {_UNSUPPORTED[name]} by Vellum; remove it")
        self.n = n
        self.presence_penalty = presence_penalty
        self.frequency_penalty = frequency_penalty
        self.repetition_penalty = repetition_penalty
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.min_p = min_p
        self.seed = seed
        self.stop = stop
        self.stop_token_ids = stop_token_ids
        self.ignore_eos = ignore_eos
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.logprobs = logprobs
        self.prompt_logprobs = prompt_logprobs
        self.detokenize = detokenize
        self.skip_special_tokens = skip_special_tokens
        self.spaces_between_special_tokens = spaces_between_special_tokens
        self.include_stop_str_in_output = include_stop_str_in_output
        self.truncate_prompt_tokens = truncate_prompt_tokens
        self.output_kind = output_kind
        self.logit_bias = logit_bias
        self.allowed_token_ids = allowed_token_ids
        self.bad_words = bad_words
        self.logprob_token_ids = logprob_token_ids
        self.repetition_detection = repetition_detection
        self.structured_outputs = structured_outputs
        self._post_init()

    @staticmethod
    def from_optional(**kwargs: Any) -> "SamplingParams":
        """Like the constructor, with None meaning the default for every field (vLLM's)."""
        return SamplingParams(**{k: v for k, v in kwargs.items() if v is not None})

    def _post_init(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        elif self.stop is None:
            self.stop = []
        else:
            self.stop = list(self.stop)
        if self.stop_token_ids is None:
            self.stop_token_ids = []
        if self.bad_words is None:
            self.bad_words = []
        if self.logprobs is True:
            self.logprobs = 1
        if self.prompt_logprobs is True:
            self.prompt_logprobs = 1
        cpp = self._to_cpp()
        # vLLM's __post_init__ adjustments, done by the C++ normalize() and reflected here.
        self.temperature = cpp.temperature
        self.top_p = cpp.top_p
        self.top_k = cpp.top_k
        self.min_p = cpp.min_p
        self.seed = cpp.seed

    def _check_types(self) -> None:
        if not _is_int(self.n):
            raise ValueError(f"n must be an int, but is of type {type(self.n)}")
        if not _is_int(self.top_k):
            raise TypeError(f"top_k must be an integer, got {type(self.top_k).__name__}")
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            if not _is_number(value):
                raise TypeError(f"{name} must be a number, got {type(value).__name__}")
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if not _is_int(value):
                raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
        for name in ("seed", "max_tokens", "logprobs", "prompt_logprobs", "truncate_prompt_tokens"):
            value = getattr(self, name)
            if value is not None and not _is_int(value):
                raise TypeError(f"{name} must be an integer or None, got {type(value).__name__}")
        for name in _BOOL_FIELDS:
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {type(getattr(self, name)).__name__}")
        if not all(isinstance(s, str) for s in self.stop):
            raise TypeError("stop must be a string or a list of strings")
        if not all(isinstance(s, str) for s in self.bad_words):
            raise TypeError("bad_words must be a list of strings")
        if not isinstance(self.output_kind, RequestOutputKind):
            raise TypeError(
                f"output_kind must be a RequestOutputKind, got {type(self.output_kind).__name__}"
            )

    def _to_cpp(self) -> _C.SamplingParams:
        """The validated, normalized C++ value (raises vLLM's ValueError messages)."""
        self._check_types()
        p = _C.SamplingParams()
        p.n = self.n
        p.presence_penalty = float(self.presence_penalty)
        p.frequency_penalty = float(self.frequency_penalty)
        p.repetition_penalty = float(self.repetition_penalty)
        p.temperature = float(self.temperature)
        p.top_p = float(self.top_p)
        p.top_k = self.top_k
        p.min_p = float(self.min_p)
        p.seed = self.seed
        p.stop = list(self.stop)
        p.stop_token_ids = _check_int_list("stop_token_ids", self.stop_token_ids)
        p.ignore_eos = self.ignore_eos
        p.max_tokens = self.max_tokens
        p.min_tokens = self.min_tokens
        p.logprobs = self.logprobs
        p.prompt_logprobs = self.prompt_logprobs
        p.detokenize = self.detokenize
        p.skip_special_tokens = self.skip_special_tokens
        p.spaces_between_special_tokens = self.spaces_between_special_tokens
        p.include_stop_str_in_output = self.include_stop_str_in_output
        p.truncate_prompt_tokens = self.truncate_prompt_tokens
        p.output_kind = _KIND_TO_C[self.output_kind]
        if self.logit_bias:
            bias = {}
            for token_id, value in self.logit_bias.items():
                if not _is_number(value):
                    raise TypeError(f"logit_bias values must be numbers, got {value!r}")
                bias[int(token_id)] = float(value)
            p.logit_bias = bias
        if self.allowed_token_ids is not None:
            p.allowed_token_ids = _check_int_list("allowed_token_ids", self.allowed_token_ids)
        p.bad_words = list(self.bad_words)
        if self.logprob_token_ids is not None:
            p.logprob_token_ids = _check_int_list("logprob_token_ids", self.logprob_token_ids)
        if self.repetition_detection is not None:
            rd = self.repetition_detection
            if isinstance(rd, dict):
                rd = RepetitionDetectionParams(**rd)
            c = _C.RepetitionDetectionParams()
            c.max_pattern_size = rd.max_pattern_size
            c.min_pattern_size = rd.min_pattern_size
            c.min_count = rd.min_count
            p.repetition_detection = c
        if self.structured_outputs is not None:
            so = self.structured_outputs
            if isinstance(so, dict):
                so = StructuredOutputsParams(**so)
            if not isinstance(so, StructuredOutputsParams):
                raise TypeError(
                    "structured_outputs must be a StructuredOutputsParams, got "
                    f"{type(so).__name__}"
                )
            p.structured_outputs = so._to_cpp()
        error = p.validate()
        if error is not None:
            param, message = error
            value = getattr(self, param, None)
            if param in _FLOAT_FIELDS and _is_int(value):
                # The C++ side holds a double; vLLM prints the value as the caller gave it.
                message = message.replace(f"got {float(value)!r}", f"got {value}")
            raise ValueError(message)
        p.normalize()
        return p

    @property
    def sampling_type(self) -> SamplingType:
        if self.temperature < 1e-5:
            return SamplingType.GREEDY
        if self.seed is not None:
            return SamplingType.RANDOM_SEED
        return SamplingType.RANDOM

    @property
    def output_text_buffer_length(self) -> int:
        if not self.stop or self.include_stop_str_in_output:
            return 0
        return max(len(s) for s in self.stop) - 1

    def clone(self) -> "SamplingParams":
        """A deep copy."""
        return SamplingParams(**self._fields())

    def _fields(self) -> dict[str, Any]:
        fields = dict(self.__dict__)
        for key in ("stop", "stop_token_ids", "bad_words"):
            fields[key] = list(fields[key])
        for key in ("allowed_token_ids", "logprob_token_ids"):
            if fields[key] is not None:
                fields[key] = list(fields[key])
        if fields["logit_bias"] is not None:
            fields["logit_bias"] = dict(fields["logit_bias"])
        return fields

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SamplingParams) and self._fields() == other._fields()

    def __repr__(self) -> str:
        f = self.__dict__
        return (
            f"SamplingParams(n={f['n']}, presence_penalty={f['presence_penalty']}, "
            f"frequency_penalty={f['frequency_penalty']}, "
            f"repetition_penalty={f['repetition_penalty']}, temperature={f['temperature']}, "
            f"top_p={f['top_p']}, top_k={f['top_k']}, min_p={f['min_p']}, seed={f['seed']}, "
            f"stop={f['stop']}, stop_token_ids={f['stop_token_ids']}, "
            f"bad_words={f['bad_words']}, include_stop_str_in_output="
            f"{f['include_stop_str_in_output']}, ignore_eos={f['ignore_eos']}, "
            f"max_tokens={f['max_tokens']}, min_tokens={f['min_tokens']}, "
            f"logprobs={f['logprobs']}, prompt_logprobs={f['prompt_logprobs']}, "
            f"skip_special_tokens={f['skip_special_tokens']}, "
            f"spaces_between_special_tokens={f['spaces_between_special_tokens']}, "
            f"truncate_prompt_tokens={f['truncate_prompt_tokens']})"
        )


@dataclass
class BeamSearchParams:
    """Parameters of LLM.beam_search (vllm.sampling_params.BeamSearchParams)."""

    beam_width: int
    max_tokens: int
    ignore_eos: bool = False
    temperature: float = 0.0
    length_penalty: float = 1.0
    include_stop_str_in_output: bool = False

    def _to_cpp(self) -> _C.SamplingParams:
        if not _is_int(self.beam_width) or self.beam_width < 1:
            raise ValueError(f"beam_width must be an integer >= 1, got {self.beam_width!r}")
        if not _is_int(self.max_tokens) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens!r}.")
        if self.temperature != 0.0:
            # vLLM ranks beams by the raw logprobs, which temperature does not change; anything
            # else would silently do something different from what was asked.
            raise ValueError(
                f"beam search ranks beams by raw logprobs; temperature must be 0.0, got "
                f"{self.temperature}"
            )
        if self.include_stop_str_in_output:
            raise ValueError(
                "include_stop_str_in_output is not supported with beam search (it has no stop "
                "strings); remove it"
            )
        p = _C.SamplingParams()
        p.use_beam_search = True
        p.n = self.beam_width
        p.max_tokens = self.max_tokens
        p.ignore_eos = bool(self.ignore_eos)
        p.temperature = 0.0
        p.length_penalty = float(self.length_penalty)
        p.output_kind = _C.RequestOutputKind.FINAL_ONLY
        error = p.validate()
        if error is not None:
            raise ValueError(error[1])
        p.normalize()
        return p
