"""SamplingParams: vLLM's defaults, adjustments and validation messages (no model needed)."""

from __future__ import annotations

import pytest

from vellum import BeamSearchParams, RequestOutputKind, SamplingParams, SamplingType


def test_defaults_are_vllms():
    p = SamplingParams()
    assert (p.n, p.temperature, p.top_p, p.top_k, p.min_p) == (1, 1.0, 1.0, 0, 0.0)
    assert (p.presence_penalty, p.frequency_penalty, p.repetition_penalty) == (0.0, 0.0, 1.0)
    assert p.max_tokens == 16 and p.min_tokens == 0
    assert p.seed is None and p.logprobs is None and p.prompt_logprobs is None
    assert p.stop == [] and p.stop_token_ids == [] and p.bad_words == []
    assert p.ignore_eos is False and p.include_stop_str_in_output is False
    assert p.skip_special_tokens is True and p.spaces_between_special_tokens is True
    assert p.detokenize is True and p.output_kind is RequestOutputKind.CUMULATIVE
    assert p.logit_bias is None and p.allowed_token_ids is None
    assert p.sampling_type is SamplingType.RANDOM


def test_post_init_adjustments():
    assert SamplingParams(stop="x").stop == ["x"]
    assert SamplingParams(seed=-1).seed is None
    assert SamplingParams(seed=7).sampling_type is SamplingType.RANDOM_SEED
    assert SamplingParams(temperature=0.005).temperature == 0.01
    greedy = SamplingParams(temperature=0, top_p=0.5, top_k=5, min_p=0.3)
    assert (greedy.top_p, greedy.top_k, greedy.min_p) == (1.0, 0, 0.0)
    assert greedy.sampling_type is SamplingType.GREEDY
    assert SamplingParams(logprobs=True).logprobs == 1
    assert SamplingParams(stop=["ab", "abcd"]).output_text_buffer_length == 3


# (kwargs, vLLM's message) — vllm/sampling_params.py::_verify_args / _verify_greedy_sampling.
INVALID = [
    ({"n": 0}, "n must be at least 1, got 0."),
    ({"n": 16385}, "n must be at most 16384, got 16385. To increase this limit, set the "
                   "VLLM_MAX_N_SEQUENCES environment variable."),
    ({"n": 2.0}, "n must be an int, but is of type <class 'float'>"),
    ({"presence_penalty": 2.5}, "presence_penalty must be in [-2, 2], got 2.5."),
    ({"frequency_penalty": -3}, "frequency_penalty must be in [-2, 2], got -3."),
    ({"frequency_penalty": -3.0}, "frequency_penalty must be in [-2, 2], got -3.0."),
    ({"temperature": -1}, "temperature must be non-negative, got -1."),
    ({"repetition_penalty": 0.0}, "repetition_penalty must be greater than zero, got 0.0."),
    ({"temperature": -1.0}, "temperature must be non-negative, got -1.0."),
    ({"top_p": 0.0}, "top_p must be in (0, 1], got 0.0."),
    ({"top_p": 1.5}, "top_p must be in (0, 1], got 1.5."),
    ({"top_k": -2}, "top_k must be 0 (disable), or at least 1, got -2."),
    ({"min_p": 1.5}, "min_p must be in [0, 1], got 1.5."),
    ({"max_tokens": 0}, "max_tokens must be at least 1, got 0."),
    ({"min_tokens": -1}, "min_tokens must be greater than or equal to 0, got -1."),
    ({"min_tokens": 20, "max_tokens": 10},
     "min_tokens must be less than or equal to max_tokens=10, got 20."),
    ({"logprobs": -2}, "logprobs must be non-negative or -1, got -2."),
    ({"prompt_logprobs": -5}, "prompt_logprobs must be non-negative or -1, got -5."),
    ({"stop": ["a", ""]}, "stop cannot contain an empty string."),
    ({"stop": ["a"], "detokenize": False},
     "stop strings are only supported when detokenize is True. Set detokenize=True to use stop."),
    ({"bad_words": ["x", ""]}, "bad_words cannot contain an empty string. Got bad_words=['x', '']"),
    ({"temperature": 0.0, "n": 2}, "n must be 1 when using greedy sampling, got 2."),
    ({"stop_token_ids": [1, "2"]}, "stop_token_ids must contain only integers"),
    ({"truncate_prompt_tokens": 0},
     "truncate_prompt_tokens must be an integer >= 1 or -1, got 0"),
]


@pytest.mark.parametrize("kwargs,message", INVALID, ids=[m[:40] for _, m in INVALID])
def test_validation_errors_are_vllms_messages(kwargs, message):
    with pytest.raises(ValueError) as e:
        SamplingParams(**kwargs)
    assert str(e.value) == message


def test_wrong_types_are_type_errors():
    with pytest.raises(TypeError, match="top_k must be an integer, got float"):
        SamplingParams(top_k=1.5)
    with pytest.raises(TypeError, match="temperature must be a number, got str"):
        SamplingParams(temperature="hot")
    with pytest.raises(TypeError, match="unexpected keyword argument 'best_of'"):
        SamplingParams(best_of=2)


def test_unsupported_features_are_refused_not_ignored():
    with pytest.raises(ValueError, match="guided_decoding: .*not supported by Vellum"):
        SamplingParams(guided_decoding={"regex": "a+"})
    with pytest.raises(ValueError, match="logits_processors: .*not supported"):
        SamplingParams(logits_processors=[lambda ids, logits: logits])
    SamplingParams(structured_outputs=None)  # the neutral value is accepted


def test_structured_outputs_take_exactly_one_constraint():
    from vellum import StructuredOutputsParams

    SamplingParams(structured_outputs=StructuredOutputsParams(regex="a+"))
    SamplingParams(structured_outputs={"choice": ["yes", "no"]})
    with pytest.raises(ValueError):
        SamplingParams(structured_outputs=StructuredOutputsParams(regex="a+", choice=["a"]))
    with pytest.raises(ValueError):
        SamplingParams(structured_outputs=StructuredOutputsParams())
    with pytest.raises(TypeError, match="StructuredOutputsParams"):
        SamplingParams(structured_outputs="a+")


def test_changes_after_construction_are_validated_when_used(llm):
    p = SamplingParams()
    p.top_p = 2.0
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\], got 2.0."):
        llm.generate("Hello", p, use_tqdm=False)


def test_clone_and_equality():
    p = SamplingParams(temperature=0.5, stop=["x"], logit_bias={3: 1.0}, seed=3)
    q = p.clone()
    assert q == p and q is not p
    q.stop.append("y")
    assert p.stop == ["x"]
    assert "temperature=0.5" in repr(p)


def test_beam_search_params():
    assert BeamSearchParams(beam_width=2, max_tokens=4).length_penalty == 1.0
    with pytest.raises(ValueError, match="max_tokens must be at least 1"):
        BeamSearchParams(beam_width=2, max_tokens=0)._to_cpp()
    with pytest.raises(ValueError, match="temperature must be 0.0"):
        BeamSearchParams(beam_width=2, max_tokens=4, temperature=0.7)._to_cpp()
