"""chapters/scaling/training_grid.py: chapter 6's grid of runs on the one runner (grid, stacking, JSON, command line).

A fake run function whose records spell out their own coordinates checks the grid and the
stacking without training anything; the real configurations are checked in the tests of their modules.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from attention_course.chapters.scaling.init_vs_step import CAUSES
from attention_course.chapters.scaling.training_grid import ScalingGrid, grid_experiment, run_grid
from attention_course.models.experiments import EXPERIMENTS, load_result, result_document, significant, write_json


@dataclass(frozen=True)
class Record:
    code: int
    curve: np.ndarray


def coordinates(d_k, a, b=0, *, seed, steps, lr, n_heads, d_model, n_layers, batch_size, eval_batch):
    """A run that trains nothing: its record spells out the arguments it got."""
    return Record(code=1000 * d_k + 100 * a + 10 * b + seed, curve=np.arange(steps) / 3 + seed)


@dataclass(frozen=True)
class Grid:
    d_k: np.ndarray
    variants: tuple
    code: np.ndarray
    curve: np.ndarray
    settings: dict = field(default_factory=dict)
    motion: dict[str, np.ndarray] = field(default_factory=dict)

    ROUNDING: ClassVar[dict] = {"curve": significant(2)}

    @classmethod
    def from_runs(cls, config, runs):
        return cls(d_k=np.array(config.d_ks), variants=tuple(config.variants),
                   settings=config.settings(seed_count=len(config.seeds)), **runs)


FAKE = ScalingGrid(train=coordinates, result=Grid, definitions={"one": (1,), "two": (2, 5)}, variants=("one", "two"),
                   d_ks=(4, 8), seeds=(0, 1, 2), steps=3)


def test_records_are_stacked_d_k_variant_seed():
    r = run_grid(FAKE)
    assert r.code.shape == (2, 2, 3) and r.curve.shape == (2, 2, 3, 3)
    expected = [[[1000 * d + 100 * a + 10 * b + s for s in (0, 1, 2)] for a, b in ((1, 0), (2, 5))] for d in (4, 8)]
    np.testing.assert_array_equal(r.code, expected)  # each run got d_k, its definition and its seed
    np.testing.assert_array_equal(r.curve[1, 0, 2], np.arange(3) / 3 + 2)
    assert r.settings == dict(steps=3, lr=1e-2, n_heads=1, d_model=32, n_layers=2, batch_size=32, eval_batch=256,
                              seed_count=3, task="repeated_sequences", optimizer="AdamW")


def test_bad_grids_fail_before_any_run():
    with pytest.raises(ValueError, match=r"unknown variants \['three'\]; expected some of \['one', 'two'\]"):
        run_grid(replace(FAKE, variants=("one", "three")))
    with pytest.raises(ValueError, match=r"d_ks=\[\], variants=\['one', 'two'\] and seeds=\[0, 1, 2\]"):
        run_grid(replace(FAKE, d_ks=()))


def test_save_and_load_round_trip(tmp_path):
    r = replace(run_grid(FAKE), motion={"step": np.array([0, 2]), "share": np.array([np.nan, 0.5])})
    write_json(result_document(r, {"note": "test"}), tmp_path / "one.json", indent=None)
    doc = json.loads((tmp_path / "one.json").read_text())
    assert list(doc) == ["schema_version", "meta", "result"] and doc["result"]["curve"][0][0][1] == [1.0, 1.3, 1.7]
    back, meta = load_result(tmp_path / "one.json", Grid)
    assert meta == {"note": "test"} and back.variants == ("one", "two") and back.settings == r.settings
    np.testing.assert_array_equal(back.code, r.code)
    np.testing.assert_allclose(back.curve, r.curve, rtol=5e-2)  # 2 significant digits: half a unit of the 2nd
    assert back.motion["share"].dtype == float and np.isnan(back.motion["share"][0])
    write_json(result_document([r, r]), tmp_path / "two.json")
    (first, second), _ = load_result(tmp_path / "two.json", Grid)
    np.testing.assert_array_equal(second.code, r.code)
    (tmp_path / "two.json").write_text('{"schema_version": 2}')
    with pytest.raises(ValueError, match=r"two.json: schema_version=2; expected 1"):
        load_result(tmp_path / "two.json", Grid)


def test_command_line_overrides_the_configuration(tmp_path, capsys):
    fake = grid_experiment("fake-run", FAKE, Path("fake.json"), "a fake run (instant)", "fake",
                           flags=("--seeds", "--d-k", "--variants", "--steps"))
    try:
        parser = argparse.ArgumentParser()
        fake.add_arguments(parser)
        out = tmp_path / "fake.json"
        args = parser.parse_args(["--out", str(out), "--seeds", "5", "--d-k", "2", "--variants", "two"])
        assert fake.cli(args, parser) == 0
    finally:
        EXPERIMENTS.pop("fake-run")
    r, meta = load_result(out, Grid)
    assert r.code.tolist() == [[[2255]]] and r.curve.shape == (1, 1, 1, 3)  # steps: the configuration's
    assert meta["command"] == "python -m attention_course fake-run" and meta["machine"]["cores"] >= 1
    assert meta["arguments"] == {"out": str(out), "seeds": [5], "d_k": [2], "variants": ["two"], "steps": 3,
                                 "quiet": False}
    assert meta["wall_seconds"] >= 0 and meta["cpu_seconds"] >= 0
    out_text, err = capsys.readouterr()
    assert out_text == f"stored {out}\n" and "fake-run" in err  # the progress bar is on stderr
    with pytest.raises(SystemExit):
        parser.parse_args(["--variants", "three"])
    assert "--lr" not in parser.format_help()  # only the flags the configuration offers


@pytest.mark.extended
def test_parallel_runs_give_the_same_numbers_and_finish():
    # Regression: with jobs > 1 the pool forked the parent, whose torch had started its OpenMP
    # threads (a module computed with torch at import time), and the first parallel op of a
    # worker hung for ever. Workers are now spawned fresh. Tens of seconds: each worker imports the package.
    config = replace(CAUSES.config, variants=("scaled", "unscaled"), seeds=(0, 1), d_ks=(8,), steps=2, eval_batch=8)
    one, two = run_grid(config), run_grid(replace(config, jobs=2))
    for name in ("loss", "eval_loss", "score_grad0", "wq_grad0"):
        np.testing.assert_array_equal(getattr(two, name), getattr(one, name))
