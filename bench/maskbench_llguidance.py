"""MaskBench with llguidance (PyPI), the same way `schema_bench maskbench` runs Vellum: every Nth
file of maskbench/data (sorted by name), each instance serialized as json.dumps does, tokenized
with the same Llama 3 tokenizer (a tokenizer.json exported from the GGUF with
bench/gguf_tokenizer_to_hf.py), driven token by token; an instance is accepted when every token
is in the mask and the matcher accepts at the end.

  python maskbench_llguidance.py MASKBENCH_DATA_DIR TOKENIZER_JSON [--every N]
  python maskbench_llguidance.py --accept JSB_DATA_DIR TOKENIZER_JSON
    (per subset of jsonschemabench's data/: schemas llguidance compiles, compile p50/p99/max)

Needs llguidance and tokenizers (pinned in README).
"""

import argparse
import json
import pathlib
import time

import llguidance
import tokenizers
from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask


def percentile(values, p):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(int(p * (len(values) - 1) + 0.5), len(values) - 1)]


def accept(data_dir, ll_tokenizer):
    print("| subset | schemas | accepted | % | compile p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    total = total_accepted = 0
    all_ms = []
    for subset in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        num = accepted = 0
        ms = []
        for path in sorted(subset.glob("*.json")):
            try:
                schema = json.loads(path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            num += 1
            start = time.monotonic()
            matcher = llguidance.LLMatcher(ll_tokenizer, json.dumps({"grammars": [{"json_schema": schema}]}))
            if not matcher.is_error():
                ms.append((time.monotonic() - start) * 1000)
                accepted += 1
        total += num
        total_accepted += accepted
        all_ms += ms
        print(f"| {subset.name} | {num} | {accepted} | {100 * accepted / max(num, 1):.1f} | "
              f"{percentile(ms, 0.5):.2f} | {percentile(ms, 0.99):.2f} | {max(ms, default=0):.2f} |", flush=True)
    print(f"| **all** | {total} | {total_accepted} | {100 * total_accepted / max(total, 1):.1f} | "
          f"{percentile(all_ms, 0.5):.2f} | {percentile(all_ms, 0.99):.2f} | {max(all_ms, default=0):.2f} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accept", action="store_true")
    parser.add_argument("data_dir", type=pathlib.Path)
    parser.add_argument("tokenizer_json", type=pathlib.Path)
    parser.add_argument("--every", type=int, default=1)
    args = parser.parse_args()
    text = args.tokenizer_json.read_text()
    tokenizer = tokenizers.Tokenizer.from_str(text)
    eos = tokenizer.token_to_id("<|eot_id|>")
    ll_tokenizer = llguidance.LLTokenizer(text, eos_token=eos)
    if args.accept:
        accept(args.data_dir, ll_tokenizer)
        return
    mask = allocate_token_bitmask(1, ll_tokenizer.vocab_size)
    files = sorted(args.data_dir.glob("*.json"))
    num_schemas = num_compiled = num_valid = num_invalid = 0
    wrong_accepts = wrong_rejects = 0
    compile_ms, token_us = [], []
    for path in files[::args.every]:
        try:
            doc = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if not doc.get("tests"):
            continue
        num_schemas += 1
        grammar = json.dumps({"grammars": [{"json_schema": doc["schema"]}]})
        start = time.monotonic()
        matcher0 = llguidance.LLMatcher(ll_tokenizer, grammar)
        if matcher0.is_error():
            continue
        compile_ms.append((time.monotonic() - start) * 1000)
        num_compiled += 1
        for test in doc["tests"]:
            valid = test.get("valid", False)
            if valid:
                num_valid += 1
            else:
                num_invalid += 1
            instance = json.dumps(test["data"], indent=None, ensure_ascii=False)
            tokens = tokenizer.encode(instance, add_special_tokens=False).ids
            matcher = matcher0.deep_copy()
            accepted = True
            for token in tokens:
                step = time.monotonic()
                fill_next_token_bitmask(matcher, mask, 0)
                allowed = (mask[0, token // 32] >> (token % 32)) & 1
                if allowed:
                    matcher.consume_token(token)
                token_us.append((time.monotonic() - step) * 1e6)
                if not allowed:
                    accepted = False
                    break
            if accepted:
                accepted = matcher.is_accepting()
            if accepted != valid:
                if valid:
                    wrong_rejects += 1
                else:
                    wrong_accepts += 1
    print(f"llguidance {llguidance.__version__ if hasattr(llguidance, '__version__') else ''}")
    print(f"schemas with tests: {num_schemas}, compiled: {num_compiled} "
          f"({100 * num_compiled / max(num_schemas, 1):.1f} %)")
    print(f"instances on compiled schemas: {num_valid} valid, {num_invalid} invalid")
    print(f"wrong accepts: {wrong_accepts}, wrong rejects: {wrong_rejects}")
    print(f"compile ms: p50 {percentile(compile_ms, 0.5):.2f} p99 {percentile(compile_ms, 0.99):.2f} "
          f"max {max(compile_ms, default=0):.2f}")
    print(f"per token (mask + consume), {len(token_us)} tokens: p50 {percentile(token_us, 0.5):.1f} us "
          f"p99 {percentile(token_us, 0.99):.1f} us max {max(token_us, default=0):.1f} us")


if __name__ == "__main__":
    main()
