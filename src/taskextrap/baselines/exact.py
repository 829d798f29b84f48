"""LLM-free exact search, the sanity baseline of the discrete-candidate language-model regimes:
every candidate executed in Python on a target's support, no model anywhere. If a learned
search cannot beat it, the docs say so. (Sparse parity's vectorised version, over implied
masks, is ``tasks.parity.exact_search``.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def exact_search(tasks, candidates: Sequence, apply: Callable[[object, str], str]) -> tuple[list, list]:
    """(best, voted): per task, the query output of the first candidate (in enumeration order)
    with the fewest wrong support examples, and the majority of every such candidate's query
    output (``search.likelihood.vote``: the first-enumerated among equally common ones).

    ``tasks`` have ``support`` ((input, output) pairs) and ``query`` ((input, output));
    ``apply(candidate, input)`` runs a candidate.
    """
    import numpy as np

    from taskextrap.search.likelihood import vote

    best, voted = [], []
    for t in tasks:
        wrong = np.array([sum(apply(c, s) != y for s, y in t.support) for c in candidates])
        outs = [apply(candidates[int(j)], t.query[0]) for j in np.flatnonzero(wrong == wrong.min())]
        best.append(outs[0])
        voted.append(vote(outs))
    return best, voted
