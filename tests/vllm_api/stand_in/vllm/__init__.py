# SPDX-License-Identifier: Apache-2.0
"""A stand-in for the few names of vLLM that the HTTP-only server tests import at module level.

These tests talk to the server over HTTP; the names here only let their modules import. What
a black-box test uses for its own checks (the served model's tokenizer, the vocabulary size) is
real; what tests vLLM's own Python internals (protocol classes, the renderer) raises
VllmInternalsUnavailable when used, so those tests fail with that reason and are listed in
tests/vllm_api/expected_failures.txt."""


class VllmInternalsUnavailable(RuntimeError):
    pass


def unavailable(name: str):
    """A stand-in for a vLLM class or function that only vLLM's own code can provide."""

    class _Unavailable:
        def __init__(self, *args, **kwargs):
            raise VllmInternalsUnavailable(
                f"{name} is vLLM's own Python code; these tests check vLLM's internals, not the "
                "server over HTTP")

        def __class_getitem__(cls, item):
            return cls

    _Unavailable.__name__ = name.rsplit(".", 1)[-1]
    return _Unavailable


# Every other vllm.* module imports as a package whose names are all unavailable(...).
import importlib.abc
import importlib.machinery
import sys
import types


class _InternalsModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name.endswith("Error") or name.endswith("Exception"):
            # Used in pytest.raises(...) around vLLM's own code: an exception type nothing raises.
            return type(name, (VllmInternalsUnavailable,), {})
        return unavailable(f"{self.__name__}.{name}")


class _InternalsFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith("vllm."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _InternalsModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.append(_InternalsFinder())
