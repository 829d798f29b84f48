"""taskextrap: the Relational Task Extrapolator (RTE) of Ousherovitch & Wang (ICML 2026).

Heavy modules (torch, sklearn) are imported lazily so that ``taskextrap --help`` is fast.
"""

__version__ = "0.1.0"

__all__ = ["RTE", "ParametricFamily", "TaskextrapError", "__version__"]


def __getattr__(name):  # lazy public API
    if name == "RTE":
        from taskextrap.rte import RTE

        return RTE
    if name == "ParametricFamily":
        from taskextrap.tasks.family import ParametricFamily

        return ParametricFamily
    if name == "TaskextrapError":
        from taskextrap.errors import TaskextrapError

        return TaskextrapError
    raise AttributeError(name)
