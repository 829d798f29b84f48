"""The engines work is spread over beyond this process: Ray, an optional extra.

Experiments' units (``experiments.executors``) and a library streamed from Parquet
(``streaming``) connect through :func:`connect_ray`, so both read ``RAY_ADDRESS`` the same way and
fail in the same one line when Ray is missing or the cluster cannot be reached.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from taskextrap.errors import TaskextrapError

__all__ = ["connect_ray", "last_line"]


def connect_ray(purpose: str, num_cpus: int | None = None) -> tuple[Any, bool]:
    """The ``ray`` module, connected to the cluster at ``RAY_ADDRESS`` when that is set, else to
    a Ray instance started on this machine (with ``num_cpus`` CPUs; None: all of them); and
    whether this call started it (the caller then shuts it down). ``purpose`` names what needs
    Ray in the one-line error when it is not installed (``--executor ray``)."""
    try:
        import ray
    except ImportError:
        raise TaskextrapError(f"{purpose} needs Ray: pip install 'taskextrap[ray]'") from None
    if ray.is_initialized():
        return ray, False
    address = os.environ.get("RAY_ADDRESS") or None
    where = f"the Ray cluster at {address}" if address else "a local Ray instance (set RAY_ADDRESS for a cluster)"
    print(f"executor: {where}", file=sys.stderr, flush=True)
    try:
        ray.init(
            address=address,
            num_cpus=None if address else num_cpus,
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=False,
            configure_logging=True,
        )
    except Exception as exc:  # noqa: BLE001 - ConnectionError, a bad address, a cluster that is down
        raise TaskextrapError(f"cannot start or reach {where}: {last_line(exc)}") from None
    return ray, True


def last_line(exc: BaseException) -> str:
    """The last non-empty line of an exception's message (a remote traceback's own error)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__
