"""models/experiments.py: the one runner (grid, search, workers, progress, JSON, merge, command line).

Fake experiments whose runs return their own arguments check the runner without training
anything; the chapters' real configurations are checked in their own tests and, against the
stored files, in tests/test_commands.py.
"""

from __future__ import annotations

import argparse
import inspect
import json
from dataclasses import dataclass, replace

import pytest

from attention_course.models import experiments as ex
from attention_course.models.experiments import (
    EXPERIMENTS,
    Experiment,
    Runs,
    Training,
    execute,
    progress_bar,
    read_json,
    register,
    run,
    write_json,
)
from attention_course.models.tiny import ModelConfig
from attention_course.models.training import evaluate_loss, train


@dataclass(frozen=True)
class Grid(Training):
    seeds: tuple = (0, 1)
    sizes: tuple = (2, 3)
    jobs: int = 1


def echo(config, size, seed):
    """A run that trains nothing: its record spells out what it got."""
    return {"size": size, "seed": seed, "steps": config.steps}


def _document(config, runs, meta):
    return {"meta": {k: meta[k] for k in ("command", "arguments")}, "runs": runs.records}


FAKE = Experiment("fake-run", Grid(), echo, None, description="A fake run (instant).",
                  grid=lambda c: [(n, s) for n in c.sizes for s in c.seeds], document=_document,
                  flags={"--seeds": dict(type=int, nargs="+", help="seeds"), "--steps": dict(type=int, help="steps"),
                         "--sizes": dict(type=int, nargs="+", help="sizes")})


def test_training_defaults_are_the_training_loops_and_the_models():
    loop = inspect.signature(train).parameters
    t = Training()
    assert (t.steps, t.lr, t.batch_size) == (loop["steps"].default, loop["lr"].default, loop["batch_size"].default)
    assert (t.d_model, t.n_heads, t.n_layers) == (ModelConfig().d_model, ModelConfig().n_heads, ModelConfig().n_layers)
    assert t.eval_batch == inspect.signature(evaluate_loss).parameters["batch_size"].default
    assert list(t.training()) == ["steps", "lr", "n_heads", "d_model", "n_layers", "batch_size", "eval_batch"]
    assert Grid(steps=7).training()["steps"] == 7 and "seeds" not in Grid().training()


def test_runs_come_back_in_grid_order_and_save_sees_each():
    seen = []
    runs = run(FAKE, save=lambda r: seen.append(len(r.records)))
    assert runs.jobs == [(2, 0), (2, 1), (3, 0), (3, 1)]
    assert runs.records[3] == {"size": 3, "seed": 1, "steps": 1000}
    assert seen == [1, 2, 3, 4] and len(runs.seconds) == len(runs.cpu_seconds) == 4


def test_a_search_asks_for_its_next_run_until_it_is_done():
    def next_jobs(config, runs):  # double until past 20, from 1; a run already done is not asked again
        last = runs.records[-1] if runs.records else 1
        return [] if last > 20 else [(last,), (last,)]

    e = Experiment("search", None, lambda c, x: 2 * x, None, description="(instant)", next_jobs=next_jobs)
    assert run(e).records == [2, 4, 8, 16, 32]
    done = Runs()
    done.add((1,), 2)
    assert run(e, done=done).jobs == [(1,), (2,), (4,), (8,), (16,)]  # the first reused


def test_execute_writes_the_document_with_its_provenance(tmp_path):
    out = tmp_path / "sub" / "fake.json"  # a missing folder is made
    doc = execute(FAKE, replace(FAKE.config, seeds=(5,)), out, {"seeds": [5]}, show=False)
    assert read_json(out) == doc and out.read_text().endswith("]\n}\n")  # indent 1, a final newline
    assert doc["meta"] == {"command": "python -m attention_course fake-run", "arguments": {"seeds": [5]}}
    assert [r["seed"] for r in doc["runs"]] == [5, 5]


def test_a_merging_part_keeps_what_the_file_holds(tmp_path):
    out = tmp_path / "merged.json"
    keep = replace(FAKE, merge=lambda doc, previous: {**doc, "runs": previous["runs"] + doc["runs"]})
    execute(keep, replace(FAKE.config, sizes=(2,), seeds=(0,)), out, show=False)
    execute(keep, replace(FAKE.config, sizes=(3,), seeds=(0,)), out, show=False)
    assert [r["size"] for r in read_json(out)["runs"]] == [2, 3]
    assert (tmp_path / "merged.json.lock").exists()  # written under a lock: parts may run side by side


def test_the_command_line_sets_the_configuration_and_picks_the_part(tmp_path, capsys):
    other = replace(FAKE, name="fake-run --other", out=tmp_path / "other.json", grid=lambda c: [(0, 0)])
    flags = {**FAKE.flags, "--other": dict(action="store_true", help="the other part")}
    cmd = replace(FAKE, out=tmp_path / "fake.json", flags=flags, parts=(other,),
                  select=lambda c: [other] if c.other else [replace(FAKE, out=tmp_path / "fake.json")],
                  config=OtherGrid(), check=lambda c: "no sizes" if not c.sizes else None)
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    assert "(default: [0, 1])" in parser.format_help() and "fake.json or other.json" in parser.format_help()
    assert cmd.cli(parser.parse_args(["--seeds", "4", "--steps", "3", "--quiet"]), parser) == 0
    assert read_json(tmp_path / "fake.json")["runs"][0] == {"size": 2, "seed": 4, "steps": 3}
    assert read_json(tmp_path / "fake.json")["meta"]["arguments"]["seeds"] == [4]
    assert cmd.cli(parser.parse_args(["--other", "--quiet"]), parser) == 0
    assert read_json(tmp_path / "other.json")["runs"] == [{"size": 0, "seed": 0, "steps": 1000}]
    out, err = capsys.readouterr()
    assert out == f"stored {tmp_path / 'fake.json'}\nstored {tmp_path / 'other.json'}\n" and err == ""
    with pytest.raises(SystemExit) as exit_:
        cmd.cli(parser.parse_args(["--sizes"]), parser)  # nargs="+": an empty list is a usage error already
    assert exit_.value.code == 2
    with pytest.raises(ValueError, match="no sizes"):
        cmd.cli(argparse.Namespace(seeds=[0], steps=1, sizes=[], other=False, quiet=True))


@dataclass(frozen=True)
class OtherGrid(Grid):
    other: bool = False


def test_progress_goes_to_stderr_with_or_without_tqdm(capsys, monkeypatch):
    assert list(progress_bar(iter([(1, "a")]), "demo", total=1, label=lambda j: f"job {j[1]}")) == [(1, "a")]
    out, err = capsys.readouterr()
    assert out == "" and "demo" in err and "job a" in err
    monkeypatch.setattr(ex, "tqdm", None)
    assert list(progress_bar(["x", "y"], "plain", total=2, label=str)) == ["x", "y"]
    out, err = capsys.readouterr()
    assert out == "" and err == "plain: 1/2 (x)\nplain: 2/2 (y)\n"
    assert list(progress_bar(["x"], "quiet", show=False)) == ["x"] and capsys.readouterr() == ("", "")


def test_the_library_prints_nothing(capsys):
    run(FAKE)
    assert capsys.readouterr() == ("", "")


def test_a_second_experiment_of_the_same_name_is_an_error():
    with pytest.raises(ValueError, match=r"two experiments are named 'scaling-run'"):
        register(replace(FAKE, name="scaling-run"))
    assert EXPERIMENTS["scaling-run"].run_one.__module__.endswith("scaling.training_grid")


def test_json_is_written_readably_or_on_one_line_and_read_back(tmp_path):
    doc = {"schema_version": 1, "a": [1, 2.5, None]}
    write_json(doc, tmp_path / "one.json")
    write_json(doc, tmp_path / "line.json", indent=None)
    assert (tmp_path / "one.json").read_text() == json.dumps(doc, indent=1) + "\n"
    assert (tmp_path / "line.json").read_text() == json.dumps(doc) + "\n"
    assert read_json(tmp_path / "line.json", schema_version=1) == doc
    with pytest.raises(ValueError, match=r"line.json: schema_version=1; expected 2"):
        read_json(tmp_path / "line.json", schema_version=2)


@pytest.mark.extended
def test_workers_give_the_records_in_grid_order():
    # fresh (spawned) worker processes, the costliest job first: the records still come back in grid order
    e = replace(FAKE, cost=lambda c, job: job[0])
    one, two = run(e), run(e, replace(FAKE.config, jobs=2))
    assert two.jobs == one.jobs and two.records == one.records
