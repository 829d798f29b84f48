"""composition-em: compositional extrapolation with the training labels hidden (beyond the paper).

The composition regime's setting (library, held-out pairs, targets and draws of ``composition``),
but RTE learns from a fixed set of observed training compositions whose (outer, inner) labels are
inferred by EM (``estimators.composition_em``). Rows on the held-out pairs, scored on the same
targets:

* ``rte``: the supervised CompositionRTE of ``composition`` (fresh labelled compositions every pass);
* ``rte-fixed-labels``: the same fixed training set as the EM arms with every label known (what the
  EM arms could reach with perfect pseudo-labels);
* ``rte-em-warmup``: no label at all; a search-only E-step starts EM;
* ``rte-em-semi25``: 25% of the training tasks keep their label; EM starts from them;
* ``ctx-interp``, ``library-best-fit``: label-free sanity baselines.

Every RTE arm trains Psi_comp and the decomposer for the same total gradient steps (the profile's).
The pseudo-label quality after each E-step is reported per arm as a ``fraction`` of training tasks
(group ``pseudo-labels``: the label behaves like the truth; ``pseudo-labels-exact``: the same pair;
``pseudo-labels-held-out-pair``: the label's family pair is held out, 0 since pseudo-labels are
restricted to the training family pairs, as every supervised label is).

``--family`` runs it on another primitive set, as ``composition`` does.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path

import numpy as np

from taskextrap.baselines.table import get_method
from taskextrap.estimators.composition_em import EMCompositionRTE
from taskextrap.experiments.composition import (
    COMPOSITION_OPTIONS,
    PROFILES as COMPOSITION_PROFILES,
    GROUP,
    get_set,
    make_library,
    make_rte,
    make_set_targets,
    set_config,
    set_run,
)
from taskextrap.experiments.discrete import mse_rows, set_group
from taskextrap.experiments.settings import Settings, UnitSpec
from taskextrap.experiments.registry import register
from taskextrap.experiments.units import UnitResult, per_target
from taskextrap.report.schema import make_row
from taskextrap.tasks.builtin import POLY_SIN_TANH

ARMS = {"rte-fixed-labels": 1.0, "rte-em-warmup": 0.0, "rte-em-semi25": 0.25}  # label share of each EM arm
# the method table's rows shown beside the EM arms: the two context- and library-only fits
TABLE_METHODS = ("ctx-interp", "library-best-fit")
METHODS = ("rte", *ARMS, *TABLE_METHODS)
EM_ROUNDS = 3
# Pseudo-label quality rows (fractions of the unlabelled training tasks) per label_quality kind.
LABEL_GROUPS = {
    "behaves": "pseudo-labels",
    "exact": "pseudo-labels-exact",
    "held_out_pair": "pseudo-labels-held-out-pair",
}


def make_em(spec: UnitSpec, share: float) -> EMCompositionRTE:
    """An EM arm with the supervised estimator's settings and a label share of ``share``; its fixed
    training set holds as many tasks as one of the supervised estimator's batches of Psi pairs."""
    base = make_rte(spec)
    return EMCompositionRTE(
        **{f: getattr(base, f) for f in base.__dataclass_fields__},
        label_share=share,
        n_tasks=spec.profile.n_pairs,
        em_rounds=EM_ROUNDS,
    )


def run_unit(spec: UnitSpec) -> UnitResult:
    """Fit the supervised RTE and the EM arms (sharing its label-free Gamma) for the unit's seed on
    the library of its primitive set (``spec.family``); score all."""
    t0 = time.perf_counter()
    primitive_set, protocol, profile, seed, device = spec.family, spec.protocol, spec.profile, spec.seed, spec.device
    primitives = make_library(profile.n_library, primitive_set)
    targets, obs = make_set_targets(primitives, protocol, profile, spec.split, spec.test_seed, primitive_set)
    cx, cy, qx = obs.ctx_x, obs.ctx_y, obs.qry_x
    rte = make_rte(spec).fit(primitives)
    timing = {"supervised_s": time.perf_counter() - t0}
    preds = {"rte": rte.predict(cx, cy, qx)}
    preds |= {
        m: get_method(m).build(seed=seed, device=device).fit(primitives).predict(cx, cy, qx) for m in TABLE_METHODS
    }
    n = len(targets)
    extra = {}
    for arm, share in ARMS.items():
        t = time.perf_counter()
        em = make_em(spec, share).fit(primitives, embedded=rte)
        preds[arm] = em.predict(cx, cy, qx)
        timing[f"{arm}_s"] = time.perf_counter() - t
        for r, quality in enumerate(em.history_):
            for kind, v in quality.items():
                extra[f"{arm}|e{r + 1}|{kind}"] = v
    errors = {m: per_target((p - obs.qry_y) ** 2, n) for m, p in preds.items()}
    errors.update(extra)
    timing["total_s"] = time.perf_counter() - t0
    return UnitResult(errors, timing)


@register(
    "composition-em",
    "Beyond the paper: composition with hidden training labels, EM pseudo-labels "
    "(warm-up, 25% labels) beside supervised RTE",
    COMPOSITION_PROFILES,
    options=COMPOSITION_OPTIONS,
    regime="composition",
    dev=True,
    family=get_set,
)
def run_composition_em(settings: Settings, cache_dir: Path | None, plot_dir: Path | None):
    """One unit per seed; rows are the held-out-pair MSE of every arm and the pseudo-label quality."""
    run, primitive_set, split = set_run("composition-em", settings, {"em_rounds": EM_ROUNDS, "arms": ARMS})
    run = dataclasses.replace(
        run, estimator=lambda spec: make_em(spec, 0.0), compute=lambda spec, plots: run_unit(spec), plot_file=None
    )
    group = functools.partial(set_group, primitive_set, POLY_SIN_TANH)  # a results group of this set

    def rows(errors):
        out = mse_rows("composition-em", errors, group(GROUP), METHODS)
        for key in sorted(k for k in errors if "|" in k):
            arm, step, kind = key.split("|")
            if len(errors[key][0]):  # the fixed-labels arm has no unlabelled task
                fractions = np.stack(errors[key], axis=1)
                out.append(
                    make_row("composition-em", group(LABEL_GROUPS[kind]), f"{arm}:{step}", "fraction", fractions)
                )
        config = {
            **set_config(settings, primitive_set, split),
            "em_rounds": EM_ROUNDS,
            "label_shares": ARMS,
            "label_pairs": EMCompositionRTE.label_pairs,
            "steps": "every RTE arm: the profile's Psi and decomposer steps (EM: in em_rounds equal M-steps)",
        }
        return out, config

    return run.plan(None, rows)
