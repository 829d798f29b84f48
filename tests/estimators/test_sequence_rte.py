"""SequenceRTE: the language-model estimator over a task adapter (fake scorer and decoder)."""

import numpy as np
import pytest

from taskextrap.errors import TaskextrapError
from taskextrap.estimators.base import Decomposition
from taskextrap.estimators.sequence import SequenceRTE

SCORES = {"a": 1.3, "b": 1.0, "c": 1.2, "d": 9.0}  # b best; c and a within 0.5 nats of it


class Adapter:
    max_new_tokens = 4
    prefix_of = None

    def candidates(self):
        return ["a", "b", "c", "d"]

    def loo_pairs(self, task, candidate):
        return [(f"{task} {candidate}", " y")]

    def query_prompts(self, task, candidate):
        return [f"{task} q{k} {candidate}" for k in (1, 2)]

    def parse(self, completion):
        return completion.strip()


@pytest.fixture
def fake_model(monkeypatch):
    """total_nll scores a pair list by its candidate; greedy decoding answers "z" under a and c
    and "<candidate><query>" under the others."""

    def total_nll(lm, pair_lists, batch_size=32, progress=None, prefix_keys=None):
        return np.array([SCORES[pairs[0][0].split()[-1]] for pairs in pair_lists])

    def greedy_once(lm, prompts, max_new_tokens=64, batch_size=32):
        said = []
        for p in prompts:
            _, q, cand = p.split()
            said.append(" z" if cand in ("a", "c") else f" {cand}{q}")
        return said

    monkeypatch.setattr("taskextrap.search.likelihood.total_nll", total_nll)
    monkeypatch.setattr("taskextrap.llm.generate.greedy_once", greedy_once)
    return object()


def test_fit_tunes_the_extender_on_the_corpus_and_unfitted_is_an_error():
    rte = SequenceRTE(Adapter(), tune=lambda corpus: ("tuned", corpus))
    with pytest.raises(TaskextrapError, match="not fitted: call fit\\(corpus\\)"):
        rte.decompose(["t"])
    assert rte.fit("corpus") is rte and rte.extender_ == ("tuned", "corpus")


def test_decompose_ranks_every_candidate_and_answer_votes_the_tied_ones(fake_model):
    rte = SequenceRTE.from_extender(Adapter(), fake_model, max_tied=None)
    d = rte.decompose(["t1", "t2"])
    assert isinstance(d, Decomposition) and d.anchors.tolist() == [[1, 2, 0, 3]] * 2
    np.testing.assert_allclose(d.score[0], [1.0, 1.2, 1.3, 9.0])
    assert [v.tolist() for v in rte.voters(d)] == [[1, 2, 0]] * 2
    a = rte.answer(["t1", "t2"], d)
    assert a.best == [["bq1", "bq2"]] * 2 and a.completions == [[" bq1", " bq2"]] * 2
    assert a.voted == [["z", "z"]] * 2  # a and c outvote the best candidate
    assert rte.predict(["t1", "t2"]) == a.best
    capped = SequenceRTE.from_extender(Adapter(), fake_model, max_tied=2)
    assert capped.answer(["t1"]).voted == [["bq1", "bq2"]]  # b and c tie 1-1: the best one's answer
    strict = SequenceRTE.from_extender(Adapter(), fake_model, tie_tol=0.0)
    assert [v.tolist() for v in strict.voters(d)] == [[1]] * 2


def test_a_saved_sequence_rte_loads_with_its_adapter_and_scores_the_same(char_lm, tmp_path):
    pytest.importorskip("transformers")
    rte = SequenceRTE.from_extender(Adapter(), char_lm, batch_size=3, tie_tol=0.25)
    folder = rte.save_pretrained(tmp_path / "seq")
    assert (folder / "config.json").is_file() and (folder / "extender" / "model.safetensors").is_file()
    with pytest.raises(TaskextrapError, match="needs the task adapter"):
        SequenceRTE.from_pretrained(folder)
    loaded = SequenceRTE.from_pretrained(folder, adapter=Adapter())
    assert (loaded.batch_size, loaded.tie_tol, loaded.tune) == (3, 0.25, None)
    tasks = ["t1", "t22"]
    a, b = loaded.decompose(tasks), rte.decompose(tasks)
    np.testing.assert_array_equal(a.score, b.score)
    np.testing.assert_array_equal(a.anchors, b.anchors)
    with pytest.raises(TaskextrapError, match="not fitted"):
        SequenceRTE(Adapter()).save_pretrained(tmp_path / "x")
