"""Dev splits: pseudo-extrapolations built from training tasks only (DESIGN.md, "Splits").

Every design choice (a hyper-parameter, a recipe, a default) is made on a dev split, which has
the shape of the real extrapolation but lies wholly inside the training task distribution, so
the real held-out tasks are looked at only for final numbers:

- parameter: the last training region becomes the held-out region ``dev`` (F1_1 -> F1_2 for the
  built-in families); the remaining training region is cut in two halves, so the library keeps
  two training regions as in the real split;
- length: the top training level becomes the held-out level (levels <= 7 -> level 8);
- composition: one cross-family training pair is held out; the other training pairs train.
- parameter-multistep: the training span is cut into equal slices, the training regions' count
  for the library and one each for ``dev-F2`` .. ``dev-F5`` (the same geometry as F1 -> F2 ..
  F5, at a third of the width for the built-in families).

Nothing of the real held-out region, level or pair appears in a dev family, ladder or split.
"""

from __future__ import annotations

import dataclasses

from taskextrap.errors import TaskextrapError
from taskextrap.tasks.family import ParametricFamily
from taskextrap.tasks.ladder import Ladder
from taskextrap.tasks.primitives import PairSplit

DEV_REGION = "dev"


def dev_family(family: ParametricFamily) -> ParametricFamily:
    """The family's dev split: its last training region is held out as region ``dev``.

    The training regions that remain keep their ranges; if only one remains it is cut into two
    halves (``<name>_a``, ``<name>_b``), and a family with a single training region is cut into
    thirds (two train, the last is ``dev``). Held-out regions of the real split are dropped.
    """
    spans = sorted((family.regions[r], r) for r in family.train_regions)
    if any(lo == hi for (lo, hi), _ in spans):
        raise TaskextrapError(f"family {family.name!r}: a dev split needs training regions of non-zero width")
    if len(spans) == 1:
        (lo, hi), name = spans[0]
        w = (hi - lo) / 3
        train = {f"{name}_a": (lo, lo + w), f"{name}_b": (lo + w, lo + 2 * w)}
        held = (lo + 2 * w, hi)
    else:
        train = {name: span for span, name in spans[:-1]}
        held = spans[-1][0]
        if len(train) == 1:
            ((name, (lo, hi)),) = train.items()
            mid = (lo + hi) / 2
            train = {f"{name}_a": (lo, mid), f"{name}_b": (mid, hi)}
    return dataclasses.replace(family, regions={**train, DEV_REGION: held}, train_regions=tuple(train))


def dev_multistep_family(family: ParametricFamily, far: tuple[str, ...] = ("F2", "F3", "F4", "F5")) -> ParametricFamily:
    """The multi-step dev split: the family's training span cut into ``m + len(far)`` equal
    slices (``m`` training regions). The first ``m`` slices are the dev library's training
    regions (``dev-F1_1``, ...), the others are held out as ``dev-F2``, ``dev-F3``, ... in order,
    so each dev target region lies as many slice-widths beyond the dev library as the real one
    lies region-widths beyond F1. Every dev task is a training-span task; no real held-out
    region appears."""
    lo = min(family.regions[r][0] for r in family.train_regions)
    hi = max(family.regions[r][1] for r in family.train_regions)
    if not hi > lo:
        raise TaskextrapError(f"family {family.name!r}: a dev split needs training regions of non-zero width")
    names = [f"dev-{r}" for r in sorted(family.train_regions, key=lambda r: family.regions[r])]
    names += [f"dev-{r}" for r in far]
    width = (hi - lo) / len(names)
    regions = {name: (lo + i * width, lo + (i + 1) * width) for i, name in enumerate(names)}
    return dataclasses.replace(family, regions=regions, train_regions=tuple(names[: len(family.train_regions)]))


def dev_ladder(ladder: Ladder) -> Ladder:
    """The ladder's dev split: the top training level becomes the held-out level."""
    levels = tuple(sorted(ladder.train_levels))
    if len(levels) < 2:
        raise TaskextrapError(f"ladder {ladder.name!r}: a dev split needs at least two training levels")
    return dataclasses.replace(ladder, train_levels=levels[:-1], test_level=levels[-1])


def dev_pair_split(split: PairSplit, label: str = "the pair split") -> PairSplit:
    """The pair split's dev split: the first cross-family training pair (outer != inner) is held
    out, the other training pairs train. The real held-out pairs are not part of it. Any pair
    split works (a user's primitive set's too) that has a cross-family training pair and at
    least one other training pair; any other is refused in one line that starts with ``label``
    (what the split belongs to, e.g. ``primitive set 'waves:waves'``)."""
    pairs = [(outer, inner) for outer, inner in split.train]
    cross = [p for p in pairs if p[0] != p[1]]
    if not cross or len(pairs) < 2:
        why = "no training pair of two different families" if not cross else "no other training pair to train on"
        raise TaskextrapError(
            f"{label}: a dev split holds out a training pair of two different families and trains on "
            f"the others, but it trains on {[f'{o} o {i}' for o, i in pairs]}: {why}"
        )
    held = cross[0]
    return PairSplit(train=tuple(p for p in pairs if p != held), test=(held,))
