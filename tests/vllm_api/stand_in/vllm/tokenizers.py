# SPDX-License-Identifier: Apache-2.0
"""get_tokenizer: the served model's tokenizer, whatever name the test gives (the stand-in serves
one model under every name), as Hugging Face's tokenizer built from the GGUF's vocabulary."""

import functools
import os
import sys
import types


@functools.lru_cache(maxsize=1)
def _served_tokenizer():
    from transformers import PreTrainedTokenizerFast
    try:
        import torch  # noqa: F401
    except ImportError:
        # transformers' GGUF reader imports torch at module level only for dtypes.
        stub = types.ModuleType("torch")
        stub.__getattr__ = lambda name: object
        sys.modules["torch"] = stub
        from transformers.integrations.gguf import reader  # noqa: F401
        del sys.modules["torch"]
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        convert_gguf_tokenizer, get_gguf_tokenizer)
    model = os.environ["VELLUM_VLLM_API_MODEL"]
    architecture, tokenizer_dict, tokenizer_config = get_gguf_tokenizer(model)
    backend, _ = convert_gguf_tokenizer(architecture, tokenizer_dict)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        **{key: value for key, value in tokenizer_config.items() if value is not None})


def get_tokenizer(tokenizer_name=None, *args, **kwargs):
    return _served_tokenizer()
