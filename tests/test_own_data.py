"""One's own data end to end: fit from a CSV, save, load in a new process, predict, evaluate."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from taskextrap.cli import main
from taskextrap.errors import TaskextrapError
from taskextrap.operators.train import TrainConfig
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet
from taskextrap.tasks.observed import ObservedTasks
from taskextrap.baselines.table import method_rows
from taskextrap.estimators.parameter import RTE
from taskextrap.evaluation import evaluate_observed, evaluation_table
from taskextrap.workflow import Columns, Contexts, DevCalibration, dev_split, predict_observed, split_targets

FAMILY = PARAMETER_FAMILIES["cubic"]
TINY = ["--steps", "5", "--pairs", "200", "--quiet"]
SHORT = TrainConfig(steps=5, batch=4096, eval_every=5)  # TINY's training, from Python: these tests check the plumbing


def _write(path, rows, header):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _observations(tasks, prefix, m, g, split=None):
    rows = []
    for i in range(len(tasks)):
        x = np.sort(g.uniform(*FAMILY.domain, m))
        x[0], x[-1] = FAMILY.domain
        y = tasks.values(x[None], [i])[0]
        rows += [
            [f"{prefix}{i}", a, b, tasks.params[i, 0]] + ([split] if split else []) for a, b in zip(x, y, strict=True)
        ]
    return rows


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A library CSV (24 tasks, 16 points each, known shift) and a targets CSV (5 held-out tasks)."""
    d = tmp_path_factory.mktemp("own")
    g = np.random.default_rng(0)
    lib = TaskSet.sample(FAMILY, {"F1_1": 12, "F1_2": 12}, g)
    tgt = TaskSet.sample(FAMILY, {"F2": 5}, g)
    _write(d / "library.csv", _observations(lib, "lib", 16, g), ["task", "x", "y", "shift"])
    _write(d / "targets.csv", _observations(tgt, "tgt", 20, g), ["task", "x", "y", "shift"])
    ctx = [r[:3] for r in _observations(tgt, "tgt", 20, g)]
    _write(
        d / "ctx.csv",
        [r for i, r in enumerate(ctx) if i % 20 < 8 or (i // 20 == 1 and i % 20 < 12)],
        ["task", "x", "y"],
    )
    _write(d / "q.csv", [[f"tgt{t}", v] for t in range(5) for v in (1.5, 10.0, 19.0)], ["task", "x"])
    return d


@pytest.fixture(scope="module")
def model(files):
    out = files / "model"
    with pytest.raises(SystemExit) as e:
        main(["fit", "--data", str(files / "library.csv"), "--out", str(out), "--param-cols", "shift",
              "--dev-order", "shift", *TINY])  # fmt: skip
    assert e.value.code == 0
    return out


def test_fit_saves_the_model_and_a_record_of_the_data_settings_and_dev_scale(model):
    assert {p.name for p in model.iterdir()} >= {"config.json", "model.safetensors", "fit.json"}
    record = json.loads((model / "fit.json").read_text())
    assert record["tasks"] == {"library": 24, "held_out": 0}
    assert record["dev"]["targets"] == 5 and "largest shift" in record["dev"]["split"]
    assert record["interval_scale_source"] == "chosen on this data's dev split"
    config = json.loads((model / "config.json").read_text())
    assert config["params"]["interval_scale"] == record["dev"]["interval_scale"]
    assert "observed" in config["library"]["family"]
    # rte-gp's context posterior, chosen on the same dev targets, kept as plain JSON
    from taskextrap.baselines.gp import GP_KERNELS
    from taskextrap.posterior.context import ContextPosterior
    from taskextrap.search.calibration import SCALE_GRID

    g = record["dev"]["rte-gp"]
    assert g["kernel"] in GP_KERNELS and 0.0 <= g["share"] <= 1.0 and g["interval_scale"] in SCALE_GRID
    assert ContextPosterior.from_dict(g["posterior"]).scale == g["interval_scale"]


@pytest.mark.slow  # a fresh interpreter loads the saved model: end to end, run by make test-slow
def test_a_new_process_predicts_what_the_fitting_one_does(files, model):
    out = files / "pred.csv"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "taskextrap.cli", "predict", "--model", str(model),
           "--context", str(files / "ctx.csv"), "--query", str(files / "q.csv"), "--out", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 15 and set(rows[0]) == {"task", "x", "mean", "lower", "upper", "level", "anchor",
                                                "anchor_weight", "phi_scale"}  # fmt: skip
    here = predict_observed(model, files / "ctx.csv", files / "q.csv")
    got = {(r["task"], float(r["x"])): (float(r["mean"]), float(r["upper"])) for r in rows}
    for t, x, m, u in zip(here["task"], here["x"], here["mean"], here["upper"], strict=True):
        assert got[(t, x)] == (m, u)  # to the bit, through the CSV's repr
    assert all(float(r["lower"]) < float(r["mean"]) < float(r["upper"]) for r in rows)
    assert {r["anchor"] for r in rows} <= {f"lib{i}" for i in range(24)}


def record_of(model) -> dict:
    return json.loads((model / "fit.json").read_text())


def test_evaluate_prints_a_verdict_and_paired_differences(files, model, capsys):
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--model", str(model), "--data", str(files / "targets.csv"), "--context-size", "8",
              "--out", str(files / "eval.json")])  # fmt: skip
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("verdict: rte ") and "rte - library-best-fit" in text
    result = json.loads((files / "eval.json").read_text())
    assert result["targets"] == 5 and list(result["mse"]) == ["rte", *method_rows("observed"), "rte-gp"]
    # rte-gp (the context posterior fit chose on its dev split) is judged beside rte: against it and every peer
    pairs = {(c["a"], c["b"]) for c in result["comparisons"]}
    assert ("rte", "rte-gp") in pairs and {("rte-gp", b) for b in method_rows("observed")} <= pairs
    assert result["interval_scales"]["rte-gp"] == record_of(model)["dev"]["rte-gp"]["interval_scale"]
    assert "rte-gp - library-best-fit" in text
    assert {"ctx-polyfit", "ctx-interp", "library-best-fit", "ctx-gp", "meta-gp", "cnp"} <= set(result["mse"])
    assert {"meta-gp", "cnp"} <= set(result["coverage_raw_by_method"])  # the classics' own intervals
    assert 0.0 <= result["coverage"] <= 1.0 and result["coverage_by_method"]["rte"] == result["coverage"]
    assert 0.0 <= result["coverage_by_method"]["ctx-gp"] <= 1.0  # a method with its own interval
    record = json.loads((model / "fit.json").read_text())
    assert set(result["seconds_by_method"]) == set(result["mse"])  # each method's price beside its error
    assert result["seconds_by_method"]["rte"]["fit_s"] == record["fit_s"]
    assert all(s["predict_s"] >= 0 for s in result["seconds_by_method"].values()) and "fit s" in text


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_evaluate_with_other_context_sizes_and_the_first_points(files, model):
    for how in ("random", "first"):
        r = evaluate_observed(model, files / "targets.csv", Contexts(16, how), Columns())
        assert r["context_size"] == 16 and r["targets"] == 5 and np.isfinite(r["mse"]["rte"])
    with pytest.raises(TaskextrapError, match="reads at least 8"):  # the model was fitted without min_context
        evaluate_observed(model, files / "targets.csv", 4, Columns())


@pytest.mark.parametrize(
    "argv,match",
    [
        (["fit", "--data", "{d}/library.csv", "--out", "{d}/m2", "--regime", "composition"], "parameter regime"),
        (["fit", "--data", "{d}/nothing.csv", "--out", "{d}/m2"], "no such file"),
        (["fit", "--data", "{d}/library.csv", "--out", "{d}/m2", "--y-col", "value"], "no y column 'value'"),
        (["evaluate", "--model", "{d}/model", "--data", "{d}/targets.csv", "--context-size", "20"], "need 21"),
        (["predict", "--model", "{d}/model", "--context", "{d}/ctx.csv", "--query", "{d}/bad_q.csv", "--out", "{d}/p"],
         "outside the library's domain"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(files, model, capsys, argv, match):
    _write(
        files / "bad_q.csv", [["tgt0", 0.5], ["tgt1", 27.0]] + [[f"tgt{t}", 0.5] for t in range(2, 5)], ["task", "x"]
    )
    with pytest.raises(SystemExit) as e:
        main([a.format(d=files) for a in argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and match in err and "\n" not in err


def test_dev_split_holds_out_the_largest_known_parameter_or_a_random_share():
    cols = {"task": np.repeat(list("abcdefghij"), 3), "x": np.tile([0.0, 1.0, 2.0], 10),
            "y": np.arange(30.0), "p": np.repeat(np.arange(10.0)[::-1], 3)}  # fmt: skip
    data = ObservedTasks.from_columns(cols, params=["p"])
    lib, held, how = dev_split(data, "p", 0.2, 0)
    assert held.ids.tolist() == ["a", "b"] and len(lib) == 8 and "pseudo-extrapolation" in how
    _, held, how = dev_split(data, None, 0.2, 0)
    assert len(held) == 2 and "interpolation split" in how
    with pytest.raises(TaskextrapError, match="not a known parameter"):
        dev_split(data, "q", 0.2, 0)


def test_a_large_dev_split_scores_a_seeded_subset_of_its_held_out_tasks(monkeypatch):
    """Beyond DEV_TARGETS held-out tasks, that many (the same for a seed) are scored; the others
    stay out of the dev library too, so it is the same pseudo-extrapolation."""
    import taskextrap.workflow as workflow

    cols = {"task": np.repeat([f"t{i:02d}" for i in range(40)], 3), "x": np.tile([0.0, 1.0, 2.0], 40),
            "y": np.arange(120.0), "p": np.repeat(np.arange(40.0), 3)}  # fmt: skip
    data = ObservedTasks.from_columns(cols, params=["p"])
    monkeypatch.setattr(workflow, "DEV_TARGETS", 3)
    lib, held, how = dev_split(data, "p", 0.2, 0)
    assert len(lib) == 32 and len(held) == 3 and "3 of them" in how
    assert set(held.ids) < {f"t{i}" for i in range(32, 40)} and lib.ids.tolist() == [f"t{i:02d}" for i in range(32)]
    assert dev_split(data, "p", 0.2, 0)[1].ids.tolist() == held.ids.tolist()


def test_split_targets_drops_points_outside_the_domain_and_pads_queries():
    cols = {"task": np.repeat(["a", "b"], [6, 8]), "x": np.r_[np.arange(6.0), np.arange(8.0) - 1],
            "y": np.arange(14.0)}  # fmt: skip
    s = split_targets(ObservedTasks.from_columns(cols), 3, "first", (0.0, 5.0))
    assert s.dropped == 2 and s.ctx_x.tolist() == [[0, 1, 2], [0, 1, 2]]
    assert s.mask.sum(axis=1).tolist() == [3, 3] and s.qry_x.shape == (2, 3)


def _tagged(files, name, rows_of):
    """A CSV of (task, x, y, shift, split) rows: ``rows_of`` maps a file of ``files`` to its split label."""
    rows = []
    for source, label in rows_of.items():
        with open(files / source) as f:
            rows += [[*r.values(), label] for r in csv.DictReader(f)]
    return _write(files / name, rows, ["task", "x", "y", "shift", "split"])


def test_evaluate_scores_held_out_targets_only(files, model, capsys):
    """Library tasks are never scored as targets: left out by the split column, or by id."""
    both = _tagged(files, "both.csv", {"library.csv": "train", "targets.csv": "test"})
    r = evaluate_observed(model, both, 8, Columns(split="split"))
    assert r["targets"] == 5 and r["left_out"] == {"labelled_train": 24, "library_ids": 0}
    unlabelled = _tagged(files, "unlabelled.csv", {"library.csv": "x", "targets.csv": "y"})
    r = evaluate_observed(model, unlabelled, 8, Columns())  # no split column: the ids tell
    assert r["targets"] == 5 and r["left_out"] == {"labelled_train": 0, "library_ids": 24}
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--model", str(model), "--data", str(unlabelled)])
    assert e.value.code == 0 and "left out 0 task(s) labelled train and 24 with a library task's id" in (
        capsys.readouterr().out
    )
    with pytest.raises(TaskextrapError, match="no held-out target: all 24 task"):
        evaluate_observed(model, files / "library.csv", 8, Columns())


def test_evaluate_and_predict_say_when_contexts_differ_from_the_scales(files, model):
    assert evaluate_observed(model, files / "targets.csv", 8, Columns())["interval_note"] is None
    note = evaluate_observed(model, files / "targets.csv", Contexts(16, "first"), Columns())["interval_note"]
    assert "chosen for contexts of 8 random points, these are 16 first points" in note
    assert "--context first --context-size 16" in note
    with pytest.warns(Warning, match="chosen for contexts of 8 random points, these are 12 points"):
        predict_observed(model, files / "ctx.csv", files / "q.csv")  # one target has 12 context points


def test_fit_json_is_plain_json_and_says_the_dev_coverage_is_in_sample(model):
    record = json.loads((model / "fit.json").read_text())
    assert record["settings"]["protocol"] == "paper" and record["settings"]["seed"] == 0
    assert record["settings"]["train"]["type"] == "TrainConfig"  # typed JSON, as config.json's
    assert record["dev"]["coverage_in_sample"] is True and "in-sample" in record["dev"]["coverage_note"]


def test_the_dev_calibration_never_sees_a_dev_target(files, monkeypatch):
    """The dev RTE is fitted on the dev library only; the final one on every library task."""
    from taskextrap.estimators.parameter import RTE
    from taskextrap.workflow import DevCalibration, fit_observed

    seen = []
    fit = RTE.fit
    monkeypatch.setattr(RTE, "fit", lambda self, library, **kw: seen.append(library) or fit(self, library, **kw))
    fit_observed(files / "library.csv", Columns(params=("shift",)), None, {"n_pairs": 200, "verbose": False,
                 "train": SHORT}, DevCalibration(order="shift"))  # fmt: skip
    dev_ids, final_ids = (set(lib.family.tasks.ids.tolist()) for lib in seen)
    held = dev_split(Columns(params=("shift",)).read(files / "library.csv"), "shift", 0.2, 0)[1]
    assert len(seen) == 2 and not dev_ids & set(held.ids.tolist()) and final_ids == dev_ids | set(held.ids.tolist())


def test_the_dev_scale_is_chosen_from_the_raw_interval(files, monkeypatch):
    """The scale is chosen on the dev RTE's raw sd: whatever scale the dev RTE was built with, the
    chosen one is the same (scoring the already scaled sd would choose another)."""
    from taskextrap.estimators.parameter import RTE
    from taskextrap.workflow import DevCalibration, fit_observed

    def chosen():
        _, record = fit_observed(files / "library.csv", Columns(params=("shift",)), None,
                                 {"n_pairs": 200, "verbose": False, "train": SHORT},
                                 DevCalibration(order="shift"))  # fmt: skip
        return record["dev"]["interval_scale"], record["dev"]["coverage_raw"]

    before = chosen()
    monkeypatch.setattr(RTE, "calibrated_scale", lambda self: 64.0)  # a dev RTE whose sd is 64 times the raw one
    assert chosen() == before


def test_predict_and_evaluate_refuse_a_folder_naming_user_code_without_trust_code(files, model, capsys, tmp_path):
    import shutil

    folder = tmp_path / "user-model"
    shutil.copytree(model, folder)
    config = json.loads((folder / "config.json").read_text())
    config["library"]["family"] = {"module_attr": "nosuchmodule:fam", "code_hash": "0" * 16}
    (folder / "config.json").write_text(json.dumps(config))
    evaluate = ["evaluate", "--model", str(folder), "--data", str(files / "targets.csv")]
    predict = ["predict", "--model", str(folder), "--context", str(files / "ctx.csv"), "--out", str(tmp_path / "p")]
    for argv in (evaluate, predict):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err.strip()
        assert e.value.code == 2 and "user code (nosuchmodule:fam)" in err and "--trust-code" in err
        with pytest.raises(SystemExit) as e:
            main([*argv, "--trust-code"])  # trusted: the module is imported, and is not there
        assert e.value.code == 2 and "cannot import module 'nosuchmodule'" in capsys.readouterr().err


def test_the_python_route_calibrates_as_fit_does_in_one_call(files, model, tmp_path):
    from taskextrap import fit_calibrated, read_tasks, save_fitted, split_targets
    from taskextrap.operators.train import TrainConfig
    from taskextrap.workflow import scale_context

    rte, record = fit_calibrated(read_tasks(files / "library.csv", params=["shift"]),
                                 {"train": TrainConfig(steps=5, batch=4096, eval_every=5), "n_pairs": 200},
                                 dev=DevCalibration(order="shift"), verbose=False)  # fmt: skip
    saved = json.loads((model / "fit.json").read_text())
    assert record["dev"] == saved["dev"] and rte.interval_scale == saved["dev"]["interval_scale"]
    # saved with its record, the folder tells predict and evaluate what `fit`'s folder tells them
    folder = save_fitted(rte, record, tmp_path / "py-model")
    assert json.loads((folder / "fit.json").read_text()) == json.loads(json.dumps(record))
    assert scale_context(folder) == scale_context(model) is not None
    s = split_targets(read_tasks(files / "targets.csv"), 8, "first")  # targets file -> contexts and queries
    assert s.ctx_x.shape == (5, 8) and (s.ctx_x.max(axis=1) <= s.qry_x.min(axis=1)).all()
    mean, sd = rte.predict(s.ctx_x, s.ctx_y, s.qry_x, return_std=True)
    assert mean.shape == s.qry_x.shape and (sd > 0).all()


def test_evaluate_says_when_a_folder_has_no_fit_record_to_calibrate_its_peers(files, model, tmp_path):
    bare = tmp_path / "bare"
    RTE.from_pretrained(model).save_pretrained(bare)  # the model without fit.json
    r = evaluate_observed(bare, files / "targets.csv", 8, Columns(), skip=("cnp", "meta-gp", "rte-gp"))
    assert "has no fit record (fit.json)" in r["calibration_note"] and "rte-gp" not in r["mse"]
    assert "note: " + r["calibration_note"] in evaluation_table(r)
    assert all(s is None for m, s in r["interval_scales"].items() if m != "rte")  # raw, and said so
    full = evaluate_observed(model, files / "targets.csv", 8, Columns(), skip=("cnp", "meta-gp", "rte-gp"))
    assert full["calibration_note"] is None and full["interval_scales"]["ctx-gp"] is not None


def test_the_two_fits_name_their_progress_bars(files, monkeypatch):
    from taskextrap import fit_calibrated, read_tasks
    from taskextrap.estimators import progress as P

    names, init = [], P.FitProgress.__init__

    def recording(self, *args, **kwargs):
        init(self, *args, **kwargs)
        names.append(self.name)

    monkeypatch.setattr(P.FitProgress, "__init__", recording)
    tiny = {"train": TrainConfig(steps=5, batch=4096, eval_every=5), "n_pairs": 200}
    fit_calibrated(read_tasks(files / "library.csv", params=["shift"]), tiny, dev=DevCalibration(order="shift"))
    assert names == ["RTE dev fit 1/2", "RTE final fit 2/2"]


def test_observed_tasks_and_target_splits_print_a_summary(files):
    from taskextrap import read_tasks, split_targets

    tasks = read_tasks(files / "targets.csv", params=["shift"])
    assert repr(tasks) == "ObservedTasks(5 tasks: 5 'train'; 20 points each, x in [0, 20], params ['shift'])"
    assert repr(split_targets(tasks, 8, seed=3)) == (
        "TargetSplit(5 targets: 8 context points and 12 queries each; 0 observations outside the domain left out)"
    )


def test_evaluate_shows_the_library_shape_peers_and_draws_a_picture(files, model, capsys):
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--model", str(model), "--data", str(files / "targets.csv"),
              "--plot", str(files / "plots")])  # fmt: skip
    out = capsys.readouterr().out
    assert e.value.code == 0 and f"drawn: {files / 'plots' / 'evaluation.png'}" in out
    assert all(f"rte - {peer}" in out for peer in ("library-mean", "library-knn", "library-fpca"))
    png = (files / "plots" / "evaluation.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_every_interval_is_calibrated_on_the_same_dev_split(files, model):
    """fit chooses rte's scale and rte-gp's posterior on the dev split; evaluate chooses every
    classic's scale on the same dev targets (once: peers.json) and reports every interval at its
    dev-chosen scale beside its raw coverage."""
    from taskextrap.search.calibration import SCALE_GRID

    record = json.loads((model / "fit.json").read_text())
    dev = record["dev"]
    classics = {"ctx-gp", "meta-gp", "cnp"}
    # where the dev step's time went: the dev RTE and rte-gp's choice (the peers are evaluate's)
    assert set(record["dev_seconds"]) == {"rte", "rte-gp"} and "methods" not in dev
    assert all(v >= 0 for v in record["dev_seconds"].values())
    r = evaluate_observed(model, files / "targets.csv", 8, Columns())
    peers = json.loads((model / "peers.json").read_text())
    assert set(peers["seconds"]) == set(method_rows("observed"))
    methods = peers["methods"]
    assert {m for m, d in methods.items() if "interval_scale" in d} == classics
    assert all(methods[m]["interval_scale"] in SCALE_GRID for m in classics)
    chosen = {m: methods[m]["interval_scale"] for m in classics}
    assert r["interval_scales"] == {"rte": dev["interval_scale"]} | chosen | {"rte-gp": dev["rte-gp"]["interval_scale"]}
    for m, scale in r["interval_scales"].items():  # a wider interval covers at least as much
        cal, raw = r["coverage_by_method"][m], r["coverage_raw_by_method"][m]
        assert (cal >= raw) if scale >= 1 else (cal <= raw)


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_peers_chosen_at_fit_are_the_ones_evaluate_chooses(files, model, capsys):
    """fit --peers chooses the peers on its dev split and prints each one's dev MSE beside rte's;
    evaluate rebuilds that very split from fit.json and the model's library and chooses the same
    (and keeps them in peers.json)."""
    evaluate_observed(model, files / "targets.csv", 8, Columns())
    later = json.loads((model / "peers.json").read_text())["methods"]
    out = files / "model-peers"
    with pytest.raises(SystemExit) as e:
        main(["fit", "--data", str(files / "library.csv"), "--out", str(out), "--param-cols", "shift",
              "--dev-order", "shift", "--peers", *TINY])  # fmt: skip
    assert e.value.code == 0
    record = json.loads((out / "fit.json").read_text())
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("dev split, mean MSE"))
    assert set(later) == set(method_rows("observed")) and f"rte {record['dev']['mse']:.4g};" in line
    for name, chosen in later.items():  # every peer scored on the same dev targets as rte, and printed
        assert np.isfinite(chosen["dev_mse"]) and f"{name} {chosen['dev_mse']:.4g}" in line
    assert record["dev"]["methods"] == later and set(record["dev_seconds"]) == {"rte", "rte-gp", *later} | {
        "ctx-interp",
        "ctx-polyfit",
        "library-best-fit",
        "library-mean",
    }
    evaluate_observed(out, files / "targets.csv", 8, Columns())
    assert not (out / "peers.json").exists()  # fit's choices are read, not made again


def test_the_library_shape_peers_are_tuned_on_the_dev_split_and_evaluated_so(files, model):
    """evaluate scores every setting of library-knn's k and library-fpca's (components, ridge) on
    fit's dev targets and keeps the lowest dev MSE; it fits each peer at its chosen setting and says so."""
    from taskextrap.baselines.library_shape import LibraryFPCA, LibraryNearest

    r = evaluate_observed(model, files / "targets.csv", 8, Columns())
    methods = json.loads((model / "peers.json").read_text())["methods"]
    for name, cls in (("library-knn", LibraryNearest), ("library-fpca", LibraryFPCA)):
        scored = methods[name]["dev_mse_by_setting"]
        assert len(scored) == int(np.prod([len(v) for v in cls.dev_grid.values()]))
        best = min(scored, key=lambda r: r["dev_mse"])
        assert methods[name]["params"] == best["params"] and methods[name]["dev_mse"] == best["dev_mse"]
    assert r["settings_by_method"]["library-knn"] == methods["library-knn"]["params"]
    assert r["settings_by_method"]["library-mean"] == {}  # nothing to choose
    assert r["classic_variants"]["cnp"].startswith("cnp-w128-x")  # which step scale the cnp row trained at
    assert "chosen on fit's dev split: library-knn k=" in evaluation_table(r)


@pytest.fixture
def fresh_model(model, tmp_path):
    """The module's model folder copied without the peers' choices (no peers.json yet)."""
    import shutil

    out = tmp_path / "model"
    shutil.copytree(model, out)
    (out / "peers.json").unlink(missing_ok=True)
    return out


def test_evaluate_skips_a_peer_without_choosing_or_scoring_it_and_chooses_it_later(files, fresh_model):
    """--skip cnp leaves cnp out of the dev choice (peers.json) and of every row; a later full
    evaluate chooses only cnp, keeps the others' choices and scores them the same."""
    skipped = evaluate_observed(fresh_model, files / "targets.csv", 8, Columns(), skip=("cnp",))
    kept = json.loads((fresh_model / "peers.json").read_text())
    assert "cnp" not in skipped["mse"] and "cnp" not in kept["chosen"] and "cnp" not in kept["seconds"]
    assert all(c["b"] != "cnp" for c in skipped["comparisons"]) and skipped["skipped"] == ["cnp"]
    assert "skipped (not chosen, not scored): cnp" in evaluation_table(skipped)
    full = evaluate_observed(fresh_model, files / "targets.csv", 8, Columns())
    later = json.loads((fresh_model / "peers.json").read_text())
    assert later["chosen"] == sorted(method_rows("observed")) and "cnp" in full["mse"]
    assert {m: c for m, c in later["methods"].items() if m != "cnp"} == kept["methods"]
    assert {m: v for m, v in full["mse"].items() if m != "cnp"} == skipped["mse"]


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_skipping_meta_gp_keeps_rte_gp_on_its_library_gp(files, fresh_model):
    """rte-gp's library GP is meta-gp's: with meta-gp's row skipped it is still fitted for
    rte-gp (here given half the precision), whose errors are those of a full evaluate."""
    path = fresh_model / "fit.json"
    record = json.loads(path.read_text())
    record["dev"]["rte-gp"]["posterior"]["share"] = 0.5
    path.write_text(json.dumps(record))
    full = evaluate_observed(fresh_model, files / "targets.csv", 8, Columns())
    r = evaluate_observed(fresh_model, files / "targets.csv", 8, Columns(), skip=("meta-gp",))
    assert "meta-gp" not in r["mse"] and "meta-gp" not in r["coverage_by_method"]
    assert r["per_target_mse"]["rte-gp"] == full["per_target_mse"]["rte-gp"]
    no_gp = evaluate_observed(fresh_model, files / "targets.csv", 8, Columns(), skip=("rte-gp", "meta-gp"))
    assert "rte-gp" not in no_gp["mse"] and all(c.get("a") != "rte-gp" for c in no_gp["comparisons"])


@pytest.mark.slow  # end to end (a whole run, fit or process): make test-slow
def test_a_peers_file_from_before_skipping_counts_every_peer_as_chosen(files, fresh_model):
    evaluate_observed(fresh_model, files / "targets.csv", 8, Columns())
    path = fresh_model / "peers.json"
    old = json.loads(path.read_text())
    del old["chosen"]
    path.write_text(json.dumps(old))
    evaluate_observed(fresh_model, files / "targets.csv", 8, Columns(), skip=("ctx-gp",))
    assert json.loads(path.read_text()) == old  # read back, nothing chosen again


def test_skip_names_a_peer_or_fails_in_one_line_before_any_work(files, tmp_path, capsys):
    with pytest.raises(TaskextrapError, match=r"cannot skip 'rte': the peers are ctx-interp, .*rte-gp$"):
        evaluate_observed(tmp_path / "no-model", files / "targets.csv", 8, Columns(), skip=("rte",))
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--model", str(tmp_path / "no-model"), "--data", str(files / "targets.csv"),
              "--skip", "cnp,knn"])  # fmt: skip
    assert e.value.code != 0 and "cannot skip 'knn'" in capsys.readouterr().err


def test_cli_evaluate_skip_accepts_commas_and_repeats(files, fresh_model, capsys):
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--model", str(fresh_model), "--data", str(files / "targets.csv"),
              "--skip", "cnp,ctx-gp", "--skip", "library-knn"])  # fmt: skip
    out = capsys.readouterr().out
    assert e.value.code == 0 and "skipped (not chosen, not scored): cnp, ctx-gp, library-knn" in out
    assert "rte - cnp" not in out and "rte - library-knn" not in out and "rte - library-fpca" in out
