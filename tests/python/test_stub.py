"""The type stub vellum/_C.pyi names what the compiled module has, and the package exports
what vLLM users import."""

from __future__ import annotations

import ast
import inspect
import pathlib

import vellum
from vellum import _C

STUB = pathlib.Path(vellum.__file__).with_name("_C.pyi")


def stub_classes() -> dict[str, set[str]]:
    tree = ast.parse(STUB.read_text())
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign):
                    members.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    members.update(t.id for t in item.targets)
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            classes[node.name] = (members, bases)
    resolved = {}
    for name, (members, bases) in classes.items():
        for base in bases:
            if base in classes:
                members = members | classes[base][0]
        resolved[name] = members - {"__init__"}
    return resolved


def module_classes() -> dict[str, set[str]]:
    classes = {}
    for name, obj in vars(_C).items():
        if inspect.isclass(obj) and not name.startswith("__"):
            enum_values = set(getattr(obj, "__members__", {}))
            members = {m for m in vars(obj) if not m.startswith("_")} | enum_values
            members -= {"name", "value"} if enum_values else set()
            classes[name] = members
    return classes


def test_stub_matches_the_module():
    stub = {k: v for k, v in stub_classes().items() if not k.startswith("_")}
    module = module_classes()
    assert set(stub) == set(module)
    for name, members in module.items():
        # Nested classes (EngineClient.State) are classes of the stub, not members.
        cls = getattr(_C, name)
        members = {m for m in members if not inspect.isclass(getattr(cls, m))}
        assert stub[name] == members, name


def test_the_package_exports_vllms_names():
    for name in ("LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "LLMEngine",
                 "EngineArgs", "AsyncLLM", "AsyncLLMEngine", "AsyncEngineArgs", "TextPrompt",
                 "TokensPrompt", "BeamSearchParams", "RequestOutputKind", "Logprob"):
        assert name in vellum.__all__ and hasattr(vellum, name), name
    assert all(hasattr(vellum, name) for name in vellum.__all__)
    assert (pathlib.Path(vellum.__file__).parent / "py.typed").exists()
