"""Context posteriors on an estimator's prediction (issue 64): corrections towards the points of
a target's context, with priors learned on dev targets (``posterior.context``). A layer above
the estimators and the baselines, as it reads both: RTE's prediction and the library GP."""
