"""The estimators: one contract (``fit(library)``, ``decompose``, ``predict``) for every regime.

- :class:`~taskextrap.estimators.parameter.RTE`: parameter regime, Strategy A (nearest anchors
  in proxy space, the proxy-space shift).
- :class:`~taskextrap.estimators.length.LengthRTE`, :class:`~taskextrap.estimators.composition.CompositionRTE`:
  length and composition regimes, Strategy B (a decomposer proposes, verification ranks on
  the context; :mod:`~taskextrap.estimators.decomposing` holds what they share).

Every estimator's ``decompose`` returns a :class:`~taskextrap.estimators.base.Decomposition`.
"""
