"""LLM.generate: greedy equal to the CLI, prompts as text or ids, n > 1, seeds, logprobs,
stop strings and ids, errors."""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from conftest import ENGINE, cli_generate, make_model, vellum_cli
from vellum import LLM, Logprob, SamplingParams

GREEDY = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)


def test_greedy_equals_the_cli_on_the_tiny_model(llm, tiny_model):
    out = llm.generate(["Hello world", "Once upon"], GREEDY, use_tqdm=False)
    assert out[0].outputs[0].token_ids == cli_generate(tiny_model, "Hello world", 24)
    assert out[1].outputs[0].token_ids == cli_generate(tiny_model, "Once upon", 24)


def test_greedy_equals_the_cli_on_stories(stories_model):
    llm = LLM(model=stories_model, **ENGINE)
    out = llm.generate("Once upon a time", GREEDY, use_tqdm=False)[0]
    assert out.prompt_token_ids == [1, 403, 407, 261, 378]
    assert out.outputs[0].token_ids == cli_generate(stories_model, "Once upon a time", 24)
    assert out.outputs[0].text.startswith(", there was a little girl named Lily")


def test_token_id_prompts_equal_text_prompts(llm):
    text = llm.generate("Hello world", GREEDY, use_tqdm=False)[0]
    ids = llm.generate({"prompt_token_ids": text.prompt_token_ids}, GREEDY, use_tqdm=False)[0]
    assert ids.prompt is None
    assert ids.outputs[0].token_ids == text.outputs[0].token_ids
    as_dict = llm.generate([{"prompt": "Hello world"}], GREEDY, use_tqdm=False)[0]
    assert as_dict.outputs[0].token_ids == text.outputs[0].token_ids


def test_outputs_keep_prompt_order_and_params_per_prompt(llm):
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in (3, 7, 5)]
    out = llm.generate(["a", "b", "c"], params, use_tqdm=False)
    assert [o.prompt for o in out] == ["a", "b", "c"]
    assert [len(o.outputs[0].token_ids) for o in out] == [3, 7, 5]
    assert [int(o.request_id) for o in out] == sorted(int(o.request_id) for o in out)
    with pytest.raises(ValueError, match="The lengths of prompts and sampling_params must be the same."):
        llm.generate(["a", "b"], params, use_tqdm=False)


def test_n_greater_than_one(llm):
    out = llm.generate("Hello", SamplingParams(n=3, temperature=1.0, seed=1, max_tokens=12,
                                               ignore_eos=True), use_tqdm=False)[0]
    assert [c.index for c in out.outputs] == [0, 1, 2]
    assert all(len(c.token_ids) == 12 for c in out.outputs)
    assert len({tuple(c.token_ids) for c in out.outputs}) > 1  # the children sample apart


def test_seeded_sampling_is_reproducible(llm):
    p = SamplingParams(temperature=1.0, seed=42, max_tokens=16, ignore_eos=True)
    a = llm.generate(["x", "y"], p, use_tqdm=False)
    b = llm.generate(["x", "y"], p, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in a] == [o.outputs[0].token_ids for o in b]


def test_engine_seed_makes_unseeded_requests_reproducible(tiny_model):
    p = SamplingParams(temperature=1.0, max_tokens=16, ignore_eos=True)
    runs = []
    for _ in range(2):
        llm = LLM(model=tiny_model, **ENGINE, seed=5)
        runs.append([o.outputs[0].token_ids for o in llm.generate(["x", "y"], p, use_tqdm=False)])
    assert runs[0] == runs[1]


def test_logprobs(llm):
    out = llm.generate("Hello", SamplingParams(temperature=0, max_tokens=6, ignore_eos=True,
                                               logprobs=3), use_tqdm=False)[0]
    c = out.outputs[0]
    assert len(c.logprobs) == 6
    tokenizer = llm.get_tokenizer()
    total = 0.0
    for token_id, position in zip(c.token_ids, c.logprobs):
        assert isinstance(position, dict) and token_id in position
        # Greedy: the sampled token is the top-1, so the dict is exactly the top 3.
        assert sorted(l.rank for l in position.values()) == [1, 2, 3]
        lp = position[token_id]
        assert isinstance(lp, Logprob)
        assert lp.rank == 1  # greedy picks the most likely token
        assert lp.decoded_token == tokenizer.decode([token_id])
        assert list(position)[0] == token_id  # vLLM's order: the sampled token first
        assert all(l.logprob <= 0.0 for l in position.values())
        total += lp.logprob
    assert math.isclose(c.cumulative_logprob, total, rel_tol=1e-4, abs_tol=1e-4)
    plain = llm.generate("Hello", GREEDY, use_tqdm=False)[0].outputs[0]
    assert plain.logprobs is None and plain.cumulative_logprob is None


def test_prompt_logprobs(llm):
    out = llm.generate("Hello world again", SamplingParams(max_tokens=1, prompt_logprobs=2),
                       use_tqdm=False)[0]
    assert len(out.prompt_logprobs) == len(out.prompt_token_ids)
    assert out.prompt_logprobs[0] is None
    for token_id, position in zip(out.prompt_token_ids[1:], out.prompt_logprobs[1:]):
        assert token_id in position and position[token_id].rank >= 1


def test_stop_strings_and_stop_token_ids(llm):
    full = llm.generate("Hello", SamplingParams(temperature=0, max_tokens=32, ignore_eos=True),
                        use_tqdm=False)[0].outputs[0]
    stop = full.text[8:11]
    assert stop.strip(), "need a visible stop string from the greedy text"
    cut = full.text.index(stop)
    out = llm.generate("Hello", SamplingParams(temperature=0, max_tokens=32, ignore_eos=True,
                                               stop=stop), use_tqdm=False)[0].outputs[0]
    assert out.finish_reason == "stop" and out.stop_reason == stop
    assert out.text == full.text[:cut]
    kept = llm.generate("Hello", SamplingParams(temperature=0, max_tokens=32, ignore_eos=True,
                                                stop=[stop], include_stop_str_in_output=True),
                        use_tqdm=False)[0].outputs[0]
    assert kept.text == full.text[: cut + len(stop)]

    stop_id = full.token_ids[5]
    first = full.token_ids.index(stop_id)
    by_id = llm.generate("Hello", SamplingParams(temperature=0, max_tokens=32, ignore_eos=True,
                                                 stop_token_ids=[stop_id]), use_tqdm=False)[0]
    c = by_id.outputs[0]
    assert c.finish_reason == "stop" and c.stop_reason == stop_id
    assert c.token_ids == full.token_ids[: first + 1]


def test_max_tokens_finish_reason_and_defaults(llm):
    out = llm.generate("Hello", use_tqdm=False)[0]  # SamplingParams(): max_tokens 16
    c = out.outputs[0]
    assert len(c.token_ids) <= 16
    assert c.finish_reason == ("length" if len(c.token_ids) == 16 else "stop")
    assert out.metrics.arrival_time <= out.metrics.finished_time
    assert out.num_cached_tokens is not None


def test_hugging_face_directory_with_a_tokenizer_from_elsewhere(llm, tiny_model, tmp_path):
    model = make_model(tmp_path / "tiny-hf", "--format", "hf")  # the same weights, no tokenizer
    with pytest.raises(ValueError, match="no tokenizer.json"):
        LLM(model=model, **ENGINE)
    hf = LLM(model=model, tokenizer=tiny_model, load_format="safetensors", **ENGINE)
    greedy = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    got = hf.generate("Hello world", greedy, use_tqdm=False)[0].outputs[0]
    want = llm.generate("Hello world", greedy, use_tqdm=False)[0].outputs[0]
    assert got.token_ids == want.token_ids and got.text == want.text


def test_generation_config_sets_the_default_sampling_params(tiny_model, tmp_path):
    model = tmp_path / "tiny-hf"
    make_model(model, "--format", "hf")
    (model / "generation_config.json").write_text(
        json.dumps({"temperature": 0.6, "top_k": 20, "max_new_tokens": 5}))
    llm = LLM(model=str(model), skip_tokenizer_init=True, **ENGINE)
    assert llm.llm_engine.get_diff_sampling_param() == {
        "temperature": 0.6, "top_k": 20, "max_tokens": 5}
    defaults = llm.get_default_sampling_params()
    assert (defaults.temperature, defaults.top_k, defaults.max_tokens) == (0.6, 20, 5)
    out = llm.generate({"prompt_token_ids": [1, 5, 9]}, use_tqdm=False)[0].outputs[0]
    assert len(out.token_ids) <= 5  # SamplingParams(): the model's max_new_tokens, not 16

    # `vellum generate` without --max-tokens takes it too (an explicit --max-tokens wins).
    def cli_tokens(*extra: str) -> int:
        out = subprocess.run(
            [vellum_cli(), "generate", "--model", str(model), "--tokenizer", tiny_model,
             "--prompt", "Hello", "--ignore-eos", "--json", "--kv-cache-memory", "64MiB",
             "--threads", "1", *extra], check=True, capture_output=True, text=True)
        return len(json.loads(out.stdout)["generated_token_ids"])

    assert cli_tokens() == 5
    assert cli_tokens("--max-tokens", "9") == 9
    # generation_config="vllm" ignores the file: vLLM's own defaults.
    plain = LLM(model=str(model), skip_tokenizer_init=True, generation_config="vllm", **ENGINE)
    assert plain.llm_engine.get_diff_sampling_param() == {}
    assert plain.get_default_sampling_params().max_tokens == 16


def test_truncate_prompt_tokens(llm):
    ids = llm.get_tokenizer().encode("one two three four five six seven")
    out = llm.generate("one two three four five six seven",
                       SamplingParams(max_tokens=2, truncate_prompt_tokens=3), use_tqdm=False)[0]
    assert out.prompt_token_ids == ids[-3:]


def test_errors_from_the_engine_are_vllms_messages(llm):
    with pytest.raises(ValueError, match="^Requested sample logprobs of 21, which is greater than "
                                         "max allowed: 20$"):
        llm.generate("Hello", SamplingParams(logprobs=21), use_tqdm=False)
    vocab = llm.get_tokenizer().vocab_size
    with pytest.raises(ValueError, match=r"token_id\(s\) \[%d\] in stop_token_ids contain "
                                         r"out-of-vocab token ids" % vocab):
        llm.generate("Hello", SamplingParams(stop_token_ids=[vocab]), use_tqdm=False)
    with pytest.raises(ValueError, match="out of vocabulary"):
        llm.generate({"prompt_token_ids": [1, vocab + 5]}, use_tqdm=False)
    with pytest.raises(TypeError, match="prompt_token_ids"):
        llm.generate([[1, 2, 3]], use_tqdm=False)
    with pytest.raises(ValueError, match="multi-modal inputs are not supported"):
        llm.generate({"prompt": "x", "multi_modal_data": {"image": None}}, use_tqdm=False)
    # A failed batch leaves nothing behind.
    assert not llm.llm_engine.has_unfinished_requests()


def test_engine_options_errors(tiny_model, tmp_path):
    with pytest.raises(OSError, match="model '.*missing.gguf' does not exist"):
        LLM(model=str(tmp_path / "missing.gguf"))
    with pytest.raises(ValueError, match="float8"):
        LLM(model=tiny_model, dtype="float8", **ENGINE)
    with pytest.raises(ValueError, match="gpu_memory_utilization is a GPU option"):
        LLM(model=tiny_model, gpu_memory_utilization=0.9)
    # A hub name is not a local path: nothing is downloaded.
    with pytest.raises(OSError, match="'meta-llama/Llama-2-7b-hf' does not exist"):
        LLM(model=tiny_model, tokenizer="meta-llama/Llama-2-7b-hf", **ENGINE)
    with pytest.raises(ValueError, match="load_format='pt' is not supported"):
        LLM(model=tiny_model, load_format="pt")
    with pytest.raises(ValueError, match="--load-format is safetensors"):
        LLM(model=tiny_model, load_format="safetensors", **ENGINE)
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['not_an_option'\\]"):
        LLM(model=tiny_model, not_an_option=1)


def test_engine_options_reach_the_engine(tiny_model):
    llm = LLM(model=tiny_model, **ENGINE, max_model_len=128, block_size=32,
              max_num_seqs=4, enable_prefix_caching=False)
    assert llm.llm_engine.max_model_len == 128
    assert llm.llm_engine.get_stats().block_size == 32
    with pytest.raises(ValueError, match="n \\(5\\) must not exceed --max-num-seqs \\(4\\)"):
        llm.generate("x", SamplingParams(n=5), use_tqdm=False)
    out = llm.generate(["a"] * 6, SamplingParams(max_tokens=4), use_tqdm=False)
    assert len(out) == 6


def test_progress_bar_is_on_by_default(llm, capsys):
    llm.generate(["a", "b"], SamplingParams(max_tokens=2))
    err = capsys.readouterr().err
    assert "Processed prompts" in err and "2/2" in err and "est. speed input" in err
    llm.generate(["a"], SamplingParams(max_tokens=2), use_tqdm=False)
    assert "Processed prompts" not in capsys.readouterr().err


def test_tokenizer(llm):
    tok = llm.get_tokenizer()
    ids = tok.encode("Hello world")
    assert tok.decode(ids, skip_special_tokens=True) == "Hello world"
    assert tok("Hello world").input_ids == ids
    assert tok.encode("Hello world", add_special_tokens=False) == ids[1:]  # BOS first
    assert isinstance(tok.convert_ids_to_tokens(ids[1]), str)
    assert tok.bos_token_id == ids[0]
    assert tok.eos_token_id is not None and tok.eos_token == tok.convert_ids_to_tokens(tok.eos_token_id)


def test_stories_special_tokens(stories_model):
    tok = LLM(model=stories_model, **ENGINE).get_tokenizer()
    assert (tok.bos_token_id, tok.eos_token_id) == (1, 2)
    assert (tok.bos_token, tok.eos_token) == ("<s>", "</s>")


def test_structured_outputs_constrain_the_output(llm):
    import re

    from vellum import StructuredOutputsParams

    regex = SamplingParams(temperature=0.8, seed=1, max_tokens=30,
                           structured_outputs=StructuredOutputsParams(regex="[a-c]{3}-[0-9]{2}"))
    choice = SamplingParams(temperature=0.8, seed=2, max_tokens=10,
                            structured_outputs=StructuredOutputsParams(choice=["alpha", "beta"]))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    as_json = SamplingParams(temperature=0.8, seed=3, max_tokens=40,
                             structured_outputs=StructuredOutputsParams(json=schema))
    outs = llm.generate(["Hello"] * 3, [regex, choice, as_json], use_tqdm=False)
    assert re.fullmatch("[a-c]{3}-[0-9]{2}", outs[0].outputs[0].text), outs[0].outputs[0].text
    assert outs[1].outputs[0].text in ("alpha", "beta")
    value = json.loads(outs[2].outputs[0].text)
    assert isinstance(value["n"], int) and set(value) == {"n"}


def test_hugging_face_repo_id_from_the_local_cache(tiny_model, tmp_path, monkeypatch):
    """LLM(model="ORG/NAME") loads the repo's snapshot from the local hub cache (offline)."""
    import shutil

    snapshot = tmp_path / "hub" / "models--TestOrg--Tiny-GGUF" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0123abc")
    shutil.copyfile(tiny_model, snapshot / "tiny-f32.gguf")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    expected = LLM(model=tiny_model, **ENGINE).generate(
        "Hello", SamplingParams(temperature=0, max_tokens=6), use_tqdm=False)
    llm = LLM(model="TestOrg/Tiny-GGUF", **ENGINE)
    out = llm.generate("Hello", SamplingParams(temperature=0, max_tokens=6), use_tqdm=False)
    assert out[0].outputs[0].token_ids == expected[0].outputs[0].token_ids
    # Two GGUF files: gguf_file chooses, and without it the error lists them.
    shutil.copyfile(tiny_model, snapshot / "tiny-copy.gguf")
    with pytest.raises(ValueError, match="tiny-copy.gguf, tiny-f32.gguf; choose one with --gguf-file"):
        LLM(model="TestOrg/Tiny-GGUF", **ENGINE)
    LLM(model="TestOrg/Tiny-GGUF", gguf_file="tiny-copy.gguf", **ENGINE)
    with pytest.raises(OSError, match="'TestOrg/Absent' does not exist as a local path or in the "
                                      "local Hugging Face cache; tried .*models--TestOrg--Absent"):
        LLM(model="TestOrg/Absent", **ENGINE)
