"""The progress bar of LLM.generate / LLM.chat: vLLM's tqdm bar (Debian's python3-tqdm)."""

from __future__ import annotations

from typing import Any, Callable, Union

from . import _C
from .outputs import RequestOutput

UseTqdm = Union[bool, Callable[..., Any]]


class Progress:
    """Counts finished sequences with input and output token speeds, as vLLM shows them."""

    def __init__(self, use_tqdm: UseTqdm, total: int) -> None:
        self._bar = None
        if not use_tqdm:
            return
        if callable(use_tqdm):
            tqdm = use_tqdm
        else:
            from tqdm.auto import tqdm
        self._bar = tqdm(
            total=total,
            desc="Processed prompts",
            dynamic_ncols=True,
            postfix=f"est. speed input: {0:.2f} toks/s, output: {0:.2f} toks/s",
        )
        self._in_tokens = 0
        self._out_tokens = 0

    def finished(self, output: Union[RequestOutput, _C.RequestOutput]) -> None:
        if self._bar is None:
            return
        n = len(output.outputs)
        self._in_tokens += len(output.prompt_token_ids or ()) * n
        self._out_tokens += sum(len(c.token_ids) for c in output.outputs)
        elapsed = self._bar.format_dict.get("elapsed") or 0.0
        if elapsed > 0:
            self._bar.postfix = (
                f"est. speed input: {self._in_tokens / elapsed:.2f} toks/s, "
                f"output: {self._out_tokens / elapsed:.2f} toks/s"
            )
        self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
