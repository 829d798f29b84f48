"""Audit a CodeIO run's final prompts without running a model; write the counts to a results file.

    python scripts/audit_prompts.py benchmarks/results/runs/codeio-paper-quick

reads ``RUN_DIR/prompts.jsonl`` (one line per task and method, written by every CodeIO run) and
writes ``benchmarks/results/<run name>-prompt-audit.json`` (``--out``): per method, how many
final prompts there are, how many the run flagged ``answer_in_prompt`` (the answer shown as an
output value), and, independently of that flag, how many contain the expected answer anywhere
as a substring, split into those where the answer equals the query input (which the query line
must show) and the others. The docs quote these counts, never a hand count.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from taskextrap.files import write_json_atomic

OUT = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def query_input(prompt: str) -> str:
    """The query input of a final prompt: the text between "In:" and "Out:" on its last line."""
    last = prompt.rstrip().splitlines()[-1]
    if not (last.startswith("In:") and "Out:" in last):
        raise ValueError(f"the prompt's last line is not a query line: {last!r}")
    return last[len("In:"):last.rindex("Out:")].strip()


def audit(records: list[dict]) -> dict:
    """Per method: ``prompts``, ``flagged`` (answer_in_prompt), ``substring`` (the answer occurs
    in the prompt and is not the query input) and ``substring_is_query`` (the answer equals the
    query input, which the query line shows)."""
    out: dict[str, dict[str, int]] = {}
    for r in records:
        m = out.setdefault(r["method"], {"prompts": 0, "flagged": 0, "substring": 0, "substring_is_query": 0})
        m["prompts"] += 1
        m["flagged"] += bool(r["answer_in_prompt"])
        if r["answer"] and r["answer"] in r["prompt"]:
            m["substring_is_query" if r["answer"] == query_input(r["prompt"]) else "substring"] += 1
    return out


def main():
    """Command line: audit RUN_DIR/prompts.jsonl and write the audit file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="results file (default: results/<run>-prompt-audit.json)")
    args = ap.parse_args()
    path = args.run_dir / "prompts.jsonl"
    if not path.is_file():
        sys.exit(f"error: {path} does not exist (a CodeIO run directory has one)")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    per_method = audit(records)
    result = {"run": args.run_dir.name, "command": "python scripts/audit_prompts.py " + " ".join(sys.argv[1:]),
              "records": len(records), "tasks": len({r["task"] for r in records}), "per_method": per_method}
    out = args.out or OUT / f"{args.run_dir.name}-prompt-audit.json"
    write_json_atomic(out, result)
    print(json.dumps(per_method, indent=1), f"\nwritten {out}")


if __name__ == "__main__":
    main()
