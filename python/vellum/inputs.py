"""Prompt types (vllm.inputs): a string, {"prompt": str} or {"prompt_token_ids": [int, ...]}."""

from __future__ import annotations

from typing import Any, NamedTuple, NotRequired, Optional, TypedDict, Union


class TextPrompt(TypedDict):
    prompt: str
    cache_salt: NotRequired[str]


class TokensPrompt(TypedDict):
    prompt_token_ids: list[int]
    prompt: NotRequired[str]  # the text the ids came from, reported back in RequestOutput.prompt
    cache_salt: NotRequired[str]


PromptType = Union[str, TextPrompt, TokensPrompt]

# Keys of vLLM's prompt dicts whose features Vellum does not implement.
_UNSUPPORTED_KEYS = {
    "multi_modal_data": "multi-modal inputs are not supported",
    "mm_processor_kwargs": "multi-modal inputs are not supported",
    "multi_modal_uuids": "multi-modal inputs are not supported",
    "prompt_embeds": "prompt embeddings are not supported",
    "token_type_ids": "token_type_ids (pooling models) are not supported",
}


class Prompt(NamedTuple):
    """A prompt as the engine takes it: text or ids, the text to report, the cache salt."""

    engine_prompt: Union[str, list[int]]
    text: Optional[str]
    cache_salt: str


def is_single_prompt(prompt: Any) -> bool:
    return isinstance(prompt, (str, dict))


def parse_prompt(prompt: Any) -> Prompt:
    """Checks one prompt and returns what the engine takes; raises TypeError / ValueError."""
    if isinstance(prompt, str):
        return Prompt(prompt, prompt, "")
    if not isinstance(prompt, dict):
        if isinstance(prompt, (list, tuple)) and all(isinstance(t, int) for t in prompt):
            raise TypeError(
                "a prompt of token ids must be given as {'prompt_token_ids': [...]} "
                "(vllm.inputs.TokensPrompt), not as a bare list"
            )
        raise TypeError(
            f"a prompt must be a str, a TextPrompt {{'prompt': str}} or a TokensPrompt "
            f"{{'prompt_token_ids': [int, ...]}}, got {type(prompt).__name__}"
        )
    for key in prompt:
        if key in _UNSUPPORTED_KEYS:
            raise ValueError(f"{key}: {_UNSUPPORTED_KEYS[key]} by Vellum; remove it")
        if key not in ("prompt", "prompt_token_ids", "cache_salt"):
            raise ValueError(
                f"unknown prompt key '{key}': a prompt dict has 'prompt' or 'prompt_token_ids' "
                f"(and optionally 'cache_salt')"
            )
    cache_salt = prompt.get("cache_salt", "")
    if not isinstance(cache_salt, str) or ("cache_salt" in prompt and not cache_salt):
        raise ValueError("cache_salt must be a non-empty string")
    if "prompt_token_ids" in prompt:
        ids = prompt["prompt_token_ids"]
        if isinstance(ids, (str, bytes)) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in ids
        ):
            raise TypeError("prompt_token_ids must be a list of integers")
        text = prompt.get("prompt")
        return Prompt(list(ids), text, cache_salt)
    if "prompt" in prompt:
        if not isinstance(prompt["prompt"], str):
            raise TypeError(f"'prompt' must be a str, got {type(prompt['prompt']).__name__}")
        return Prompt(prompt["prompt"], prompt["prompt"], cache_salt)
    raise ValueError("a prompt dict needs 'prompt' (text) or 'prompt_token_ids' (token ids)")
