"""Empirical coverage on JSONSchemaBench: a running OpenAI-compatible server is asked, with
response_format json_schema (strict), for a JSON value valid against each sampled schema;
the reply is checked with Python's `jsonschema` (formats included).

  python jsonschemabench_coverage.py DATA_DIR --url http://127.0.0.1:8391 --model NAME \
      [--per-subset 10] [--max-tokens 512] [--seed 0]

Prints one markdown row per subset: requests, valid, refused (HTTP 400), out of tokens
(finish_reason "length"), invalid (complete but not valid JSON or not valid against the schema).
Only the standard library and `jsonschema` are needed.
"""

import argparse
import json
import pathlib
import random
import urllib.error
import urllib.request

import jsonschema

PROMPT = (
    "Write one JSON value that is valid against this JSON schema. Reply with the JSON only.\n\n"
    "{schema}"
)
MAX_SCHEMA_CHARS = 6000  # the prompt must fit the model's context


def ask(url, model, schema, max_tokens):
    body = {
        "model": model,
        "messages": [{"role": "user",
                      "content": PROMPT.format(schema=json.dumps(schema)[:MAX_SCHEMA_CHARS])}],
        "temperature": 0,
        "max_tokens": max_tokens,
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "output", "strict": True, "schema": schema}},
    }
    request = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=900) as response:
            reply = json.load(response)
    except urllib.error.HTTPError as e:
        if e.code == 400:
            return "refused", None
        raise
    choice = reply["choices"][0]
    if choice["finish_reason"] == "length":
        return "length", None
    return "done", choice["message"]["content"]


def is_valid(schema, text):
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return False
    validator = jsonschema.validators.validator_for(schema)
    try:
        validator(schema, format_checker=validator.FORMAT_CHECKER).validate(value)
    except (jsonschema.ValidationError, jsonschema.SchemaError, RecursionError):
        return False
    except Exception:  # unresolvable remote $ref and the like: not a valid output
        return False
    return True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir", type=pathlib.Path)
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--per-subset", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("| subset | requests | valid | % | refused | out of tokens | invalid |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    totals = [0, 0, 0, 0, 0]
    for subset in sorted(p for p in args.data_dir.iterdir() if p.is_dir()):
        files = sorted(subset.glob("*.json"))
        random.Random(args.seed).shuffle(files)
        counts = {"valid": 0, "refused": 0, "length": 0, "invalid": 0}
        num = 0
        for path in files:
            if num == args.per_subset:
                break
            try:
                schema = json.loads(path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            num += 1
            status, text = ask(args.url, args.model, schema, args.max_tokens)
            if status == "done":
                status = "valid" if is_valid(schema, text) else "invalid"
            counts[status] += 1
        row = [num, counts["valid"], counts["refused"], counts["length"], counts["invalid"]]
        totals = [a + b for a, b in zip(totals, row)]
        print(f"| {subset.name} | {num} | {counts['valid']} | {100 * counts['valid'] / max(num, 1):.0f} "
              f"| {counts['refused']} | {counts['length']} | {counts['invalid']} |", flush=True)
    print(f"| **all** | {totals[0]} | {totals[1]} | {100 * totals[1] / max(totals[0], 1):.0f} "
          f"| {totals[2]} | {totals[3]} | {totals[4]} |")


if __name__ == "__main__":
    main()
