"""vLLM's quick-start, unchanged but for the model path."""

from __future__ import annotations

import subprocess
import sys
import textwrap

QUICKSTART = textwrap.dedent(
    """
    from vellum import LLM, SamplingParams
    prompts = ["Hello, my name is", "The capital of France is"]
    sampling_params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=100)
    llm = LLM(model=MODEL)
    outputs = llm.generate(prompts, sampling_params)
    for output in outputs:
        print(output.prompt, output.outputs[0].text)
    """
)


def run_quickstart(model: str, kv_bytes: int | None = None) -> tuple[list, int]:
    namespace = {"MODEL": model}
    code = QUICKSTART
    if kv_bytes is not None:  # the shared CI machine: a small KV cache instead of a memory share
        code = code.replace("LLM(model=MODEL)", f"LLM(model=MODEL, kv_cache_memory_bytes={kv_bytes})")
    exec(compile(code, "quickstart", "exec"), namespace)
    return namespace["outputs"], namespace["llm"].get_tokenizer().eos_token_id


def check_outputs(outputs, eos_token_id) -> None:
    assert [o.prompt for o in outputs] == ["Hello, my name is", "The capital of France is"]
    for o in outputs:
        assert o.finished
        assert o.request_id in ("0", "1")
        assert len(o.outputs) == 1
        c = o.outputs[0]
        assert isinstance(c.text, str) and c.text
        assert 1 <= len(c.token_ids) <= 100
        assert c.finish_reason in ("stop", "length")
        if c.finish_reason == "length":
            assert len(c.token_ids) == 100
        else:  # EOS (stop_reason None) or another end-of-generation token, maybe the 100th
            assert c.token_ids[-1] == (eos_token_id if c.stop_reason is None else c.stop_reason)


def test_quickstart_on_tiny_model(tiny_model):
    check_outputs(*run_quickstart(tiny_model, 64 << 20))


def test_quickstart_on_stories(stories_model):
    outputs, eos_token_id = run_quickstart(stories_model, 64 << 20)
    check_outputs(outputs, eos_token_id)
    # A model trained on children's stories writes English words.
    text = " ".join(o.outputs[0].text for o in outputs)
    assert any(word in text for word in (" the ", " a ", " was ", " and ")), text


def test_quickstart_as_a_script_with_the_default_memory(stories_model, tmp_path):
    """Exactly the quick-start's code (default KV sizing), run as a program, printing text."""
    script = tmp_path / "quickstart.py"
    script.write_text(f"MODEL = {stories_model!r}\n" + QUICKSTART)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    lines = [l for l in result.stdout.splitlines() if l.startswith(("Hello, my name is",
                                                                      "The capital of France is"))]
    assert len(lines) == 2, result.stdout
    assert "Processed prompts" in result.stderr  # the tqdm bar is on by default
