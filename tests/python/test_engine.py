"""LLMEngine: add_request / step / abort_request / has_unfinished_requests (vLLM's loop)."""

from __future__ import annotations

import pytest

from conftest import ENGINE
from vellum import EngineArgs, LLMEngine, RequestOutputKind, SamplingParams


@pytest.fixture(scope="module")
def engine(tiny_model):
    return LLMEngine.from_engine_args(EngineArgs(model=tiny_model, **ENGINE))


def run(engine):
    outputs = []
    while engine.has_unfinished_requests():
        outputs.extend(engine.step())
    return outputs


def test_step_loop_with_cumulative_outputs(engine, llm):
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    engine.add_request("a", "Hello world", params)
    engine.add_request("b", {"prompt_token_ids": [1, 20, 30]}, params)
    assert engine.has_unfinished_requests()
    assert engine.get_num_unfinished_requests() == 2
    outputs = run(engine)
    a = [o for o in outputs if o.request_id == "a"]
    assert [len(o.outputs[0].token_ids) for o in a] == list(range(1, 9))  # one more each step
    assert [o.finished for o in a] == [False] * 7 + [True]
    assert a[-1].outputs[0].text.startswith(a[3].outputs[0].text)
    assert engine.get_num_unfinished_requests() == 0
    # Same tokens as LLM.generate on the same model.
    expected = llm.generate("Hello world", params, use_tqdm=False)[0].outputs[0].token_ids
    assert a[-1].outputs[0].token_ids == expected


def test_delta_outputs_add_up(engine):
    engine.add_request("d", "Hello world", SamplingParams(
        temperature=0, max_tokens=8, ignore_eos=True, output_kind=RequestOutputKind.DELTA))
    engine.add_request("c", "Hello world", SamplingParams(temperature=0, max_tokens=8,
                                                          ignore_eos=True))
    outputs = run(engine)
    delta = [o.outputs[0] for o in outputs if o.request_id == "d"]
    final = [o.outputs[0] for o in outputs if o.request_id == "c"][-1]
    assert sum((d.token_ids for d in delta), []) == final.token_ids
    assert "".join(d.text for d in delta) == final.text


def test_abort_request(engine):
    params = SamplingParams(temperature=0, max_tokens=200, ignore_eos=True)
    engine.add_request("long", "Hello", params)
    engine.add_request("other", "Hello", SamplingParams(temperature=0, max_tokens=4,
                                                        ignore_eos=True))
    engine.step()
    engine.step()
    engine.abort_request("long")
    engine.abort_request(["not-a-request"])  # unknown ids are ignored
    outputs = run(engine)
    final = [o for o in outputs if o.request_id == "long" and o.finished]
    assert len(final) == 1 and final[0].outputs[0].finish_reason == "abort"
    assert len(final[0].outputs[0].token_ids) < 200
    other = [o for o in outputs if o.request_id == "other" and o.finished]
    assert other[0].outputs[0].finish_reason == "length"
    stats = engine.get_stats()
    assert stats.num_running == 0 and stats.num_waiting == 0 and stats.kv_cache_usage == 0.0


def test_add_request_errors(engine):
    engine.add_request("dup", "x", SamplingParams(max_tokens=2))
    with pytest.raises(ValueError, match="Request id dup already running."):
        engine.add_request("dup", "x", SamplingParams(max_tokens=2))
    with pytest.raises(ValueError, match="Requested prompt logprobs of 30"):
        engine.add_request("bad", "x", SamplingParams(prompt_logprobs=30))
    with pytest.raises(ValueError, match="LoRA"):
        engine.add_request("lora", "x", SamplingParams(), lora_request=object())
    too_long = {"prompt_token_ids": [5] * (engine.max_model_len + 1)}
    with pytest.raises(ValueError, match="maximum"):
        engine.add_request("long", too_long, SamplingParams())
    run(engine)
    assert engine.get_num_unfinished_requests() == 0
