"""Why the depth-3 search does not find the chain (issue 36, part 1), on the dev split only.

    python scripts/diagnose_depth3.py --protocol paper     # about 10 minutes on 2 cores
    python scripts/diagnose_depth3.py --protocol strict

Fits the experiment's ``quick`` estimator (seed 0) on the dev split's 15 training recipes and
scores its 6 dev recipes (poly applied to a sin output; 200 targets x 2 draws, the dev run's own
targets), so no test recipe or test draw is read. Writes
``benchmarks/results/depth3-diagnosis-<protocol>.json``.

What it measures, per depth slot (outer r_3, middle r_2, inner r_1):
- **index recall@k**: the true library primitive among the slot's k nearest in the proxy space;
- **functional recall@k**: a primitive whose curve is within ``EPS`` RMSE of the true one's (on
  the domain) among the k nearest. The rescaled primitives are near-duplicates of each other
  (a rescaled poly forgets its constant and its scale), so the index is not identifiable;
- the same on training-recipe chains of validation-pool primitives (in distribution), to
  separate "the decomposer cannot resolve a primitive" from "it does not extrapolate";
- the family of the rank-1 candidate, and recall when retrieval is restricted to the true family
  (what a perfect family classifier would give);
- the verification: with the true chain inserted among the candidates, is it (or a chain whose
  curve equals it within ``EPS_CHAIN``) the arg-min, and how does the found chain's context loss
  compare with the truth's (an identifiability check: a found chain that fits the context better
  than the truth means the context does not determine the chain).

Alternatives, each with its recall, chains found and query MSE through the same Psi_chain:
- ``paper``: the paper's parallel decomposer (MSE to Gamma's embeddings), as fitted;
- ``curve-mse``: the decomposer regresses each slot's coordinates in a PCA of the library's
  curves (retrieval by functional distance);
- ``gamma-nce`` / ``curve-nce``: the decomposer trained with a retrieval loss (softmax over the
  training pool's primitives of minus the squared distance) in either space;
- ``multistart``: the paper's candidates, then coordinate refinement from each of the best 8
  verified chains for 2 rounds (a beam over slots through the whole library).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from taskextrap.baselines.context import ctx_interp
from taskextrap.baselines.discrete import DiscreteInductive
from taskextrap.estimators.base import Decomposition
from taskextrap.experiments import composition_depth3 as D3
from taskextrap.experiments.settings import UnitSpec
from taskextrap.files import write_json_atomic
from taskextrap.operators.mlp import mlp
from taskextrap.report.schema import environment_info
from taskextrap.search import chain_search as S
from taskextrap.search.decomposer import DECOMPOSER_HIDDEN
from taskextrap.seeding import rng
from taskextrap.tasks.chains import PAPER_RECIPE_SPLIT, dev_recipe_split
from taskextrap.tasks.regimes import get_protocol

OUT_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
EPS = 0.25  # primitive curves within this RMSE on the domain (2.5% of the range 10) count as equal
EPS_CHAIN = 0.5  # chain curves (h on the domain) within this RMSE count as the same chain
KS = (1, 10, 60)
SLOTS = D3.SLOTS
DOMAIN_POINTS = 201


class Problem(NamedTuple):
    """The fitted estimator, the library's curves, the dev draws and training-recipe draws with their chains."""

    rte: object
    curves: np.ndarray  # (L, DOMAIN_POINTS) every library primitive (the identity too) on the domain
    obs: object
    truth: np.ndarray  # (n, depth) true chains of the draws
    val_obs: object  # in-distribution draws: training recipes, validation-pool primitives
    val_truth: np.ndarray


def per_target(v: np.ndarray, task: np.ndarray) -> np.ndarray:
    """Mean of per-draw values per target."""
    n = task.max() + 1
    return np.bincount(task, v, n) / np.bincount(task, minlength=n)


def summary(v: np.ndarray, task: np.ndarray | None = None) -> dict:
    """Mean and 95% interval over targets (draws averaged per target first)."""
    t = per_target(np.asarray(v, float), task) if task is not None else np.asarray(v, float)
    return {"mean": float(t.mean()), "ci95": float(1.96 * t.std(ddof=1) / np.sqrt(len(t)))}


def ranks(z_hat: np.ndarray, z_lib: np.ndarray) -> np.ndarray:
    """(n, L) library indices ordered nearest first."""
    d = ((z_hat[:, None, :] - z_lib[None]) ** 2).sum(-1)
    return np.argsort(d, axis=1, kind="stable")


def slot_recall(order: np.ndarray, truth: np.ndarray, curves: np.ndarray, family: np.ndarray) -> dict:
    """Index and functional recall@k, the rank-1 family's accuracy and recall within the true family."""
    equal = np.sqrt(((curves[order] - curves[truth][:, None]) ** 2).mean(-1)) < EPS  # (n, L)
    hit = order == truth[:, None]
    out = {f"index@{k}": hit[:, :k].any(1) for k in KS}
    out.update({f"functional@{k}": equal[:, :k].any(1) for k in KS})
    out["family@1"] = family[order[:, 0]] == family[truth]
    same = family[order] == family[truth][:, None]
    within = [o[s] for o, s in zip(order, same, strict=True)]  # the slot's ranking restricted to the true family
    for k in (10, 60):
        out[f"family-restricted index@{k}"] = np.array([t in w[:k] for t, w in zip(truth, within, strict=True)])
    out["median functional rank"] = equal.argmax(1).astype(float)
    return out


def _chains(chains: np.ndarray, loss: np.ndarray, extras: dict) -> Decomposition:
    """Verified chains (n, c, depth) with their context losses as a decomposition (no continuous part)."""
    return Decomposition(np.asarray(chains, dtype=np.int64), np.zeros((*chains.shape[:2], 0)), loss, extras)


def chain_curves(rte, chains: np.ndarray) -> np.ndarray:
    x = np.linspace(*rte.primitives_.domain, DOMAIN_POINTS)
    return S.chain_values(rte.primitives_, np.broadcast_to(x, (*chains.shape[:-1], DOMAIN_POINTS)), chains)


def search_report(prob: Problem, slots: list[np.ndarray], refine_from: int = 1, rounds: int | None = None) -> dict:
    """Verify the k^3 chains of ``slots``, refine, predict through Psi_chain; recall, chains found, MSE."""
    rte, obs, truth = prob.rte, prob.obs, prob.truth
    cx, cy, qx = obs.ctx_x, obs.ctx_y, obs.qry_x
    t = time.perf_counter()
    chains, loss = S.verify_chains(rte.primitives_, cx, cy, slots, rte.keep)
    d = _chains(chains, loss, {"candidates": np.stack(slots, 1)})
    rounds = rte.resolved("refine_rounds") if rounds is None else rounds
    if refine_from == 1:
        d = rte.refined(cx, cy, d, rounds)
    else:  # refine each of the best ``refine_from`` verified chains from its own start, then re-rank all
        starts = [
            S.refine_chains(rte.primitives_, cx, cy, d.anchors[:, m : m + 1], d.score[:, m : m + 1], rounds, keep=1)
            for m in range(refine_from)
        ]
        allc = np.concatenate([c for c, _ in starts] + [d.anchors], 1)
        alll = np.concatenate([lo for _, lo in starts] + [d.score], 1)
        order = np.argsort(alll, axis=1, kind="stable")[:, : rte.keep]
        allc, alll = np.take_along_axis(allc, order[..., None], 1), np.take_along_axis(alll, order, 1)
        d = rte.weighted(_chains(allc, alll, d.extras))
    search_s = time.perf_counter() - t
    mean = rte.predict(cx, cy, qx, d)
    h_true = chain_curves(rte, truth)
    best = d.anchors[:, 0]
    dist_best = np.sqrt(((chain_curves(rte, best) - h_true) ** 2).mean(-1))
    kept = d.anchors[:, : rte.keep]
    dist_kept = np.sqrt(((chain_curves(rte, kept) - h_true[:, None]) ** 2).mean(-1))
    true_loss = S.context_losses(rte.primitives_, cx, cy, truth[:, None])[:, 0]
    cands = np.stack(slots, 1)
    equal = [
        np.sqrt(((prob.curves[s] - prob.curves[truth[:, j]][:, None]) ** 2).mean(-1)) < EPS for j, s in enumerate(slots)
    ]
    return {
        "mse": summary(((mean - obs.qry_y) ** 2).mean(1), obs.task),
        "verified-composition mse": summary(((rte.compose(qx, best) - obs.qry_y) ** 2).mean(1), obs.task),
        "chain index in candidates": summary((cands == truth[:, :, None]).any(2).all(1), obs.task),
        "chain functional in candidates": summary(np.all([e.any(1) for e in equal], 0), obs.task),
        "chain index top-1": summary((best == truth).all(1), obs.task),
        "chain functional top-1": summary(dist_best < EPS_CHAIN, obs.task),
        "chain functional among verified": summary((dist_kept < EPS_CHAIN).any(1), obs.task),
        "found fits context at least as well as truth": summary(d.score[:, 0] <= true_loss * (1 + 1e-9), obs.task),
        "median context loss found / truth": float(np.median(d.score[:, 0] / np.maximum(true_loss, 1e-12))),
        "median curve rmse of found chain": float(np.median(dist_best)),
        "search_s": search_s,
    }


def retrieval_report(prob: Problem, z_hat: list[np.ndarray], z_lib: np.ndarray, obs, truth) -> dict:
    """Per-slot recall of the retrieval from predicted slot embeddings ``z_hat`` in space ``z_lib``."""
    fam = prob.rte.primitives_.family
    out = {}
    for j, slot in enumerate(SLOTS):
        r = slot_recall(ranks(z_hat[j], z_lib), truth[:, j], prob.curves, fam)
        out[slot] = {k: (float(np.median(v)) if k.startswith("median") else summary(v, obs.task)) for k, v in r.items()}
    return out


def curve_space(curves: np.ndarray, dim: int) -> np.ndarray:
    """PCA coordinates of the library's curves (library data only): Euclidean distance in them is
    the curves' L2 distance, up to the dropped components."""
    c = curves - curves.mean(0)
    _u, _s, vt = np.linalg.svd(c, full_matrices=False)
    return (c @ vt[:dim].T) / np.sqrt(curves.shape[1])


def train_decomposer(rte, z_lib: np.ndarray, loss: str, steps: int, batch: int, seed: int) -> torch.nn.Module:
    """The parallel decomposer's network, trained on fresh training-pool compositions to predict
    each slot's coordinates in ``z_lib``: ``loss`` "mse" (the paper's) or "nce" (a softmax over
    the training pool's primitives of minus the squared distance; the validation pool is never a
    label or a negative). Best weights on validation-pool compositions kept."""
    torch.manual_seed(seed)
    depth, dim = rte.depth, z_lib.shape[1]
    net = torch.nn.Sequential(
        mlp([2 * rte.protocol_.n_context, *DECOMPOSER_HIDDEN]),
        torch.nn.ReLU(),
        torch.nn.Linear(DECOMPOSER_HIDDEN[-1], depth * dim),
    )
    scale = float(np.sqrt((z_lib**2).sum(1).mean()))
    zt = torch.from_numpy((z_lib / scale).astype(np.float32))
    pool = np.asarray(rte.train_pool_)
    remap = np.full(len(z_lib), -1)
    remap[pool] = np.arange(len(pool))
    rte.decomposer_.device = torch.device("cpu")

    def batch_of(p, n, g):
        tasks, o = rte.draw_training_tasks(p, n, g)
        return rte.decomposer_.inputs(o.ctx_x, o.ctx_y), torch.from_numpy(tasks.chains[o.task])

    def objective(x, chains):
        out = net(x).view(len(x), depth, dim)
        if loss == "mse":
            return ((out - zt[chains]) ** 2).sum(-1).mean()
        logits = -(torch.cdist(out.reshape(-1, dim), zt[pool]) ** 2)
        return torch.nn.functional.cross_entropy(logits, torch.from_numpy(remap[chains.numpy().reshape(-1)]))

    g = rng(seed, "diagnose-depth3", loss)
    val = batch_of(rte.val_pool_, 512, rng(seed, "diagnose-depth3-val"))
    val_loss = (lambda: objective(*val)) if loss == "mse" else None
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps, 5e-5)
    best, state = np.inf, None
    for step in range(steps):
        x, chains = batch_of(pool, batch, g)
        lo = objective(x, chains)
        opt.zero_grad()
        lo.backward()
        opt.step()
        sched.step()
        if (step + 1) % 100 == 0 or step + 1 == steps:
            with torch.no_grad():  # nce: validation primitives are not in the softmax, so select on distance
                out = net(val[0]).view(-1, depth, dim)
                v = float(val_loss()) if val_loss else float(((out - zt[val[1]]) ** 2).sum(-1).mean())
            if v < best:
                best, state = v, {k: t.clone() for k, t in net.state_dict().items()}
    net.load_state_dict(state)
    net.eval()
    net.z_scale = scale
    return net


def predicted_slots(net, rte, obs) -> list[np.ndarray]:
    with torch.no_grad():
        out = net(rte.decomposer_.inputs(obs.ctx_x, obs.ctx_y)).numpy().astype(float) * net.z_scale
    return list(out.reshape(len(obs.ctx_x), rte.depth, -1).transpose(1, 0, 2))


def nearest_slots(z_hat: list[np.ndarray], z_lib: np.ndarray, k: int) -> list[np.ndarray]:
    return [ranks(z, z_lib)[:, :k] for z in z_hat]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--protocol", default="paper", choices=("paper", "strict"))
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--targets", type=int, default=200)
    ap.add_argument("--draws", type=int, default=2)
    ap.add_argument("--steps", type=int, default=None, help="alternative decomposers' steps (default: the profile's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    profile = D3.PROFILES[args.profile]
    protocol = get_protocol(args.protocol, D3.REGIME)
    split = dev_recipe_split(PAPER_RECIPE_SPLIT)
    prims = D3.make_library(profile.n_library)
    targets, obs = D3.make_targets(prims, protocol, args.targets, args.draws, split, D3.DEPTH3_TEST_SEED)
    rte = D3.make_rte(UnitSpec(None, protocol, profile, 0, "adapted", split=split)).fit(prims)
    fit_s = time.perf_counter() - t0
    print(f"fitted in {fit_s:.0f} s", file=sys.stderr)
    inductive = DiscreteInductive(rte).fit()
    vt, vobs = rte.draw_training_tasks(rte.val_pool_, args.targets, rng(0, "diagnose-depth3", "in-distribution"))
    x = np.linspace(*rte.primitives_.domain, DOMAIN_POINTS)
    curves = rte.primitives_.exact(
        np.broadcast_to(x, (len(rte.primitives_), DOMAIN_POINTS)), np.arange(len(rte.primitives_))
    )
    prob = Problem(rte, curves, obs, targets.chains[obs.task], vobs, vt.chains[vobs.task])
    k = rte.resolved("k")
    report = {
        "protocol": args.protocol,
        "profile": args.profile,
        "split": repr(split),
        "seed": 0,
        "test_seed": D3.DEPTH3_TEST_SEED,
        "targets": args.targets,
        "draws": args.draws,
        "k": k,
        "eps_primitive": EPS,
        "eps_chain": EPS_CHAIN,
        "fit_s": fit_s,
    }
    # How close the library's primitives are to each other: why the index is not identifiable.
    d = np.sqrt(((curves[:, None] - curves[None]) ** 2).mean(-1))
    np.fill_diagonal(d, np.inf)
    fam = rte.primitives_.family
    report["library"] = {
        str(rte.primitives_.families[f].name): {
            "median nearest-neighbour curve rmse": float(np.median(d[fam == f].min(1))),
            f"median primitives within {EPS}": float(np.median((d[fam == f] < EPS).sum(1))),
        }
        for f in range(len(rte.primitives_.families))
        if (fam == f).sum() > 1
    }
    baselines = {
        "sparse-inductive": inductive.predict(obs.ctx_x, obs.ctx_y, obs.qry_x),
        "ctx-interp": ctx_interp(obs.ctx_x, obs.ctx_y, obs.qry_x),
    }
    report["baselines"] = {m: summary(((p - obs.qry_y) ** 2).mean(1), obs.task) for m, p in baselines.items()}
    report["oracle mse"] = summary(
        (
            (
                rte.predict(obs.ctx_x, obs.ctx_y, obs.qry_x, rte.decomposition_for(obs.ctx_x, obs.ctx_y, prob.truth))
                - obs.qry_y
            )
            ** 2
        ).mean(1),
        obs.task,
    )

    z_paper = rte.decomposer_.predict(obs.ctx_x, obs.ctx_y)
    z_paper_val = rte.decomposer_.predict(vobs.ctx_x, vobs.ctx_y)
    paper_slots = nearest_slots(z_paper, rte.z_library_, k)
    alts = {}
    alts["paper"] = {
        "retrieval": retrieval_report(prob, z_paper, rte.z_library_, obs, prob.truth),
        "retrieval in distribution": retrieval_report(prob, z_paper_val, rte.z_library_, vobs, prob.val_truth),
        "search": search_report(prob, paper_slots),
    }
    print("paper done", file=sys.stderr)
    # The verification's scoring: the true chain inserted into every slot's candidates.
    inserted = [np.concatenate([s[:, :-1], prob.truth[:, j : j + 1]], 1) for j, s in enumerate(paper_slots)]
    alts["paper + truth inserted"] = {"search": search_report(prob, inserted, rounds=0)}
    alts["multistart"] = {"search": search_report(prob, paper_slots, refine_from=8, rounds=2)}
    print("multistart done", file=sys.stderr)
    z_curve = curve_space(curves, rte.z_library_.shape[1])
    steps = args.steps or profile.decomposer_train.steps
    for name, space, loss in (
        ("curve-mse", z_curve, "mse"),
        ("gamma-nce", rte.z_library_, "nce"),
        ("curve-nce", z_curve, "nce"),
    ):
        t = time.perf_counter()
        net = train_decomposer(rte, space, loss, steps, profile.decomposer_train.batch, 0)
        zh, zh_val = predicted_slots(net, rte, obs), predicted_slots(net, rte, vobs)
        alts[name] = {
            "retrieval": retrieval_report(prob, zh, space, obs, prob.truth),
            "retrieval in distribution": retrieval_report(prob, zh_val, space, vobs, prob.val_truth),
            "search": search_report(prob, nearest_slots(zh, space, k)),
            "train_s": time.perf_counter() - t,
        }
        print(f"{name} done", file=sys.stderr)
    report["alternatives"] = alts
    report["wall_s"] = time.perf_counter() - t0
    report["environment"] = environment_info()
    out = args.out or OUT_DIR / f"depth3-diagnosis-{args.protocol}.json"
    write_json_atomic(out, report)
    print(f"wrote {out} ({report['wall_s']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
