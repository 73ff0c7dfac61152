#!/usr/bin/env python3
"""Exports a GGUF file's tokenizer as a Hugging Face tokenizer directory (tokenizer.json ...).

bench/serve_vs_llama_server.sh uses it so that AIPerf can build its synthetic prompts with the
served model's own tokenizer, offline (no Hugging Face hub download).

  python gguf_tokenizer_to_hf.py MODEL.gguf OUT_DIR

Needs transformers (>= 5, as AIPerf 0.13.0 installs it) and no torch. Uses transformers' GGUF
tokenizer mapping, the code behind AutoTokenizer.from_pretrained(..., gguf_file=...), which
itself insists on torch.
"""
import sys, types
import transformers
from transformers import PreTrainedTokenizerFast
# transformers' GGUF reader imports torch at module level only for tensor dtypes; the metadata
# path needs none, so let it import against a stand-in when torch is absent (AIPerf needs no torch).
try:
    import torch  # noqa: F401
except ImportError:
    stub = types.ModuleType("torch")
    stub.__getattr__ = lambda name: object  # any torch.X used in annotations or constants
    sys.modules["torch"] = stub
    from transformers.integrations.gguf import reader  # noqa: F401
    del sys.modules["torch"]
from transformers.integrations.gguf.gguf_tokenizer_mapping import get_gguf_tokenizer, convert_gguf_tokenizer
model, out = sys.argv[1], sys.argv[2]
arch, tok_dict, tok_config = get_gguf_tokenizer(model)
backend, _ = convert_gguf_tokenizer(arch, tok_dict)
tok = PreTrainedTokenizerFast(tokenizer_object=backend, **{k: v for k, v in tok_config.items() if v is not None})
tok.save_pretrained(out)
print(arch, transformers.__version__, len(tok), tok("Hello world, this is a test")["input_ids"])
