"""CodeIO task module: primitives, equivalence classes, split, prompts, samplers, LOO pairs."""

import re
from collections import defaultdict

import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.llm import codeio as C
from taskextrap.tasks import strings as S
from taskextrap.seeding import rng

TABLE = [  # (primitive, input, output) from reference section 11.1
    ("add_prefix_x", "ab", "x_ab"),
    ("add_suffix_y", "ab", "ab_y"),
    ("alternate_case", "abcdef", "aBcDeF"),
    ("compress", "aaabb", "ab"),
    ("concat_self", "ab", "abab"),
    ("duplicate_chars", "ab", "aabb"),
    ("fancy_brackets", "ab", "«a»«b»"),
    ("filter_alpha", "x_a-b1«c»", "xabc"),
    ("force_digit", "abc", "abc1"),
    ("force_digit", "ab3", "ab3"),
    ("force_palindrome", "aba", "aba"),
    ("force_palindrome", "ab", "abba"),
    ("identity", "abc", "abc"),
    ("interlace_self_rev", "abc", "acbbca"),
    ("loop_concat_2", "ab", "abab"),
    ("lower_case", "aBC", "abc"),
    ("mirror", "aba", "abaaba"),
    ("recursive_interlace_rev", "abc", "acbbca"),
    ("remove_vowels", "AbEcio", "bc"),
    ("repeat_2", "ab", "abab"),
    ("reverse", "abcde", "edcba"),
    ("reverse_words", "ab cd", "cd ab"),
    ("rotate_1", "abc", "bca"),
    ("rotate_3", "ab", "ba"),
    ("rotate_3", "abc", "abc"),
    ("rotate_3", "abcde", "deabc"),
    ("sep_dash", "abc", "a-b-c"),
    ("shift_1", "azZ_", "baA_"),
    ("shift_13", "abN", "noA"),
    ("shuffle", "abcdef", "afedcb"),
    ("shuffle", "abcdefg", "adgcfbe"),
    ("shuffle", "ab", "ab"),
    ("shuffle", "", ""),
    ("sort", "baB", "Bab"),
    ("upper_case", "ab", "AB"),
    ("verify_even", "abc", "ab"),
    ("verify_even", "abcd", "abcd"),
    ("vowel_to_num", "aEiou", "12345"),
    ("while_rotate_1", "abc", "bca"),
]
KNOWN_CLASSES = [
    {"identity", "lower_case", "filter_alpha", "reverse_words"},
    {"concat_self", "loop_concat_2", "repeat_2"},
    {"mirror", "force_palindrome"},
    {"interlace_self_rev", "recursive_interlace_rev"},
    {"rotate_1", "while_rotate_1"},
]


def _classes(items, probe):
    groups = defaultdict(list)
    for c in items:
        groups[S.behaviour(c, probe)].append(c)
    return list(groups.values())


def test_primitive_set_and_masking():
    assert len(S.PRIMITIVES) == 31 and list(S.NAMES) == sorted(S.PRIMITIVES)
    assert S.masked_name("add_prefix_x") == "Func_00" and S.masked_name("identity") == "Func_10"
    assert S.masked_name("reverse") == "Func_18" and S.masked_name("while_rotate_1") == "Func_30"
    with pytest.raises(TaskextrapError):
        S.masked_name("nope")


@pytest.mark.parametrize("name,s,out", TABLE)
def test_primitive_table(name, s, out):
    assert S.PRIMITIVES[name](s) == out


def test_long_inputs_do_not_recurse_deeply():
    s = "ab" * 5000
    assert S.PRIMITIVES["reverse"](s) == s[::-1]
    assert S.PRIMITIVES["recursive_interlace_rev"](s) == S.PRIMITIVES["interlace_self_rev"](s)


def test_23_distinct_singles_with_known_classes():
    classes = _classes(S.NAMES, S.PROBE)
    assert len(classes) == 23
    merged = sorted(map(sorted, (c for c in classes if len(c) > 1)))
    assert merged == sorted(map(sorted, KNOWN_CLASSES))


def test_381_distinct_composites():
    # The count depends on the input sample through rare events. (remove_vowels, force_palindrome)
    # differs from (remove_vowels, mirror) only when the vowel-free string is a palindrome (~0.15%
    # of inputs), so 300 strings give 380 or 381 and PROBE (200) merges the two. A sample holding a
    # raw palindrome (~1e-5 per string) splits mirror from force_palindrome and gives 406.
    probe = S.random_strings(rng(1, "test-probe"), 400)
    assert not any(s == s[::-1] for s in probe)
    assert len(_classes(S.all_pairs(), probe)) == 381
    on_probe = _classes(S.all_pairs(), S.PROBE)
    merged = next(c for c in on_probe if ("remove_vowels", "mirror") in c)
    assert ("remove_vowels", "force_palindrome") in merged and len(on_probe) == 380
    assert len(_classes(S.NAMES, (*S.PROBE, "abccba"))) == 24  # one palindrome splits a class


def test_apply_order_and_validation():
    assert S.apply(("reverse", "add_prefix_x"), "abc") == "x_cba"
    assert S.apply("sort", "cab") == "abc"
    for bad in ["nope", ("reverse",), ("reverse", "nope"), 3]:
        with pytest.raises(TaskextrapError):
            S.apply(bad, "abc")


def test_random_strings():
    xs = S.random_strings(rng(0, "s"), 500)
    assert all(6 <= len(s) <= 14 and s.isalpha() and s.islower() for s in xs)
    assert xs == S.random_strings(rng(0, "s"), 500)
    assert {len(s) for s in xs} == set(range(6, 15))


def test_split_deterministic_and_disjoint():
    train, test = S.split_pairs(0)
    assert len(S.all_pairs()) == 961 and len(test) == 192 and len(train) == 769
    assert not set(train) & set(test) and set(train) | set(test) == set(S.all_pairs())
    assert (train, test) == S.split_pairs(0)
    assert S.split_pairs(1)[1] != test
    with pytest.raises(TaskextrapError):
        S.split_pairs(0, test_fraction=1.5)


def test_novel_test_pairs():
    train, test = S.split_pairs(0)
    novel = S.novel_test_pairs(train, test)
    seen = {S.behaviour(c) for c in train + list(S.NAMES)}
    assert 0 < len(novel) < len(test) and set(novel) <= set(test)
    assert all(S.behaviour(p) not in seen for p in novel)
    assert all(S.behaviour(p) in seen for p in set(test) - set(novel))


def test_candidates_are_not_told_the_split():
    cands = S.candidates()
    assert len(cands) == 31 + 961 and cands[:31] == list(S.NAMES)
    assert set(S.split_pairs(0)[1]) <= set(cands)


def test_fewshot_prompt_format():
    prompt = C.fewshot_prompt([("ab", "ba"), ("cd", "dc")], "ef")
    assert prompt == (
        "Perform the string transformation pattern seen below:\nIn: ab Out: ba\nIn: cd Out: dc\n### Query:\nIn: ef Out:"
    )
    assert C.answer_completion("fe") == " fe" and C.cot_prompt([("ab", "ba")], "ef") == C.fewshot_prompt(
        [("ab", "ba")], "ef"
    )


def _blocks(prompt):
    """{masked name: [(in, out), ...]} of the reference blocks of a prompt."""
    head = prompt.split(C.TARGET_HEADER)[0]
    parts = re.split(r"--- (Func_\d\d) ---\n", head)[1:]
    rows = [re.findall(r"In: (\S*) Out: (\S*)\n", body) for body in parts[1::2]]
    return dict(zip(parts[::2], rows, strict=True))


FILLERS = ("fillone", "filltwo", "fillthree", "fillfour")


def test_reference_prompt_blocks_on_shots_and_fillers_never_the_query():
    pair = ("reverse", "add_prefix_x")
    shots = [(s, S.apply(pair, s)) for s in ["abc", "hello"]]
    prompt = C.reference_prompt(pair, shots, "query", FILLERS)
    assert prompt.startswith(C.REFERENCE_HEADER + "--- Func_18 ---\n")
    assert prompt.index("Func_18") < prompt.index("Func_00")
    blocks = _blocks(prompt)
    assert list(blocks) == ["Func_18", "Func_00"]
    for name, rows in zip(pair, blocks.values(), strict=True):
        assert [x for x, _ in rows] == ["abc", "hello", *FILLERS]  # shots, then fillers: 6 rows
        assert all(out == S.PRIMITIVES[name](x) for x, out in rows)  # raw inputs, never chained
    assert prompt.count("query") == 1 and prompt.endswith("In: hello Out: x_olleh\n### Query:\nIn: query Out:")
    assert list(_blocks(C.reference_prompt("sort", shots, "q", FILLERS))) == ["Func_26"]
    three = [(s, S.apply(pair, s)) for s in ["abc", "hello", "xyz"]]
    assert len(_blocks(C.reference_prompt(pair, three, "q", FILLERS))["Func_18"]) == S.BLOCK_ROWS
    with pytest.raises(TaskextrapError, match="filler"):
        C.reference_prompt(pair, shots, "query", FILLERS[:3])
    with pytest.raises(TaskextrapError, match="query input"):
        C.reference_prompt(pair, shots, "fillone", FILLERS)  # a filler equal to the query is refused


def test_anchored_prompt_anchors_shot_lines_only():
    pair = ("reverse", "upper_case")
    shots = [(s, S.apply(pair, s)) for s in ["abc", "hello"]]
    prompt = C.reference_prompt(pair, shots, "query", FILLERS, anchored=True)
    plain = C.reference_prompt(pair, shots, "query", FILLERS)
    assert _blocks(prompt) == _blocks(plain)  # the same blocks, not chained
    assert prompt.endswith("In: abc Out: cba => CBA\nIn: hello Out: olleh => OLLEH\n### Query:\nIn: query Out:")
    assert "yreuq" not in prompt and "YREUQ" not in prompt  # neither a(q) nor b(a(q)) is shown
    assert C.target_completion(pair, "query", "YREUQ", anchored=True) == " yreuq => YREUQ"
    assert C.target_completion(pair, "query", "YREUQ") == " YREUQ"
    assert C.parse_cot(C.target_completion(pair, "query", "YREUQ", anchored=True)) == "YREUQ"
    # a single has no anchor: its prompt and completion are the plain ones
    assert C.reference_prompt("sort", shots, "q", FILLERS, anchored=True) == C.reference_prompt(
        "sort", shots, "q", FILLERS
    )
    assert C.target_completion("sort", "q", "q", anchored=True) == " q"
    assert C.anchor_of(pair) == "reverse" and C.anchor_of("sort") is None


def test_anchored_loo_pairs_score_the_whole_anchored_completion():
    support = [("abc", "CBA"), ("de", "ED"), ("fgh", "HGF")]
    pairs = C.loo_pairs(("reverse", "upper_case"), support, FILLERS, anchored=True)
    for (prompt, completion), (s, t) in zip(pairs, support, strict=True):
        assert prompt.endswith(f"### Query:\nIn: {s} Out:") and completion == f" {s[::-1]} => {t}"
        assert s[::-1] not in prompt and t not in prompt  # the held-out line is a query exactly


def test_loo_pairs_treat_the_held_out_example_as_a_query():
    task = S.make_test_tasks(S.split_pairs(0)[1], 0)[10]
    pairs = C.loo_pairs(task.pair, task.support, task.fillers)
    inputs = [s for s, _ in task.support]
    assert len(pairs) == 3
    for i, (prompt, completion) in enumerate(pairs):
        others = inputs[:i] + inputs[i + 1 :]
        assert prompt == C.reference_prompt(
            task.pair, task.support[:i] + task.support[i + 1 :], inputs[i], task.fillers
        )
        target = re.findall(r"In: (\S*) Out:", prompt.split(C.TARGET_HEADER)[1])
        assert target == [*others, inputs[i]]
        assert completion == " " + task.support[i][1]
        # the blocks show the other support inputs, then fillers: never the held-out input
        assert all([x for x, _ in rows] == others + list(task.fillers[:4]) for rows in _blocks(prompt).values())
        assert prompt.count(inputs[i]) == 1
    # the prompts of every candidate with the same first function share the header and its block
    a, b = (
        C.loo_pairs(("reverse", "sort"), task.support, task.fillers),
        C.loo_pairs("reverse", task.support, task.fillers),
    )
    head = C.REFERENCE_HEADER + C.reference_block("reverse", inputs[1:] + list(task.fillers[:4]))
    assert a[0][0].startswith(head) and b[0][0].startswith(head)
    with pytest.raises(TaskextrapError):
        C.loo_pairs("sort", [], FILLERS)


def test_parse_cot():
    assert C.parse_cot(" abc => cba") == "cba"
    assert C.parse_cot(" a => b => c\nIn: junk") == "c"
    assert C.parse_cot("no arrow here ") == "no arrow here"
    assert C.parse_cot("") == "" and C.parse_cot(None) == "" and C.parse_cot("x =>") == ""


def _spy_apply(monkeypatch):
    seen, real = [], S.apply

    def spy(candidate, s):
        seen.append(candidate)
        return real(candidate, s)

    monkeypatch.setattr(C, "apply", spy)
    monkeypatch.setattr(S, "apply", spy)  # the examples the samplers draw are made in tasks.strings
    return seen


def test_samplers_never_use_held_out_pairs(monkeypatch):
    train, _test = S.split_pairs(0)
    seen = _spy_apply(monkeypatch)
    g = rng(0, "samplers")
    out = C.fewshot_pairs(g, 200, train) + C.cot_pairs(g, 200, train)
    refs = C.reference_pairs(g, 300, train)
    pairs_used = {tuple(c) for c in seen if not isinstance(c, str)}
    assert len(pairs_used) > 300 and pairs_used <= set(train)
    allowed = {tuple(map(S.masked_name, p)) for p in train} | {(S.masked_name(n),) for n in S.NAMES}
    n_blocks = [len(_blocks(p)) for p, _ in refs]
    assert {1, 2} <= set(n_blocks)  # singles and pairs both occur
    assert all(tuple(_blocks(p)) in allowed for p, _ in refs)
    assert all(c.startswith(" ") and p.endswith(" Out:") for p, c in out + refs)


def test_pretraining_texts_are_fewshot_texts_of_one_single(monkeypatch):
    from taskextrap.llm.sft import ScoredText

    texts = C.pretraining_texts(rng(0, "corpus"), 400, p_wide=0.3)
    names, wide = set(), 0
    for text in texts:
        assert isinstance(text, ScoredText)
        full = "".join(t for t, _ in text.pieces)
        rows = re.findall(r"In: (\S*) Out: (\S*)(?:\n|$)", full)
        assert full.startswith(C.FEWSHOT_HEADER) and 3 <= len(rows) <= 7
        *shots, (q, t) = rows
        assert full == C.fewshot_prompt(shots, q) + C.answer_completion(t)  # the evaluation format
        fits = [n for n in S.NAMES if all(S.PRIMITIVES[n](x) == y for x, y in rows)]
        assert fits  # one single primitive explains every row: no pair is ever shown
        names.add(fits[0])
        wide += any(not c.islower() for x, _ in rows for c in x)
        # every answer after the first shot's is scored, the first never is
        scored = [t for t, on in text.pieces if on]
        assert scored == [f" {y}\n" for _, y in shots[1:]] + [f" {t}"]
    assert len(names) >= 20 and 0.2 < wide / len(texts) < 0.4
    assert all(
        all(c.islower() for x in re.findall(r"In: (\S*) Out:", "".join(t for t, _ in x.pieces)) for c in x)
        for x in C.pretraining_texts(rng(1, "corpus"), 50, p_wide=0.0)
    )
    with pytest.raises(TaskextrapError):
        C.pretraining_texts(rng(0, "x"), 1, p_wide=2.0)
    with pytest.raises(TaskextrapError):
        C.pretraining_texts(rng(0, "x"), 1, min_shots=3, max_shots=2)


@pytest.mark.parametrize(
    "sampler, first, kw",
    [
        (C.fewshot_pairs, 1, {}),
        (C.cot_pairs, 1, {}),
        (C.reference_pairs, 0, {}),
        (C.reference_pairs, 0, {"anchored": True}),
    ],
)
def test_score_shots_gives_the_same_text_and_scores_the_determined_answers(sampler, first, kw):
    from taskextrap.llm.sft import ScoredText

    train, _ = S.split_pairs(0)
    plain = sampler(rng(2, "shots"), 30, train, **kw)
    scored = sampler(rng(2, "shots"), 30, train, score_shots=True, **kw)
    for (prompt, completion), text in zip(plain, scored, strict=True):
        assert isinstance(text, ScoredText)
        assert "".join(t for t, _ in text.pieces) == prompt + completion  # same draw, same text
        answers = re.findall(r"In: \S* Out:(?: \S* =>)?( \S*\n)", prompt.split("Target Task:")[-1])
        assert len(answers) == 3
        # the completion and every shot answer the prompt determines; nothing else
        assert [t for t, on in text.pieces if on] == [*answers[first:], completion]


def test_scored_text_tokens_equal_the_prompt_completion_pair(char_lm):
    train, _ = S.split_pairs(0)
    for (prompt, completion), text in zip(
        C.reference_pairs(rng(3, "t"), 5, train),
        C.reference_pairs(rng(3, "t"), 5, train, score_shots=True),
        strict=True,
    ):
        ids, labels = text.ids_and_labels(char_lm)
        assert ids == char_lm.prompt_ids(prompt) + char_lm.completion_ids(completion)
        assert labels[-len(char_lm.completion_ids(completion)) :] == char_lm.completion_ids(completion)


def test_wide_strings():
    out = C.wide_strings(rng(0, "wide"), 500)
    assert all(1 <= len(s) <= 20 and " " not in s for s in out)
    assert set("".join(out)) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-«»")
    assert any(c.isupper() for s in out for c in s) and any(c in "«»_-" for s in out for c in s)
    with pytest.raises(TaskextrapError):
        C.wide_strings(rng(0, "wide"), 1, min_len=0)


def test_cot_pairs_intermediate_and_answer():
    train, _ = S.split_pairs(0)
    for prompt, completion in C.cot_pairs(rng(1, "cot"), 50, train):
        q = re.findall(r"In: (\S*) Out:$", prompt)[0]
        mid, answer = completion[1:].split(" => ")
        assert any(S.apply(p[0], q) == mid and S.apply(p, q) == answer for p in train)
        assert C.parse_cot(completion) == answer


def test_make_test_tasks():
    _, test = S.split_pairs(0)
    tasks = S.make_test_tasks(test, 0)
    assert [t.pair for t in tasks] == test
    for t in tasks[:20]:
        assert len(t.support) == 3 and len(t.fillers) == S.BLOCK_ROWS - 2  # enough for a leave-one-out prompt
        assert all(S.apply(t.pair, s) == o for s, o in (*t.support, t.query))
        inputs = [s for s, _ in t.support] + [t.query[0]]
        assert len(set(t.fillers)) == len(t.fillers) and not set(t.fillers) & set(inputs)
    assert tasks == S.make_test_tasks(test, 0) and tasks != S.make_test_tasks(test, 1)
    dev = S.make_test_tasks(test[:5], 0, stream="dev")
    assert [t.support for t in dev] != [t.support for t in tasks[:5]]


def test_dev_split_holds_out_a_fifth_of_the_training_pairs():
    for seed in (0, 1):
        train, test = S.split_pairs(seed)
        dev_train, dev = S.dev_split(seed)
        assert len(dev) == 153 and len(dev_train) == 616
        assert set(dev_train) | set(dev) == set(train)
        assert not set(dev_train) & set(dev)  # disjoint from each other
        assert not (set(dev_train) | set(dev)) & set(test)  # nothing of the test pairs is touched
        assert (dev_train, dev) == S.dev_split(seed)
    assert S.dev_split(0)[1] != S.dev_split(1)[1]
    with pytest.raises(TaskextrapError):
        S.dev_split(0, dev_fraction=0.0)


def test_primitive_prompts_use_their_own_stream():
    prompts = C.primitive_prompts("reverse", 5, seed=0)
    assert len(prompts) == 5 and prompts == C.primitive_prompts("reverse", 5, seed=0)
    for prompt, answer in prompts:
        query = re.findall(r"In: (\S*) Out:$", prompt)[0]
        shots = re.findall(r"In: (\S*) Out: (\S*)\n", prompt)
        assert prompt.startswith(C.FEWSHOT_HEADER) and len(shots) == 3 and answer == query[::-1]
        assert all(t == s[::-1] for s, t in shots)
    assert C.primitive_prompts("reverse", 5, seed=0, stream="other") != prompts
    assert C.primitive_prompts("sort", 5, seed=0)[0][0] != prompts[0][0]
    with pytest.raises(TaskextrapError):
        C.primitive_prompts("nope", 1, seed=0)


def test_primitive_accuracy_and_pretraining_check(monkeypatch):
    # A fake decoder that answers every even-indexed primitive right and the others wrong.
    truth = {
        p: (i % 2 == 0, t)
        for stream in ("primitive-probe", "pretraining-check")
        for i, name in enumerate(S.NAMES)
        for p, t in C.primitive_prompts(name, 10, 0, stream)
    }

    def fake_generate(lm, prompts, **kw):
        return [[truth[p][1] if truth[p][0] else "wrong"] for p in prompts]

    monkeypatch.setattr("taskextrap.llm.generate.generate", fake_generate)
    acc = C.primitive_accuracy(None, n_per=3)
    assert list(acc) == list(S.NAMES)
    assert all(v == (1.0 if i % 2 == 0 else 0.0) for i, v in enumerate(acc.values()))
    assert C.pretraining_check(None) == {"primitive_exact_match": pytest.approx(16 / 31)}


def test_anchored_reference_pairs_are_anchored_for_pairs_only():
    train, _ = S.split_pairs(0)
    items = C.reference_pairs(rng(4, "anch"), 200, train, anchored=True)
    n_pairs = 0
    for prompt, completion in items:
        blocks = _blocks(prompt)  # a self-pair (a, a) shows one name twice
        target = prompt.split(C.TARGET_HEADER)[1]
        q = re.findall(r"In: (\S*) Out:$", target)[0]
        shots = re.findall(r"In: (\S*) Out:", target)[:-1]
        assert all([x for x, _ in rows][:3] == shots and q not in [x for x, _ in rows] for rows in blocks.values())
        if prompt.count("--- Func_") == 2:
            n_pairs += 1
            first = dict(next(iter(blocks.values())))  # the anchor's outputs, from its block
            rows = re.findall(r"In: (\S*) Out: (\S*) => (\S*)\n", target)
            assert len(rows) == 3 and all(first[x] == mid for x, mid, _ in rows)
            mid, answer = completion[1:].split(" => ")  # the model writes a(q) itself
            assert mid not in C.prompt_outputs(prompt) and answer == C.parse_cot(completion)
        else:
            assert "=>" not in target and "=>" not in completion
        assert not C.answer_in_prompt(prompt, C.parse_cot(completion), q)
    assert 100 < n_pairs < 200
