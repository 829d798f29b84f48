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

from dataclasses import dataclass, field, replace

import numpy as np

from taskextrap.errors import TaskextrapError


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
    """

    anchors: np.ndarray
    phi: np.ndarray
    score: np.ndarray
    extras: dict = field(default_factory=dict)

    def __post_init__(self):
        n, k = self.score.shape
        if self.anchors.shape[:2] != (n, k) or self.phi.shape[:2] != (n, k):
            raise TaskextrapError(f"a decomposition's anchors {self.anchors.shape}, phi {self.phi.shape} and "
                                  f"score {self.score.shape} must agree on (targets, candidates)")

    @property
    def k(self) -> int:
        """Candidates per target."""
        return self.score.shape[1]

    def columns(self, cols) -> "Decomposition":
        """The same targets with only the candidates ``cols`` (an index or a slice), e.g. the best
        one (``columns(0)``) for an estimator that should not average. Extras are kept."""
        cols = [cols] if isinstance(cols, (int, np.integer)) else cols
        return replace(self, anchors=self.anchors[:, cols], phi=self.phi[:, cols], score=self.score[:, cols])

    @classmethod
    def given(cls, anchors: np.ndarray, phi: np.ndarray, extras: dict | None = None) -> "Decomposition":
        """A decomposition that was chosen, not searched (an oracle's, an ablation's): ``anchors``
        (n, k[, parts]) and ``phi`` (n, k, ...), scores NaN."""
        anchors, phi = np.asarray(anchors, dtype=int), np.asarray(phi, dtype=float)
        return cls(anchors, phi, np.full(anchors.shape[:2], np.nan), extras or {})


class Estimator:
    """Base class of the estimators: ``fit(library)``, ``decompose``, ``predict``.

    Subclasses set :attr:`fitted_attribute` to an attribute that ``fit`` sets last (so a fit
    that failed half way is not taken for a fitted estimator).
    """

    fitted_attribute = "psi_"
    library_kind = "library"  # what fit takes, for the error of an unfitted estimator

    def fit(self, library, progress=None) -> "Estimator":  # pragma: no cover - abstract
        """Learn everything from ``library`` (training tasks only) and return self."""
        raise NotImplementedError

    def decompose(self, ctx_x, ctx_y) -> Decomposition:  # pragma: no cover - abstract
        """Each target's candidates, best first, from its context only."""
        raise NotImplementedError

    def predict(self, ctx_x, ctx_y, x_query,
                decomposition: Decomposition | None = None) -> np.ndarray:  # pragma: no cover - abstract
        """Each target at ``x_query`` (n, q); ``decomposition`` reuses (or imposes) one."""
        raise NotImplementedError

    def decomposition_for(self, ctx_x, ctx_y, anchors, phi=None) -> Decomposition:  # pragma: no cover - abstract
        """The decomposition an oracle or an ablation chooses: the given ``anchors`` (and ``phi``,
        where the regime has a continuous part), scores NaN."""
        raise NotImplementedError

    def check_is_fitted(self) -> None:
        """A one-line error unless ``fit`` has finished."""
        check_is_fitted(self, self.fitted_attribute, self.library_kind)


def check_is_fitted(estimator, attribute: str, library_kind: str = "library") -> None:
    """Raise a one-line TaskextrapError unless ``estimator`` has the fitted ``attribute``."""
    if not hasattr(estimator, attribute):
        name = type(estimator).__name__
        raise TaskextrapError(f"{name} is not fitted: call fit({library_kind}) first")


def fitted_attributes(estimator) -> list[str]:
    """The names of everything ``fit`` learned (public attributes ending in ``_``)."""
    return sorted(k for k in vars(estimator) if k.endswith("_") and not k.startswith("_"))
