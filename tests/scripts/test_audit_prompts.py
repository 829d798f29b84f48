"""scripts/audit_prompts.py: counts answers in final prompts independently of the run's own flag."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "scripts" / "audit_prompts.py"


def _rec(method, prompt, answer, flagged=False):
    return {"task": "a+b", "method": method, "seed": 0, "prompt": prompt, "answer": answer, "answer_in_prompt": flagged}


def test_audit_counts_substrings_the_run_did_not_flag_and_excuses_the_query_input(load_script):
    mod = load_script("scripts/audit_prompts.py")
    clean = _rec("rte", "In: ab Out: ba\n### Query:\nIn: cd Out:", "dcX")
    leaky = _rec("rte", "In: ab Out: dcX\n### Query:\nIn: cd Out:", "dcX")  # unflagged, still counted
    identity = _rec("few-shot", "In: ab Out: ab\n### Query:\nIn: cd Out:", "cd")  # answer = query input
    flagged = _rec("few-shot", "In: ab Out: zz\n### Query:\nIn: cd Out:", "zz", flagged=True)
    out = mod.audit([clean, leaky, identity, flagged])
    assert out["rte"] == {"prompts": 2, "flagged": 0, "substring": 1, "substring_is_query": 0}
    assert out["few-shot"] == {"prompts": 2, "flagged": 1, "substring": 1, "substring_is_query": 1}
    with pytest.raises(ValueError, match="not a query line"):
        mod.query_input("In: ab Out: ba\nthe end")


def test_cli_writes_the_audit_and_refuses_a_directory_without_prompts(tmp_path):
    run = tmp_path / "codeio-x"
    run.mkdir()
    (run / "prompts.jsonl").write_text(json.dumps(_rec("oracle", "In: ab Out: ba\nIn: cd Out:", "dc")) + "\n")
    out = tmp_path / "audit.json"
    subprocess.run([sys.executable, str(_PATH), str(run), "--out", str(out)], check=True, capture_output=True)
    data = json.loads(out.read_text())
    assert data["records"] == 1 and data["tasks"] == 1 and data["per_method"]["oracle"]["substring"] == 0
    bad = subprocess.run([sys.executable, str(_PATH), str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.strip().startswith("error:") and len(bad.stderr.strip().splitlines()) == 1


def test_cli_reads_a_committed_gzipped_copy_and_names_the_run_after_it(tmp_path):
    import gzip

    line = json.dumps(_rec("rte", "In: ab Out: ba\nIn: cd Out:", "dc")) + "\n"
    copy = tmp_path / "codeio-y-prompts.jsonl.gz"
    copy.write_bytes(gzip.compress(line.encode()))
    out = tmp_path / "audit.json"
    subprocess.run([sys.executable, str(_PATH), str(copy), "--out", str(out)], check=True, capture_output=True)
    data = json.loads(out.read_text())
    assert data["run"] == "codeio-y" and data["records"] == 1 and data["per_method"]["rte"]["prompts"] == 1
