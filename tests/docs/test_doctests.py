"""The Examples sections of the public estimator and task classes run as doctests (issue 46):
each one fits or draws at sizes that take seconds, and its printed shapes and values must be
what the code gives. Every public class listed here has such a section."""

import doctest
import importlib

import pytest

PUBLIC = {
    "taskextrap.estimators.parameter": ("RTE",),
    "taskextrap.estimators.multistep": ("ChainedRTE",),
    "taskextrap.estimators.length": ("LengthRTE",),
    "taskextrap.estimators.composition": ("CompositionRTE",),
    "taskextrap.estimators.composition_depth3": ("Composition3RTE",),
    "taskextrap.estimators.composition_em": ("EMCompositionRTE",),
    "taskextrap.estimators.sequence": ("SequenceRTE",),
    "taskextrap.tasks.family": ("ParametricFamily",),
    "taskextrap.tasks.taskset": ("TaskSet",),
    "taskextrap.tasks.ladder": ("Ladder", "LadderSet"),
    "taskextrap.tasks.primitives": ("PrimitiveFamily", "PairSplit", "PrimitiveSet", "CompositionFamily"),
    "taskextrap.tasks.observe": ("ObservationProtocol", "Observations"),
    "taskextrap.tasks.observed": ("ObservedTasks",),
    "taskextrap.profiles": (),
    "taskextrap.baselines.gp": (),
}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_the_examples_of_a_module_run_and_print_what_they_say(module):
    if module == "taskextrap.estimators.sequence":
        pytest.importorskip("transformers")
    mod = importlib.import_module(module)
    failed, attempted = doctest.testmod(mod, optionflags=FLAGS, verbose=False, report=True)
    assert attempted > 0, f"{module} has no example"
    assert failed == 0, f"{failed} of {attempted} examples of {module} failed (see the output above)"


# The public methods whose docstrings say what they return (a Returns section).
RETURNS = {
    "taskextrap.estimators.base": (
        "Fittable.fit",
        "Estimator.decompose",
        "Estimator.predict",
        "Estimator.decomposition_for",
    ),
    "taskextrap.estimators.parameter": ("RTE.fit", "RTE.decompose", "RTE.predict"),
    "taskextrap.estimators.decomposing": ("DecomposingRTE.fit", "DecomposingRTE.predict"),
    "taskextrap.estimators.length": ("LengthRTE.decompose",),
    "taskextrap.estimators.composition": ("CompositionRTE.decompose",),
    "taskextrap.estimators.composition_depth3": ("Composition3RTE.decompose",),
    "taskextrap.estimators.composition_em": ("EMCompositionRTE.fit",),
    "taskextrap.estimators.multistep": ("ChainedRTE.fit", "ChainedRTE.predict"),
    "taskextrap.estimators.sequence": (
        "SequenceRTE.fit",
        "SequenceRTE.decompose",
        "SequenceRTE.answer",
        "SequenceRTE.predict",
    ),
    "taskextrap.tasks.taskset": ("TaskSet.sample", "TaskSet.values"),
    "taskextrap.tasks.ladder": ("LadderSet.sample_library", "LadderSet.extend", "LadderSet.values"),
    "taskextrap.tasks.primitives": ("PrimitiveFamily.sample", "PrimitiveSet.sample", "CompositionSet.sample"),
    "taskextrap.tasks.observe": ("ObservationProtocol.draw",),
    "taskextrap.tasks.family": ("ParametricFamily.sample_params",),
    "taskextrap.tasks.observed": ("ObservedTasks.library",),
}


@pytest.mark.parametrize("module, name", [(m, n) for m, ns in RETURNS.items() for n in ns])
def test_the_public_methods_say_what_they_return(module, name):
    cls, method = name.split(".")
    doc = getattr(getattr(importlib.import_module(module), cls), method).__doc__ or ""
    assert "Returns:" in doc, f"{name} has no Returns section"


@pytest.mark.parametrize("module, name", [(m, c) for m, cs in PUBLIC.items() for c in cs])
def test_every_public_class_has_a_runnable_examples_section(module, name):
    doc = getattr(importlib.import_module(module), name).__doc__ or ""
    assert "Examples:" in doc and ">>> " in doc.split("Examples:", 1)[1], f"{name} has no runnable Examples section"
