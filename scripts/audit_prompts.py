"""Audit a CodeIO run's final prompts without running a model; write the counts to a results file.

    python scripts/audit_prompts.py benchmarks/results/runs/codeio-paper-quick
    python scripts/audit_prompts.py benchmarks/results/codeio-paper-paper-prompts.jsonl.gz

reads ``RUN_DIR/prompts.jsonl`` (one line per task and method, written by every CodeIO run), or
a copy of it (``<run name>-prompts.jsonl``, gzipped or not, as committed beside the results) and
writes ``benchmarks/results/<run name>-prompt-audit.json`` (``--out``): per method, how many
final prompts there are, how many the run flagged ``answer_in_prompt`` (the answer shown as an
output value), and, independently of that flag, how many contain the expected answer anywhere
as a substring, split into those where the answer equals the query input (which the query line
must show) and the others. The docs quote these counts, never a hand count.
"""

from __future__ import annotations

import argparse
import gzip
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
    return last[len("In:") : last.rindex("Out:")].strip()


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


def prompts_file(source: Path) -> tuple[Path, str]:
    """(the prompts file, the run's name) of a run directory or of a committed copy
    ``<run>-prompts.jsonl[.gz]``; exits with a one-line error when there is none."""
    if source.is_dir():
        path, run = source / "prompts.jsonl", source.name
    else:
        path, run = source, source.name.removesuffix(".gz").removesuffix(".jsonl").removesuffix("-prompts")
    if not path.is_file():
        sys.exit(f"error: {path} does not exist (a CodeIO run directory has one)")
    return path, run


def read_records(path: Path) -> list[dict]:
    """The JSON lines of a prompts file (gzipped when its name ends in .gz)."""
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def main():
    """Command line: audit a run's prompts.jsonl (or a committed copy) and write the audit file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="a CodeIO run directory, or a <run>-prompts.jsonl[.gz] file")
    ap.add_argument("--out", type=Path, default=None, help="results file (default: results/<run>-prompt-audit.json)")
    args = ap.parse_args()
    path, run = prompts_file(args.run_dir)
    records = read_records(path)
    per_method = audit(records)
    result = {
        "run": run,
        "command": "python scripts/audit_prompts.py " + " ".join(sys.argv[1:]),
        "records": len(records),
        "tasks": len({r["task"] for r in records}),
        "per_method": per_method,
    }
    out = args.out or OUT / f"{run}-prompt-audit.json"
    write_json_atomic(out, result)
    print(json.dumps(per_method, indent=1), f"\nwritten {out}")


if __name__ == "__main__":
    main()
