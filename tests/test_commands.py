"""Every command of ``python -m attention_course``, and the stored runs its experiments wrote.

The fast tier checks that every command's ``--help`` works and says how long the command takes,
that every stored file in ``attention_course/data/`` belongs to an experiment (or is named below
with what writes it), and that no chapter keeps a runner of its own (argparse, tqdm, a JSON
writer, code after a ``__main__`` guard). The extended tier runs each experiment, and each
part of one, on a small configuration through the command line and checks that what it writes
has the structure of the stored file (every key the stored file has, in the same order, with
values of the same kind), and compares the values that a small configuration shares with the
stored run.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from attention_course.__main__ import COMMANDS, commands, main
from attention_course.models.experiments import EXPERIMENTS, read_json
from attention_course.models.records import DATA_DIR

PACKAGE = Path(__file__).resolve().parents[1] / "attention_course"

#: Stored files that are not a long run's, and what writes each.
NOT_EXPERIMENTS = {
    "evidence.json": "python -m attention_course evidence",
    "head_explorer.json": "heads.sliders.head_explorer_data (the head explorer's maps)",
    "search_sentences.json": "chapters/encoder/search.py (the search example's sentences)",
    "slider_depth_probe.json": "graphs.slider_data.write_probe_data",
    "slider_top_key.json": "graphs.slider_data.write_top_key_data",
    "slider_rule_miss.json": "graphs.topology_rules.write_rule_miss",
    "slider_role_scores.json": "heads.roles.write_role_scores",
    "slider_efficient_inputs.json": "lowrank.approximation_error.write_structure_sweep",
    "slider_learned_width.json": "kernels.self_weight.write_self_weight_sweep",
    "slider_kernel_family.json": "kernels.kernel_family.write_family_sweep",
}
#: How a duration reads in a command's help.
DURATION = re.compile(r"\b(seconds?|minutes?|an hour|hours?|(a|\d+) (s|minutes?))\b|\d+ s\b")


def _stored_files() -> dict[str, list[str]]:
    """Stored file name -> the experiments (command parts) that write it."""
    owners: dict[str, list[str]] = {}
    for e in EXPERIMENTS.values():
        for part in e.experiments():
            for path in (part.out, *part.also):
                if path is not None:
                    owners.setdefault(Path(path).name, []).append(part.name)
    return owners


def test_every_command_has_help_that_says_how_long_it_takes(capsys):
    assert set(COMMANDS) == {"progress", "evidence"}  # every other command is an experiment
    for name, cmd in commands().items():
        with pytest.raises(SystemExit) as exit_:
            main([name, "--help"])
        out = capsys.readouterr().out
        assert exit_.value.code == 0 and f"usage: python -m attention_course {name}" in out, name
        if name in EXPERIMENTS:
            assert DURATION.search(cmd.description), f"{name}'s help does not say how long it takes"
            assert cmd.help and "--quiet" in out, name
    assert main([]) == 0 and "scaling-run" in capsys.readouterr().out


def _quoted_command_lines() -> list[tuple[str, str]]:
    """(page, arguments) of every command line the book and the README quote in code formatting."""
    root = PACKAGE.parent
    found = []
    for page in [*sorted((root / "book").glob("*.ipynb")), *sorted((root / "book").glob("*.md")), root / "README.md"]:
        if page.suffix == ".ipynb":
            text = "\n".join("".join(c["source"]) for c in json.loads(page.read_text(encoding="utf-8"))["cells"])
        else:
            text = page.read_text(encoding="utf-8")
        text = re.sub(r"\\\n\s*", " ", text)  # a shell line continued with a backslash
        spans = re.findall(r"`(python -m attention_course [^`]*)`", text)  # inline code
        for block in re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S):  # fenced code
            spans += [line for line in block.splitlines() if line.strip().startswith("python -m attention_course ")]
        for span in spans:
            args = span.split("#")[0].strip().removeprefix("python -m attention_course ").strip()
            if args and "<" not in args:  # "<command> --help" is a pattern, not a command
                found.append((page.name, args))
    return found


def test_every_command_line_the_book_quotes_parses():
    """A learner who copies a quoted command gets the run, not argparse's usage error."""
    import shlex

    from attention_course.__main__ import build_parser

    lines = _quoted_command_lines()
    assert len(lines) >= 20, f"only {len(lines)} quoted command lines found; the extraction broke"
    parser, bad = build_parser(), []
    for page, args in lines:
        try:
            parser.parse_args(shlex.split(args))
        except SystemExit:
            bad.append(f"{page}: python -m attention_course {args}")
    assert not bad, "command lines that do not parse:\n" + "\n".join(bad)


def test_every_stored_file_belongs_to_an_experiment_or_says_what_writes_it():
    owners = _stored_files()
    stored = {p.name for pattern in ("*.json", "*.npz") for p in DATA_DIR.glob(pattern)}
    assert not set(owners) & set(NOT_EXPERIMENTS)
    assert stored == set(owners) | set(NOT_EXPERIMENTS), (
        f"not written by any experiment: {sorted(stored - set(owners) - set(NOT_EXPERIMENTS))}; "
        f"named but missing: {sorted((set(owners) | set(NOT_EXPERIMENTS)) - stored)}")


def test_every_experiment_is_a_configuration_of_the_one_runner():
    """No chapter or model module keeps a runner of its own: no argparse, no tqdm, no JSON written by
    hand, no code after a ``__main__`` guard (all are models/experiments.py's)."""
    problems = []
    for path in sorted((PACKAGE / "chapters").rglob("*.py")) + sorted((PACKAGE / "models").rglob("*.py")):
        if path.name == "experiments.py":
            continue
        text = path.read_text()
        tree = ast.parse(text)
        rel = path.relative_to(PACKAGE)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                problems += [f"{rel} imports {n}" for n in names if n in ("argparse", "tqdm")]
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                problems.append(f"{rel} has a __main__ guard")
            if isinstance(node, ast.FunctionDef) and node.name in ("add_arguments", "cli", "main"):
                problems.append(f"{rel} defines {node.name}")
        problems += [f"{rel} writes JSON itself" for pat in ("json.dump(", "json.dumps(") if pat in text
                     and path.name != "benchmarks.py"]  # benchmarks passes arguments to its memory probe as JSON
    assert not problems, problems


def test_each_part_of_a_command_has_its_own_file():
    for name, e in EXPERIMENTS.items():
        files = [part.out for part in e.experiments()[1:] if part.out is not None]
        assert len(files) == len(set(files)), f"{name}: two parts write the same file"


# ------------------------------------------------------------------ the extended tier: each runner, small
def schema(x):
    """The structure of a JSON value: dicts by key, lists by the union of their elements, scalars by kind.

    A dict whose keys are all numbers (``"16"``, ``"256"``) is a map: its keys are data, its values one schema.
    """
    if isinstance(x, dict):
        if not x:
            return None  # empty: a dict or a map, nothing to compare
        if all(re.fullmatch(r"-?\d+(\.\d+)?", k) for k in x):
            return ("map", _union(schema(v) for v in x.values()))
        return ("dict", {k: schema(v) for k, v in x.items()})
    if isinstance(x, list):
        return ("list", _union(schema(v) for v in x))
    if x is None:
        return None  # null: a NaN, or nothing yet; any kind
    return ("bool",) if isinstance(x, bool) else ("number",) if isinstance(x, (int, float)) else ("str",)


def _merge(a, b):
    if a is None or b is None:
        return a if b is None else b
    if a[0] != b[0]:
        return ("mixed", (a, b))
    if a[0] == "dict":
        return ("dict", {k: _merge(a[1].get(k), b[1].get(k)) for k in {**a[1], **b[1]}})
    if a[0] in ("list", "map"):
        return (a[0], _merge(a[1], b[1]))
    return a


def _union(schemas):
    out = None
    for s in schemas:
        out = _merge(out, s)
    return out


def differences(stored, fresh, path="", top=True, maps=()) -> list[str]:
    """Where ``fresh`` lacks a key of ``stored``, orders the top level otherwise, or holds another kind of value.

    Provenance (``meta``, ``machine``) is left out: it records where and how a run ran. The dicts at
    ``maps`` (paths such as ``/result/settings/definitions``; ``*`` for any key) are keyed by the
    configuration (one entry per variant, method or rank): there only the values' kind is compared.
    """
    if stored is None or fresh is None:
        return []
    if stored[0] == fresh[0] == "dict" and any(re.fullmatch(m.replace("[", r"\[").replace("]", r"\]")
                                                             .replace("*", "[^/]+"), path) for m in maps):
        stored, fresh = ("map", _union(stored[1].values())), ("map", _union(fresh[1].values()))
    if stored[0] != fresh[0]:
        return [f"{path or 'the document'}: {stored[0]} stored, {fresh[0]} written"]
    if stored[0] == "dict":
        keys = [k for k in stored[1] if k not in ("meta", "machine")]
        out = [f"{path}/{k}: stored, not written" for k in keys if k not in fresh[1]]
        if top and [k for k in fresh[1] if k in keys] != [k for k in keys if k in fresh[1]]:
            out.append(f"the keys are written in another order: {list(fresh[1])} against {list(stored[1])}")
        return out + [d for k in keys if k in fresh[1] for d in differences(stored[1][k], fresh[1][k], f"{path}/{k}",
                                                                            top=False, maps=maps)]
    if stored[0] in ("list", "map"):
        return differences(stored[1], fresh[1], path + "[]", top=False, maps=maps)
    return []


def test_schema_differences_find_a_missing_key_a_new_kind_and_a_reordering():
    stored = {"meta": {"x": 1}, "runs": [{"a": 1, "b": [1.0, None]}], "steps": {"1": 10, "2": 20}}
    assert differences(schema(stored), schema({**stored, "meta": {}, "steps": {"4": 1}})) == []
    assert differences(schema(stored), schema({**stored, "runs": [{"a": 1}]})) == ["/runs[]/b: stored, not written"]
    assert differences(schema(stored), schema({**stored, "runs": [{"a": "1", "b": []}]})) == [
        "/runs[]/a: number stored, str written"]
    assert "another order" in differences(schema(stored), schema({"steps": {}, "runs": stored["runs"]}))[0]
    named = {"rules": {"a": [1.0], "b": [2.0]}}
    assert differences(schema(named), schema({"rules": {"a": [1.0]}})) == ["/rules/b: stored, not written"]
    assert differences(schema(named), schema({"rules": {"a": [1.0]}}), maps=["/rules"]) == []
    assert differences(schema(named), schema({"rules": {"a": ["x"]}}), maps=["/rules"]) == [
        "/rules[][]: number stored, str written"]


#: Per stored file, the dicts keyed by the configuration (a variant, method or rank per key).
MAPS = {
    "scale_backward.json": ["/result/settings/definitions"],
    "scale_backward_rows.json": ["/result/settings/definitions"],
    "scale_backward_start.json": ["/result/settings/definitions"],
    "lowrank_function.json": ["/minilm_swap[]", "/tiny_swap[]"],
    "benchmarks_full.json": ["/summary/slopes", "/summary/slopes_load_normalised", "/summary/matmul_ratio",
                             "/summary/crossover_vs_sdpa", "/summary/crossover_vs_sdpa/*",
                             "/summary/crossover_vs_naive", "/summary/crossover_vs_naive/*"],
}
#: Keys a stored file holds that no code writes: notes added by hand after the run.
BY_HAND = {"composition_grid.json": ["/runs[]/reused_from"]}  # the n = 8 runs reused from composition_matched.json


#: Each experiment (or part) on a small configuration: its stored file, the command line, and a check of
#: the values that configuration shares with the stored run (None: only the structure).
def _same_first_steps(stored, fresh):  # scaling-causes: seed 1's first 8 steps and its step-0 gradients
    s = stored["result"]
    f = fresh["result"]
    np.testing.assert_allclose(np.array(f["loss"])[:, 0, :8], np.array(s["loss"])[:, 1, :8], rtol=5e-4)
    np.testing.assert_allclose(np.array(f["score_grad0"])[:, 0], np.array(s["score_grad0"])[:, 1], rtol=1e-6)


def _same_first_block(stored, fresh):  # scaling-run: seed 0, d_k = 64 without the scale, the first 10-step block
    s, f = stored["runs"][0], fresh["runs"][0]
    i, j = s["d_k"].index(64), s["scales"].index("none")
    assert abs(f["loss"][0][0][0] - s["loss"][i][j][0]) <= 5e-4 * abs(s["loss"][i][j][0])
    np.testing.assert_allclose(f["logit_std_init"][0][0], s["logit_std_init"][i][j], rtol=5e-4)


def _same_start(stored, fresh):  # scaling-saturation: the checkpoint at step 0 is before any training
    s, f = stored["result"], fresh["result"]
    assert f["step"][0] == s["step"][0] == 0
    np.testing.assert_allclose(np.array(f["eval_loss"])[0, 0, 0, 0], np.array(s["eval_loss"])[0, 0, 0, 0], rtol=5e-4)


def _same_baselines(stored, fresh):  # composition-run: the non-composing answers on the held-out batch
    assert fresh["baselines"] == stored["baselines"]


def _same_first_check(stored, fresh):  # --matched: the same model at step 0, and its size
    s = {(r["n_nodes"], r["n_layers"], r["n_heads"], r["seed"]): r for r in stored["runs"]}
    for r in fresh["runs"]:
        old = s[r["n_nodes"], r["n_layers"], r["n_heads"], r["seed"]]
        assert r["parameters"] == old["parameters"] and r["checks"][0] == old["checks"][0] == 0
        assert abs(r["check_loss"][0] - old["check_loss"][0]) <= 1e-3  # stored to 4 decimals, float32


def _same_short_lengths(stored, fresh):  # lowrank-run --quick: MiniLM at n = 16, 32, 64 (no training)
    old = {r["n"]: r for r in stored["length"]}
    for r in fresh["length"]:
        for key in ("effective_rank", "rank_error", "uniform_error", "sink_share"):
            np.testing.assert_allclose(r[key], old[r["n"]][key], rtol=1e-4, atol=1e-6)  # float32 model


def _same_focus(stored, fresh):  # lowrank-sentences --quick: the focus study is the full one
    assert fresh["focus"]["config"] == stored["focus"]["config"]
    np.testing.assert_allclose(fresh["focus"]["erank_median"], stored["focus"]["erank_median"], rtol=1e-4)


def _same_test_set(stored, fresh):  # vision-run --quick: the same held-out images and geometry
    assert fresh["n_test"] == stored["n_test"] and fresh["uniform"] == pytest.approx(stored["uniform"])


def _same_untrained_numbers(stored, fresh):  # metric-run --quick: draw 0's tuned control and baselines
    for key in ("sigma", "mse_tuned", "mse_identity", "mse_mean"):
        assert fresh[key][0] == pytest.approx(stored[key][0], rel=1e-9), key


def _same_seed_zero(stored, fresh):  # insight-run --part memory --seeds 0: seed 0's retrieval curves
    for name, by_d in fresh["curves"].items():
        for d, curve in by_d.items():
            assert curve["sizes"] == stored["curves"][name][d]["sizes"]
            assert curve["accuracy"][0] == stored["curves"][name][d]["accuracy"][0]


SMALL = {
    "scale_causes.json": (["scaling-causes", "--seeds", "1", "--steps", "8"], _same_first_steps),
    "scaling_training.json": (["scaling-run", "--d-k", "64", "--scales", "none", "--seeds", "0", "--steps", "10",
                               "--n-heads", "4", "--lr", "3e-3", "--every", "10"], _same_first_block),
    "scale_saturation.json": (["scaling-saturation", "--seeds", "0", "--d-k", "64", "--variants", "scaled",
                               "--steps", "4"], _same_start),
    "scale_sweep.json": (["scaling-saturation", "--seeds", "0", "--d-k", "16", "--variants", "scaled",
                          "--steps", "4"], None),
    "scale_backward.json": (["scaling-backward", "--seeds", "0", "--steps", "2", "--variants", "unscaled",
                             "unscaled, tempered backward", "--motion-every", "1"], None),
    "scale_backward_rows.json": (["scaling-backward", "--seeds", "0", "--steps", "2", "--variants",
                                  "unscaled, saturated rows tempered", "--motion-every", "0"], None),
    "scale_backward_start.json": (["scaling-backward", "--seeds", "0", "--steps", "2", "--variants",
                                   "W_Q init x0.5, saturated rows tempered", "--motion-every", "0"], None),
    "composition.json": (["composition-run", "--hops", "1", "2", "--layers", "1", "--seeds", "0", "--steps", "2",
                          "--every", "1", "--jobs", "1", "--d-model", "16"], _same_baselines),
    "composition_matched.json": (["composition-run", "--matched", "--seeds", "0", "--max-steps", "2", "--jobs", "1",
                                  "--eval-size", "100"], _same_first_check),
    "composition_grid.json": (["composition-run", "--matched", "--grid", "--nodes", "6", "--seeds", "0",
                               "--max-steps", "2", "--eval-size", "100"], None),
    "head_training.json": (["heads-run", "--seeds", "0", "--steps", "4", "--heads", "2", "--head-seeds", "0",
                            "--head-steps", "4", "--division-seeds", "0", "--division-steps", "4",
                            "--subspace-seeds", "0", "--every", "2"], None),
    "lowrank_function.json": (["lowrank-run", "--quick"], _same_short_lengths),
    "lowrank_verdicts.json": (["lowrank-run", "--quick", "--verdicts"], None),
    "lowrank_sentences.json": (["lowrank-sentences", "--quick"], _same_focus),
    "vision_attention.json": (["vision-run", "--quick"], _same_test_set),
    "vision_attention_seeds0-7.json": (["vision-run", "--quick", "--first-seed", "0"], None),
    "vision_attention_pixels.json": (["vision-run", "--quick", "--patch", "1", "--first-seed", "16"], _same_test_set),
    "lowrank_two_models.json": (["lowrank-two-models", "--part", "heads", "--models", "MiniLM", "SmolLM2", "--quick"], None),
    "learned_metric.json": (["metric-run", "--quick"], _same_untrained_numbers),
    "benchmarks_full.json": (["bench", "--quick", "--max-n", "256", "--repeats", "1"], None),
    "insight_memory.json": (["insight-run", "--part", "memory", "--seeds", "0"], _same_seed_zero),
    "insight_ablations.json": (["insight-run", "--part", "ablations", "--only", "window 4", "--steps", "3",
                                "--seeds", "0", "--jobs", "1"], None),
    "agreement.json": (["agreement-run", "--n", "16"], None),  # its values: test_agreement
    "agreement_96.json": (["agreement-run", "--n", "16", "--seed", "0"], None),  # the first run, on 96 sentences
    "similarity.json": (["similarity-run", "--n", "8"], None),  # its values: test_similarity
    "shakespeare_run.json": (["shakespeare-run", "--steps", "4"], None),
    "topology_matched.json": (["topology-matched", "--n-fit", "4", "--n-held", "2"], None),
    "content_position.json": (["content-position", "--n-sentences", "1", "--n-shuffles", "1"], None),  # its values: test_content_position_study
    "decoder_roles.json": (["decoder-roles", "--n-texts", "1"], None),  # its values: test_roles (extended)
    "depth_probe.json": (["depth-probe", "--n-sentences", "40", "--n-train", "30", "--fit-sizes", "10", "30",
                          "--layers", "0", "1", "-1"], None),  # its values: test_depth_study (extended)
}


#: Files that several parts of one experiment write in turn (each run keeps the parts it did not run):
#: the small run of SMALL, then these, into the same file.
THEN = {"lowrank_two_models.json": [["lowrank-two-models", "--part", "trailing", "--quick"]]}


@pytest.mark.extended
@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_small_run_writes_the_stored_structure(name, tmp_path):
    argv, same = SMALL[name]
    e = EXPERIMENTS[argv[0]]
    out = tmp_path / name
    flag = next((p.out_flag for p in e.experiments() if p.out is not None and p.out.name == name), e.out_flag)
    for run in [argv, *THEN.get(name, [])]:
        assert main([*run, flag, str(out), "--quiet"]) == 0
    stored, fresh = read_json(DATA_DIR / name), read_json(out)
    by_hand = [f"{path}: stored, not written" for path in BY_HAND.get(name, [])]
    assert [d for d in differences(schema(stored), schema(fresh), maps=MAPS.get(name, ())) if d not in by_hand] == []
    if same is not None:
        same(stored, fresh)


def test_every_stored_run_has_a_small_run_or_a_reason():
    """A new experiment needs a small configuration here (or in one of the runs below)."""
    special = {"composition_hops.json",  # its small run: tests/chapters/graphs/test_hop_sweep.py
               "composition_grid_long.json", "composition_follow_up.json", "composition_follow_up_2.json",
               "topology_rules.json", "insight_metric.json", "insight_partner.json", "insight_linear.json",
               "insight_linear_long.json", "insight_signed.json",
                   "insight_speed.json", "insight_converged.json",  # small runs: test_commands (speed), test_converged_arms (extended)
               # their small runs: tests/chapters/insight/test_score_arms.py (extended)
               "insight_heads.json", "insight_heads_tied.json", "insight_heads_other.json", "insight_frozen.json",
               "decoder_bench.json", "decoder_reference.npz",
               "qk_gauge.json"}  # its small run: tests/chapters/kernels/test_gauge_study.py (extended, MiniLM on four texts)
    assert set(_stored_files()) == set(SMALL) | special


@pytest.mark.extended
def test_the_long_grid_and_follow_ups_write_the_stored_structure(tmp_path, monkeypatch):
    """Their designs are fixed constants (the ledger's), so the small run shrinks them in place."""
    from attention_course.chapters.graphs import head_budget as hb

    monkeypatch.setitem(hb.LONG_GRID, "max_steps", 2)
    monkeypatch.setattr(hb, "FOLLOW_UP", ((6, 2, 2, 0, 2), (6, 1, 4, 0, 2)))
    monkeypatch.setattr(hb, "SECOND_FOLLOW_UP", ((6, 1, 4, 0, 2),))
    for name, argv in [("composition_grid_long.json", ["--grid", "--long", "--nodes", "8", "--grid-layers", "2"]),
                       ("composition_follow_up.json", ["--follow-up", "--jobs", "1"]),
                       ("composition_follow_up_2.json", ["--follow-up", "--second", "--jobs", "1"])]:
        out = tmp_path / name
        assert main(["composition-run", "--matched", *argv, "--seeds", "0", "--eval-size", "100", "--out", str(out),
                     "--quiet"]) == 0
        assert differences(schema(read_json(DATA_DIR / name)), schema(read_json(out))) == [], name


@pytest.mark.extended
def test_topology_rules_on_one_sentence_writes_the_stored_structure(tmp_path, monkeypatch):
    from attention_course.chapters.graphs import topology_rules as tr

    one = tmp_path / "sentences.json"
    one.write_text(json.dumps({"sentences": read_json(tr.RULE_DATA)["sentences"][:1]}))
    monkeypatch.setattr(tr, "RULE_DATA", one)
    out = tmp_path / "rules.json"
    assert main(["topology-rules", "--out", str(out), "--quiet"]) == 0
    stored, fresh = read_json(tr.RULES_DATA), read_json(out)
    assert differences(schema(stored), schema(fresh)) == [] and list(fresh["rules"]) == list(stored["rules"])


@pytest.mark.extended
def test_the_converged_comparisons_write_the_stored_structure(tmp_path, monkeypatch):
    """Each part with one configuration and a short rule (the stored rule trains for minutes)."""
    from attention_course.chapters.insight import converged_comparisons as cc

    short = cc.ConvergenceRule(check_every=5, min_steps=5, max_steps=10, window=5, valid_batch=16)
    monkeypatch.setattr(cc, "ConvergenceRule", lambda: short)
    monkeypatch.setattr(cc, "LONG_RULE", replace(short, plateau_from=5))
    monkeypatch.setattr(cc, "metric_grid", lambda: [(cc.COPY, "W_Q = W_K = I", 16)])
    monkeypatch.setattr(cc, "partner_grid", lambda: [(cc.PARTNER, "tied W_Q = W_K", 16)])
    monkeypatch.setattr(cc, "signed_grid", lambda: [(cc.PARTNER, cc.SIGNED, 16)])
    monkeypatch.setattr(cc, "SPEED_RULE", replace(short, target=0.95, plateau_from=10**6))
    for name, argv in [("insight_speed.json", ["--part", "speed", "--seeds", "0"]),
                       ("insight_metric.json", ["--part", "metric", "--seeds", "0"]),
                       ("insight_partner.json", ["--part", "partner", "--seeds", "0"]),
                       ("insight_signed.json", ["--part", "signed", "--seeds", "0"]),
                       ("insight_linear.json", ["--part", "linear", "--widths", "16", "--pairs", "8", "--seeds", "0"]),
                       ("insight_linear_long.json", ["--part", "linear", "--long", "--widths", "16", "--pairs", "32",
                                                     "--seeds", "0"])]:
        out = tmp_path / name
        assert main(["insight-metric", *argv, "--out", str(out), "--quiet"]) == 0
        assert differences(schema(read_json(DATA_DIR / name)), schema(read_json(out))) == [], name


@pytest.mark.extended
def test_the_decoder_runs_write_the_stored_structure(tmp_path):
    """decoder-bench with 4 new tokens; decoder-reference in full (about a minute): the same arrays, same dtypes."""
    from attention_course.models.experiments import execute

    bench = EXPERIMENTS["decoder-bench"]
    fresh = execute(bench, replace(bench.config, new_tokens=4), tmp_path / "bench.json", show=False)
    assert differences(schema(read_json(DATA_DIR / "decoder_bench.json")), schema(fresh)) == []
    assert main(["decoder-reference", "--out", str(tmp_path / "reference.npz"), "--quiet"]) == 0
    with np.load(DATA_DIR / "decoder_reference.npz") as old, np.load(tmp_path / "reference.npz") as new:
        assert sorted(old.files) == sorted(new.files)
        assert all(old[k].dtype.kind == new[k].dtype.kind and old[k].shape == new[k].shape for k in old.files)
