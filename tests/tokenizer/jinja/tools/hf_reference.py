#!/usr/bin/env python3
"""Renders a chat template with Jinja2 configured the way transformers' apply_chat_template does
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, HF's tojson,
raise_exception, strftime_now). Used by hand to cross-check the expected strings in
chat_template_test.cc against an independent implementation; not run by CTest (Jinja2 is not a
build dependency).

usage: hf_reference.py TEMPLATE.jinja CONTEXT.json   (prints repr() of the rendered prompt)
"""
import json
import sys
from datetime import datetime

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.exceptions import TemplateError


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime(2024, 7, 26, 9, 30).strftime(fmt)  # the tests' fixed clock


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    with open(sys.argv[1], encoding="utf-8") as f:
        template = env.from_string(f.read())
    with open(sys.argv[2], encoding="utf-8") as f:
        context = json.load(f)
    try:
        print(repr(template.render(**context)))
    except TemplateError as e:
        print("ERROR:", e)


if __name__ == "__main__":
    main()
