"""The estimators: one contract (``fit(library)``, ``decompose``, ``predict``) for every regime.

- :class:`~taskextrap.estimators.parameter.RTE`: parameter regime, the decomposition objective
  (Eq. 3) over retrieved anchors and scaled proxy shifts; ``search="proxy"`` is Strategy A
  (nearest anchors in proxy space, the proxy-space shift).
- :class:`~taskextrap.estimators.length.LengthRTE`, :class:`~taskextrap.estimators.composition.CompositionRTE`:
  length and composition regimes, Strategy B (a decomposer proposes, verification ranks on
  the context; :mod:`~taskextrap.estimators.decomposing` holds what they share).

Every estimator's defaults are its experiment's ``rte`` row under the paper profile (the
dev-chosen settings and the paper profile's sizes), and its fit shows a progress bar once it
has run a few seconds (``verbose=False``: none; :mod:`~taskextrap.estimators.progress`).
Every estimator's ``decompose`` returns a :class:`~taskextrap.estimators.base.Decomposition`.
"""
