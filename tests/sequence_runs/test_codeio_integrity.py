"""No CodeIO prompt shows its query's answer: every prompt any method builds, for every held-out
task of the paper profile, is checked with ``answer_in_prompt``; the checker itself is checked
against the authors' query-aligned format (a mutation check). String work only, no model."""

import dataclasses

import pytest

from taskextrap.experiments import codeio as E

from taskextrap.sequence_runs import codeio as codeio_runs
from taskextrap.llm import codeio as C
from taskextrap.tasks import strings as S


def _old_prompt(candidate, shots, query_in, anchored):
    """The format before the integrity review, built by hand: blocks on the shot inputs AND the
    query input, and (anchored) a(q) printed on the query line."""
    inputs = [s for s, _ in shots] + [query_in]
    anchor = C.anchor_of(candidate) if anchored else None
    out = (lambda x: "") if anchor is None else (lambda x: f" {S.PRIMITIVES[anchor](x)} =>")
    lines = "".join(f"In: {s} Out:{out(s)} {t}\n" for s, t in shots)
    return C.reference_prefix(candidate, inputs) + lines + f"{C.QUERY_HEADER}In: {query_in} Out:{out(query_in)}"


def _profile(anchored):
    return dataclasses.replace(E.PROFILES["paper"], anchored=anchored)


@pytest.fixture(scope="module")
def paper_tasks():
    tasks, _, _ = codeio_runs.held_out_tasks(E.PROFILES["paper"].n_tasks)
    assert len(tasks) == 192
    return tasks


def test_answer_in_prompt_reads_every_kind_of_output_value():
    prompt = (
        "Reference Functions:\n--- Func_18 ---\nIn: abc Out: cba\n"
        + C.TARGET_HEADER
        + "In: abc Out: cba => CBA\n"
        + C.QUERY_HEADER
        + "In: xyz Out:"
    )
    assert C.prompt_outputs(prompt) == {"cba", "CBA"}
    assert C.answer_in_prompt(prompt, "cba", "xyz")  # a block row's output (and an anchor value)
    assert C.answer_in_prompt(prompt, "CBA", "xyz")  # a shot's answer after "=>"
    assert not C.answer_in_prompt(prompt, "ZYX", "xyz")
    assert not C.answer_in_prompt(prompt, "cb", "xyz")  # whole values only, not substrings
    assert not C.answer_in_prompt(prompt, "abc", "abc")  # an answer equal to the query input is allowed
    assert not C.answer_in_prompt(C.fewshot_prompt([("ab", "ba")], "xyz"), "zyx", "xyz")


def test_the_checker_flags_the_old_query_aligned_format():
    split = codeio_runs.Split("test", 0, 10_000)  # the earlier runs' split and draws
    tasks, _, _ = codeio_runs.held_out_tasks(None, split)
    old = [C.answer_in_prompt(_old_prompt(t.pair, t.support, t.query[0], True), t.query[1], t.query[0]) for t in tasks]
    assert sum(old) == 66  # 74 counting the 8 tasks whose answer is their query input
    pair = next(t for t in tasks if t.pair[1] == "identity" and t.query[1] != t.query[0])
    assert C.answer_in_prompt(
        _old_prompt(pair.pair, pair.support, pair.query[0], False), pair.query[1], pair.query[0]
    )  # block a shows a(q), the answer
    # the anchored query line alone gives it away: blocks on the shots only, "Out: a(q) =>"
    t = pair
    mixed = C.reference_prompt(t.pair, t.support, t.query[0], t.fillers) + f" {S.apply(t.pair[0], t.query[0])} =>"
    assert C.answer_in_prompt(mixed, t.query[1], t.query[0])
    # and the new format never shows it, on the same tasks
    assert not any(
        C.answer_in_prompt(codeio_runs.query_prompt(m, t, _profile(True), t.pair), t.query[1], t.query[0])
        for t in tasks
        for m in ("oracle", "rte", "few-shot", "cot-majority")
    )


# every 8th held-out task in make test; all 192 in make test-slow (a few million prompt checks)
@pytest.mark.parametrize("stride", [8, pytest.param(1, marks=pytest.mark.slow)])
@pytest.mark.parametrize("anchored", [True, False])
def test_no_prompt_of_any_method_shows_the_answer(paper_tasks, anchored, stride):
    """few-shot, cot, oracle and rte's final prompt under every one of the 992 candidates, for the
    held-out tasks; and every leave-one-out prompt against its held-out example's answer."""
    profile, cands = _profile(anchored), S.candidates()
    shown, n = [], 0
    tasks = paper_tasks[::stride]
    for t in tasks:
        q, answer = t.query
        prompts = [codeio_runs.query_prompt(m, t, profile) for m in ("few-shot", "cot-majority", "oracle")]
        prompts += [codeio_runs.query_prompt("rte", t, profile, c) for c in cands]
        shown += [(t.pair, p) for p in prompts if C.answer_in_prompt(p, answer, q)]
        n += len(prompts)
        for c in cands:
            for (prompt, completion), (s, y) in zip(
                C.loo_pairs(c, t.support, t.fillers, anchored), t.support, strict=True
            ):
                assert not C.answer_in_prompt(prompt, y, s), (t.pair, c, prompt)
                assert prompt.endswith(f"In: {s} Out:") and C.parse_cot(completion) == y
    assert len(paper_tasks) == 192 and n == len(tasks) * (3 + 992) and shown == []


def test_no_block_and_no_line_shows_a_value_computed_from_the_query(paper_tasks):
    for t in paper_tasks[::16]:
        q = t.query[0]
        from_q = {S.apply(c, q) for c in S.candidates()} - {q}
        for c in S.candidates()[::7]:
            prompt = codeio_runs.query_prompt("rte", t, _profile(True), c)
            assert prompt.count(q) == 1 and prompt.endswith(f"In: {q} Out:")  # only on its own line
            assert not C.prompt_outputs(prompt) & from_q
