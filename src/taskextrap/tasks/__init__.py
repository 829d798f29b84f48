"""Task families, regions, libraries and observation protocols."""

from taskextrap.tasks.builtin import PARAMETER_FAMILIES, PROJECTILE
from taskextrap.tasks.family import ParametricFamily
from taskextrap.tasks.observe import PROTOCOLS, ObservationProtocol, Observations, get_protocol
from taskextrap.tasks.registry import get_family
from taskextrap.tasks.taskset import TaskSet

__all__ = ["PARAMETER_FAMILIES", "PROJECTILE", "PROTOCOLS", "ObservationProtocol", "Observations",
           "ParametricFamily", "TaskSet", "get_family", "get_protocol"]
