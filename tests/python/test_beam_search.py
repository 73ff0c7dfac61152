"""LLM.beam_search (vLLM's BeamSearchParams / BeamSearchOutput)."""

from __future__ import annotations

import pytest

from vellum import BeamSearchOutput, BeamSearchParams, SamplingParams


def test_beam_search_outputs(llm):
    params = BeamSearchParams(beam_width=3, max_tokens=6, ignore_eos=True)
    outputs = llm.beam_search([{"prompt": "Hello"}, "World"], params)
    assert len(outputs) == 2 and all(isinstance(o, BeamSearchOutput) for o in outputs)
    prompt_ids = llm.get_tokenizer().encode("Hello")
    seqs = outputs[0].sequences
    assert len(seqs) == 3
    for s in seqs:
        assert s.tokens[: len(prompt_ids)] == prompt_ids  # vLLM: prompt + generated ids
        assert len(s.tokens) == len(prompt_ids) + 6
        assert s.text == llm.get_tokenizer().decode(s.tokens[len(prompt_ids):],
                                                    skip_special_tokens=True)
        assert s.cum_logprob < 0.0
    assert [s.cum_logprob for s in seqs] == sorted((s.cum_logprob for s in seqs), reverse=True)
    assert len({tuple(s.tokens) for s in seqs}) == 3


def test_width_one_is_greedy(llm):
    beam = llm.beam_search(["Hello"], BeamSearchParams(beam_width=1, max_tokens=8,
                                                       ignore_eos=True))[0].sequences[0]
    greedy = llm.generate("Hello", SamplingParams(temperature=0, max_tokens=8, ignore_eos=True),
                          use_tqdm=False)[0]
    assert beam.tokens == greedy.prompt_token_ids + greedy.outputs[0].token_ids


def test_beam_search_errors(llm):
    with pytest.raises(TypeError, match="BeamSearchParams"):
        llm.beam_search(["Hello"], SamplingParams())
    with pytest.raises(ValueError, match="temperature must be 0.0"):
        llm.beam_search(["Hello"], BeamSearchParams(beam_width=2, max_tokens=4, temperature=1.0))
    assert not llm.llm_engine.has_unfinished_requests()
