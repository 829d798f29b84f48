"""Task families, regions, libraries and observation protocols."""

from taskextrap.tasks.builtin import PARAMETER_FAMILIES, PRIMITIVE_SETS, PROJECTILE
from taskextrap.tasks.family import ParametricFamily
from taskextrap.tasks.ladder import Ladder
from taskextrap.tasks.observe import PROTOCOLS, ObservationProtocol, Observations
from taskextrap.tasks.regimes import get_protocol
from taskextrap.tasks.primitives import CompositionFamily, PairSplit, PrimitiveFamily
from taskextrap.tasks.registry import get_family, get_primitive_set
from taskextrap.tasks.taskset import TaskSet

__all__ = [
    "PARAMETER_FAMILIES",
    "PRIMITIVE_SETS",
    "PROJECTILE",
    "PROTOCOLS",
    "CompositionFamily",
    "Ladder",
    "ObservationProtocol",
    "Observations",
    "PairSplit",
    "ParametricFamily",
    "PrimitiveFamily",
    "TaskSet",
    "get_family",
    "get_primitive_set",
    "get_protocol",
]
