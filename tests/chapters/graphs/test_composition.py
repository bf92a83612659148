"""Tests for chapter 5's composition run: the pointer-chasing task, the stored runs, the figure.

The task is checked against a plain-Python reference (parse the tokens into a dict, follow it
k times); the stored JSON is checked for its structure and for every claim the chapter makes
from it; the figure renders on Agg.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.__main__ import main
from attention_course.chapters import graphs as comp  # the chapter's face: composition and head_budget
from attention_course.models.experiments import EXPERIMENTS, execute
from attention_course.chapters.graphs.figures import plot_composition
from attention_course.figures.style import MAX_WIDTH
from attention_course.models.pointer_chasing import (
    N_SPLITS,
    PointerChasingTask,
    baseline_accuracies,
    decode,
    follow,
    map_split,
    pointer_chasing,
    random_cycles,
)
from attention_course.models.tiny import ModelConfig, TinyTransformer
from attention_course.models.training import train
from attention_course.chapters.graphs import head_budget as comp_head_budget

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------ plain-Python reference
def reference(inputs: list[int], n: int, k: int) -> tuple[dict, int, int]:
    """Parse one sequence into {source: target}, its query and the node k links on."""
    succ = {}
    for t in inputs[:-1]:
        assert n <= t < n + n * n, "an edge token lies outside the edge range"
        a, b = divmod(t - n, n)
        assert a not in succ, "a node has two outgoing edges"
        succ[a] = b
    node = query = inputs[-1]
    for _ in range(k):
        node = succ[node]
    return succ, query, node


def orbit_length(succ: dict, start: int) -> int:
    node, steps = succ[start], 1
    while node != start:
        node, steps = succ[node], steps + 1
    return steps


sizes = st.integers(3, 10)
hops = st.integers(1, 12)
seeds = st.integers(0, 2**31 - 1)
splits = st.sampled_from(["train", "test", "all"])


# ------------------------------------------------------------ the task
@settings(max_examples=60, deadline=None)
@given(n=sizes, k=hops, seed=seeds, batch=st.integers(1, 6), split=splits)
def test_answer_is_the_k_fold_composition(n, k, seed, batch, split):
    if split == "test":
        n = max(n, 5)  # no cycle on 3 or 4 nodes hashes to the held-out part
    inputs, targets, mask = pointer_chasing(batch, n_nodes=n, hops=k, split=split, seed=seed)
    assert inputs.shape == targets.shape == mask.shape == (batch, n + 1)
    assert mask[:, -1].all() and not mask[:, :-1].any()
    for row, y in zip(inputs.tolist(), targets[:, -1].tolist()):
        succ, query, answer = reference(row, n, k)
        assert 0 <= query < n
        assert sorted(succ) == list(range(n))  # every node has exactly one outgoing edge
        assert sorted(succ.values()) == list(range(n))  # ... and one incoming: a permutation
        assert orbit_length(succ, query) == n  # a single cycle through all nodes
        assert y == answer


@settings(max_examples=40, deadline=None)
@given(n=sizes, k=hops, seed=seeds)
def test_decode_and_follow_agree_with_the_reference(n, k, seed):
    batch = pointer_chasing(4, n_nodes=n, hops=k, split="all", seed=seed)
    f, q = decode(batch.inputs, n)
    for row, fb, qb, y in zip(batch.inputs.tolist(), f.tolist(), q.tolist(), follow(f, q, k).tolist()):
        succ, query, answer = reference(row, n, k)
        assert fb == [succ[a] for a in range(n)] and qb == query and y == answer


@settings(max_examples=40, deadline=None)
@given(n=sizes, seed=seeds)
def test_random_cycles_are_single_cycles(n, seed):
    f = random_cycles(5, n, torch.Generator().manual_seed(seed))
    for row in f.tolist():
        assert orbit_length(dict(enumerate(row)), 0) == n


def test_train_and_held_out_maps_are_disjoint():
    n = 8
    def maps(split):
        f, _ = decode(pointer_chasing(3000, n_nodes=n, hops=1, split=split, seed=1).inputs, n)
        return {tuple(r) for r in f.tolist()}
    train_maps, test_maps = maps("train"), maps("test")
    assert not train_maps & test_maps
    # the split is the plain-Python hash sum((2a + 1) f(a)) mod N_SPLITS
    assert all(sum((2 * a + 1) * b for a, b in enumerate(m)) % N_SPLITS == 0 for m in test_maps)
    assert all(sum((2 * a + 1) * b for a, b in enumerate(m)) % N_SPLITS != 0 for m in train_maps)


def test_the_held_out_share_is_about_one_in_five():
    f = random_cycles(20000, 8, torch.Generator().manual_seed(0))
    share = float((map_split(f) == 0).double().mean())
    # binomial standard error sqrt(0.2 * 0.8 / 20000) = 0.003; 0.015 is five of them
    assert abs(share - 1 / N_SPLITS) < 0.015


def test_batches_are_seeded():
    a, b = pointer_chasing(8, hops=3, seed=5), pointer_chasing(8, hops=3, seed=5)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    g = torch.Generator().manual_seed(5)
    first, second = pointer_chasing(8, hops=3, generator=g), pointer_chasing(8, hops=3, generator=g)
    assert not torch.equal(first.inputs, second.inputs)  # the generator advances


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_baselines_are_measured_on_the_batch(k):
    n = 8
    batch = pointer_chasing(500, n_nodes=n, hops=k, split="test", seed=0)
    b = baseline_accuracies(batch, n)
    assert b["guess"] == 1 / n
    assert b["copy"] == 0.0  # on a single cycle f^k(q) != q for 0 < k < n
    assert b["one_hop"] == (1.0 if k == 1 else 0.0)
    assert b["hop_j"] == [1.0 if j == k else 0.0 for j in range(n)]


@pytest.mark.parametrize("kwargs, match", [
    ({"hops": 0}, "hops=0"), ({"n_nodes": 2}, "at least 3"), ({"split": "val"}, "split='val'"),
    ({"batch_size": 0}, "batch_size=0"), ({"n_nodes": 4, "split": "test"}, "n_nodes=4: no cycle"),
])
def test_bad_settings_are_named(kwargs, match):
    args = {"batch_size": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        pointer_chasing(**args)


def test_decode_names_the_shape():
    with pytest.raises(ValueError, match=r"\(2, 5\); expected \(B, n_nodes \+ 1\) = \(B, 9\)"):
        decode(torch.zeros(2, 5, dtype=torch.long), 8)


def test_task_object_trains_like_a_task():
    task = PointerChasingTask(n_nodes=8, hops=1)
    assert (task.vocab_size, task.seq_len, task.name) == (72, 9, "pointer_chasing(n=8, k=1, train)")
    model = TinyTransformer(ModelConfig(vocab_size=72, max_len=9, d_model=16), seed=0)
    loss = train(model, task, steps=3, seed=0)
    assert loss.shape == (3,) and abs(loss[0] - math.log(72)) < 0.3  # untrained: near uniform over 72 tokens


# ------------------------------------------------------------ the stored run and the chapter's claims
@pytest.fixture(scope="module")
def doc():
    return comp.load_runs()


def test_stored_run_has_every_cell_over_three_seeds(doc):
    s = doc["settings"]
    assert {"n_nodes", "d_model", "n_heads", "lr", "batch_size", "steps", "eval_size"} <= set(s)
    grid = {(r["hops"], r["n_layers"]) for r in doc["runs"]}
    ks, Ls = sorted({k for k, _ in grid}), sorted({L for _, L in grid})
    assert grid == {(k, L) for k in ks for L in Ls}  # a full grid
    assert ks[:2] == [1, 2] and Ls[:2] == [1, 2]
    for cell in comp.summarise(doc["runs"]).values():
        assert cell["n"] >= 3
    for r in doc["runs"]:
        assert 0.0 <= r["accuracy"] <= 1.0 and r["steps"] == s["steps"][str(r["hops"])]
        assert len(r["train_curve"]) == r["steps"] // doc["meta"]["arguments"]["every"]
    assert set(doc["baselines"]) == {str(k) for k in ks}
    for k, b in doc["baselines"].items():
        assert b["guess"] == 1 / s["n_nodes"] and b["copy"] == 0.0
        assert b["one_hop"] == (1.0 if k == "1" else 0.0)


@pytest.mark.extended
def test_stored_run_is_reproducible_for_one_cell(doc):
    """Re-run the cheapest cell (k = 1, L = 1, seed 0) and compare with the stored accuracy."""
    s = doc["settings"]
    r = comp.run_one(1, 1, 0, s["steps"]["1"], n_nodes=s["n_nodes"], d_model=s["d_model"], n_heads=s["n_heads"],
                     lr=s["lr"], batch_size=s["batch_size"], eval_batch=s["eval_size"])
    stored = next(x for x in doc["runs"] if (x["hops"], x["n_layers"], x["seed"]) == (1, 1, 0))
    # a trained model's argmax can flip on a few sequences across CPUs (float32 kernels): 1% of them
    assert abs(r["accuracy"] - stored["accuracy"]) <= 0.01


def test_the_chapters_claims_follow_from_the_stored_run(doc):
    """What the chapter's prose and verdict say, checked on the stored numbers."""
    acc = comp.summarise(doc["runs"])
    chance = 1 / doc["settings"]["n_nodes"]
    # one layer learns one hop on every seed; on two hops no seed gets close (stored: 0.41-0.61)
    assert acc[1, 1]["min"] >= 0.99
    assert acc[2, 1]["max"] < 0.75
    # two layers solve k = 2 on every seed (stored: 0.986-1.0)
    assert acc[2, 2]["min"] >= 0.95
    # fewer layers than hops stays far from solved
    for (k, L), cell in acc.items():
        if L < k:
            assert cell["max"] < 0.75, (k, L)
    # every model beats guessing (1/n) and the one-link answer (0) scores nothing for k > 1
    assert all(cell["min"] > chance for cell in acc.values())
    needed = comp.layers_needed(doc["runs"], threshold=0.9)
    assert needed[1] == 1 and needed[2] == 2


# ------------------------------------------------------------ the live run and the command line
def test_live_run_is_deterministic():
    a = comp.live_run(hops=(1,), n_layers=(1,), steps=20, eval_size=200, d_model=16)
    b = comp.live_run(hops=(1,), n_layers=(1,), steps=20, eval_size=200, d_model=16)
    assert [r["accuracy"] for r in a] == [r["accuracy"] for r in b]
    assert [r["train_curve"] for r in a] == [r["train_curve"] for r in b]


def test_summarise_and_layers_needed_against_a_table():
    runs = [{"hops": k, "n_layers": L, "accuracy": a}
            for k, L, a in [(1, 1, 1.0), (1, 1, 0.96), (2, 1, 0.2), (2, 1, 0.3), (2, 2, 0.95), (2, 2, 0.85),
                            (2, 3, 0.99), (2, 3, 0.91), (3, 3, 0.4), (3, 3, 0.5)]]
    s = comp.summarise(runs)
    assert s[2, 2] == {"mean": pytest.approx(0.9), "min": 0.85, "max": 0.95, "n": 2}
    assert comp.layers_needed(runs, threshold=0.9) == {1: 1, 2: 3, 3: None}


def test_command_is_registered_and_writes_json(tmp_path):
    assert EXPERIMENTS["composition-run"] is comp.hop_sweep.COMPOSITION_RUN  # head_budget's, with the hop sweep
    out = tmp_path / "c.json"
    code = main(["composition-run", "--hops", "1", "2", "--layers", "1", "--seeds", "0", "--steps", "2", "3",
                 "--d-model", "16", "--eval-size", "40", "--every", "1", "--jobs", "1", "--quiet", "--out", str(out)])
    assert code == 0
    d = comp.load_runs(out)
    assert [(r["hops"], r["steps"]) for r in d["runs"]] == [(1, 2), (2, 3)]
    assert json.loads(out.read_text())["settings"]["d_model"] == 16


def test_command_rejects_mismatched_steps(capsys):
    with pytest.raises(SystemExit) as err:
        main(["composition-run", "--hops", "1", "2", "3", "--steps", "1", "2", "--quiet"])
    assert err.value.code == 2 and "--steps has 2 values" in capsys.readouterr().err


# ------------------------------------------------------------ the figure
def test_figure_draws_one_line_per_k_with_baselines(doc):
    fig = plot_composition(comp.summarise(doc["runs"]), chance=1 / 8, baselines={"follow one link": 0.0}, title="t")
    fig.canvas.draw()
    ax = fig.axes[0]
    ks = sorted({r["hops"] for r in doc["runs"]})
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[: len(ks)] == [f"k = {k} hop" + ("s" if k > 1 else "") for k in ks]
    assert labels[len(ks):] == ["guess, 1/n = 0.125", "follow one link: 0"]
    assert len(ax.containers) == len(ks)  # one errorbar per k
    assert fig.get_size_inches()[0] <= MAX_WIDTH
    assert ax.get_title() == "t" and ax.get_ylabel() == "held-out accuracy"


def test_figure_means_and_bars_are_the_summary():
    runs = [{"hops": 2, "n_layers": 1, "accuracy": a} for a in (0.2, 0.4, 0.3)]
    ax = plot_composition(comp.summarise(runs)).axes[0]
    line = ax.containers[0].lines[0]
    np.testing.assert_allclose(line.get_ydata(), [0.3])  # the mean of the three seeds


def test_figure_draws_into_a_given_axes_and_rejects_nothing():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    assert plot_composition({(1, 1): {"mean": 1.0, "min": 1.0, "max": 1.0}}, ax=ax) is fig
    assert ax.get_legend() is not None  # drawn inside the given axes
    with pytest.raises(ValueError, match="summary is empty"):
        plot_composition({})


# ------------------------------------------------------------ the head grid (l-hops)
@pytest.fixture(scope="module")
def grid():
    return comp.load_grid()


def test_stored_grid_holds_exactly_the_preregistered_search(grid):
    """Replaying the ledger's search on the stored results asks for every new stored run; the only
    others are the reused n = 8 runs of the earlier matched study."""
    stored = {(r["n_nodes"], r["n_layers"], r["n_heads"], r["seed"]): r for r in grid["runs"]}
    asked = []

    def lookup(n, L, h, seed, **kw):
        asked.append((n, L, h, seed))
        return stored[n, L, h, seed]  # KeyError: the search needed a run that is not stored

    comp_head_budget.grid_search(comp_head_budget.GRID_NODES, seeds=(0, 1), run=lookup)
    extra = {key for key in stored if key not in asked}
    assert all(stored[key].get("reused_from") == "composition_matched.json" for key in extra)
    assert all("reused_from" in r or key in asked for key, r in stored.items())


def test_grid_runs_are_matched_and_follow_the_settings(grid):
    params = {(r["n_nodes"], r["n_layers"] * r["n_heads"]): [] for r in grid["runs"]}
    for r in grid["runs"]:
        params[r["n_nodes"], r["n_layers"] * r["n_heads"]].append(r["parameters"])
        assert r["hops"] == 2 and r["steps"] <= 3000 and r["checks"][-1] == r["steps"]
        assert r["steps"] == 3000 or r["check_accuracy"][-1] >= 0.99  # stopped early only at 0.99
        n, L, h = r["n_nodes"], r["n_layers"], r["n_heads"]
        d, V = 64, n + n * n
        # embeddings (V + positions n + 1), 4 d h d_k per layer, a LayerNorm per block and at the end
        assert r["parameters"] == V * d + (n + 1) * d + L * 4 * d * h * 16 + (L + 1) * 2 * d + d * V
    assert all(max(p) - min(p) <= 128 for p in params.values())  # one layer of H = two of H/2, up to a LayerNorm


def test_grid_table_and_fewest_heads_against_the_raw_runs(grid):
    table = comp.grid_table(grid["runs"])
    for (n, L, H), row in table.items():
        acc = [r["accuracy"] for r in grid["runs"] if (r["n_nodes"], r["n_layers"], r["n_layers"] * r["n_heads"]) == (n, L, H)]
        assert sorted(row["accuracy"]) == sorted(acc) and row["passes"] == (min(acc) >= 0.9)
    assert comp_head_budget.fewest_heads(grid["runs"], 8, 2) == 8 and comp_head_budget.fewest_heads(grid["runs"], 6, 2) is None
    assert all(comp_head_budget.fewest_heads(grid["runs"], n, 1) is None for n in comp_head_budget.GRID_NODES)


def test_head_budget_figure_draws_each_configuration(grid):
    from attention_course.chapters.graphs.figures import plot_head_budget

    table = comp.grid_table(grid["runs"])
    fig = plot_head_budget(table, title="t")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sum("layer" in x for x in labels) == len({(n, L) for n, L, _ in table})
    assert fig.get_size_inches()[0] <= MAX_WIDTH
    with pytest.raises(ValueError, match="empty"):
        plot_head_budget({})





def _loss_fell(run, window):
    """Relative fall of the held-out loss over the last ``window`` steps of ``run``, by hand."""
    before = [l for c, l in zip(run["checks"], run["check_loss"]) if c <= run["checks"][-1] - window][-1]
    return (before - run["check_loss"][-1]) / before


# ------------------------------------------------------------ the long grid (l-hops, deciding run)
@pytest.fixture(scope="module")
def long_grid():
    return comp.load_grid(comp.LONG_GRID_RUN)


def test_long_grid_holds_exactly_the_preregistered_search(long_grid):
    """Replaying the ledger's search (n = 8, 12, 16; 4-32 heads) on the stored results asks for
    every stored run and nothing that is not stored."""
    stored = {(r["n_nodes"], r["n_layers"], r["n_heads"], r["seed"]): r for r in long_grid["runs"]}
    asked = []

    def lookup(n, L, h, seed, **kw):
        asked.append((n, L, h, seed))
        return stored[n, L, h, seed]  # KeyError: the search needed a run that is not stored

    design = comp.LONG_GRID
    comp_head_budget.grid_search(design["nodes"], seeds=(0, 1), heads=design["heads"], run=lookup)
    assert sorted(asked) == sorted(stored)
    settings = long_grid["settings"]
    assert (settings["max_steps"], settings["flat_window"], settings["heads"]) == (
        design["max_steps"], design["flat_window"], list(design["heads"]))


def test_long_grid_runs_are_matched_and_stop_only_at_the_line(long_grid):
    steps = comp.LONG_GRID["max_steps"]
    for r in long_grid["runs"]:
        assert r["hops"] == 2 and r["steps"] <= steps and r["checks"][-1] == r["steps"]
        assert r["steps"] == steps or r["check_accuracy"][-1] >= 0.99
        n, L, h = r["n_nodes"], r["n_layers"], r["n_heads"]
        d, V = 64, n + n * n
        assert r["parameters"] == V * d + (n + 1) * d + L * 4 * d * h * 16 + (L + 1) * 2 * d + d * V


def test_long_grid_decision_by_hand(long_grid):
    """The registered rule, applied by hand to the raw runs: h1, h2 and which failures are flat."""
    runs, window = long_grid["runs"], comp.LONG_GRID["flat_window"]

    def acc(n, L, H):
        return [r["accuracy"] for r in runs if (r["n_nodes"], r["n_layers"], r["n_layers"] * r["n_heads"]) == (n, L, H)]

    assert min(acc(8, 2, 4)) >= 0.9 and min(acc(12, 2, 4)) >= 0.9  # two layers of 2 + 2 heads pass at 8 and 12
    assert min(acc(8, 1, 16)) >= 0.9 and min(acc(8, 1, 8)) < 0.9  # one layer needs 16 heads at n = 8 ...
    assert max(acc(12, 1, 32)) < 0.2  # ... and 32 are not enough at n = 12 (guess 1/12)
    sixteen = [r for r in runs if r["n_nodes"] == 16]
    assert {r["n_layers"] * r["n_heads"] for r in sixteen if r["n_layers"] == 2} == {4, 8, 16, 32}
    assert all(r["accuracy"] < 0.1 and _loss_fell(r, window) < 0.05 for r in sixteen)  # n = 16: flat at the guess, 1/16
    d = comp.grid_decision(runs, comp.LONG_GRID["nodes"], window=window)
    assert d["h1"] == {8: 16, 12: None, 16: None} and d["h2"] == {8: 4, 12: 4, 16: None}
    assert d["two_layer_failures_flat"] and d["composition"] == "reach only"


def test_grid_decision_each_branch():
    def run(n, L, H, acc, falling=False):
        loss = [2.0, 1.0, 0.5 if falling else 1.0]
        return {"n_nodes": n, "n_layers": L, "n_heads": H // L, "seed": 0, "accuracy": acc,
                "checks": [0, 1000, 2000], "check_loss": loss, "check_accuracy": [0.1, acc, acc]}

    two = [run(n, 2, 4, 1.0) for n in (8, 12)]
    assert comp.grid_decision(two + [run(8, 1, 4, 1.0)], (8, 12))["composition"] == "reach only"  # one layer as good
    assert comp.grid_decision(two + [run(8, 1, 4, 0.5, falling=True)], (8, 12))["composition"] == "undecided"
    grows = [run(8, 2, 4, 1.0), run(12, 2, 4, 0.1), run(12, 2, 8, 1.0)]
    assert comp.grid_decision(grows, (8, 12))["composition"] == "reach only"  # h2 grows, on a flat failure
    grows[1] = run(12, 2, 4, 0.1, falling=True)
    assert comp.grid_decision(grows, (8, 12))["composition"] == "undecided"


def test_long_grid_parts_merge_into_the_file(tmp_path, monkeypatch):
    """Two parts of the search (one n each) write the same file: the second keeps the first's runs and
    records both parts; a run already in the file is reused, not run again."""
    ran = []

    def fake(n, L, h, seed, **kw):
        ran.append((n, L, h, seed))
        return {"n_nodes": n, "n_layers": L, "n_heads": h, "seed": seed, "accuracy": 1.0 if L == 2 else 0.5}

    monkeypatch.setattr(comp.head_budget, "run_matched", fake)
    out = tmp_path / "grid.json"
    config = comp.head_budget.HEAD_GRID.config
    from dataclasses import replace

    execute(comp.head_budget.HEAD_GRID, replace(config, nodes=(6,), seeds=(0,)), out, {"nodes": [6]}, show=False)
    first = list(ran)
    execute(comp.head_budget.HEAD_GRID, replace(config, nodes=(6, 8), seeds=(0,)), out, {"nodes": [6, 8]}, show=False)
    doc = comp.load_grid(out)
    assert first == [(6, 1, 16, 0), (6, 2, 2, 0)]  # the registered order: one layer fails at 16, two pass at 2 + 2
    assert ran[len(first):] == [(8, 1, 16, 0), (8, 2, 2, 0)]  # n = 6 reused from the file
    assert sorted({r["n_nodes"] for r in doc["runs"]}) == [6, 8] and len(doc["runs"]) == 4
    assert [p["arguments"] for p in doc["meta"]["parts"]] == [{"nodes": [6]}, {"nodes": [6, 8]}]
    r = lambda n, s: {"n_nodes": n, "n_layers": 2, "n_heads": 2, "seed": s, "accuracy": 0.5}  # noqa: E731
    merged = comp_head_budget.merge_grid({"meta": {"parts": [{"arguments": 2}]}, "settings": {}, "runs": [r(8, 0) | {"accuracy": 0.9}]},
                             {"meta": {"parts": [{"arguments": 1}]}, "runs": [r(8, 0)]})
    assert [x["accuracy"] for x in merged["runs"]] == [0.5]  # the first write of a run is kept


@pytest.mark.extended
@pytest.mark.numerics
def test_one_stored_grid_run_is_reproducible(long_grid):
    """The deciding run's two layers of 2 + 2 heads on 8 nodes, seed 1 (about 30 s), asserted as
    the claim, not the step: leaving the plateau is chaotic in float32 (stored at 7,000 steps with
    AVX2; 9,750 on an AVX-512 machine), so the fresh run must pass (0.99 at a check, held-out
    accuracy at least the decision's 0.9) before the step limit, as the stored one did."""
    stored = next(r for r in long_grid["runs"] if (r["n_nodes"], r["n_layers"], r["n_heads"], r["seed"]) == (8, 2, 2, 1))
    limit = comp.LONG_GRID["max_steps"]
    fresh = comp_head_budget.run_matched(8, 2, 2, seed=1, max_steps=limit)
    assert stored["steps"] < limit and stored["accuracy"] >= 0.9
    assert fresh["steps"] < limit and fresh["check_accuracy"][-1] >= 0.99
    assert fresh["accuracy"] >= 0.9


# ------------------------------------------------------------ the follow-up (l-hops, a longer horizon)
@pytest.fixture(scope="module")
def follow_up():
    return comp.load_grid(comp.FOLLOW_UP_RUN)


def test_follow_up_holds_exactly_the_registered_runs(follow_up):
    """The stored follow-up is the ledger's five runs, in its order, each stopped only at 0.99 or
    its step limit, one layer of 4 heads with the weights of two layers of 2 + 2."""
    assert [tuple(c) for c in follow_up["settings"]["configs"]] == list(comp_head_budget.FOLLOW_UP)
    assert [(r["n_nodes"], r["n_layers"], r["n_heads"], r["seed"]) for r in follow_up["runs"]] == [
        c[:4] for c in comp_head_budget.FOLLOW_UP]
    for r, (n, L, h, seed, most) in zip(follow_up["runs"], comp_head_budget.FOLLOW_UP):
        assert r["hops"] == 2 and r["checks"][-1] == r["steps"] <= most
        assert r["steps"] == most or r["check_accuracy"][-1] >= 0.99
        d, V = 64, n + n * n
        assert r["parameters"] == V * d + (n + 1) * d + L * 4 * d * h * 16 + (L + 1) * 2 * d + d * V
    one, two = follow_up["runs"][2], follow_up["runs"][0]
    assert 0 < two["parameters"] - one["parameters"] <= 2 * 64  # the same weights, up to one LayerNorm


def test_follow_up_decision_by_hand(follow_up):
    """The registered rule by hand: two layers of 2 + 2 must pass on 16 nodes on both seeds, and
    every one-layer failure be flat over its last third, for composition to hold."""
    runs = follow_up["runs"]
    two = [r for r in runs if r["n_layers"] == 2]
    one = [r for r in runs if r["n_layers"] == 1]
    two_pass = all(r["accuracy"] >= 0.9 for r in two)
    one_passes = any(r["accuracy"] >= 0.9 for r in one)
    one_flat = all(r["check_accuracy"][-1] >= 0.99 or _loss_fell(r, r["steps"] // 3) < 0.05 for r in one)
    by_hand = "reach only" if one_passes else "holds" if two_pass and one_flat else "undecided"
    d = comp.follow_up_decision(runs)
    assert d["composition"] == by_hand
    assert d["two_layers_pass"] == two_pass and d["one_layer_failures_flat"] == one_flat


def test_follow_up_decision_each_branch():
    def run(L, acc, falling=False):
        return {"n_layers": L, "accuracy": acc, "steps": 3000, "checks": [0, 1000, 2000, 3000],
                "check_loss": [2.0, 2.0, 1.5 if falling else 1.0, 1.0], "check_accuracy": [0.1, 0.1, acc, acc]}

    assert comp.follow_up_decision([run(2, 1.0), run(1, 0.1)])["composition"] == "holds"
    assert comp.follow_up_decision([run(2, 1.0), run(1, 0.95)])["composition"] == "reach only"
    assert comp.follow_up_decision([run(2, 1.0), run(2, 0.1), run(1, 0.1)])["composition"] == "undecided"
    assert comp.follow_up_decision([run(2, 1.0), run(1, 0.5, falling=True)])["composition"] == "undecided"


def test_training_curves_figure_draws_each_stored_run(follow_up):
    from attention_course.chapters.graphs.figures import plot_training_curves

    runs = follow_up["runs"]
    fig = plot_training_curves(runs, chance={n: 1 / n for n in (8, 12, 16)}, title="t")
    ax = fig.axes[0]
    lines = [l for l in ax.get_lines() if not l.get_label().startswith(("_", "success"))]
    assert len(lines) == len(runs)
    for line, r in zip(lines, runs):
        assert list(line.get_xdata()) == r["checks"][1:]  # step 0 dropped from the log axis
        assert list(line.get_ydata()) == r["check_accuracy"][1:]
        assert line.get_linestyle() == ("-" if r["n_layers"] == 1 else "--")
    assert fig.get_size_inches()[0] <= MAX_WIDTH
    with pytest.raises(ValueError, match="empty"):
        plot_training_curves([])


def test_second_follow_up_holds_the_registered_runs_and_decides(long_grid):
    """The second follow-up is the ledger's two runs; by the registered rule (a pass of one layer of
    4 heads gives reach only) it decides, and by hand: both pass, each later than two layers did."""
    doc = comp.load_grid(comp.SECOND_FOLLOW_UP_RUN)
    assert [tuple(c) for c in doc["settings"]["configs"]] == list(comp_head_budget.SECOND_FOLLOW_UP)
    runs = doc["runs"]
    assert [(r["n_nodes"], r["n_layers"], r["n_heads"], r["seed"]) for r in runs] == [
        c[:4] for c in comp_head_budget.SECOND_FOLLOW_UP]
    for r, (*_, most) in zip(runs, comp_head_budget.SECOND_FOLLOW_UP):
        assert r["checks"][-1] == r["steps"] <= most
        assert r["steps"] == most or r["check_accuracy"][-1] >= 0.99
    passes = [r["accuracy"] >= 0.9 for r in runs]
    assert comp.follow_up_decision(runs)["composition"] == ("reach only" if any(passes) else "undecided")
    two_layer_steps = {r["n_nodes"]: r["steps"] for r in long_grid["runs"]
                       if (r["n_layers"], r["n_heads"], r["seed"]) == (2, 2, 0)}
    for r in runs:  # the same 4 heads in one layer need more steps than in two
        assert r["steps"] > two_layer_steps[r["n_nodes"]]
