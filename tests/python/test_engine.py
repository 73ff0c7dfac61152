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


def test_quantized_kv_cache_types():
    """kv_cache_dtype / cache_type_k / cache_type_v reach the engine: the stats name the storage,
    a q8_0 cache holds more blocks in the same bytes, and an unknown type is refused."""
    from conftest import shared_model

    model = shared_model("arch/llama-f16.gguf")  # head dim 64: whole 32-value q8_0 blocks

    def stats_of(**kv):
        engine = LLMEngine.from_engine_args(EngineArgs(model=model, **ENGINE, **kv))
        engine.add_request("r", {"prompt_token_ids": [5, 6, 7, 8]}, SamplingParams(max_tokens=4))
        outputs = run(engine)
        assert len(outputs[-1].outputs[0].token_ids) == 4
        return engine.get_stats()

    bf16 = stats_of(kv_cache_dtype="bf16")
    q8 = stats_of(kv_cache_dtype="q8_0")
    mixed = stats_of(kv_cache_dtype="bf16", cache_type_k="q8_0")
    assert (bf16.kv_cache_dtype, q8.kv_cache_dtype) == ("bf16", "q8_0")
    assert mixed.kv_cache_dtype == "k=q8_0,v=bf16"
    assert q8.num_kv_blocks > 1.8 * bf16.num_kv_blocks
    with pytest.raises(Exception, match="q4_9"):
        stats_of(kv_cache_dtype="q4_9")
