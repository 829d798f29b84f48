"""Leak audit: no fitted component ever consumes a held-out task, and the audit can fail.

The honest runs must pass ``audit.check``; each mutation test injects one leak into one fit
(probe pretraining, Psi's model selection, the length decomposer, Psi_comp's training pairs,
a fine-tuning corpus) and asserts that the audit names it.
"""

import numpy as np
import pytest


from taskextrap import audit
from taskextrap.errors import TaskextrapError
from taskextrap.baselines.table import has_own_interval, method_rows
from taskextrap.experiments.parameter import INTERVAL_METHODS, SELF_CALIBRATED, main_methods, run_unit
from taskextrap.experiments.settings import UnitSpec
from taskextrap.experiments.parameter import PROFILES as PARAMETER_PROFILES
from taskextrap.operators.parameter import sort_context
from taskextrap.operators.train import TrainConfig
from taskextrap.estimators import library_fit as phase1a_module
from taskextrap.estimators.parameter import RTE
from taskextrap.seeding import rng
from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol
from taskextrap.search.calibration import interval_keys

OWN_INTERVALS = tuple(filter(has_own_interval, method_rows("parameter")))  # the table's own intervals

INDUCTIVE = {"sparse-inductive", "t2v-inductive", "inductive-oracle"}
CLASSICS = {"meta-gp", "cnp"}  # the classics fitted on the library (ctx-gp fits the target's context only)
FAM = PARAMETER_FAMILIES["quadratic"]


def _check_param(seen, **kw):
    """The parameter regime's audit: regions judged by the test's own family, F1 only."""
    audit.check(seen, FAM.training_labels(), labels=FAM.region_of, **kw)


def test_spy_collects_only_inside_its_block():
    audit.record_fit("outside", np.zeros((1, 1)))
    with audit.spy() as seen:
        audit.record_fit("inside", np.ones((2, 3)))
    audit.record_fit("after", np.zeros((1, 1)))
    assert [c for c, _ in seen] == ["inside"]
    assert seen[0][1].shape == (2, 3)


def test_check_names_held_out_unlabelled_and_missing_components():
    f2 = FAM.sample_params("F2", 2, np.random.default_rng(0))
    f1 = FAM.sample_params("F1_1", 2, np.random.default_rng(0))
    with audit.spy() as seen:
        audit.record_fit("scaler", f1, FAM)
        audit.consume("pca", audit.Batch((np.zeros((2, 3)),)))  # no sources: no task identity
        audit.consume("psi", audit.Batch((f1,), [audit.Source(FAM, f2)]), stage="val")
    with pytest.raises(audit.LeakError) as e:
        audit.check(seen, FAM.training_labels(), required={"scaler", "decomposer"})
    msg = str(e.value)
    assert "\n" not in msg and "scaler" not in msg.split(";")[0]
    assert "psi (val): F2" in msg and "pca (train): data without task identity" in msg
    assert "never reported: decomposer" in msg
    audit.check(seen[:1], FAM.training_labels(), required={"scaler"})  # the F1 record alone passes


def test_consume_verifies_that_the_named_tasks_generate_the_arrays():
    g = np.random.default_rng(0)
    f1, f2 = FAM.sample_params("F1_2", 3, g), FAM.sample_params("F2", 3, g)
    x = g.uniform(*FAM.domain, size=(3, 5))
    honest = audit.Batch((x, FAM(f1, x)), [audit.Source(FAM, f1, ((0, 1, 0.0),))])
    lying = audit.Batch((x, FAM(f2, x)), [audit.Source(FAM, f1, ((0, 1, 0.0),))])
    assert audit.consume("psi", lying) == tuple(lying)  # nobody listens: a no-op
    with audit.spy() as seen:
        audit.consume("psi", honest)
        with pytest.raises(audit.LeakError, match="do not generate"):
            audit.consume("psi", lying)
    assert len(seen) == 1


@pytest.mark.parametrize("protocol", ["paper", "strict"])
def test_parameter_experiment_never_fits_on_f2(protocol):
    with audit.spy() as seen:
        unit = run_unit(UnitSpec(FAM, get_protocol(protocol), PARAMETER_PROFILES["tiny"], seed=0, embedding="gradient"))
    diagnostics = {"entropy:rte", "entropy:strategy-a", "anchor-retrieved:rte", "anchor-retrieved:strategy-a"}
    intervals = {
        k for m in (*INTERVAL_METHODS, *SELF_CALIBRATED, *OWN_INTERVALS) for k in interval_keys(f"interval:{m}")
    }
    assert set(unit.errors) == set(main_methods()) | {"far-anchors"} | intervals | diagnostics
    assert {f"{m}_predict_s" for m in main_methods()} | {"search_s"} <= set(unit.timing)  # each row's price
    _check_param(seen, required={"scaler", "probe", "pca", "psi"} | INDUCTIVE | CLASSICS)
    assert {(r.component, r.stage) for r in seen} >= {("psi", "val"), ("psi", "train")} | {
        (k, "val") for k in INDUCTIVE
    }
    f2_lo = FAM.regions["F2"][0]
    for component, params in seen:
        assert params.ndim == 2 and params.shape[1] == 3 and len(params) > 0, component
        assert params[:, 0].max() < f2_lo, component


@pytest.mark.slow  # end to end, run by .ci/run's slow set (make test stays under 5 minutes)
def test_parameter_dev_split_never_fits_on_its_held_out_region():
    """The dev split (DESIGN.md, "Splits") holds out F1_2 as ``dev``: no fit may see it, nor F2."""
    from taskextrap.tasks.dev import dev_family

    dev = dev_family(FAM)
    with audit.spy() as seen:
        run_unit(UnitSpec(dev, get_protocol("paper"), PARAMETER_PROFILES["tiny"], seed=0, embedding="gradient"))
    audit.check(
        seen,
        dev.training_labels(),
        labels=dev.region_of,
        required={"scaler", "probe", "pca", "psi"} | INDUCTIVE | CLASSICS,
    )
    audit.check(seen, {"F1_1"}, labels=FAM.region_of)  # judged by the real split: F1_1 only, no F1_2, no F2


@pytest.mark.parametrize("split", ["test", "dev"])
def test_multistep_experiment_fits_on_its_library_regions_only(split):
    """parameter-multistep fits RTE, the chained oracle and the inductive baselines on F1 only
    (on the dev split: on the two dev library slices, so F1_2's upper part, F2 and beyond never)."""
    from taskextrap.experiments import multistep as M
    from taskextrap.tasks.builtin import MULTISTEP_FAMILIES

    real = MULTISTEP_FAMILIES["cubic"]
    fam = M.families_for(real, split)[0]
    with audit.spy() as seen:
        M.run_unit(UnitSpec(fam, get_protocol("paper"), PARAMETER_PROFILES["tiny"], seed=0, embedding="gradient"))
    audit.check(
        seen, fam.training_labels(), labels=fam.region_of, required={"scaler", "probe", "pca", "psi"} | INDUCTIVE
    )
    if split == "dev":  # judged by the real split too: every fitted task is an F1 task
        audit.check(seen, {"F1_1"}, labels=real.region_of)


def test_fit_refuses_a_library_with_held_out_tasks(make_rte):
    lib = TaskSet.sample(FAM, {"F1_1": 5, "F1_2": 5, "F2": 1}, np.random.default_rng(0))
    with audit.spy() as seen, pytest.raises(TaskextrapError, match="held-out") as e:
        make_rte().fit(lib)
    assert "\n" not in str(e.value)
    assert seen == []  # rejected before anything was fitted


# ----------------------------------------------------------------------------- mutations


def _f2_tasks(n: int, seed: int = 1) -> TaskSet:
    return TaskSet.sample(FAM, {"F2": n}, np.random.default_rng(seed))


def test_honest_rte_fit_passes_the_audit(make_rte, quad_library):
    with audit.spy() as seen:
        make_rte(embedding="gradient").fit(quad_library)
    _check_param(seen, required={"scaler", "probe", "pca", "psi"})


def test_audit_detects_an_f2_task_in_probe_pretraining(make_rte, quad_library, monkeypatch):
    """Mutation (a): one F2 curve joins the probe's pretraining set (the PCA still sees F1 only)."""
    from taskextrap.embed.estimators import ProxyEmbedding

    def leaky(method, dim, seed, scaler, library, obs, **kw):
        f2 = _f2_tasks(1)
        both = TaskSet(FAM, np.concatenate([library.params, f2.params]), np.concatenate([library.region, f2.region]))
        grid = np.broadcast_to(FAM.grid(64), (len(both), 64))
        contexts = audit.Batch(
            (obs.ctx_x, obs.ctx_y, obs.qry_x, obs.qry_y), [audit.Source(FAM, obs.params, ((2, 3, 0.0),))]
        )
        curves = audit.Batch((grid, both.values(grid)), [audit.Source(FAM, both.params, ((0, 1, 0.0),))])
        return ProxyEmbedding(method, dim=dim, seed=seed)._fit(contexts, curves, scaler)

    monkeypatch.setattr(phase1a_module, "fit_library_embedding", leaky)
    with audit.spy() as seen:
        make_rte(embedding="gradient").fit(quad_library)
    with pytest.raises(audit.LeakError, match=r"probe \(train\): F2") as e:
        _check_param(seen)
    assert "pca" not in str(e.value) and "psi" not in str(e.value)


def test_audit_detects_f2_curves_swapped_into_pretraining_under_f1_names(make_rte, quad_library, monkeypatch):
    """Mutation (a'): the pretraining arrays hold an F2 curve while the batch still names F1 tasks."""
    from taskextrap.embed.estimators import ProxyEmbedding

    honest = ProxyEmbedding._fit

    def leaky(self, contexts, pretrain, scaler):
        grid, curves = pretrain
        curves = curves.copy()
        curves[0] = _f2_tasks(1).values(grid[:1])[0]
        return honest(self, contexts, audit.Batch((grid, curves), pretrain.sources), scaler)

    monkeypatch.setattr(ProxyEmbedding, "_fit", leaky)
    with audit.spy(), pytest.raises(audit.LeakError, match=r"probe \(train\) consumed arrays that its reported"):
        make_rte(embedding="gradient").fit(quad_library)


@pytest.mark.parametrize("relabel", [True, False])
def test_audit_detects_f2_targets_in_psi_model_selection(make_rte, quad_library, monkeypatch, relabel):
    """Mutation (b): Psi's validation batch holds F2 targets, named as such (relabel) or still
    named as the F1 validation tasks it replaced (caught by the verification)."""
    honest = RTE._pair_arrays

    def leaky(self, draw_idx, g):
        batch = honest(self, draw_idx, g)
        if not np.array_equal(draw_idx, np.flatnonzero(self.draws_.val)):
            return batch
        obs = self.protocol_.draw(_f2_tasks(len(draw_idx)), 1, np.random.default_rng(2))
        cx, cy = sort_context(obs.ctx_x, obs.ctx_y)
        target, anchor = batch.sources
        arrays = (cx, cy, FAM(anchor.params, cx), obs.qry_x, FAM(anchor.params, obs.qry_x), batch[5], obs.qry_y)
        sources = [audit.Source(FAM, obs.params, target.checks), anchor] if relabel else batch.sources
        return audit.Batch(arrays, sources)

    monkeypatch.setattr(RTE, "_pair_arrays", leaky)
    if relabel:
        with audit.spy() as seen:
            make_rte().fit(quad_library)
        with pytest.raises(audit.LeakError, match=r"psi \(val\): F2") as e:
            _check_param(seen)
        assert "psi (train)" not in str(e.value)
    else:
        with audit.spy(), pytest.raises(audit.LeakError, match=r"psi \(val\) consumed arrays"):
            make_rte().fit(quad_library)


# ----------------------------------------------------------------------------- discrete regimes

TINY_DISCRETE = dict(
    n_pairs=150,
    train=TrainConfig(steps=6, batch=256, eval_every=3),
    decomposer_train=TrainConfig(steps=6, batch=64, eval_every=3),
    seed=0,
)


@pytest.fixture(scope="module")
def ladder_library():
    from taskextrap.tasks.ladder import POLYNOMIAL_LADDER, LadderSet

    return LadderSet.sample_library(POLYNOMIAL_LADDER, 6, rng(0, "test-ladder"))


@pytest.mark.parametrize("inject", [False, True])
def test_length_audit_detects_a_degree9_task_in_the_decomposer(ladder_library, monkeypatch, inject):
    """Mutation (c): the decomposer's training steps may start from level-8 library tasks, so
    some of its targets are degree-9 polynomials. The honest fit passes the same check."""
    from taskextrap.estimators.length import LengthRTE

    ladder = ladder_library.family
    if inject:
        honest = LengthRTE._decomposer_arrays
        top = np.flatnonzero(ladder_library.level == 8)
        monkeypatch.setattr(
            LengthRTE, "_decomposer_arrays", lambda self, pool, n, g: honest(self, np.union1d(pool, top), n, g)
        )
    with audit.spy() as seen:
        LengthRTE(embedding="gradient", **TINY_DISCRETE).fit(ladder_library)
    error = _check_discrete_fit(seen, ladder.training_labels(), inject, r"decomposer \(train\): level-9")
    assert error is None or "psi" not in error


@pytest.mark.parametrize("inject", [False, True])
def test_composition_audit_detects_a_held_out_pair_in_psi_comp(leak_held_out_pairs, inject):
    """Mutation (d): Psi_comp's training compositions include the held-out pairs."""
    from taskextrap.estimators.composition import CompositionRTE
    from taskextrap.tasks.primitives import PAPER_SPLIT, PrimitiveSet

    prims = PrimitiveSet.sample(n_per_family=8, rng=rng(0, "test-prims"))
    if inject:
        leak_held_out_pairs(CompositionRTE, "_operator_arrays")
    with audit.spy() as seen:
        CompositionRTE(k=3, embedding="gradient", **TINY_DISCRETE).fit(prims)
    error = _check_discrete_fit(
        seen, PAPER_SPLIT.training_labels(), inject, r"psi \((train|val)\): .*(sin o poly|tanh o sin|poly o tanh)"
    )
    assert error is None or ("decomposer" not in error and "scaler" not in error)


def _check_discrete_fit(seen, labels, inject: bool, match: str) -> str | None:
    """Audit a discrete-regime fit: an honest one passes (None); an injected leak must raise a
    LeakError matching ``match`` (its message is returned for further checks)."""
    required = {"scaler", "probe", "pca", "psi", "decomposer"}
    if not inject:
        audit.check(seen, labels, required=required)
        return None
    with pytest.raises(audit.LeakError, match=match) as e:
        audit.check(seen, labels, required=required)
    return str(e.value)


def test_audit_detects_an_f2_task_in_the_classics_library_draws(monkeypatch):
    """meta-gp and cnp report the draws they fit: one F2 task slipped into them fails the audit."""
    from taskextrap.experiments import parameter as P

    honest = P.library_batch

    def leaky(rte, mask, extra=None):
        batch = honest(rte, mask, extra)
        cx, cy, qx, qy, e = batch
        params = batch.sources[0].params.copy()
        params[0] = TaskSet.sample(FAM, {"F2": 1}, rng(0, "leak")).params[0]
        cy, qy = cy.copy(), qy.copy()
        cy[0], qy[0] = FAM(params[:1], cx[:1])[0], FAM(params[:1], qx[:1])[0]
        return audit.Batch((cx, cy, qx, qy, e), [audit.Source(FAM, params, batch.sources[0].checks)])

    monkeypatch.setattr(P, "library_batch", leaky)
    with audit.spy() as seen:
        run_unit(UnitSpec(FAM, get_protocol("paper"), PARAMETER_PROFILES["tiny"], seed=0, embedding="gradient"))
    with pytest.raises(audit.LeakError, match="leak audit failed") as e:
        _check_param(seen)
    assert "meta-gp" in str(e.value) and "cnp" in str(e.value)
