"""Speculative decoding from Python (issue 36): LLM(speculative_config=...) with vLLM's keys."""

from __future__ import annotations

import pytest

from conftest import ENGINE

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
         "prompt_lookup_max": 5, "gate": "always"}
PROMPT = "Lily and Tom went to the park. Lily and Tom"


def greedy(max_tokens: int):
    from vellum import SamplingParams

    return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)


def test_greedy_output_is_the_same_with_ngram_and_suffix(stories_model):
    from vellum import LLM

    plain = LLM(model=stories_model, **ENGINE).generate([PROMPT], greedy(80))[0]
    for spec in (NGRAM, '{"method": "suffix", "gate": "always"}'):
        llm = LLM(model=stories_model, speculative_config=spec, **ENGINE)
        out = llm.generate([PROMPT], greedy(80))[0]
        assert out.outputs[0].token_ids == plain.outputs[0].token_ids
        stats = llm.llm_engine.get_stats()
        assert stats.spec_num_draft_tokens > 0
        assert 0 < stats.spec_num_accepted_tokens < stats.spec_num_draft_tokens
        assert sum(stats.spec_num_accepted_tokens_per_pos) == stats.spec_num_accepted_tokens


def test_bad_speculative_configs_are_refused(tiny_model):
    from vellum import LLM

    with pytest.raises(ValueError, match='method "eagle" is not supported'):
        LLM(model=tiny_model, speculative_config={"method": "eagle"}, **ENGINE)
    with pytest.raises(ValueError, match="speculative_config must be a dict"):
        LLM(model=tiny_model, speculative_config=4, **ENGINE)
