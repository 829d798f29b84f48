"""baselines.exact: the LLM-free consistency search over a discrete candidate space."""

from types import SimpleNamespace

from taskextrap.baselines.exact import exact_search

CANDS = ["upper", "reverse", "upper-reverse", "same"]


def _apply(c, s):
    return {"upper": s.upper(), "reverse": s[::-1], "upper-reverse": s.upper()[::-1], "same": s}[c]


def test_first_consistent_candidate_answers_and_ties_vote():
    t = SimpleNamespace(support=(("ab", "AB"),), query=("xy", "XY"))
    assert exact_search([t], CANDS, _apply) == (["XY"], ["XY"])
    # "aa" cannot tell reverse from same: both consistent, the first enumerated answers
    t = SimpleNamespace(support=(("aa", "aa"),), query=("xy", ""))
    assert exact_search([t], CANDS, _apply) == (["yx"], ["yx"])


def test_the_vote_can_overrule_the_first_consistent_candidate():
    # on "aa" -> "aa" reverse, same and a second identity are consistent: reverse comes first,
    # but two of the three say "xy"
    cands = ["reverse", "same", "same-again"]
    apply = lambda c, s: s[::-1] if c == "reverse" else s  # noqa: E731
    t = SimpleNamespace(support=(("aa", "aa"),), query=("xy", "xy"))
    assert exact_search([t], cands, apply) == (["yx"], ["xy"])


def test_no_consistent_candidate_takes_the_fewest_wrong():
    t = SimpleNamespace(support=(("ab", "AB"), ("cd", "zz")), query=("q", "Q"))
    best, voted = exact_search([t], CANDS, _apply)
    assert best == ["Q"] and voted == ["Q"]  # upper is 1 wrong, the others 2: upper answers
