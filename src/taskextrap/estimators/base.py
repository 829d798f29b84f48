"""The contract every Relational Task Extrapolator follows, whatever its regime.

An estimator is fitted on a library of training tasks (``fit(library)``), explains a target
from its context alone (``decompose(ctx_x, ctx_y) -> Decomposition``) and predicts the target
at query inputs (``predict(ctx_x, ctx_y, x_query, decomposition=None)``). Everything learned in
``fit`` is an attribute whose name ends in ``_``; before ``fit`` there is none, and
:func:`check_is_fitted` says so in one line. An oracle or an ablation does not get a special
keyword: it builds the :class:`Decomposition` it wants (``decomposition_for``) and passes it to
``predict``.
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from taskextrap.errors import TaskextrapError, did_you_mean
from taskextrap.validation import as_index_array, check_context, check_instance, check_query, check_scaled

if TYPE_CHECKING:
    from taskextrap.scaling import FamilyScaler


@dataclass(frozen=True)
class Decomposition:
    """How each target relates to the library: candidates per target, best first.

    Attributes:
        anchors: library indices of each candidate, (n, k) — or (n, k, parts) where a candidate
            is made of several library tasks (a composition's outer and inner constituent).
        phi: the transformation of each candidate, (n, k, ...): a proxy-space shift (parameter
            regime), a new coefficient (length regime); (n, k, 0) where the relation has no
            continuous part (composition).
        score: how well each candidate explains the context, (n, k); lower is better (a proxy
            distance or a context loss). NaN for a candidate that was given, not searched.
        extras: regime diagnostics (the decomposer's guess, the retrieved candidates, ...).
        weights: the posterior over the candidates, (n, k), rows summing to 1: how much of the
            prediction each candidate gets (``search.posterior``). None: ``predict`` decides
            (the regime's default: an equal mean, or weights from the scores).
    """

    anchors: np.ndarray
    phi: np.ndarray
    score: np.ndarray
    extras: dict = field(default_factory=dict)
    weights: np.ndarray | None = None

    def __post_init__(self):
        anchors, phi, score = (_numeric(name, getattr(self, name)) for name in ("anchors", "phi", "score"))
        if score.ndim != 2:
            raise TaskextrapError(f"a decomposition's score must have shape (targets, candidates), got {score.shape}")
        n, k = score.shape
        if anchors.shape[:2] != (n, k) or phi.shape[:2] != (n, k):
            raise TaskextrapError(
                f"a decomposition's anchors {anchors.shape}, phi {phi.shape} and "
                f"score {score.shape} must agree on (targets, candidates)"
            )
        if anchors.dtype.kind not in "iu":
            raise TaskextrapError(
                f"a decomposition's anchors must be integer library indices, got dtype {anchors.dtype}"
            )
        if not np.all(np.isfinite(phi)):
            raise TaskextrapError("a decomposition's phi contains NaN or inf")
        if not isinstance(self.extras, dict):
            raise TaskextrapError(f"a decomposition's extras must be a dict, got {type(self.extras).__name__}")
        for name, value in (("anchors", anchors), ("phi", phi), ("score", score)):
            object.__setattr__(self, name, value)  # frozen: arrays instead of whatever sequence was given
        if self.weights is not None:
            w = _numeric("weights", self.weights).astype(float)
            if w.shape != (n, k):
                raise TaskextrapError(
                    f"a decomposition's weights must have shape (targets, candidates) = {(n, k)}, got {w.shape}"
                )
            bad = k > 0 and (w.min() < 0 or not np.allclose(w.sum(axis=1), 1.0, atol=1e-6))  # k = 0: none to weigh
            if not np.all(np.isfinite(w)) or bad:
                raise TaskextrapError("a decomposition's weights must be finite, non-negative and sum to 1 per target")
            object.__setattr__(self, "weights", w)

    @property
    def k(self) -> int:
        """Candidates per target."""
        return self.score.shape[1]

    def columns(self, cols) -> Decomposition:
        """The same targets with only the candidates ``cols`` (an index or a slice), e.g. the best
        one (``columns(0)``) for an estimator that should not average. Extras are kept."""
        indexable = (int, np.integer, slice, list, tuple, np.ndarray)
        if isinstance(cols, (bool, np.bool_)) or not isinstance(cols, indexable):
            raise TaskextrapError(
                f"cols must be a candidate index, a slice or a list of indices, got {type(cols).__name__}"
            )
        cols = [cols] if isinstance(cols, (int, np.integer)) else cols
        if not isinstance(cols, slice):
            cols = as_index_array("cols", cols, self.k, "candidate indices")
        weights = None
        if self.weights is not None:  # the posterior restricted to the kept candidates
            weights = self.weights[:, cols]
            total = weights.sum(axis=1, keepdims=True)
            weights = np.where(total > 0, weights / np.where(total > 0, total, 1.0), 1.0 / max(weights.shape[1], 1))
        return replace(
            self, anchors=self.anchors[:, cols], phi=self.phi[:, cols], score=self.score[:, cols], weights=weights
        )

    @classmethod
    def given(cls, anchors: np.ndarray, phi: np.ndarray, extras: dict | None = None) -> Decomposition:
        """A decomposition that was chosen, not searched (an oracle's, an ablation's): ``anchors``
        (n, k[, parts]) and ``phi`` (n, k, ...), scores NaN."""
        anchors, phi = _numeric("anchors", anchors), _numeric("phi", phi)
        if anchors.dtype.kind == "f":  # integral floats are indices written as floats; 2.5 is not an index
            if not np.all(anchors == np.round(anchors)):
                raise TaskextrapError("anchors must hold integer library indices, got non-integer values")
            anchors = anchors.astype(int)
        if anchors.ndim < 2:
            raise TaskextrapError(f"anchors must have shape (targets, candidates[, parts]), got {anchors.shape}")
        return cls(anchors, np.asarray(phi, dtype=float), np.full(anchors.shape[:2], np.nan), extras or {})


def _numeric(name: str, a) -> np.ndarray:
    """``a`` as an array of real numbers (integer or float dtype; NaN allowed, no bool, complex or object)."""
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError):
        raise TaskextrapError(f"a decomposition's {name} must be a numeric array") from None
    if arr.dtype.kind not in "iuf":
        raise TaskextrapError(f"a decomposition's {name} must be a numeric array, got dtype {arr.dtype}")
    return arr


def check_decomposition(d, n: int, library_size: int, anchor_parts: tuple = (), phi_shape: tuple | None = None) -> None:
    """A one-line error unless ``d`` is a Decomposition of ``n`` targets whose anchors (n, k,
    *anchor_parts) are indices into a library of ``library_size`` and whose phi is (n, k, *phi_shape)."""
    check_instance("decomposition", d, Decomposition, "a Decomposition (from decompose or decomposition_for)")
    if d.anchors.shape[0] != n:
        raise TaskextrapError(f"decomposition is for {d.anchors.shape[0]} targets, but the context has {n}")
    if d.k == 0:
        raise TaskextrapError("decomposition has no candidates: at least one per target is needed")
    if d.anchors.shape[2:] != tuple(anchor_parts):
        raise TaskextrapError(
            f"decomposition anchors must have shape (n, k{''.join(f', {p}' for p in anchor_parts)}), "
            f"got {d.anchors.shape}"
        )
    if phi_shape is not None and d.phi.shape[2:] != tuple(phi_shape):
        raise TaskextrapError(
            f"decomposition phi must have shape (n, k{''.join(f', {p}' for p in phi_shape)}), got {d.phi.shape}"
        )
    if d.anchors.min() < 0 or d.anchors.max() >= library_size:
        raise TaskextrapError(f"decomposition anchors must be library indices in [0, {library_size})")


@dataclass
class PendingFit:
    """A fit whose networks are still to be trained (an estimator's ``begin_fit``): train its
    ``jobs`` (``operators.train.train_jobs``, beside other fits' jobs) and run its ``work`` (what
    it computes without a network, such as a GP's marginal-likelihood fit, in a lane beside the
    training), then call ``finish()``, which completes the fit (calibration, the fitted
    attributes). :func:`fit_together` does all three."""

    jobs: list
    finish: Callable[[], Any]
    work: list[Callable[[], Any]] = field(default_factory=list)


def fit_together(pending: Sequence[PendingFit], stacked: bool | None = None) -> float:
    """Train the networks of several fits at once (stacked by architecture on a GPU, one after
    another on a CPU: ``operators.train.train_jobs``), their ``work`` beside, then finish each
    fit in order; returns the seconds the training took, the work's included (on the lanes it
    overlaps the training; with one lane or on a GPU it runs before it)."""
    from taskextrap.operators.train import train_jobs

    t = time.perf_counter()
    train_jobs([j for p in pending for j in p.jobs], stacked, beside=[w for p in pending for w in p.work])
    seconds = time.perf_counter() - t
    for p in pending:
        p.finish()
    return seconds


class Fittable(abc.ABC):
    """What every estimator shares, whatever its targets are: ``fit(library)``, one line
    (:meth:`check_is_fitted`) for a method called before it, and scikit-learn's parameter
    contract: the constructor arguments are stored exactly as given (``get_params``,
    ``set_params``, ``sklearn.base.clone``); what they resolve to (a protocol's name to the
    protocol, a None to the dev-chosen value) is set by ``fit`` as attributes ending in ``_``.

    Subclasses are dataclasses whose fields are the constructor arguments. They set
    :attr:`fitted_attribute` to an attribute that ``fit`` sets last (so a fit that failed half
    way is not taken for a fitted estimator), and check their arguments in :meth:`_settings`,
    which runs at construction (a bad argument is a one-line error there) and again only when an
    argument changes (``set_params``, or an assignment): every other reader (``fit``,
    ``resolved``, equality) gets the checked settings kept since (:meth:`_checked`).
    """

    fitted_attribute = "psi_"
    library_kind = "library"  # what fit takes, for the error of an unfitted estimator
    saveable = False  # save_pretrained / from_pretrained work (estimators.saving); a subclass inherits it

    def __post_init__(self):
        self._checked()

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if name in getattr(type(self), "__dataclass_fields__", ()):  # an argument changed: check again
            self.__dict__.pop("_checked_settings", None)

    def _checked(self) -> dict[str, Any]:
        """:meth:`_settings` of the current arguments, computed once after construction or a
        change of argument (a one-line error for a bad one) and kept."""
        settings = self.__dict__.get("_checked_settings")
        if settings is None:
            settings = self._settings()
            self.__dict__["_checked_settings"] = settings
        return settings

    def _settings(self) -> dict[str, Any]:
        """Check every constructor argument (a one-line error for a bad one) and return what
        ``fit`` resolves from them, by argument name (``fit`` sets each as ``<name>_``)."""
        return {}

    # Arguments read when a target is decomposed or predicted, not when the networks are trained
    # (a set_params after fit counts, as the experiments' inference variants rely on): fit does
    # not freeze them into ``<name>_``; the estimator reads ``resolved(name)`` where it uses them.
    inference_arguments: tuple[str, ...] = ()

    def _resolve(self) -> None:
        """Set the resolved training arguments (:meth:`_settings`, less
        :attr:`inference_arguments`) as fitted attributes ``<name>_``."""
        for name, value in self._checked().items():
            if name not in self.inference_arguments:
                setattr(self, f"{name}_", value)

    def resolved(self, name: str):
        """The argument ``name`` as ``fit`` uses it: its resolved value where it has one (a
        protocol object for a protocol's name, a dev-chosen value for None), else as given."""
        settings = self._checked()
        return settings[name] if name in settings else getattr(self, name)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor arguments, as given (scikit-learn's ``get_params``; ``deep`` is
        accepted for compatibility: no argument is itself an estimator)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}  # type: ignore[arg-type]

    def set_params(self, **params) -> Fittable:
        """Set constructor arguments by name (scikit-learn's ``set_params``) and return self. An
        unknown name or a bad value is a one-line error and changes nothing. A fitted estimator
        keeps its fit: call ``fit`` again for the new arguments to take effect there."""
        valid = self.get_params()
        unknown = sorted(set(params) - set(valid))
        if unknown:
            raise TaskextrapError(
                f"{type(self).__name__} has no parameter {', '.join(map(repr, unknown))}; "
                f"its parameters: {', '.join(valid)}" + did_you_mean(unknown[0], valid)
            )
        before = {name: valid[name] for name in params}
        for name, value in params.items():
            setattr(self, name, value)
        try:
            self._checked()
        except TaskextrapError:
            for name, value in before.items():
                setattr(self, name, value)
            raise
        return self

    def __eq__(self, other) -> bool:
        """One class with the same arguments, compared as ``fit`` resolves them (``protocol="paper"``
        equals the paper protocol's object; ``k=None`` equals the dev-chosen k). ``verbose`` and
        other fields that change nothing computed are not compared."""
        if type(other) is not type(self):
            return NotImplemented
        return self._compared() == other._compared()

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq

    def _compared(self) -> list:
        settings = self._checked()
        return [settings.get(f.name, getattr(self, f.name)) for f in dataclasses.fields(self) if f.compare]  # type: ignore[arg-type]

    @abc.abstractmethod
    def fit(self, library, progress=None) -> Fittable:
        """Learn everything from ``library`` (training tasks only) and return self.

        Returns:
            The estimator itself, fitted (attributes ending in ``_``).
        """

    def check_is_fitted(self) -> None:
        """A one-line error unless ``fit`` has finished."""
        check_is_fitted(self, self.fitted_attribute, self.library_kind)

    def _check_state(self, meta: dict) -> None:
        """A one-line error unless the saved state ``meta`` (an estimator's ``fitted_state``) was
        written by an estimator of this class and these arguments (its repr)."""
        if meta.get("estimator") != repr(self):
            raise TaskextrapError(f"the saved state is of another estimator or settings than {type(self).__name__}")

    def save_pretrained(self, folder, library: bool = True) -> Path:
        """Write this fitted estimator into ``folder``: ``config.json`` (its arguments, its
        library's description, the taskextrap version and source hash) and ``model.safetensors``
        (what the fit learned and the library's tasks; with ``library=False`` only their
        fingerprint); ``from_pretrained`` reads it back (``estimators.saving``). Returns the folder."""
        from taskextrap.estimators.saving import save_pretrained

        return save_pretrained(self, folder, library)

    @classmethod
    def from_pretrained(cls, folder, library=None, trust_code: bool = False):
        """The fitted estimator ``save_pretrained`` wrote into ``folder``, from its two files alone
        (no library drawn again, nothing fitted): the same predictions and intervals. ``library``
        (optional; needed for a folder saved without its library): the library the estimator was
        fitted on, checked to hold the saved tasks and used as it is (the same object).
        ``trust_code``: import the user module a library's family names (``module:attr``), which
        runs its code; without it such a folder is refused in one line."""
        from taskextrap.estimators.saving import load_pretrained

        return load_pretrained(folder, cls, library, trust_code)


class Estimator(Fittable):
    """Base class of the estimators of tasks observed as arrays: ``fit(library)``,
    ``decompose(ctx_x, ctx_y)``, ``predict(ctx_x, ctx_y, x_query)``. (The language-model
    :class:`~taskextrap.estimators.sequence.SequenceRTE` has the same shape over task objects.)
    """

    # Declared for the type checker only (on a dataclass subclass they would be constructor
    # fields): the protocol, a name or an object as given, and the ObservationProtocol fit
    # resolves it to; what fit sets (the pools and noise where a regime draws training relations).
    protocol: Any
    protocol_: Any  # an ObservationProtocol (its draw takes every regime's task set)
    loo_: bool  # RTE's, resolved from its search when None
    min_context_: int  # RTE's fewest context points, resolved from the protocol when None
    psi_context_: bool  # Composition3RTE's
    scaler_: FamilyScaler
    noise_sd_: float
    train_pool_: np.ndarray
    val_pool_: np.ndarray

    @abc.abstractmethod
    def decompose(self, ctx_x, ctx_y) -> Decomposition:
        """Each target's candidates, best first, from its context only.

        Returns:
            A :class:`Decomposition`: ``anchors`` (n, k, ...) library indices, ``phi``,
                ``score`` (n, k) (lower is better), ``weights`` and ``extras``, candidates
                best first.
        """

    @abc.abstractmethod
    def predict(self, ctx_x, ctx_y, x_query, decomposition: Decomposition | None = None, return_std: bool = False):
        """Each target at ``x_query`` (n, q); ``decomposition`` reuses (or imposes) one. With
        ``return_std`` also the predictive standard deviation (n, q) of the posterior over
        decompositions (``search.posterior.mixture``): (mean, std).

        Returns:
            The predictions (n, q); with ``return_std=True`` the pair (predictions,
                predictive sd), both (n, q).
        """

    @abc.abstractmethod
    def decomposition_for(self, ctx_x, ctx_y, anchors, phi=None) -> Decomposition:
        """The decomposition an oracle or an ablation chooses: the given ``anchors`` (and ``phi``,
        where the regime has a continuous part), scores NaN.

        Returns:
            A :class:`Decomposition` holding the given candidates (scores NaN), to pass
                to :meth:`predict`.
        """

    def _checked_context(self, ctx_x, ctx_y) -> tuple[np.ndarray, np.ndarray]:
        """The context as validated float arrays (n, m) of a size the estimator reads
        (:meth:`_sized_context`), within the float32 networks' range once scaled
        (``validation.MAX_SCALED``). Needs the fitted scaler."""
        ctx_x, ctx_y = self._sized_context(ctx_x, ctx_y)
        check_scaled("ctx_x", self.scaler_.x(ctx_x))
        check_scaled("ctx_y", self.scaler_.y(ctx_y))
        return ctx_x, ctx_y

    def _sized_context(self, ctx_x, ctx_y) -> tuple[np.ndarray, np.ndarray]:
        """The context as float arrays of the protocol's ``n_context`` points per task (a one-line
        error otherwise); an estimator that reads other sizes overrides this."""
        return check_context(ctx_x, ctx_y, self.protocol_.n_context)

    def _checked_query(self, x_query, n: int) -> np.ndarray:
        """Query inputs as a validated float array (n, q), within range once scaled."""
        qry_x = check_query(x_query, n)
        check_scaled("x_query", self.scaler_.x(qry_x))
        return qry_x


def check_progress(progress) -> None:
    """``progress`` of ``fit`` is None or a callable ``progress(step, loss)`` (called every training step)."""
    if progress is not None and not callable(progress):
        raise TaskextrapError(
            f"progress must be None or callable as progress(step, loss), got {type(progress).__name__}"
        )


def check_is_fitted(estimator, attribute: str, library_kind: str = "library") -> None:
    """Raise a one-line TaskextrapError unless ``estimator`` has the fitted ``attribute``."""
    if not hasattr(estimator, attribute):
        name = type(estimator).__name__
        raise TaskextrapError(f"{name} is not fitted: call fit({library_kind}) first")


def fitted_attributes(estimator) -> list[str]:
    """The names of everything ``fit`` learned (public attributes ending in ``_``)."""
    return sorted(k for k in vars(estimator) if k.endswith("_") and not k.startswith("_"))
