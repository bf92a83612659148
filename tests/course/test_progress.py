"""`python -m attention_course progress`: run a learner's notebooks and report every exercise.

The committed notebooks must come out "not attempted" everywhere, solved copies
(each stub replaced by the source of its reference solution) must pass, and a
notebook with a known mutant must fail with that mutant's own feedback. Broken
notebooks (corrupt JSON, a raising cell, a failing setup cell, a timeout, a
dying kernel) are reported with their error while the others still run.

Kernels are slow to start, so the committed notebooks and a learner's folder run
in one module-scoped call of `progress.run` (one kernel), and the tests read it. That folder
holds solved copies of the first two chapters and of the chapter with the known mutant; every
chapter's solved copy is run by the extended tier (the checks themselves, for every reference
solution, are in tests/exercises/test_exercises.py).
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from attention_course.course import progress
from attention_course.__main__ import main
from attention_course.exercises import REGISTRY
from attention_course.course.solutions import SOLUTIONS

ROOT = Path(__file__).resolve().parents[2]
BOOK = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
SUMMARY_RE = re.compile(r"^(\d+)/(\d+) exercises passed \(")
# A stand-in for check() in the tiny notebooks: no torch to import, so their kernels start fast.
FAKE_CHECK = """def check(eid, fn):
    print(f"✅ [{eid}] passed all 1 checks." if fn() == 1 else f"❌ [{eid}] expected 1")"""


def _exercise_ids(path: Path) -> list[str]:
    """The `# EXERCISE:` ids of a notebook, read from its raw JSON (independently of progress)."""
    sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    return [s.splitlines()[0].removeprefix("# EXERCISE:").strip() for s in sources if s.startswith("# EXERCISE:")]


WITH_EXERCISES = [p for p in BOOK if _exercise_ids(p)]
LAST = WITH_EXERCISES[0]  # the chapter whose copy loses its last exercise


def _pasted(eid: str, stub: str, fn) -> str:
    """An exercise cell holding ``fn``'s source renamed to ``stub``, importing the module names it uses."""
    module = sys.modules[fn.__module__]
    names = [n for n in fn.__code__.co_names if n in vars(module) and n != fn.__name__]
    header = f"from {fn.__module__} import {', '.join(names)}\n" if names else ""
    source = re.sub(rf"^def {fn.__name__}\(", f"def {stub}(", inspect.getsource(fn), count=1, flags=re.M)
    assert f"def {stub}(" in source
    return f"# EXERCISE: {eid}\n{header}{source}"


def _solved(nb, wrong=None):
    """A copy of ``nb`` with each stub replaced by its solution's source (or by ``wrong[id]``'s)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        m = progress.EXERCISE_RE.search(cell.source) if cell.cell_type == "code" else None
        if m:
            (stub,) = progress.DEF_RE.findall(cell.source)
            cell.source = _pasted(m[1], stub, (wrong or {}).get(m[1], SOLUTIONS[m[1]]))
    return nb


def _write(path: Path, nb) -> Path:
    nbformat.write(nb, path)
    return path


def _by_id(report) -> dict:
    return {e.id: e for e in report.exercises}


def _plain_mutant():
    """The first registered mutant that is a plain named function (so getsource gives a `def`)."""
    for eid, ex in REGISTRY.items():
        for m in ex.mutants:
            if m.fn.__name__.startswith("_") and inspect.isfunction(m.fn):
                return eid, m
    pytest.fail("no mutant is a plain function")


def _tiny(path: Path, eid: str, body: str = "", chapter: str = "", returns: str = "1") -> Path:
    """Two setup-like cells (with a fake check), an optional chapter cell and one exercise."""
    cells = [new_code_cell("# setup"), new_code_cell(FAKE_CHECK), *([new_code_cell(chapter)] if chapter else []),
             new_code_cell(f"# EXERCISE: {eid}\n{body}\ndef f():\n    return {returns}"),
             new_code_cell(f'check("{eid}", f)')]  # fmt: skip
    return _write(path, new_notebook(cells=cells))


@pytest.fixture(scope="module")
def committed():
    """`progress.run` over every committed notebook (a kernel each: the extended tier's)."""
    return progress.run(BOOK)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A learner's folder: solved copies (one chapter with a known wrong answer) and broken
    notebooks; all in one `progress.run`."""
    d = tmp_path_factory.mktemp("learner")
    books = {p.stem: nbformat.read(p, as_version=4) for p in BOOK}
    setup = [c for c in books["01_mechanics"].cells if c.cell_type == "code"][:2]
    wrong_id, mutant = _plain_mutant()
    wrong_chapter = next(p.stem for p in BOOK if wrong_id in _exercise_ids(p))
    (d / "corrupt.ipynb").write_text('{"cells": [')
    paths = [d / "corrupt.ipynb"]  # first: the notebooks after it must still run
    solved = {p.stem for p in WITH_EXERCISES[:2]} | {wrong_chapter}
    for stem, nb in books.items():
        if stem in solved:
            paths.append(_write(d / f"{stem}.ipynb", _solved(nb, {wrong_id: mutant.fn} if stem == wrong_chapter else None)))
    deleted = _solved(books[LAST.stem])  # the learner deleted the last exercise and its check
    last = max(i for i, c in enumerate(deleted.cells) if c.source.startswith("# EXERCISE:"))
    del deleted.cells[last:last + 2]
    paths.append(_write(d / f"{LAST.stem[:2]}_deleted.ipynb", deleted))
    uses_shift = "e = np.exp(x - x.max(axis=-1, keepdims=True) + SHIFT)\n    return e / e.sum(axis=-1, keepdims=True)"
    paths.append(_write(d / "97_name_error.ipynb", new_notebook(cells=[
        *setup, new_code_cell("SHIFT = 0.0  # a chapter cell, not run in exercises mode"),
        new_code_cell(f"# EXERCISE: stable-softmax\ndef my_softmax(x):\n    {uses_shift}"),
        new_code_cell('check("stable-softmax", my_softmax)')])))  # fmt: skip
    paths.append(_write(d / "96_scratch_on_top.ipynb", new_notebook(cells=[
        new_code_cell("notes = 'a scratch cell the learner added above the setup'"), *setup,
        new_code_cell(_pasted("causal-mask", "my_mask", SOLUTIONS["causal-mask"])),
        new_code_cell('check("causal-mask", my_mask)')])))  # fmt: skip
    paths.append(_write(d / "98_setup_fails.ipynb", new_notebook(cells=[
        setup[0], new_code_cell("import no_such_module_for_the_course\nfrom attention_course import check"),
        new_code_cell("# EXERCISE: causal-mask\ndef my_mask(T, S):\n    raise NotImplementedError"),
        new_code_cell('check("causal-mask", my_mask)')])))  # fmt: skip
    paths.append(_write(d / "99_raises.ipynb", new_notebook(cells=[
        *setup,
        new_code_cell('# EXERCISE: stable-softmax\nraise RuntimeError("boom")\ndef my_softmax(x):\n    return x'),
        new_code_cell('check("stable-softmax", my_softmax)'),
        new_code_cell(_pasted("causal-mask", "my_mask", SOLUTIONS["causal-mask"])),
        new_code_cell('check("causal-mask", my_mask)'),
        new_code_cell("# EXERCISE: one-query\ndef my_one_query(q_i, k, v):\n    raise NotImplementedError")])))  # fmt: skip
    reports = progress.run(paths)
    return SimpleNamespace(wrong=(wrong_chapter, wrong_id, mutant), learner={Path(r.path).stem: r for r in reports})


# ---------------------------------------------------------- committed notebooks
@pytest.mark.extended  # a kernel per committed notebook
def test_committed_notebooks_are_all_not_attempted(committed):
    assert [r.path for r in committed] == [str(p) for p in BOOK]
    for report, path in zip(committed, BOOK):
        assert report.error is None
        assert [e.id for e in report.exercises] == _exercise_ids(path)
        assert all(e.status == "not attempted" for e in report.exercises), report
        assert all("not implemented yet" in e.message for e in report.exercises)


@pytest.mark.extended
def test_committed_summary_counts_every_exercise_cell(committed):
    n = sum(len(_exercise_ids(p)) for p in BOOK)
    assert n == len(REGISTRY)
    last = progress.format_report(committed).splitlines()[-1]
    assert last == f"0/{n} exercises passed (0 failed, {n} not attempted, 0 not run)"


# ---------------------------------------------------------- a learner's folder
def test_solved_copies_pass(runs):
    _, wrong_id, _ = runs.wrong
    for path in [p for p in BOOK if p.stem in runs.learner]:
        statuses = {e.id: e.status for e in runs.learner[path.stem].exercises}
        assert list(statuses) == _exercise_ids(path)
        assert all(s == "passed" for eid, s in statuses.items() if eid != wrong_id), statuses


@pytest.mark.extended
def test_every_chapters_solved_copy_passes(tmp_path):
    """Each chapter with each stub replaced by its reference solution: every exercise passes."""
    paths = [_write(tmp_path / p.name, _solved(nbformat.read(p, as_version=4))) for p in WITH_EXERCISES]
    for path, report in zip(WITH_EXERCISES, progress.run(paths, timeout=600)):
        assert report.error is None, report
        assert [(e.id, e.status) for e in report.exercises] == [(eid, "passed") for eid in _exercise_ids(path)]


def test_wrong_answer_gets_its_mutants_feedback(runs):
    wrong_chapter, wrong_id, mutant = runs.wrong
    result = _by_id(runs.learner[wrong_chapter])[wrong_id]
    assert (result.status, result.message) == ("failed", mutant.feedback)


def test_corrupt_notebook_is_reported_and_the_others_still_run(runs):
    corrupt = runs.learner["corrupt"]
    assert corrupt.error.startswith("could not read the notebook (JSONDecodeError: ")
    assert corrupt.exercises == ()  # no chapter number: no declared exercises to list
    assert [r.chapter for r in runs.learner.values()][:2] == ["corrupt", BOOK[0].stem]
    assert all(e.status == "passed" for e in runs.learner[WITH_EXERCISES[1].stem].exercises)


def test_a_raising_exercise_cell_is_not_run_with_its_error(runs):
    report = runs.learner["99_raises"]
    results = _by_id(report)
    assert (results["stable-softmax"].status, results["stable-softmax"].message) == ("not run", "RuntimeError: boom")
    assert results["causal-mask"].status == "passed"  # later cells still ran
    assert results["one-query"].status == "not run"
    assert results["one-query"].message == 'no check("one-query", ...) cell after the exercise cell'
    assert report.error is None


def test_a_scratch_cell_above_the_setup_does_not_hide_the_imports(runs):
    (result,) = runs.learner["96_scratch_on_top"].exercises
    assert (result.id, result.status) == ("causal-mask", "passed"), result


def test_a_failing_setup_cell_is_the_notebooks_error(runs):
    report = runs.learner["98_setup_fails"]
    assert report.error.startswith("a setup cell raised ModuleNotFoundError")
    (result,) = report.exercises
    assert (result.status, result.message) == ("not run", report.error)  # no --full hint for its NameError


def test_deleted_exercise_is_still_listed_as_not_attempted(runs):
    report = runs.learner[f"{LAST.stem[:2]}_deleted"]
    deleted = _exercise_ids(LAST)[-1]
    assert [e.id for e in report.exercises] == _exercise_ids(LAST)
    assert _by_id(report)[deleted].status == "not attempted"
    assert _by_id(report)[deleted].message.startswith("no `# EXERCISE:` cell")


def test_exercises_mode_name_error_suggests_full_mode(runs):
    result = _by_id(runs.learner["97_name_error"])["stable-softmax"]
    assert result.status == "failed"
    assert "NameError: name 'SHIFT' is not defined" in result.message and result.message.endswith(progress.FULL_HINT)


def test_table_shows_feedback_under_failures_only(runs):
    table = progress.format_report([runs.learner[BOOK[0].stem], runs.learner["98_setup_fails"]])
    _, wrong_id, mutant = runs.wrong
    lines = table.splitlines()
    row = next(i for i, line in enumerate(lines) if f" {wrong_id} " in line)
    ex = REGISTRY[wrong_id]
    assert lines[row].startswith("  ❌") and " failed " in lines[row]
    assert lines[row].endswith(f"difficulty {ex.difficulty}/3, {ex.minutes} min")
    assert lines[row + 1].startswith(" " * 7) and mutant.feedback.startswith(lines[row + 1].strip())
    assert table.count("a setup cell raised") == 1  # the notebook's error, not repeated under its exercise


@pytest.mark.extended
def test_every_result_carries_its_exercises_difficulty(committed):
    """The table shows each exercise's difficulty and minutes beside its result, and --json has them."""
    for report in committed:
        table = progress.format_report([report]).splitlines()
        for e in report.exercises:
            ex = REGISTRY[e.id]
            assert (e.difficulty, e.minutes) == (ex.difficulty, ex.minutes) and ex.difficulty in (1, 2, 3)
            (line,) = [line for line in table if f" {e.id} " in line]
            assert line.endswith(f"difficulty {ex.difficulty}/3, {ex.minutes} min"), line
    entry = progress.to_json(committed)["exercises"][0]
    assert entry["difficulty"] in (1, 2, 3) and entry["minutes"] > 0


def test_declared_exercises_follow_the_chapters_reading_order():
    for path in BOOK:
        if _exercise_ids(path):
            assert list(progress.declared_exercises(path.stem)) == _exercise_ids(path), path.stem
    assert progress.declared_exercises("notes") == () and progress.declared_exercises("99_x") == ()


# ------------------------------------------------------------ modes, timeouts
def test_exercises_and_full_mode_on_a_notebook_using_a_chapter_name(tmp_path):
    path = _tiny(tmp_path / "shift.ipynb", "s", chapter="SHIFT = 0", returns="1 + SHIFT")
    (exercises,) = progress.run([path])
    (full,) = progress.run([path], mode="full")
    assert (exercises.error, full.error) == (None, None)
    assert [(e.id, e.status) for e in exercises.exercises] == [("s", "not run")]
    assert exercises.exercises[0].message == f"NameError: name 'SHIFT' is not defined {progress.FULL_HINT}"
    assert [(e.id, e.status, e.message) for e in full.exercises] == [("s", "passed", "passed all 1 checks.")]


@pytest.mark.slow
def test_timeout_and_dead_kernel_stop_only_their_notebook(tmp_path, capfd):
    paths = [_tiny(tmp_path / "sleepy.ipynb", "a", "import time\ntime.sleep(60)"),
             _tiny(tmp_path / "dies.ipynb", "b", "import os\nos._exit(1)"),
             _tiny(tmp_path / "fine.ipynb", "c")]  # fmt: skip
    sleepy, dies, fine = progress.run(paths, timeout=3)
    assert capfd.readouterr() == ("", "")  # neither progress nor the kernels print anything
    assert sleepy.error == "timed out after 3 s in the cell starting `# EXERCISE: a` (see --timeout)"
    assert [(e.status, e.message) for e in sleepy.exercises] == [("not run", sleepy.error)]
    assert dies.error == "the kernel died in the cell starting `# EXERCISE: b`"
    assert [e.status for e in dies.exercises] == ["not run"]
    assert (fine.error, [e.status for e in fine.exercises]) == (None, ["passed"])


# ------------------------------------------------------------ pure functions
def test_exercise_notebook_keeps_the_learners_inserted_cells_only():
    nb = new_notebook(cells=[new_code_cell(s) for s in (
        "# colab", "# imports", "chapter = 1", "# EXERCISE: a\ndef f(): ...", "helper = 2",
        'check("a", f)', "more_chapter = 3", "# EXERCISE: b\ndef g(): ...", "after_b = 4")])  # fmt: skip
    sources = [c.source for c in progress.exercise_notebook(nb).cells]
    assert sources == ["# colab", "# imports", "# EXERCISE: a\ndef f(): ...", "helper = 2", 'check("a", f)',
                       "# EXERCISE: b\ndef g(): ..."]  # fmt: skip


def _error(ename, evalue):
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[])


def test_an_error_in_the_first_exercise_is_not_a_setup_error():
    """With one setup cell, the first exercise is the second code cell: its error is the learner's."""
    cells = ["from attention_course import check", "# EXERCISE: a\ndef f(:", 'check("a", f)']
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    nb.cells[1].outputs = [_error("SyntaxError", "invalid syntax")]
    nb.cells[2].outputs = [_error("NameError", "name 'f' is not defined")]
    report = progress.collect(nb, "99_one_setup_cell.ipynb")
    assert report.error is None
    (result,) = report.exercises
    assert (result.id, result.status, result.message) == ("a", "not run", "SyntaxError: invalid syntax")
    nb.cells[0].outputs = [_error("ImportError", "no")]  # a real setup failure is still the notebook's error
    assert progress.collect(nb, "99_one_setup_cell.ipynb").error == "a setup cell raised ImportError: no"


def test_setup_cells_fall_back_to_code_cells_before_the_first_exercise():
    nb = new_notebook(cells=[new_code_cell(c) for c in ("x = 1", "# EXERCISE: a\ndef f(): ...", "y = 2")])
    assert progress.setup_cells(nb) == [0]  # not the exercise cell, though there is only one code cell before it


def test_format_report_wraps_and_truncates_long_feedback():
    rep = progress.NotebookReport("x.ipynb", "x", None, (progress.ExerciseResult("x", "a", "failed", "word " * 200),))
    lines = progress.format_report([rep], width=80, max_lines=3).splitlines()
    assert max(len(line) for line in lines) <= 80
    assert len(lines) == 1 + 1 + 3 + 2 and lines[4].endswith("…") and lines[5] == ""


def test_parse_verdicts_reads_each_mark_and_ignores_other_output():
    text = "print\n✅ [a] passed all 3 checks.\n❌ [b] wrong\n✏️ [c] not implemented yet\n✏ [d] bare pencil\n[e] x"
    assert progress.parse_verdicts(text) == {
        "a": ("passed", "passed all 3 checks."), "b": ("failed", "wrong"),
        "c": ("not attempted", "not implemented yet"), "d": ("not attempted", "bare pencil")}  # fmt: skip


def test_run_rejects_an_unknown_mode():
    with pytest.raises(ValueError, match="mode must be 'exercises' or 'full', got 'fast'"):
        progress.run([], mode="fast")


# ------------------------------------------------------------------------ CLI
@pytest.mark.extended  # a fresh interpreter importing the package: tens of seconds on a busy machine
def test_cli_json_in_a_subprocess(tmp_path):
    """No kernel here (the notebook is unreadable): this checks the entry point, its JSON and its stderr."""
    (tmp_path / "01_broken.ipynb").write_text("not json")
    proc = subprocess.run([sys.executable, "-m", "attention_course", "progress", "--json", "01_broken.ipynb"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip; 600 s: a loaded CI machine
    assert (proc.returncode, proc.stderr) == (0, "")  # no runpy RuntimeWarning, no log lines
    out = json.loads(proc.stdout)
    (notebook,) = out["notebooks"]
    assert notebook["path"] == "01_broken.ipynb" and notebook["error"].startswith("could not read the notebook")
    ids = [e["id"] for e in out["exercises"]]
    assert ids == _exercise_ids(BOOK[0]) and {e["status"] for e in out["exercises"]} == {"not run"}
    n = len(ids)
    assert out["totals"] == {"exercises": n, "passed": 0, "failed": 0, "not attempted": 0, "not run": n,
                             "notebooks": 1, "notebooks failed": 1}  # fmt: skip
    assert out["summary"] == f"0/{n} exercises passed (0 failed, 0 not attempted, {n} not run; 1/1 notebooks did not finish)"


def test_cli_plain_output_ends_with_the_summary(tmp_path, capsys):
    (tmp_path / "broken.ipynb").write_text("{}")
    assert main(["progress", str(tmp_path / "broken.ipynb")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == f"broken  ({tmp_path / 'broken.ipynb'})" and "could not read" in lines[1]
    assert SUMMARY_RE.match(lines[-1]) and lines[-1].endswith("; 1/1 notebooks did not finish)")


def test_cli_no_notebooks_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["progress"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "no notebooks found" in err and str(tmp_path / "book") in err
    with pytest.raises(SystemExit, match="2"):
        main(["progress", "missing.ipynb"])
    assert "no such notebook: missing.ipynb" in capsys.readouterr().err


def test_cli_without_a_command_prints_help(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m attention_course") and "progress" in out


# ---------------------------------------------------------- the lesson's own helpers
def _trees(sources):
    import ast
    for src in sources:
        try:
            yield ast.parse(src)
        except SyntaxError:  # a cell with IPython magics
            continue


def _top_level_defs(sources) -> set[str]:
    import ast
    return {s.name for tree in _trees(sources) for s in tree.body if isinstance(s, ast.FunctionDef)}


def _reads(sources) -> set[str]:
    import ast
    return {n.id for tree in _trees(sources) for n in ast.walk(tree) if isinstance(n, ast.Name)}


@pytest.mark.parametrize("path", [p for p in BOOK if _exercise_ids(p)], ids=lambda p: p.stem)
def test_exercises_mode_runs_the_lesson_helpers_its_exercises_call(path):
    """A stub or an answer may call a function the lesson writes on the page (chapter 10's
    layer_qkv, chapter 8's layer_norm); exercises mode must define it, or a correct answer fails."""
    nb = nbformat.read(path, as_version=4)
    spans = progress.exercise_spans(nb)
    inside = {i for _, start, end in spans for i in range(start, (start if end is None else end) + 1)}
    code = {i: c.source for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    page = _top_level_defs(s for i, s in code.items() if i not in inside)
    called = _reads(s for i, s in code.items() if i in inside) & page
    kept = _top_level_defs(c.source for c in progress.exercise_notebook(nb).cells)
    assert called <= kept, f"{path.stem}: exercises call {sorted(called - kept)}, which exercises mode never defines"
