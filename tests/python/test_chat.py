"""LLM.chat: messages through the model's chat template or a given one."""

from __future__ import annotations

import pytest

from conftest import ENGINE
from vellum import LLM, SamplingParams

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello!"}]
GREEDY = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)


def test_chat_with_a_given_template(llm):
    out = llm.chat(MESSAGES, GREEDY, chat_template=CHATML, use_tqdm=False)[0]
    expected_prompt = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello!"
                       "<|im_end|>\n<|im_start|>assistant\n")
    assert out.prompt == expected_prompt
    tok = llm.get_tokenizer()
    assert out.prompt_token_ids == tok.apply_chat_template(
        MESSAGES, chat_template=CHATML, add_generation_prompt=True)
    # The same tokens as generating from the rendered ids.
    same = llm.generate({"prompt_token_ids": out.prompt_token_ids}, GREEDY, use_tqdm=False)[0]
    assert out.outputs[0].token_ids == same.outputs[0].token_ids
    assert len(out.outputs[0].token_ids) == 8

    no_gen = llm.chat(MESSAGES, GREEDY, chat_template=CHATML, add_generation_prompt=False,
                      use_tqdm=False)[0]
    assert no_gen.prompt == expected_prompt[: -len("<|im_start|>assistant\n")]


def test_a_batch_of_conversations(llm):
    second = [{"role": "user", "content": "Bye"}]
    outs = llm.chat([MESSAGES, second], GREEDY, chat_template=CHATML, use_tqdm=False)
    assert len(outs) == 2 and outs[1].prompt.startswith("<|im_start|>user\nBye")


def test_a_model_without_template_is_a_clear_error(stories_model):
    llm = LLM(model=stories_model, **ENGINE)  # stories260K has no tokenizer.chat_template
    with pytest.raises(ValueError, match="has no chat template .*pass chat_template="):
        llm.chat(MESSAGES, GREEDY, use_tqdm=False)
    # A template given with the request works.
    assert llm.chat(MESSAGES, GREEDY, chat_template=CHATML, use_tqdm=False)[0].outputs[0].text


def test_the_tiny_models_own_template(llm):
    if not llm.llm_engine._cpp_engine().has_chat_template():
        pytest.skip("this build's `vellum make-model --shape tiny` writes no chat template")
    out = llm.chat(MESSAGES, GREEDY, use_tqdm=False)[0]
    tok = llm.get_tokenizer()
    assert out.prompt == tok.apply_chat_template(MESSAGES, tokenize=False,
                                                 add_generation_prompt=True)
    assert out.prompt_token_ids == tok.apply_chat_template(MESSAGES, add_generation_prompt=True)
    assert len(out.outputs[0].token_ids) == 8


def test_chat_errors(llm):
    with pytest.raises(ValueError, match="Cannot set both `continue_final_message` and "
                                         "`add_generation_prompt` to True."):
        llm.chat(MESSAGES, GREEDY, chat_template=CHATML, continue_final_message=True,
                 use_tqdm=False)
    with pytest.raises(TypeError, match="messages must be"):
        llm.chat("Hello", GREEDY, chat_template=CHATML, use_tqdm=False)


def test_chat_with_the_models_own_template(chat_model):
    llm = LLM(model=chat_model, **ENGINE)
    out = llm.chat([{"role": "user", "content": "Hello!"}], GREEDY, use_tqdm=False)[0]
    # Phi-3's template (tokenizer.chat_template of the vocabulary the model was made with).
    assert out.prompt == "<s><|user|>\nHello!<|end|>\n<|assistant|>\n"
    tok = llm.get_tokenizer()
    assert out.prompt_token_ids[0] == 1  # <s> written by the template, not added again
    assert out.prompt_token_ids.count(1) == 1
    # The role markers are parsed as the special tokens they are, not spelled out.
    pieces = tok.convert_ids_to_tokens(out.prompt_token_ids)
    assert "<|user|>" in pieces and "<|end|>" in pieces and "<|assistant|>" in pieces
    assert len(out.outputs[0].token_ids) == 8
