"""CodeIO string primitives and their compositions (paper Section 4.2; reference 11): the task
family, the pair split, novelty, examples, test tasks and the candidate space. No language model
here: the prompts and training corpora are in :mod:`taskextrap.llm.codeio`.

A task is an ordered pair (a, b) of string primitives with output b(a(s)). The primitives are
the authors' code's **31** functions (reference 11.1). The paper says 33 and lists 30 names; we
follow the code. Masked names Func_00..Func_30 follow the alphabetical order of the code names.
On lowercase a-z inputs several primitives coincide (23 distinct singles), so many held-out
pairs are functionally equal to a training pair or a single primitive. ``novel_test_pairs``
picks the held-out pairs that are new functions.

The search space is every single plus every pair (``candidates``), never the held-out list
(reference 11.7). A test task's filler strings (the extra rows of its reference blocks) are
random strings, none of them a support or query input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import groupby
from collections.abc import Callable

import numpy as np

from taskextrap.errors import TaskextrapError
from taskextrap.seeding import rng

BLOCK_ROWS = 6  # rows of a reference block: the shot inputs, then random fillers (the authors' six)

VOWELS = set("aeiouAEIOU")
_VOWEL_DIGIT = {v: str(i + 1) for i, v in enumerate("aeiou")}


# ------------------------------------------------------------------------------ primitives


def _shift(s: str, k: int) -> str:
    # Caesar shift on ASCII letters only, case preserved; everything else passes through.
    out = []
    for c in s:
        if "a" <= c <= "z":
            c = chr((ord(c) - 97 + k) % 26 + 97)
        elif "A" <= c <= "Z":
            c = chr((ord(c) - 65 + k) % 26 + 65)
        out.append(c)
    return "".join(out)


def _reverse(s: str) -> str:
    # Recursive, as in the authors' code; halving keeps the depth logarithmic for long inputs.
    if len(s) <= 1:
        return s
    h = len(s) // 2
    return _reverse(s[h:]) + _reverse(s[:h])


def _interlace(a: str, b: str) -> str:
    return "".join(x + y for x, y in zip(a, b, strict=False))


def _recursive_interlace(a: str, b: str) -> str:
    # Same function as _interlace, computed recursively (the authors' separate primitive).
    if len(a) <= 1:
        return _interlace(a, b)
    h = len(a) // 2
    return _recursive_interlace(a[:h], b[:h]) + _recursive_interlace(a[h:], b[h:])


def _rotate(s: str, k: int) -> str:
    k = k % len(s) if s else 0
    return s[k:] + s[:k]


def _while_rotate_1(s: str) -> str:
    # Loop-based rotation by one: move the first character to the end once.
    out, steps = s, 0
    while steps < 1 and out:
        out, steps = out[1:] + out[0], steps + 1
    return out


def _loop_concat_2(s: str) -> str:
    out = ""
    for _ in range(2):
        out += s
    return out


def _shuffle(s: str) -> str:
    # Deterministic stride permutation: the smallest odd m >= 3 coprime with len(s).
    n = len(s)
    if n <= 1:
        return s  # gcd(m, 0) = m would never reach 1
    m = 3
    while math.gcd(m, n) != 1:
        m += 2
    return "".join(s[(i * m) % n] for i in range(n))


def _force_digit(s: str) -> str:
    # The authors' depth-3 back-chaining search stops at its first rule, "append 1".
    return s if any(c.isdigit() for c in s) else s + "1"


PRIMITIVES: dict[str, Callable[[str], str]] = {
    "add_prefix_x": lambda s: "x_" + s,
    "add_suffix_y": lambda s: s + "_y",
    "alternate_case": lambda s: "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(s)),
    "compress": lambda s: "".join(k for k, _ in groupby(s)),
    "concat_self": lambda s: s + s,
    "duplicate_chars": lambda s: "".join(c + c for c in s),
    "fancy_brackets": lambda s: "".join(f"«{c}»" for c in s),
    "filter_alpha": lambda s: "".join(c for c in s if c.isalpha()),
    "force_digit": _force_digit,
    "force_palindrome": lambda s: s if s == s[::-1] else s + s[::-1],
    "identity": lambda s: s,
    "interlace_self_rev": lambda s: _interlace(s, s[::-1]),
    "loop_concat_2": _loop_concat_2,
    "lower_case": lambda s: s.lower(),
    "mirror": lambda s: s + s[::-1],
    "recursive_interlace_rev": lambda s: _recursive_interlace(s, _reverse(s)),
    "remove_vowels": lambda s: "".join(c for c in s if c not in VOWELS),
    "repeat_2": lambda s: s * 2,
    "reverse": _reverse,
    "reverse_words": lambda s: " ".join(reversed(s.split(" "))),
    "rotate_1": lambda s: _rotate(s, 1),
    "rotate_3": lambda s: _rotate(s, 3),
    "sep_dash": lambda s: "-".join(s),
    "shift_1": lambda s: _shift(s, 1),
    "shift_13": lambda s: _shift(s, 13),
    "shuffle": _shuffle,
    "sort": lambda s: "".join(sorted(s)),
    "upper_case": lambda s: s.upper(),
    "verify_even": lambda s: s[:-1] if len(s) % 2 else s,
    "vowel_to_num": lambda s: "".join(_VOWEL_DIGIT.get(c.lower(), c) for c in s),
    "while_rotate_1": _while_rotate_1,
}
NAMES: tuple[str, ...] = tuple(sorted(PRIMITIVES))
_INDEX = {name: i for i, name in enumerate(NAMES)}

Candidate = str | tuple[str, str]


def masked_name(name: str) -> str:
    """The anonymised name shown to the model: Func_NN by alphabetical index (reverse: Func_18)."""
    if name not in _INDEX:
        raise TaskextrapError(f"unknown primitive {name!r}")
    return f"Func_{_INDEX[name]:02d}"


def as_candidate(candidate) -> Candidate:
    """A single primitive name or an (a, b) pair, checked; anything else is a one-line error."""
    if isinstance(candidate, str):
        if candidate not in PRIMITIVES:
            raise TaskextrapError(f"unknown primitive {candidate!r}")
        return candidate
    parts = tuple(candidate) if isinstance(candidate, (tuple, list)) else ()
    if len(parts) != 2 or not all(isinstance(p, str) and p in PRIMITIVES for p in parts):
        raise TaskextrapError(f"a candidate is a primitive name or a pair of names: {candidate!r}")
    return parts


def functions_of(candidate) -> tuple[str, ...]:
    """The primitive names of a candidate in application order (a then b; one for a single)."""
    c = as_candidate(candidate)
    return (c,) if isinstance(c, str) else c


def apply(candidate, s: str) -> str:
    """Output of a candidate on s: f(s) for a single name f, b(a(s)) for a pair (a, b)."""
    for name in functions_of(candidate):
        s = PRIMITIVES[name](s)
    return s


# ------------------------------------------------------------------- strings, pairs, split

_ALPHABET = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def random_strings(g: np.random.Generator, n: int, min_len: int = 6, max_len: int = 14) -> list[str]:
    """n random lowercase a-z strings, length uniform in [min_len, max_len]."""
    if not 1 <= min_len <= max_len:
        raise TaskextrapError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    lengths = g.integers(min_len, max_len + 1, size=n)
    return ["".join(_ALPHABET[g.integers(0, 26, size=int(k))]) for k in lengths]


def all_pairs() -> list[tuple[str, str]]:
    """All 961 ordered pairs (a, b) (output b(a(s))), self- and identity pairs included."""
    return [(a, b) for a in NAMES for b in NAMES]


def split_pairs(seed: int = 0, test_fraction: float = 0.2) -> tuple[list, list]:
    """(train_pairs, test_pairs): a seeded shuffle holds out floor(fraction * 961) pairs (192).

    Both lists keep the all_pairs order, so the split depends on the seed only.
    """
    if not 0.0 < test_fraction < 1.0:
        raise TaskextrapError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    pairs = all_pairs()
    order = rng(seed, "codeio", "split").permutation(len(pairs))
    held = set(order[: math.floor(test_fraction * len(pairs))].tolist())
    train = [p for i, p in enumerate(pairs) if i not in held]
    test = [p for i, p in enumerate(pairs) if i in held]
    return train, test


def dev_split(seed: int = 0, dev_fraction: float = 0.2) -> tuple[list, list]:
    """(dev_train_pairs, dev_pairs): a seeded fifth of the training pairs of ``split_pairs(seed)``
    held out as dev pairs. The test pairs are in neither list; both keep the all_pairs order."""
    if not 0.0 < dev_fraction < 1.0:
        raise TaskextrapError(f"dev_fraction must lie in (0, 1), got {dev_fraction}")
    train, _ = split_pairs(seed)
    order = rng(seed, "codeio", "dev-split").permutation(len(train))
    held = set(order[: math.floor(dev_fraction * len(train))].tolist())
    return ([p for i, p in enumerate(train) if i not in held], [p for i, p in enumerate(train) if i in held])


PROBE: tuple[str, ...] = tuple(random_strings(rng(0, "codeio", "probe"), 200))


def behaviour(fn_or_pair, probe=None) -> tuple[str, ...]:
    """A candidate's (name, pair or callable) outputs on the probe strings (default PROBE).

    Typical random inputs, so two functions that differ only on rare inputs (e.g. palindromes)
    count as one behaviour.
    """
    probe = PROBE if probe is None else probe
    if callable(fn_or_pair):
        return tuple(fn_or_pair(s) for s in probe)
    return tuple(apply(fn_or_pair, s) for s in probe)


def novel_test_pairs(train, test, probe=None) -> list[tuple[str, str]]:
    """Held-out pairs whose behaviour differs from every training pair and every single."""
    seen = {behaviour(c, probe) for c in list(train) + list(NAMES)}
    return [tuple(p) for p in test if behaviour(p, probe) not in seen]


# ------------------------------------------------------------------ examples and test tasks


def examples(g: np.random.Generator, candidate, k: int) -> list[tuple[str, str]]:
    """k fresh strings and the candidate's outputs (a sampler's last one serves as its query)."""
    return [(s, apply(candidate, s)) for s in random_strings(g, k)]


def filler_strings(g: np.random.Generator, n: int, exclude=()) -> list[str]:
    """n distinct random strings (:func:`random_strings`), none of them in ``exclude`` (the
    task's own inputs): the filler rows of reference blocks."""
    taken: set[str] = set(exclude)
    out: list[str] = []
    while len(out) < n:
        (s,) = random_strings(g, 1)
        if s not in taken:
            taken.add(s)
            out.append(s)
    return out


@dataclass(frozen=True)
class CodeIOTask:
    """One test task: its pair, support examples (in, out), one query (in, out) and the filler
    strings of its reference blocks (random strings, none of them a support or query input)."""

    pair: tuple[str, str]
    support: tuple[tuple[str, str], ...]
    query: tuple[str, str]
    fillers: tuple[str, ...]


def make_test_tasks(test_pairs, seed: int, n_support: int = 3, stream: str = "test") -> list[CodeIOTask]:
    """One task per pair; each pair's strings come from its own stream ``(seed, stream, pair)``.

    The support and query strings are drawn first (so they do not depend on the fillers), then
    enough fillers for a leave-one-out prompt's blocks (BLOCK_ROWS - n_support + 1).
    """
    if n_support < 1:
        raise TaskextrapError(f"n_support must be >= 1, got {n_support}")
    tasks = []
    for candidate in test_pairs:
        pair = as_candidate(candidate)
        if isinstance(pair, str):
            raise TaskextrapError(f"test_pairs: a test task is a pair of primitives, got the single {pair!r}")
        g = rng(seed, "codeio", stream, *pair)
        *support, query = examples(g, pair, n_support + 1)
        fillers = filler_strings(g, max(0, BLOCK_ROWS - n_support + 1), [s for s, _ in support] + [query[0]])
        tasks.append(CodeIOTask(pair, tuple(support), query, tuple(fillers)))
    return tasks


def candidates() -> list[Candidate]:
    """The search space: all 31 singles, then all 961 pairs (never told which are held out)."""
    return list(NAMES) + all_pairs()
