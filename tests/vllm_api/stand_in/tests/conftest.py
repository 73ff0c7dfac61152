# SPDX-License-Identifier: Apache-2.0
# Replaces vLLM's tests/conftest.py, which sets up GPUs, Hugging Face runners and vLLM itself; the
# HTTP-only files under tests/entrypoints/openai/ need none of it.
