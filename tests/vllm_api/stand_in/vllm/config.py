# SPDX-License-Identifier: Apache-2.0
"""ModelConfig: only get_vocab_size(), of the served model (the GGUF's vocabulary)."""

from vllm.tokenizers import get_tokenizer


class ModelConfig:
    def __init__(self, model=None, **kwargs):
        self.model = model

    def get_vocab_size(self) -> int:
        return len(get_tokenizer(self.model))
