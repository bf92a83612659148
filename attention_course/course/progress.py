"""Learner progress: run the chapter notebooks and tabulate every ``check(...)`` verdict.

``python -m attention_course progress`` runs the notebooks with nbclient. Exercises mode (the
default) runs the setup cells and each exercise's cells (:func:`exercise_notebook`), all notebooks
in one kernel; ``--full`` runs every cell, a fresh kernel per notebook. Nothing a learner's
notebook does stops the run: an error is reported and the other notebooks still run. An exercise
is ``passed``, ``failed``, ``not attempted`` or ``not run``.
"""

from __future__ import annotations

import ast
import copy
import importlib
import json
import logging
import re
import subprocess
import textwrap
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import nbformat

from .. import chapters as _chapters
from ..exercises import _core

__all__ = [
    "ExerciseResult",
    "NotebookReport",
    "STATUSES",
    "find_notebooks",
    "exercise_spans",
    "declared_exercises",
    "setup_cells",
    "exercise_notebook",
    "page_helpers",
    "parse_verdicts",
    "collect",
    "run",
    "totals",
    "summary_line",
    "rating",
    "format_report",
    "to_json",
    "add_arguments",
    "cli",
]

STATUSES = ("passed", "failed", "not attempted", "not run")
MARKS = dict(zip(STATUSES, (_core.PASS_MARK, _core.FAIL_MARK, _core.TODO_MARK, "⚠️")))
PATTERNS = ("book/[0-9][0-9]_*.ipynb", "[0-9][0-9]_*.ipynb")
EXERCISE_RE = re.compile(r"^# EXERCISE: ([\w-]+)\s*$", re.M)
DEF_RE = re.compile(r"^def (\w+)\(", re.M)
VERDICT_RE = re.compile(r"^(✅|❌|✏\ufe0f?) \[([\w-]+)\] (.*)$", re.M)  # what check() prints
FULL_HINT = (
    "(progress ran only the setup and exercise cells; if your function uses a name "
    "defined elsewhere in the notebook, run it with --full)"
)
UNREAD = "the notebook could not be read"
STOPPED_BEFORE = "the notebook stopped before this exercise"
_QUIET = logging.getLogger("attention_course.course.progress.nbclient")  # nbclient logs timeouts as errors
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


@dataclass(frozen=True)
class ExerciseResult:
    """One exercise's verdict: ``status`` is one of :data:`STATUSES`; ``difficulty`` (1-3) and
    ``minutes`` are the exercise's own (0 when it is not a registered exercise)."""

    chapter: str
    id: str
    status: str
    message: str = ""
    difficulty: int = 0
    minutes: int = 0


def _result(chapter: str, eid: str, status: str, message: str = "") -> ExerciseResult:
    """An :class:`ExerciseResult` with the registered exercise's difficulty and minutes."""
    ex = _core.REGISTRY.get(eid)
    return ExerciseResult(chapter, eid, status, message, ex.difficulty if ex else 0, ex.minutes if ex else 0)


def rating(result: ExerciseResult) -> str:
    """``"difficulty 2/3, 20 min"``, or "" for an exercise that is not rated.

    Examples
    --------
    >>> rating(ExerciseResult("01_x", "a", "passed", "", 2, 20)), rating(ExerciseResult("01_x", "b", "passed"))
    ('difficulty 2/3, 20 min', '')
    """
    return f"difficulty {result.difficulty}/3, {result.minutes} min" if result.difficulty else ""


@dataclass(frozen=True)
class NotebookReport:
    """A notebook's exercises; ``error`` says why it did not run to the end (else None)."""

    path: str
    chapter: str
    error: Optional[str]
    exercises: tuple = ()


def find_notebooks(paths: Sequence[str | Path] = (), cwd: str | Path = ".") -> list[Path]:
    """The notebooks to run: ``paths`` (a folder stands for its chapter notebooks) or the defaults.

    With no paths: ``book/[0-9][0-9]_*.ipynb`` under ``cwd``, else
    ``[0-9][0-9]_*.ipynb`` in ``cwd``. An empty list means none were found.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "book").mkdir(), (Path(d) / "book" / "01_a.ipynb").touch()
    ...     print([p.name for p in find_notebooks(cwd=d)], find_notebooks(cwd=Path(d) / "none"))
    ['01_a.ipynb'] []
    """
    if paths:
        return [q for p in paths for q in (find_notebooks(cwd=p) if Path(p).is_dir() else [Path(p)])]
    for pattern in PATTERNS:
        if hits := sorted(Path(cwd).glob(pattern)):
            return hits
    return []


def _runs(cell: Any) -> bool:
    return cell.cell_type == "code" and bool(cell.source.strip())


def exercise_spans(nb: Any) -> list[tuple[str, int, Optional[int]]]:
    """``(id, exercise cell index, check cell index or None)`` for each ``# EXERCISE:`` cell.

    The check cell is the first later code cell, before the next exercise, that calls ``check("<id>", ...)``.

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell as c, new_notebook
    >>> nb = new_notebook(cells=[c("# EXERCISE: a\\ndef f(): ..."), c("x = 1"), c('check("a", f)'),
    ...                          c("# EXERCISE: b\\ndef g(): ...")])
    >>> exercise_spans(nb)
    [('a', 0, 2), ('b', 3, None)]
    """
    cells = nb.cells
    found = [(i, EXERCISE_RE.search(c.source)) for i, c in enumerate(cells) if c.cell_type == "code"]
    starts = [(i, m.group(1)) for i, m in found if m]
    spans = []
    for n, (i, eid) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(cells)
        call = re.compile(rf"""\bcheck\(\s*["']{re.escape(eid)}["']""")
        at = [j for j in range(i + 1, end) if cells[j].cell_type == "code" and call.search(cells[j].source)]
        spans.append((eid, i, at[0] if at else None))
    return spans


def _fresh(cell: Any) -> Any:
    """A code cell with the same source and metadata, no outputs."""
    return nbformat.v4.new_code_cell(cell.source, metadata=copy.deepcopy(dict(cell.metadata)))


SETUP_RE = re.compile(r"google\.colab|^\s*(?:from|import)\s+attention_course\b", re.M)


def setup_cells(nb: Any) -> list[int]:
    """Indices of the setup cells: before the first exercise, the Colab cell and the package imports.

    Chosen by content (a learner's scratch cell is not setup); without such cells, the first two
    code cells before the first exercise.

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell as c, new_notebook
    >>> nb = new_notebook(cells=[c("x = 1  # scratch"), c("import google.colab"), c("plot()"),
    ...                          c("from attention_course import check"), c("# EXERCISE: a")])
    >>> setup_cells(nb)
    [1, 3]
    """
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    first = next((i for i in code if EXERCISE_RE.search(nb.cells[i].source)), len(nb.cells))
    before = [i for i in code if i < first]
    return [i for i in before if SETUP_RE.search(nb.cells[i].source)] or before[:2]


def _loads(tree: ast.AST) -> set[str]:
    """Names a piece of code reads."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _defines(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds: a ``def``, a ``class``, an import or a plain assignment."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, ast.Assign):
        return {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _parsed(source: str) -> Optional[ast.Module]:
    try:
        return ast.parse(source)
    except SyntaxError:  # IPython magics, or a learner's half-written cell
        return None


def page_helpers(nb: Any, wanted: Sequence[str], skip: set[int]) -> dict[int, str]:
    """The lesson's own definitions the exercise cells call, cut out of the cells that hold them.

    In the code cells outside ``skip``: the ``def`` and ``class`` statements that bind a name
    the exercise cells read, and (transitively) the defs, imports and plain assignments those
    read; no other statement runs. Returns cell index -> the source to run.

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell as c, new_notebook
    >>> nb = new_notebook(cells=[c("import numpy as np\\nx = np.ones(3)\\nscale = 2\\n"
    ...                            "def double(v):\\n    return scale * np.asarray(v)\\nprint(double(x))"),
    ...                          c("# EXERCISE: a\\ndef f(v):\\n    return double(v)")])
    >>> print(page_helpers(nb, [nb.cells[1].source], skip={1})[0])
    import numpy as np
    scale = 2
    def double(v):
        return scale * np.asarray(v)
    """
    called: set[str] = set()  # what the exercise cells read: only a def or class answers it
    for source in wanted:
        tree = _parsed(source)
        called |= _loads(tree) if tree is not None else set()
    need: set[str] = set()  # what the chosen definitions read: any binding statement answers it
    candidates = []  # (cell, statement index, statement, source segment)
    for i, cell in enumerate(nb.cells):
        if i in skip or cell.cell_type != "code":
            continue
        tree = _parsed(cell.source)
        if tree is None:
            continue
        for n, stmt in enumerate(tree.body):
            if _defines(stmt):
                candidates.append((i, n, stmt, ast.get_source_segment(cell.source, stmt)))
    chosen: set[tuple[int, int]] = set()
    grew = True
    while grew:  # what a chosen statement reads may be bound by another one
        grew = False
        for i, n, stmt, _ in candidates:
            is_def = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            if (i, n) not in chosen and (_defines(stmt) & need or (is_def and _defines(stmt) & called)):
                chosen.add((i, n))
                need |= _loads(stmt)
                grew = True
    out: dict[int, list[str]] = {}
    for i, n, _, segment in candidates:
        if (i, n) in chosen:
            out.setdefault(i, []).append(segment)
    return {i: "\n".join(parts) for i, parts in out.items()}


def exercise_notebook(nb: Any, solutions: Optional[Mapping[str, Callable]] = None) -> Any:
    """The exercises-mode notebook: the setup cells (:func:`setup_cells`), then each exercise's code cells.

    With the lesson's helpers (:func:`page_helpers`). With ``solutions`` (id -> function) each stub
    becomes an import of its solution under the stub's name. Outputs are cleared.

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell as c, new_markdown_cell as md, new_notebook
    >>> nb = new_notebook(cells=[c("# Colab cell (google.colab)"), c("from attention_course import check"), c("slow()"),
    ...     md("Exercise"), c("# EXERCISE: attention\\ndef my_att(q, k, v):\\n    raise NotImplementedError"),
    ...     c('check("attention", my_att)'), c("later()")])
    >>> from attention_course.course.solutions import SOLUTIONS
    >>> print("\\n---\\n".join(cell.source for cell in exercise_notebook(nb, SOLUTIONS).cells))
    # Colab cell (google.colab)
    ---
    from attention_course import check
    ---
    # EXERCISE: attention
    from attention_course.course.solutions import attention as my_att
    ---
    check("attention", my_att)
    """
    setup = setup_cells(nb)
    keep = {i: nb.cells[i] for i in setup}  # cell index -> the cell to run
    for eid, start, check_at in exercise_spans(nb):
        for i in range(start, (start if check_at is None else check_at) + 1):
            cell = nb.cells[i]
            if i in setup or cell.cell_type != "code":
                continue
            if i == start and solutions is not None:
                names = DEF_RE.findall(cell.source)
                if len(names) != 1:
                    raise ValueError(f"exercise {eid!r}: expected one `def` in its cell, found {names}")
                fn = solutions[eid]
                source = f"# EXERCISE: {eid}\nfrom {fn.__module__} import {fn.__name__} as {names[0]}"
                cell = nbformat.v4.new_code_cell(source)
            keep[i] = cell
    exercise_sources = [nb.cells[i].source for i in keep if i not in setup]
    for i, source in page_helpers(nb, exercise_sources, skip=set(keep)).items():
        keep[i] = nbformat.v4.new_code_cell(source, metadata=copy.deepcopy(dict(nb.cells[i].metadata)))
    return nbformat.v4.new_notebook(cells=[_fresh(keep[i]) for i in sorted(keep)],
                                    metadata=copy.deepcopy(nb.metadata))


def parse_verdicts(text: str) -> dict[str, tuple[str, str]]:
    """Verdict lines printed by ``check`` -> ``{id: (status, message)}``; the last one wins.

    Examples
    --------
    >>> parse_verdicts("hello\\n✅ [a] passed all 3 checks.\\n❌ [b] rows do not sum to 1")
    {'a': ('passed', 'passed all 3 checks.'), 'b': ('failed', 'rows do not sum to 1')}
    """
    status = {"✅": "passed", "❌": "failed"}  # else the pencil
    return {m[2]: (status.get(m[1], "not attempted"), m[3].strip()) for m in VERDICT_RE.finditer(text)}


def _error_of(cells: Sequence[Any]) -> Optional[str]:
    """``"ename: evalue"`` of the first error output in ``cells``, if any."""
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    return f"{errors[0].get('ename', 'Error')}: {errors[0].get('evalue', '')}".strip() if errors else None


def declared_exercises(chapter: str) -> tuple:
    """The exercise ids chapter ``chapter`` (a notebook's stem, ``"03_low_rank"``) declares, in order.

    Chapter NN is the NN-th folder of :mod:`attention_course.chapters`; an evidence page
    (``NN_x_evidence``) declares its folder's ``EVIDENCE_EXERCISES``, the lesson the others.

    Examples
    --------
    >>> declared_exercises("01_mechanics")[:2], declared_exercises("notes"), declared_exercises("01_mechanics_evidence")
    (('stable-softmax', 'one-query'), (), ())
    >>> declared_exercises("05_message_passing_evidence")
    ('effective-graph-overlap',)
    """
    m = re.match(r"(\d\d)_", chapter)
    topics = list(getattr(_chapters, "__all__", ()))
    if not m or not 1 <= int(m[1]) <= len(topics):
        return ()
    name = f"{_chapters.__name__}.{topics[int(m[1]) - 1]}.exercises"
    try:
        module = importlib.import_module(name)
    except ImportError:  # a chapter without exercises
        return ()
    exercises = tuple(getattr(module, "EXERCISES", ()))
    on_evidence = set(getattr(importlib.import_module(name.rpartition(".")[0]), "EVIDENCE_EXERCISES", ()))
    return tuple(e for e in exercises if (e in on_evidence) == chapter.endswith("_evidence"))


def _with_missing(chapter: str, results: list, message: str, status: str = "not attempted") -> tuple:
    """Add the exercises chapter NN declares but the notebook lacks, in the declared order."""
    declared = declared_exercises(chapter)
    found = {r.id: r for r in results}
    listed = [found.get(eid) or _result(chapter, eid, status, message) for eid in declared]
    return tuple(listed + [r for r in results if r.id not in declared])


def collect(nb: Any, path: str | Path, mode: str = "exercises", stopped: Optional[str] = None) -> NotebookReport:
    """Read every exercise's verdict from ``nb``, the executed notebook of ``path``.

    Exercises mode adds :data:`FULL_HINT` to NameErrors; ``stopped`` (the error that ended
    execution early) becomes the message of the exercise that was running.

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell as c, new_notebook, new_output
    >>> nb = new_notebook(cells=[c("# EXERCISE: x\\ndef f(): ..."), c('check("x", f)'),
    ...                          c("# EXERCISE: y\\ndef g(): ..."), c('check("y", g)')])
    >>> nb.cells[1].outputs = [new_output("stream", name="stdout", text="❌ [x] off by one\\n")]
    >>> nb.cells[2].outputs = [new_output("error", ename="SyntaxError", evalue="bad", traceback=[])]
    >>> for r in collect(nb, "99_demo.ipynb").exercises:
    ...     print(r.id, "|", r.status, "|", r.message)
    x | failed | off by one
    y | not run | SyntaxError: bad
    """
    chapter = Path(path).stem
    setup_error = _error_of([nb.cells[i] for i in setup_cells(nb)])
    setup_error = setup_error and f"a setup cell raised {setup_error}"
    started = [i for i, c in enumerate(nb.cells) if _runs(c) and c.get("execution_count") is not None]
    last = started[-1] if started else -1  # the cell running when execution stopped
    results = []
    for eid, start, check_at in exercise_spans(nb):
        end = start if check_at is None else check_at
        cells = [c for c in nb.cells[start:end + 1] if c.cell_type == "code"]
        outputs = [o for c in cells for o in c.get("outputs", [])]
        text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        status, message = parse_verdicts(text).get(eid, ("not run", ""))
        if status != "not run":
            pass
        elif stopped and last <= end:
            message = stopped if last >= start else STOPPED_BEFORE
        elif check_at is None:
            message = setup_error or _error_of(cells) or f'no check("{eid}", ...) cell after the exercise cell'
        else:
            message = setup_error or _error_of(cells) or "the check cell printed no verdict"
        if (mode == "exercises" and status != "passed" and not setup_error and "NameError" in message
                and "name 'check' is not defined" not in message):
            message = f"{message} {FULL_HINT}"
        results.append(_result(chapter, eid, status, message))
    exercises = _with_missing(chapter, results, f"no `# EXERCISE:` cell for it in {chapter}")
    return NotebookReport(str(path), chapter, stopped or setup_error or None, exercises)


def _load(path: Path, mode: str) -> tuple[Any, Optional[str]]:
    """(the notebook to execute, None), or (None, why it cannot be read)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # old notebooks: missing cell ids, ...
            nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # missing, not JSON, not a notebook
        detail = exc.__cause__ if isinstance(exc.__cause__, ValueError) else exc  # the JSON error, if any
        first = (str(detail).strip().splitlines() or [""])[0][:120]
        return None, f"could not read the notebook ({type(detail).__name__}: {first})"
    if mode == "exercises":
        return exercise_notebook(nb), None
    cells = [_fresh(c) if c.cell_type == "code" else copy.deepcopy(c) for c in nb.cells]
    return nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(nb.metadata)), None


#: The cell run before each notebook of a batch: a clean namespace and the notebook's folder. %reset
#: ends with a full garbage collection, which walks every object the imports made (torch,
#: transformers: 0.3-0.6 s a notebook); gc.freeze() then sets those survivors aside, so the next
#: reset's collection walks only what the notebook made. The verdicts are the same: each notebook
#: still starts from an empty namespace, and its own garbage is collected at the next reset (an
#: object alive at a reset that later becomes cyclic garbage waits for the kernel's end instead).
_RESET = "%reset -f\n__import__('gc').freeze()\n__import__('os').chdir({folder!r})"


def _execute(batch: list, timeout: int, kernel_name: str) -> dict[int, str]:
    """Run the notebooks ``[(key, folder, nb)]`` of ``batch`` in one kernel; outputs go into each nb.

    Before each notebook the kernel's namespace is reset and its working folder
    set. If a cell times out or the kernel dies, that notebook stops there and
    the rest of the batch restarts in a fresh kernel. Returns ``{key: why it stopped}``.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    stops, pending = {}, list(batch)
    while pending:
        cells, owner, started = [], [], []
        for key, folder, nb in pending:
            cells += [nbformat.v4.new_code_cell(_RESET.format(folder=str(folder))), *nb.cells]
            owner += [key] * (1 + len(nb.cells))
        combined = nbformat.v4.new_notebook()
        combined.cells = cells  # the same cell objects, so each notebook gets its outputs
        client = NotebookClient(
            combined,
            timeout=timeout,
            kernel_name=kernel_name,
            allow_errors=True,
            record_timing=False,
            log=_QUIET,
            shutdown_kernel="immediate",
            on_cell_start=lambda cell, cell_index: started.append(cell_index),
            resources={"metadata": {"path": str(pending[0][1])}},
        )
        try:
            client.execute(stderr=subprocess.DEVNULL)  # the kernel's own log lines are not for the learner
            return stops
        except Exception as exc:  # a timeout, a dead kernel, a kernel that cannot start
            k = started[-1] if started else 0
            first = cells[k].source.strip().splitlines()[0][:60]
            where = "" if first == "%reset -f" else f" in the cell starting `{first}`"
            if isinstance(exc, CellTimeoutError):
                stops[owner[k]] = f"timed out after {timeout} s{where} (see --timeout)"
            elif isinstance(exc, DeadKernelError):
                stops[owner[k]] = f"the kernel died{where}"
            else:
                stops[owner[k]] = f"could not run the notebook ({type(exc).__name__}: {exc})"
            pending = pending[[key for key, _, _ in pending].index(owner[k]) + 1:]
    return stops


def run(
    paths: Sequence[str | Path], mode: str = "exercises", timeout: int = 120, kernel_name: str = "python3"
) -> list[NotebookReport]:
    """Execute the notebooks and collect their verdicts; a learner's notebook never makes it raise.

    Parameters
    ----------
    paths : notebook files, run in this order.
    mode : "exercises" (each :func:`exercise_notebook`, all in one kernel) or
        "full" (every cell, a fresh kernel per notebook).
    timeout : seconds each cell may run; cells run in their notebook's folder.
    kernel_name : the Jupyter kernel to use.

    Returns
    -------
    One :class:`NotebookReport` per path, in order. Raises ValueError only for an unknown ``mode``.
    """
    if mode not in ("exercises", "full"):
        raise ValueError(f"mode must be 'exercises' or 'full', got {mode!r}")
    loaded = [(Path(p), *_load(Path(p), mode)) for p in paths]
    runnable = [(key, path, nb) for key, (path, nb, _) in enumerate(loaded) if nb is not None]
    jobs = [(key, path.resolve().parent, nb) for key, path, nb in runnable if mode == "full" or exercise_spans(nb)]
    stops = {}
    for batch in [jobs] if mode == "exercises" else [[job] for job in jobs]:
        if batch:
            stops.update(_execute(batch, timeout, kernel_name))
    return [_report(key, path, nb, error, mode, stops) for key, (path, nb, error) in enumerate(loaded)]


def _report(key: int, path: Path, nb: Any, error: Optional[str], mode: str, stops: dict) -> NotebookReport:
    """The report of ``run``'s notebook number ``key``: its verdicts, or why it could not be read."""
    if nb is None:
        return NotebookReport(str(path), path.stem, error, _with_missing(path.stem, [], UNREAD, "not run"))
    return collect(nb, path, mode, stops.get(key))


def totals(reports: Sequence[NotebookReport]) -> dict[str, int]:
    """Counts by status, plus ``exercises``, ``notebooks`` and ``notebooks failed``."""
    counts = {s: sum(e.status == s for r in reports for e in r.exercises) for s in STATUSES}
    failed = sum(r.error is not None for r in reports)
    return {"exercises": sum(counts.values()), **counts, "notebooks": len(reports), "notebooks failed": failed}


def summary_line(counts: Mapping[str, int]) -> str:
    """``"9/21 exercises passed"`` followed by the other counts.

    Examples
    --------
    >>> summary_line({"exercises": 21, "passed": 9, "failed": 2, "not attempted": 10, "not run": 0,
    ...               "notebooks": 6, "notebooks failed": 0})
    '9/21 exercises passed (2 failed, 10 not attempted, 0 not run)'
    """
    others = ", ".join(f"{counts[s]} {s}" for s in STATUSES[1:])
    line = f"{counts['passed']}/{counts['exercises']} exercises passed ({others}"
    bad = counts.get("notebooks failed", 0)
    return line + (f"; {bad}/{counts['notebooks']} notebooks did not finish)" if bad else ")")


def format_report(reports: Sequence[NotebookReport], width: int = 88, max_lines: int = 4) -> str:
    """The table by chapter (mark, id, status; the feedback under a failure) and the summary line.

    Feedback is wrapped to ``width`` columns and cut after ``max_lines`` lines.

    Examples
    --------
    >>> rep = NotebookReport("book/01_x.ipynb", "01_x", None, (ExerciseResult("01_x", "a", "passed", "ok", 1, 10),
    ...     ExerciseResult("01_x", "b", "failed", "you divided by d_k instead of its square root " * 3, 2, 20)))
    >>> print(format_report([rep], width=60))
    01_x  (book/01_x.ipynb)
      ✅ a                        passed          difficulty 1/3, 10 min
      ❌ b                        failed          difficulty 2/3, 20 min
           you divided by d_k instead of its square root you
           divided by d_k instead of its square root you divided
           by d_k instead of its square root
    <BLANKLINE>
    1/2 exercises passed (1 failed, 0 not attempted, 0 not run)
    """
    limits = {"max_lines": max_lines, "placeholder": " …"}

    def wrap(text: str, first: str, rest: str) -> list[str]:
        return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest, **limits)

    lines = []
    for rep in reports:
        lines.append(f"{rep.chapter}  ({rep.path})")
        lines += wrap(f"⚠️  {rep.error}", "  ", "      ") if rep.error else []
        lines += [] if rep.exercises or rep.error else ["  (no exercises in this notebook)"]
        for e in rep.exercises:
            lines.append(f"  {MARKS[e.status]} {e.id:<24} {e.status:<15} {rating(e)}".rstrip())
            if e.status in ("failed", "not run") and e.message not in ("", UNREAD, STOPPED_BEFORE, rep.error):
                lines += wrap(e.message, " " * 7, " " * 7)
    return "\n".join(lines + ["", summary_line(totals(reports))])


def to_json(reports: Sequence[NotebookReport], mode: str = "exercises") -> dict:
    """One JSON-ready dict: mode, notebooks (path, chapter, error), exercises, totals, summary.

    Examples
    --------
    >>> rep = NotebookReport("a/01_x.ipynb", "01_x", None, (ExerciseResult("01_x", "e", "passed", "ok", 1, 5),))
    >>> out = to_json([rep])
    >>> out["exercises"], out["summary"]
    ([{'chapter': '01_x', 'id': 'e', 'status': 'passed', 'message': 'ok', 'difficulty': 1, 'minutes': 5}], '1/1 exercises passed (0 failed, 0 not attempted, 0 not run)')
    """
    counts = totals(reports)
    return {
        "mode": mode,
        "notebooks": [{"path": r.path, "chapter": r.chapter, "error": r.error} for r in reports],
        "exercises": [asdict(e) for r in reports for e in r.exercises],
        "totals": counts,
        "summary": summary_line(counts),
    }


# ----------------------------------------------------------------------- CLI
def add_arguments(parser: Any) -> None:
    """The ``progress`` command's arguments, added to an argparse ``parser``."""
    where = "default: book/[0-9][0-9]_*.ipynb, else [0-9][0-9]_*.ipynb in the current folder"
    parser.add_argument("notebooks", nargs="*", help=f"notebooks or folders ({where})")
    parser.add_argument("--full", action="store_true", help="run every cell, not only setup and exercise cells")
    parser.add_argument("--timeout", type=int, default=120, help="seconds each cell may run (default 120)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def cli(args: Any, parser: Any) -> int:
    """Run ``progress`` for parsed ``args`` and print the table or JSON; returns the exit code.

    Usage errors (no notebooks found, a missing path) go through
    ``parser.error``, which exits with status 2.
    """
    import shutil

    paths = find_notebooks(args.notebooks)
    if missing := [str(p) for p in paths if not p.exists()]:
        parser.error(f"no such notebook: {', '.join(missing)}")
    if not paths:
        looked = args.notebooks or [str(Path.cwd() / p) for p in PATTERNS]
        parser.error(f"no notebooks found (looked for {' and '.join(looked)})")
    mode = "full" if args.full else "exercises"
    reports = run(paths, mode, args.timeout)
    if args.json:
        print(json.dumps(to_json(reports, mode), indent=2, ensure_ascii=False))
    else:
        print(format_report(reports, width=max(60, min(100, shutil.get_terminal_size((88, 24)).columns))))
    return 0
