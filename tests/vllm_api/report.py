"""Summarizes the JUnit files of tests/vllm_api/run.sh against the list of tests expected to fail.

expected_failures.txt: one line per test, `FILE::TEST[PARAMS]  reason` (FILE relative to
tests/entrypoints/openai/; `FILE::*` covers a whole file), `#` comments. Exit status 1 when a test
fails that is not listed, or a listed test passes (then the list is stale and must shrink)."""

import argparse
import fnmatch
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

PREFIX = "tests.entrypoints.openai."


def read_expected(path: Path) -> dict[str, str]:
    expected = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        test, _, reason = line.partition("  ")
        expected[test.strip()] = reason.strip()
    return expected


def test_id(case: ElementTree.Element) -> str:
    module = case.get("classname", "")
    if not module:
        # A file that failed to import: pytest names the module and no test.
        name = case.get("name", "")
        if name.startswith(PREFIX):
            name = name[len(PREFIX):]
        return name.replace(".", "/") + ".py::<import>"
    if module.startswith(PREFIX):
        module = module[len(PREFIX):]
    return module.replace(".", "/") + ".py::" + case.get("name", "")


def outcome(case: ElementTree.Element) -> str:
    if case.find("skipped") is not None:
        return "skipped"
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    return "passed"


def reason_for(test: str, expected: dict[str, str]) -> str | None:
    for pattern, reason in expected.items():
        if fnmatch.fnmatchcase(test, pattern.replace("[", "[[]")):
            return reason
    return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--expected", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("junit", nargs="+", type=Path)
    args = parser.parse_args()
    expected = read_expected(args.expected)

    rows, unexpected, stale = [], [], []
    counts = {"passed": 0, "failed": 0, "skipped": 0, "expected failure": 0}
    for path in args.junit:
        for case in ElementTree.parse(path).iter("testcase"):
            test, result = test_id(case), outcome(case)
            reason = reason_for(test, expected)
            if result == "failed" and reason is not None:
                result = "expected failure"
            elif result == "failed":
                unexpected.append(test)
            elif result == "passed" and reason is not None:
                stale.append(test)
            counts[result] += 1
            rows.append(f"| `{test}` | {result} | {reason or ''} |")

    total = sum(counts.values())
    summary = ", ".join(f"{count} {name}" for name, count in counts.items())
    lines = [f"# vLLM's OpenAI-server tests against vellum serve: {total} tests: {summary}", "",
             "| test | result | why it is expected to fail |", "|---|---|---|", *rows, ""]
    if unexpected:
        lines += ["Failed and not listed as expected:", *[f"- `{t}`" for t in unexpected], ""]
    if stale:
        lines += ["Listed as expected to fail but passed:", *[f"- `{t}`" for t in stale], ""]
    args.out.write_text("\n".join(lines))
    print(lines[0])
    for test in unexpected:
        print(f"unexpected failure: {test}")
    for test in stale:
        print(f"passes but is listed as expected to fail: {test}")
    return 1 if unexpected or stale else 0


if __name__ == "__main__":
    sys.exit(main())
