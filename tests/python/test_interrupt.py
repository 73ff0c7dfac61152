"""Ctrl-C during generate aborts the batch, raises KeyboardInterrupt and leaves the LLM usable;
the GIL is released while the engine computes."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from vellum import SamplingParams

LONG = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
SHORT = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)


def check_engine_is_clean_and_usable(llm, expected):
    engine = llm.llm_engine
    assert not engine.has_unfinished_requests()
    assert engine.get_num_unfinished_requests() == 0
    stats = engine.get_stats()
    assert stats.num_running == 0 and stats.num_waiting == 0 and stats.kv_cache_usage == 0.0
    again = llm.generate(["Hello", "World"], SHORT, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in again] == expected


def test_sigint_from_the_progress_bar_hook(llm):
    """A real SIGINT, delivered at a known point: when the first request finishes."""
    expected = [o.outputs[0].token_ids for o in llm.generate(["Hello", "World"], SHORT,
                                                             use_tqdm=False)]

    class InterruptingBar:
        def __init__(self, **kwargs):
            self.format_dict = {"elapsed": 1.0}
            self.postfix = ""

        def update(self, n):
            os.kill(os.getpid(), signal.SIGINT)

        def close(self):
            pass

    params = [SHORT] + [LONG] * 7
    with pytest.raises(KeyboardInterrupt):
        llm.generate(["Hello"] * 8, params, use_tqdm=InterruptingBar)
    check_engine_is_clean_and_usable(llm, expected)


def test_sigint_while_the_engine_steps(llm):
    """SIGINT from another thread while the main thread is inside the engine's steps."""
    expected = [o.outputs[0].token_ids for o in llm.generate(["Hello", "World"], SHORT,
                                                             use_tqdm=False)]
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            llm.generate(["Hello"] * 64, LONG, use_tqdm=False)
    finally:
        timer.cancel()
    assert time.monotonic() - start < 30  # interrupted, not run to the end
    check_engine_is_clean_and_usable(llm, expected)


def test_the_gil_is_released_while_the_engine_steps(llm):
    """With a 10 s switch interval a thread holding the GIL would keep it; the main thread gets it
    back at once only if step() releases it while the engine computes."""
    engine = llm.llm_engine
    for i in range(32):
        engine.add_request(f"gil-{i}", "Hello", LONG)
    stop = threading.Event()

    def step_until_stopped():
        while not stop.is_set() and engine.has_unfinished_requests():
            engine.step()

    old = sys.getswitchinterval()
    sys.setswitchinterval(10.0)
    try:
        worker = threading.Thread(target=step_until_stopped)
        worker.start()
        start = time.monotonic()
        time.sleep(0.2)  # the worker takes the GIL and steps
        # Waking up needs the GIL back: at once if the worker is inside step() without it, else
        # only when the worker lets it go (10 s) or finishes.
        elapsed = time.monotonic() - start
        busy = worker.is_alive()
        stop.set()
        worker.join()
    finally:
        sys.setswitchinterval(old)
        engine.abort_request([f"gil-{i}" for i in range(32)])
        while engine.has_unfinished_requests():
            engine.step()
    assert busy, "the requests finished before the check; make them longer"
    assert elapsed < 2.0, f"the main thread waited {elapsed:.1f} s for the GIL"
