"""The model's tokenizer with the Hugging Face methods vLLM users call (LLM.get_tokenizer())."""

from __future__ import annotations

import json
from typing import Any, Optional, Union

from . import _C

Engine = Union[_C.LLMEngine, _C.EngineClient]


class BatchEncoding(dict):
    """What calling the tokenizer returns: a dict that also reads as attributes (.input_ids)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def render_chat(
    engine: Engine,
    conversation: list[dict[str, Any]],
    *,
    chat_template: Optional[str] = None,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    tools: Optional[list[dict[str, Any]]] = None,
    chat_template_kwargs: Optional[dict[str, Any]] = None,
) -> str:
    """The chat rendered to prompt text by the engine's (or the given) Jinja chat template."""
    if not isinstance(conversation, (list, tuple)) or not all(
        isinstance(m, dict) for m in conversation
    ):
        raise TypeError("messages must be a list of {'role': ..., 'content': ...} dicts")
    try:
        return engine.apply_chat_template(
            json.dumps(list(conversation)),
            json.dumps(tools) if tools is not None else "",
            json.dumps(chat_template_kwargs) if chat_template_kwargs else "",
            chat_template or "",
            add_generation_prompt,
            continue_final_message,
        )
    except ValueError as e:
        if chat_template or engine.has_chat_template():
            raise
        raise ValueError(f"{e}; from Python, pass chat_template=... (a Jinja template source)") from None


class Tokenizer:
    """The tokenizer stored in the model file (SentencePiece or byte-level BPE)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def vocab_size(self) -> int:
        return self._engine.vocab_size()

    def __len__(self) -> int:
        return self._engine.vocab_size()

    @property
    def bos_token_id(self) -> Optional[int]:
        return self._engine.bos_token_id()

    @property
    def eos_token_id(self) -> Optional[int]:
        return self._engine.eos_token_id()

    @property
    def bos_token(self) -> Optional[str]:
        bos = self._engine.bos_token_id()
        return None if bos is None else self._engine.token_text(bos)

    @property
    def eos_token(self) -> Optional[str]:
        eos = self._engine.eos_token_id()
        return None if eos is None else self._engine.token_text(eos)

    @property
    def max_model_len(self) -> int:
        return self._engine.max_model_len()

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`; BOS first (as the model's metadata asks) with add_special_tokens."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        return self._engine.encode(text, add_special_tokens, False)

    def decode(self, token_ids: Union[int, list[int]], skip_special_tokens: bool = False) -> str:
        """Text of `token_ids` (Hugging Face's default keeps special tokens)."""
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        return self._engine.decode(list(token_ids), skip_special_tokens)

    def batch_decode(self, sequences: list[list[int]], skip_special_tokens: bool = False) -> list[str]:
        return [self.decode(ids, skip_special_tokens) for ids in sequences]

    def convert_ids_to_tokens(self, ids: Union[int, list[int]]) -> Union[str, list[str]]:
        """The vocabulary pieces as stored (SentencePiece '▁', byte-level BPE 'Ġ')."""
        if isinstance(ids, int):
            return self._engine.token_text(ids)
        return [self._engine.token_text(i) for i in ids]

    def __call__(
        self, text: Union[str, list[str]], add_special_tokens: bool = True
    ) -> BatchEncoding:
        if isinstance(text, str):
            ids = self.encode(text, add_special_tokens)
            return BatchEncoding(input_ids=ids, attention_mask=[1] * len(ids))
        batch = [self.encode(t, add_special_tokens) for t in text]
        return BatchEncoding(input_ids=batch, attention_mask=[[1] * len(ids) for ids in batch])

    def apply_chat_template(
        self,
        conversation: list[dict[str, Any]],
        tools: Optional[list[dict[str, Any]]] = None,
        chat_template: Optional[str] = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool = False,
        tokenize: bool = True,
        **kwargs: Any,
    ) -> Union[str, list[int]]:
        """Hugging Face's apply_chat_template: the ids (tokenize=True) or the text of a chat.

        Extra keyword arguments become template variables.
        """
        text = render_chat(
            self._engine,
            conversation,
            chat_template=chat_template,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            tools=tools,
            chat_template_kwargs=kwargs or None,
        )
        if not tokenize:
            return text
        # The template writes BOS and the role markers itself.
        return self._engine.encode(text, False, True)
