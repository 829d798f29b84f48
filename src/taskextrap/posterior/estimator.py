"""``rte-gp``: RTE's relational prior with a context posterior (issue 64), an estimator with the
project's contract (``fit(library)``, ``predict(ctx_x, ctx_y, x_query, return_std=False)``).

``fit`` makes every choice on the library's own dev split, never on a target: an RTE of the same
settings and (with ``library_prior``) the library GP ``meta-gp`` are fitted on the dev library,
predict the dev targets at their context and query inputs, and ``posterior.context.choose_posterior``
chooses the residual prior's kernel, its share of the product with ``meta-gp`` and the interval
scale out of fold; then RTE and ``meta-gp`` are fitted on the whole library. ``predict`` reads a
target's context only: RTE's prediction at the context and query inputs, ``meta-gp``'s posterior
at the queries, and the chosen posterior. The paper's ``rte`` is the estimator inside, unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from taskextrap.baselines.classics import LibraryGP, chosen
from taskextrap.baselines.gp import GP_KERNELS, MetaGP, hyper_names
from taskextrap.baselines.table import get_method
from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Estimator, Fittable, fit_together
from taskextrap.estimators.parameter import RTE
from taskextrap.estimators.saving import decode, encode
from taskextrap.files import read_json, read_state, write_json_atomic, write_state_atomic
from taskextrap.scaling import FamilyScaler
from taskextrap.posterior.context import ContextPosterior, DevDraws, choose_posterior
from taskextrap.seeding import rng
from taskextrap.tasks.dev import DEV_REGION, dev_family
from taskextrap.tasks.observe import noise_scale
from taskextrap.tasks.taskset import TaskSet
from taskextrap.validation import as_2d_float, check_context, check_instance, check_int, check_query

__all__ = ["RTEGP", "SELF_CALIBRATED", "choice_summary", "in_unit", "library_dev_split"]

# rte-gp's interval is calibrated inside its fit, on the library's own dev split (RTEGP.choose):
# an experiment gives it a coverage row and takes no scale for it from the scales file
SELF_CALIBRATED = ("rte-gp",)
FORMAT = 1  # the folder layout of a saved rte-gp; another value is refused
RTE_FOLDER, GP_FILE, CONFIG_FILE = "rte", "library_gp.safetensors", "rte-gp.json"


def library_dev_split(library: TaskSet) -> tuple[TaskSet, TaskSet]:
    """A parametric library's own dev split (``tasks.dev.dev_family``): its tasks of the last
    training region are the dev targets, the others the dev library, relabelled by the dev
    family's regions. A library of one region that cannot be split is a one-line error."""
    family = dev_family(library.family)
    shift = library.params[:, library.family.param_names.index(library.family.shift)]
    spans = {r: family.regions[r] for r in (*family.train_regions, DEV_REGION)}
    region = np.array([next((r for r, (lo, hi) in spans.items() if lo <= v <= hi), "") for v in shift], dtype=object)
    held, kept = region == DEV_REGION, np.isin(region, family.train_regions)
    if not held.any() or not kept.any():
        raise TaskextrapError(
            f"the library of {library.family.name!r} has no tasks on one side of its dev split "
            f"({int(kept.sum())} dev-library tasks, {int(held.sum())} dev targets): pass dev=(library, targets)"
        )
    return (
        TaskSet(family, library.params[kept], region[kept]),
        TaskSet(family, library.params[held], region[held]),
    )


@dataclass(eq=False)
class RTEGP(Fittable):
    """``rte-gp``: RTE's prediction corrected towards the target's context by a Gaussian process
    on its residuals, times the library GP where dev says it helps (``posterior.context``).

    Args:
        rte: the relational prior, an unfitted RTE of any regime (its settings; None: ``RTE()``,
            the paper's ``rte`` row of the parameter regime).
        regime: whose dev-chosen ``meta-gp`` variant is the library prior (``baselines.classics.chosen``).
        library_prior: multiply by the library GP ``meta-gp`` (its dev-chosen variant), with the
            share dev chooses (False: the residual GP alone).
        kernels: the residual prior's kernel families tried on dev.
        dev_draws: context/query draws of each dev target.
        library_draws: ``fn(rte)`` -> the ``SharedDraws`` the library GP learns from beside a
            fitted RTE (a discrete regime's: its training batches, as its unit's table learns);
            None: the library GP's own draws of the library.

    Examples:
        >>> import numpy as np
        >>> from taskextrap import RTE
        >>> from taskextrap.operators.train import TrainConfig
        >>> from taskextrap.posterior.estimator import RTEGP
        >>> from taskextrap.tasks import PARAMETER_FAMILIES, TaskSet, get_protocol
        >>> family = PARAMETER_FAMILIES["quadratic"]
        >>> library = TaskSet.sample(family, {"F1_1": 24, "F1_2": 12}, np.random.default_rng(0))
        >>> small = RTE(n_pairs=200, train=TrainConfig(steps=5, batch=64), verbose=False)
        >>> model = RTEGP(small, kernels=("rbf",)).fit(library)
        >>> obs = get_protocol("paper").draw(TaskSet.sample(family, {"F2": 3}, np.random.default_rng(1)), 1,
        ...                                  np.random.default_rng(2))
        >>> mean, sd = model.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, return_std=True)
        >>> mean.shape, bool((sd > 0).all())
        ((3, 8), True)
    """

    rte: Any = None
    regime: str = "parameter"
    library_prior: bool = True
    kernels: tuple = GP_KERNELS
    dev_draws: int = 4
    library_draws: Any = field(default=None, repr=False, compare=False)
    verbose: bool = field(default=False, repr=False, compare=False)

    fitted_attribute = "posterior_"

    def _settings(self) -> dict:
        if self.rte is not None:
            check_instance("rte", self.rte, Estimator, "an unfitted RTE (taskextrap.RTE, LengthRTE, ...)")
        check_instance("regime", self.regime, str, "a regime name (parameter, length, ...)")
        check_instance("library_prior", self.library_prior, bool, "True or False")
        if not self.kernels:
            raise TaskextrapError("kernels must name at least one kernel family")
        for k in self.kernels:
            hyper_names(k)
        check_int("dev_draws", self.dev_draws, 1)
        return {}

    def _base(self) -> Any:  # an RTE of any regime (their fit returns Fittable)
        """A fresh RTE of the given settings and class (the prior is fitted twice: on the dev
        library, then on the whole library)."""
        base = RTE(verbose=self.verbose) if self.rte is None else self.rte
        return type(base)(**base.get_params())

    def _library_gp(self, rte: Any) -> LibraryGP | None:
        """``meta-gp`` at its dev-chosen variant, observing the library as ``rte`` does."""
        if not self.library_prior:
            return None
        entry = get_method(chosen(self.regime)["meta-gp"])
        gp = entry.build(seed=rte.seed, device=str(rte.device), protocol=rte.protocol, train=rte.train)
        assert isinstance(gp, LibraryGP)  # the table's meta-gp rows are LibraryGP variants
        return gp

    def fit(self, library: TaskSet, dev: tuple[TaskSet, TaskSet] | None = None) -> RTEGP:
        """Choose the context posterior on the dev split ``dev`` = (dev library, dev targets)
        (None: the library's own, :func:`library_dev_split`; :meth:`choose`), then fit RTE and
        the library GP on ``library``. Returns the estimator, fitted: ``rte_``, ``library_gp_``
        (or None), ``posterior_`` and ``dev_record_`` (the choice, scored out of fold on the dev
        targets)."""
        self._checked()
        posterior, record = self.choose(library, dev)
        self.rte_ = self._base().fit(library)
        gp = self._library_gp(self.rte_)
        if gp is not None:
            gp.fit(library)
        self.library_gp_: LibraryGP | None = gp
        self.dev_record_ = record
        self.posterior_ = posterior  # set last: an estimator is fitted once this exists
        return self

    def choose(self, library: TaskSet, dev: tuple[TaskSet, TaskSet] | None = None) -> tuple[ContextPosterior, dict]:
        """The context posterior chosen on ``library``'s dev split (:meth:`fit`'s first half; an
        experiment's unit calls it beside its own fits of RTE and ``meta-gp``): an RTE of this
        estimator's settings and the library GP fitted on the dev library, the dev targets drawn
        ``dev_draws`` times through RTE's protocol, ``posterior.context.choose_posterior``.

        Returns:
            (the chosen posterior, its record: the choice and the dev split's sizes).
        """
        self._checked()
        dev_library, dev_targets = library_dev_split(library) if dev is None else dev
        dev_rte = self._base().fit(dev_library)
        g = rng(dev_rte.seed, "rte-gp-dev")
        obs = dev_rte.protocol_.draw(dev_targets, self.dev_draws, g, noise_scale(dev_targets.family))
        posterior, record = self.choose_with(dev_rte, dev_library, obs)
        return posterior, record | {"dev_library": len(dev_library), "dev_targets": len(dev_targets)}

    def choose_with(self, dev_rte: Any, dev_library, draws, fitted_gp: Any = None) -> tuple[ContextPosterior, dict]:
        """The context posterior chosen on dev ``draws`` (``ctx_x``, ``ctx_y``, ``qry_x``,
        ``qry_y``; a ``task`` per draw and a query ``mask`` where they have them: protocol draws
        or a user's dev targets split into contexts and queries) given ``dev_rte``, fitted on
        ``dev_library``. The library GP of the same settings is fitted on it here, unless
        ``fitted_gp`` is that very GP already (a ``meta-gp`` fitted on ``dev_library`` with the
        library GP's arguments, its own library draws: the same fit, not made twice)."""
        cx, cy, qx = draws.ctx_x, draws.ctx_y, draws.qry_x
        k = cx.shape[1]
        base = dev_rte.predict(cx, cy, np.concatenate([cx, qx], 1))
        gp = self._library_gp(dev_rte)
        if (
            gp is not None
            and isinstance(fitted_gp, LibraryGP)
            and self.library_draws is None
            and (fitted_gp.get_params() == gp.get_params())
        ):
            gp = fitted_gp
        elif gp is not None:
            shared = None if self.library_draws is None else self.library_draws(dev_rte)
            fit_together([gp.begin_fit(dev_library, shared)])
        expert = None if gp is None else gp.predict(cx, cy, qx, return_std=True)
        dev = DevDraws(cx, cy, qx, draws.qry_y, base[:, :k], base[:, k:], getattr(draws, "task", None),
                       getattr(draws, "mask", None))  # fmt: skip
        return choose_posterior(dev, dev_rte.scaler_, expert, tuple(self.kernels), str(dev_rte.device))

    @classmethod
    def from_parts(
        cls, rte: Any, posterior: ContextPosterior, library_gp: LibraryGP | None = None, regime: str = "parameter"
    ) -> RTEGP:
        """A fitted ``rte-gp`` from a fitted RTE (of ``regime``), a chosen posterior and (when
        its share is below 1) a fitted library GP: an experiment's unit, whose RTE and ``meta-gp``
        are its own rows' fits."""
        rte.check_is_fitted()
        if posterior.share < 1.0 and library_gp is None:
            raise TaskextrapError("this posterior gives the library GP a share: pass a fitted library_gp")
        model = cls(regime=regime, library_prior=library_gp is not None)
        model.rte_, model.library_gp_, model.dev_record_ = rte, library_gp, {}
        model.posterior_ = posterior
        return model

    # ------------------------------------------------------------------------- saving
    def save_pretrained(self, folder, library: bool = True) -> Path:
        """Write this fitted ``rte-gp`` into ``folder``: RTE's own folder (``rte/``,
        ``estimators.saving``), the library GP's arrays (``library_gp.safetensors``) and
        ``rte-gp.json`` (the settings, the chosen posterior, the dev record); never a pickle.
        :meth:`from_pretrained` reads it back to the same predictions. Returns the folder."""
        self.check_is_fitted()
        folder = Path(folder)
        self.rte_.save_pretrained(folder / RTE_FOLDER, library=library)
        gp = self.library_gp_
        if gp is not None:
            meta = {"params": encode(gp.get_params(), "the library GP's settings"),
                    "scaler": list(dataclasses.astuple(gp.gp_.scaler_))}  # fmt: skip
            arrays = {"log_theta": gp.gp_.log_theta_.cpu().numpy(), "mean": gp.gp_.mean_.cpu().numpy()}
            write_state_atomic(folder / GP_FILE, arrays, meta)
        record = {
            "format": FORMAT,
            "estimator": type(self.rte_).__name__,
            "settings": {
                "regime": self.regime,
                "library_prior": self.library_prior,
                "kernels": list(self.kernels),
                "dev_draws": self.dev_draws,
            },
            "posterior": self.posterior_.to_dict(),
            "library_gp": gp is not None,
            "dev_record": self.dev_record_,
        }
        write_json_atomic(folder / CONFIG_FILE, record)
        return folder

    @classmethod
    def from_pretrained(cls, folder, library=None, trust_code: bool = False) -> RTEGP:
        """The fitted ``rte-gp`` :meth:`save_pretrained` wrote into ``folder`` (nothing fitted
        again; ``library`` and ``trust_code`` as ``RTE.from_pretrained`` reads them)."""
        folder = Path(folder)
        record = read_json(folder / CONFIG_FILE)
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise TaskextrapError(f"{folder / CONFIG_FILE} is not an rte-gp folder of format {FORMAT}")
        rte = _rte_class(record.get("estimator", "RTE")).from_pretrained(folder / RTE_FOLDER, library, trust_code)
        gp = None
        if record.get("library_gp"):
            arrays, meta = read_state(folder / GP_FILE)
            gp = LibraryGP(**decode(meta["params"]))
            inner = MetaGP(gp.kernel, gp.mean_degree, device=str(rte.device))
            inner.scaler_ = FamilyScaler(*meta["scaler"])
            inner.log_theta_ = torch.from_numpy(np.ascontiguousarray(arrays["log_theta"])).to(
                torch.device(str(rte.device))
            )
            inner.mean_ = torch.from_numpy(np.ascontiguousarray(arrays["mean"])).to(torch.device(str(rte.device)))
            gp.gp_, gp.library_ = inner, rte.library_
        model = cls.from_parts(rte, ContextPosterior.from_dict(record["posterior"]), gp)
        settings = record.get("settings", {})
        model.regime = str(settings.get("regime", "parameter"))
        model.library_prior = bool(settings.get("library_prior", gp is not None))
        model.kernels = tuple(settings.get("kernels", GP_KERNELS))
        model.dev_draws = int(settings.get("dev_draws", 4))
        model.dev_record_ = record.get("dev_record", {})
        return model

    def predict(self, ctx_x, ctx_y, x_query, return_std: bool = False, decomposition=None, at_query=None):
        """Each target's prediction (n, q) at ``x_query`` from its context (n, k); with
        ``return_std`` also the calibrated predictive sd (n, q). ``decomposition``: RTE's of these
        contexts (``rte_.decompose``), when the caller has it (the same numbers, one search less).
        ``at_query``: RTE's own prediction (n, q) at ``x_query`` from that decomposition (an
        experiment's ``rte`` row), when the caller has it: then only the context inputs run
        through RTE (its candidates predicted once at the queries, not twice; the numbers differ
        from one joint pass only in the rounding of the network's row blocks)."""
        self.check_is_fitted()
        ctx_x, ctx_y = check_context(ctx_x, ctx_y)
        x_query = check_query(x_query, len(ctx_x), "x_query")
        k = ctx_x.shape[1]
        if at_query is None:
            base = self.rte_.predict(ctx_x, ctx_y, np.concatenate([ctx_x, x_query], 1), decomposition)
        else:
            if decomposition is None:
                raise TaskextrapError("at_query is RTE's prediction from a decomposition: pass that decomposition")
            at_query = as_2d_float("at_query", at_query)  # one prediction per task: never broadcast
            if at_query.shape != x_query.shape:
                raise TaskextrapError(f"at_query must have x_query's shape {x_query.shape}, got {at_query.shape}")
            base = np.concatenate([self.rte_.predict(ctx_x, ctx_y, ctx_x, decomposition), at_query], 1)
        expert = None
        if self.library_gp_ is not None and self.posterior_.share < 1.0:
            expert = self.library_gp_.predict(ctx_x, ctx_y, x_query, return_std=True)
        mean, sd = self.posterior_.predict(
            base[:, :k], base[:, k:], ctx_x, ctx_y, x_query, expert, str(self.rte_.device)
        )
        return (mean, sd) if return_std else mean


def _rte_class(name: str) -> Any:
    """The RTE class a saved rte-gp names (its relational prior's regime), or a one-line error."""
    from taskextrap.estimators.composition import CompositionRTE
    from taskextrap.estimators.composition_depth3 import Composition3RTE
    from taskextrap.estimators.length import LengthRTE

    classes = {c.__name__: c for c in (RTE, LengthRTE, CompositionRTE, Composition3RTE)}
    if name not in classes:
        raise TaskextrapError(f"a saved rte-gp's RTE is a {name!r}; this taskextrap reads {sorted(classes)}")
    return classes[name]


def in_unit(
    dev_rte: Any, rte: Any, library, dev, library_gp: LibraryGP | None, regime: str, library_draws=None
) -> RTEGP:
    """``rte-gp`` of an experiment's unit: the context posterior chosen on the dev split ``dev``
    (None: the parametric library's own, :func:`library_dev_split`) by ``dev_rte`` (an unfitted
    RTE of the unit's settings), on top of the unit's own fits of ``rte`` and ``meta-gp``
    (``library_gp``, the row's; None where the unit has none), so its relational prior is the
    ``rte`` row's, bit for bit; ``library_draws`` as :class:`RTEGP` takes it. Its ``dev_record_``
    is the choice's record."""
    chooser = RTEGP(rte=dev_rte, regime=regime, library_prior=library_gp is not None, library_draws=library_draws)
    posterior, record = chooser.choose(library, dev)
    model = RTEGP.from_parts(rte, posterior, library_gp if posterior.share < 1.0 else None, regime)
    model.dev_record_ = record
    return model


def choice_summary(record: dict) -> dict:
    """What an ``rte-gp``'s dev choice was (a results file's ``config``): the kernel, polynomial
    degree, share, interval scale and amplitude pseudo-points, the choice's out-of-fold MSE and
    coverage on the dev targets beside RTE's own MSE there, and the dev split's sizes."""
    keys = ("kernel", "degree", "share", "correct", "interval_scale", "dof", "out_of_fold_coverage_raw",
            "out_of_fold_coverage", "out_of_fold_interval_score", "base_mse", "dev_library", "dev_targets")  # fmt: skip
    out = {k: record[k] for k in keys if k in record}
    scores = record.get("out_of_fold_mse", {})
    if not record.get("correct", True):  # RTE's own prediction was chosen
        out["out_of_fold_mse"] = record["base_mse"]
    elif scores:  # the chosen posterior's out-of-fold MSE, beside the base's
        out["out_of_fold_mse"] = scores[f"{record['kernel']}@{record['degree']}@{record['share']:.4g}"]
    return out
