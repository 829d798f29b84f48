"""Choose each regime's interval scale on its dev split (issue 36, part 3).

    python benchmarks/run.py --only parameter composition length composition-depth3 --profiles quick --split dev
    python scripts/calibrate_intervals.py --profile quick

Reads the dev results files ``benchmarks/results/<experiment>-<protocol>-<profile>-dev.json``
(each records every interval's raw coverage at every grid scale, ``config["coverage_by_scale"]``:
rte's, Strategy A's and each classic's, whose scales are chosen alike),
pools each regime's groups (the dev families of ``parameter``; the one group of the others)
with equal weight, and takes the smallest grid scale whose pooled coverage reaches the 90% level
(``search.calibration.choose_scale``); each built-in parameter family also gets the scale of its
own dev split (its dev targets only), which the estimators prefer for that family. Writes the
scales the estimators read, ``src/taskextrap/search/interval_scales.json``, and a copy with the
dev coverage before and after to ``benchmarks/results/interval-calibration.json``. Only dev files are read: a test file
is refused.

    python scripts/calibrate_intervals.py --transfer paper

does not choose: it reads the scales in use and reports what they cover on another profile's dev
runs (those that exist; the `paper` profile's are dearer, and only some were run), per group, to
``benchmarks/results/interval-transfer-<profile>.json``: whether a scale chosen on the `quick` dev
runs still reaches the level at the sizes the `paper` tables use, on dev tasks only.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import numpy as np

from taskextrap.baselines.classics import CTX_GP_VARIANT, VARIANTS, chosen, scale_name
from taskextrap.files import write_json_atomic
from taskextrap.search.calibration import SCALE_GRID, SCALES_FILE, choose_scale, method_key
from taskextrap.search.posterior import INTERVAL_LEVEL

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
EXPERIMENTS = ("parameter", "composition", "length", "composition-depth3")
PROTOCOLS = ("paper", "strict")


@functools.lru_cache(maxsize=64)
def _read_once(path: Path, mtime_ns: int) -> dict:
    return json.loads(path.read_text())


def _read(path: Path) -> dict:
    """A results file's content, read once per process while it is unchanged: calibration and the
    transfer report ask for the files scored after the dev runs once per (regime, protocol).
    Callers only read the dict."""
    return _read_once(path, path.stat().st_mtime_ns)


def _collect(out: dict[str, tuple[str, dict]], name: str, cells: list[dict], variant_of) -> None:
    """Add the raw coverage curves of ``cells`` (one file's, already filtered) to ``out``: variant
    -> (the first file that scored it, {cell: curve}); ``variant_of`` names a curve's variant from
    its key in ``coverage_by_scale``. A cell already read keeps its first file's curve."""
    for c in cells:
        for key, curve in c["coverage_by_scale"].items():
            out.setdefault(variant_of(key), (name, {}))[1].setdefault(c["family"], curve)


def after_files(results: Path, experiment: str, profile: str) -> list[tuple[str, dict]]:
    """``benchmarks/cnp_steps_dev.py``'s committed files (``cnp-steps-dev*.json``) that scored
    variants after the dev files on ``experiment``'s dev split at ``profile``: (file name, its
    content), by name. The one reader of those files: the dev rule's scores
    (:func:`after_scores`) and the calibration's curves (:func:`scored_after`) both come from here."""
    docs = [(path.name, _read(path)) for path in sorted(results.glob("cnp-steps-dev*.json"))]
    mine = lambda doc: doc.get("regime", "parameter") == experiment and doc.get("profile") == profile  # noqa: E731
    return [(name, doc) for name, doc in docs if mine(doc)]


def after_scores(results: Path, experiment: str, profile: str) -> dict[str, float]:
    """The dev rule's score (``classics.variant_scores``) of each variant scored after the dev
    files (:func:`after_files`), as ``classics.choose_classics`` reads it. A file that scored only
    one protocol is refused in one line: the dev choice pools both."""
    scores: dict[str, float] = {}
    for name, doc in after_files(results, experiment, profile):
        scored = sorted({c["protocol"] for c in doc["cells"]})
        if scored != sorted(PROTOCOLS):
            raise SystemExit(f"error: {name} scored {scored}, not both protocols")
        scores.update(doc["scores"])
    return scores


def scored_after(results: Path, experiment: str, protocol: str, profile: str) -> dict[str, tuple[str, dict]]:
    """The classics' variants scored after the dev files (:func:`after_files` that record
    coverage): variant -> (its file's name, {cell: raw coverage curve}) under ``protocol``; a
    parameter cell is named after its family, a discrete regime's after the regime."""
    out: dict[str, tuple[str, dict]] = {}
    for name, doc in after_files(results, experiment, profile):
        cells = [c for c in doc["cells"] if c["protocol"] == protocol and "coverage_by_scale" in c]
        _collect(out, name, cells, lambda variant: variant)
    return out


def ctx_gp_after(results: Path, experiment: str, protocol: str, profile: str) -> dict[str, tuple[str, dict]]:
    """``ctx-gp``'s fits scored on the dev units' targets after the dev files
    (``benchmarks/ctx_gp_dev_coverage.py``'s ``ctx-gp-dev-coverage.json``), as :func:`scored_after`
    gives the cnp's: variant (``classics.ctx_gp_variant``: ``ctx-gp-lbfgs-r32``) -> (the file's
    name, {cell: raw coverage curve}) under ``protocol``."""
    from taskextrap.baselines.classics import ctx_gp_variant

    path = results / "ctx-gp-dev-coverage.json"
    if not path.exists():
        return {}
    doc = _read(path)
    if doc.get("profile") != profile:
        return {}
    out: dict[str, tuple[str, dict]] = {}
    cells = [c for c in doc["cells"] if c["regime"] == experiment and c["protocol"] == protocol]
    _collect(out, path.name, cells, lambda fit: ctx_gp_variant(**doc["fits"][fit]))
    return out


def everything_after(results: Path, experiment: str, protocol: str, profile: str) -> dict[str, tuple[str, dict]]:
    """The variants scored after the dev files, the cnp's (:func:`scored_after`) and ctx-gp's
    fits (:func:`ctx_gp_after`): variant -> (file name, {cell: raw coverage curve})."""
    return scored_after(results, experiment, protocol, profile) | ctx_gp_after(results, experiment, protocol, profile)


def cells_by_group(experiment: str, cells: dict, groups: list[str]) -> dict:
    """:func:`scored_after`'s cells under a dev file's group names. A parameter cell is named
    after its family, as the dev file's groups are; a discrete regime's dev file has one group
    (its held-out split: ``polynomial-level8``, ``unseen-pairs``), the cell the regime's name."""
    if experiment == "parameter":
        return cells
    if len(groups) != 1:
        raise SystemExit(f"error: a {experiment} dev file holds one group, this one {len(groups)}: {groups}")
    return {groups[0]: cells[experiment]} if experiment in cells else {}


def curves_of(
    experiment: str, data: dict, after: dict[str, tuple[str, dict]] | None = None, sources: dict | None = None
) -> dict[str, np.ndarray]:
    """Calibration key -> (groups, len(SCALE_GRID)) raw coverage curves of one dev results file:
    rte's (and Strategy A's), and every classic's whose interval the run recorded, under
    ``search.calibration.method_key`` (the same dev split, the same rule). A learned classic whose
    variant (or ctx-gp fit) today neither the file scored nor made its row is read from ``after``
    (:func:`everything_after`: the same dev cells, scored outside the dev units) when that covers
    every group; ``sources`` (given) gets the file name of each key read from there."""
    by_scale = data["config"]["coverage_by_scale"]
    pick = lambda m: np.array([g[m] for g in by_scale.values()])  # noqa: E731
    if experiment != "parameter":
        out = {experiment: pick("rte")}
    else:
        out = {"parameter-proxy": pick("strategy-a")}
        if data["config"]["objective"]["variant"] != "strategy-a":  # rte is the objective search
            out["parameter-objective"] = pick("rte")
    rows = [m for m in next(iter(by_scale.values())) if m not in ("rte", "strategy-a")]
    classics = [m for m in rows if m not in VARIANTS]  # a dev file's variant rows: below
    # a learned classic's row is scaled for the variant behind it in this regime today
    # (classics.chosen): read from that variant's own row where a dev file scored the variants,
    # else from the classic's row when the file was made with that variant (its config's
    # classic_variants); a file that has neither calibrates nothing for it. ctx-gp alike, by its
    # fit (classics.CTX_GP_VARIANT; a file that does not record it was made with an older fit),
    # its scale kept under its own name
    made = data["config"].get("classic_variants", {})
    today = chosen(experiment) | {"ctx-gp": CTX_GP_VARIANT}
    groups = list(by_scale)
    for m in [m for m in classics if m in today]:
        source = today[m] if today[m] in rows else m if made.get(m) == today[m] else None
        name, cells = (after or {}).get(today[m], ("", {}))
        cells = cells_by_group(experiment, cells, groups) if source is None and cells else {}
        key = method_key(experiment, scale_name(m, experiment))
        if source is not None:
            out[key] = pick(source)
        elif cells and all(g in cells for g in groups):
            out[key] = np.array([cells[g] for g in groups])
            if sources is not None:
                sources[key] = name
        else:
            print(f"{experiment}: the file's {m} row is {made.get(m, 'an unrecorded variant')}, not today's "
                  f"{today[m]}, and no file scored after it covers this file's groups: no scale chosen for it",
                  file=sys.stderr)  # fmt: skip
    return out | {method_key(experiment, m): pick(m) for m in classics if m not in today}


def _dev_file(results: Path, experiment: str, protocol: str, profile: str) -> tuple[Path, dict] | None:
    """The dev results file of (experiment, protocol, profile) and its content; None if absent, a
    one-line error if it is not a dev run."""
    path = results / f"{experiment}-{protocol}-{profile}-dev.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if data["config"].get("split") != "dev":
        raise SystemExit(f"error: {path.name} is not a dev run; scales are chosen and checked on dev only")
    return path, data


def calibrate(profile: str, results: Path = RESULTS) -> dict:
    """The chosen scale of every (calibration key, protocol) with its dev coverage, raw and calibrated."""
    one = SCALE_GRID.index(1.0)
    scales = {}
    for experiment in EXPERIMENTS:
        for protocol in PROTOCOLS:
            found = _dev_file(results, experiment, protocol, profile)
            if found is None:
                raise SystemExit(
                    f"error: {experiment}-{protocol}-{profile}-dev.json is missing; run benchmarks/run.py --only "
                    f"{experiment} --profiles {profile} --protocols {protocol} --split dev"
                )
            path, data = found
            groups = list(data["config"]["coverage_by_scale"])
            sources: dict[str, str] = {}
            after = everything_after(results, experiment, protocol, profile)
            for key, curves in curves_of(experiment, data, after, sources).items():
                pooled = curves.mean(axis=0)
                scale = choose_scale(pooled)
                i = SCALE_GRID.index(scale)
                scales[f"{key}/{protocol}"] = {
                    "scale": scale,
                    "dev_coverage_raw": round(float(pooled[one]), 4),
                    "dev_coverage_calibrated": round(float(pooled[i]), 4),
                    "dev_groups": {
                        g: {"raw": round(float(c[one]), 4), "calibrated": round(float(c[i]), 4)}
                        for g, c in zip(groups, curves, strict=True)
                    },
                    "source": sources.get(key, path.name),
                }
                if experiment == "parameter":  # each built-in family's own dev split: a scale each
                    for g, c in zip(groups, curves, strict=True):
                        j = SCALE_GRID.index(choose_scale(c))
                        scales[f"{key}/{protocol}/{g}"] = {
                            "scale": SCALE_GRID[j],
                            "dev_coverage_raw": round(float(c[one]), 4),
                            "dev_coverage_calibrated": round(float(c[j]), 4),
                            "source": sources.get(key, path.name),
                        }
    return scales


def transfer(profile: str, scales: dict, results: Path = RESULTS) -> dict:
    """The coverage of the ``scales`` in use (:func:`calibrate`'s form) on ``profile``'s dev runs:
    per (calibration key, protocol) that has a dev file, each group's raw coverage and its coverage
    at the scale an estimator applies to it (a parameter family's own, else the regime's)."""
    one = SCALE_GRID.index(1.0)
    out = {}
    for experiment in EXPERIMENTS:
        for protocol in PROTOCOLS:
            found = _dev_file(results, experiment, protocol, profile)
            if found is None:
                continue
            path, data = found
            groups = list(data["config"]["coverage_by_scale"])
            after = everything_after(results, experiment, protocol, profile)
            sources: dict[str, str] = {}
            for key, curves in curves_of(experiment, data, after, sources).items():
                regime = f"{key}/{protocol}"
                if regime not in scales:
                    continue
                rows = {}
                for g, c in zip(groups, curves, strict=True):
                    scale = scales.get(f"{regime}/{g}", scales[regime])["scale"]
                    at = float(c[SCALE_GRID.index(scale)])
                    rows[g] = {"scale": scale, "raw": round(float(c[one]), 4), "calibrated": round(at, 4)}
                out[regime] = {"groups": rows, "source": sources.get(key, path.name)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="quick", help="the profile of the dev runs read")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--transfer", metavar="PROFILE", help="report the scales in use on PROFILE's dev runs instead")
    args = ap.parse_args(argv)
    command = "python scripts/calibrate_intervals.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.transfer:
        in_use = json.loads(SCALES_FILE.read_text())
        checked = transfer(args.transfer, in_use["scales"], args.results)
        if not checked:
            raise SystemExit(f"error: no {args.transfer}-profile dev runs in {args.results}")
        report = {"level": INTERVAL_LEVEL, "scales_profile": in_use["profile"], "profile": args.transfer,
                  "split": "dev", "command": command, "regimes": checked}  # fmt: skip
        write_json_atomic(args.results / f"interval-transfer-{args.transfer}.json", report)
        for regime, v in checked.items():
            print(regime, {g: f"{r['raw']:.3f} -> {r['calibrated']:.3f}" for g, r in v["groups"].items()})
        return 0
    scales = calibrate(args.profile, args.results)
    doc = {
        "level": INTERVAL_LEVEL,
        "grid": "0.25 * 2 ** (k / 10), k = 0..80",
        "profile": args.profile,
        "split": "dev",
        "seed_pooling": "every seed of the dev runs, groups weighted equally",
        "command": command,
        "scales": scales,
    }
    write_json_atomic(SCALES_FILE, {k: doc[k] for k in ("level", "profile", "split", "command", "scales")})
    write_json_atomic(args.results / "interval-calibration.json", doc)
    for key, v in scales.items():
        print(
            f"{key}: scale {v['scale']:g} (dev coverage {v['dev_coverage_raw']:.3f} -> "
            f"{v['dev_coverage_calibrated']:.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
