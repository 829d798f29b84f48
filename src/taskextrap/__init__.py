"""taskextrap: the Relational Task Extrapolator (RTE) of Ousherovitch & Wang (ICML 2026).

Heavy modules (torch, sklearn) are imported lazily so that ``taskextrap --help`` is fast.
"""

__version__ = "0.1.0"

_LAZY = {
    "RTE": "taskextrap.estimators.parameter",  # parameter regime: the objective (Eq. 3), or Strategy A
    "LengthRTE": "taskextrap.estimators.length",  # length regime, Strategy B
    "CompositionRTE": "taskextrap.estimators.composition",  # compositional regime, Strategy B
    "Decomposition": "taskextrap.estimators.base",
    "ParametricFamily": "taskextrap.tasks.family",
    "Ladder": "taskextrap.tasks.ladder",
    "LadderSet": "taskextrap.tasks.ladder",
    "PrimitiveSet": "taskextrap.tasks.primitives",
    "ObservedTasks": "taskextrap.tasks.observed",  # tasks from data files: a library without a formula
    "read_tasks": "taskextrap.tasks.observed",
    "fit_calibrated": "taskextrap.workflow",  # RTE on observed tasks, its interval scale chosen on their dev split
    "save_fitted": "taskextrap.workflow",  # a fitted RTE with its fit record, as `taskextrap fit` saves it
    "split_targets": "taskextrap.workflow",  # targets read from a file as contexts and queries
    "TaskextrapError": "taskextrap.errors",
}

__all__ = [*_LAZY, "__version__"]


def __getattr__(name):  # lazy public API
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)
