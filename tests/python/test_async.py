"""AsyncLLM: streaming RequestOutputs through asyncio, concurrency, abort, errors."""

from __future__ import annotations

import asyncio

import pytest

from conftest import ENGINE
from vellum import AsyncEngineArgs, AsyncLLM, AsyncLLMEngine, RequestOutputKind, SamplingParams


@pytest.fixture(scope="module")
def engine(tiny_model):
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=tiny_model,
                                                       **ENGINE))
    yield engine
    engine.shutdown()


def collect(engine, prompt, params, request_id):
    async def main():
        return [out async for out in engine.generate(prompt, params, request_id)]
    return asyncio.run(main())


def test_streams_cumulative_outputs_equal_to_llm(engine, llm):
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    outputs = collect(engine, "Hello world", params, "r1")
    assert len(outputs) == 12 and outputs[-1].finished
    assert not any(o.finished for o in outputs[:-1])
    assert [len(o.outputs[0].token_ids) for o in outputs] == list(range(1, 13))
    expected = llm.generate("Hello world", params, use_tqdm=False)[0].outputs[0]
    assert outputs[-1].outputs[0].token_ids == expected.token_ids
    assert outputs[-1].outputs[0].text == expected.text
    assert outputs[-1].prompt == "Hello world"


def test_delta_and_final_only(engine):
    delta = collect(engine, "Hello", SamplingParams(temperature=0, max_tokens=10, ignore_eos=True,
                                                    output_kind=RequestOutputKind.DELTA), "d")
    final = collect(engine, "Hello", SamplingParams(temperature=0, max_tokens=10, ignore_eos=True,
                                                    output_kind=RequestOutputKind.FINAL_ONLY), "f")
    assert len(final) == 1
    assert sum((o.outputs[0].token_ids for o in delta), []) == final[0].outputs[0].token_ids
    assert "".join(o.outputs[0].text for o in delta) == final[0].outputs[0].text


def test_concurrent_requests_and_a_responsive_loop(engine):
    async def one(i):
        params = SamplingParams(temperature=0, max_tokens=8 + i, ignore_eos=True)
        last = None
        async for out in engine.generate(f"prompt {i}", params, f"c{i}"):
            last = out
        return last

    async def main():
        ticks = 0
        done = False

        async def ticker():
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        results = await asyncio.gather(*(one(i) for i in range(6)))
        done = True
        await task
        return results, ticks

    results, ticks = asyncio.run(main())
    assert [len(r.outputs[0].token_ids) for r in results] == [8 + i for i in range(6)]
    assert [r.request_id for r in results] == [f"c{i}" for i in range(6)]
    assert ticks > 6  # the event loop kept running while the engine worked


def test_leaving_the_loop_aborts_the_request(engine):
    async def main():
        params = SamplingParams(temperature=0, max_tokens=500, ignore_eos=True)
        before = (await engine.get_stats()).generation_tokens
        seen = 0
        async for _ in engine.generate("Hello", params, "early"):
            seen += 1
            if seen == 3:
                break
        # The engine frees it within a step; wait for that.
        for _ in range(500):
            if engine.get_num_unfinished_requests() == 0:
                break
            await asyncio.sleep(0.01)
        return seen, (await engine.get_stats()).generation_tokens - before

    seen, generated = asyncio.run(main())
    assert seen == 3
    assert generated < 400, "the request ran on after the loop was left"
    assert engine.get_num_unfinished_requests() == 0
    stats = asyncio.run(engine.get_stats())
    assert stats.num_running == 0 and stats.kv_cache_usage == 0.0


def test_cancelling_the_task_aborts_the_request(engine):
    """What a web framework does when the client goes away."""
    async def main():
        params = SamplingParams(temperature=0, max_tokens=500, ignore_eos=True)
        started = asyncio.Event()

        async def consume():
            async for _ in engine.generate("Hello", params, "cancelled"):
                started.set()

        before = (await engine.get_stats()).generation_tokens
        task = asyncio.create_task(consume())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(500):
            if engine.get_num_unfinished_requests() == 0:
                break
            await asyncio.sleep(0.01)
        return (await engine.get_stats()).generation_tokens - before

    generated = asyncio.run(main())
    assert engine.get_num_unfinished_requests() == 0
    assert generated < 400, "the request ran on after its task was cancelled"


def test_abort_from_another_task_ends_the_stream(engine):
    async def main():
        params = SamplingParams(temperature=0, max_tokens=500, ignore_eos=True)
        outputs = []
        async for out in engine.generate("Hello", params, "to-abort"):
            outputs.append(out)
            if len(outputs) == 2:
                await engine.abort("to-abort")
        return outputs

    outputs = asyncio.run(main())
    assert outputs[-1].finished and outputs[-1].outputs[0].finish_reason == "abort"
    assert len(outputs[-1].outputs[0].token_ids) < 500


def test_invalid_requests_raise_value_error(engine):
    with pytest.raises(ValueError, match="Requested sample logprobs of 25"):
        collect(engine, "Hello", SamplingParams(logprobs=25), "bad")

    async def duplicate():
        params = SamplingParams(temperature=0, max_tokens=50, ignore_eos=True)
        first = engine.generate("Hello", params, "same")
        await first.__anext__()
        with pytest.raises(ValueError, match="Request id same already running."):
            await engine.generate("Hello", params, "same").__anext__()
        await first.aclose()

    asyncio.run(duplicate())


def test_tokenizer_and_alias(engine):
    tok = asyncio.run(engine.get_tokenizer())
    assert tok.decode(tok.encode("Hello world"), skip_special_tokens=True) == "Hello world"
    assert AsyncLLMEngine is AsyncLLM
    assert engine.is_running and not engine.errored


def test_shutdown_refuses_new_requests(tiny_model):
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=tiny_model,
                                                       **ENGINE))
    engine.shutdown()
    assert not engine.is_running
    with pytest.raises(RuntimeError, match="shut down"):
        collect(engine, "Hello", SamplingParams(max_tokens=2), "late")


def test_load_failure_is_an_exception(tmp_path):
    with pytest.raises(ValueError, match="does not exist; pass a GGUF file"):
        AsyncLLM.from_engine_args(AsyncEngineArgs(model=str(tmp_path / "missing.gguf")))
