"""Every test file, every doctest and every notebook runs in some tier (none goes nowhere).

pytest skips folders by name (``norecursedirs``; its default includes ``build``, ``dist`` and
``venv``) and deselects by marker, and a test it never collects fails nothing: chapter 8's
tests once sat in a folder named ``build`` and never ran. This collects the whole configured
suite once, without running it, and places each item in the tier that runs it:

* ``make test``: the ``testpaths`` of ``pyproject.toml``, items marked neither ``site`` nor
  ``extended`` (notebooks included, under nbval);
* ``make test-extended``: items marked ``extended`` under ``tests/`` and in ``book/``'s notebooks
  (the evidence pages, under nbval);
* ``make test-site``: items marked ``site`` in the files the Makefile's ``test-site`` names.

Then it asks that every ``tests/**/test_*.py`` file has an item in some tier, that every module
of the package (and of the book's extensions) with a ``>>>`` example has its doctests in
``make test``, and that every notebook of ``book/`` is in ``make test`` or, for an evidence page,
``make test-extended``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs inside the collecting pytest: writes each item's file, kind and markers as JSON.
_PLUGIN = """
import json, os
def pytest_collection_finish(session):
    rows = [{"id": item.nodeid, "file": item.nodeid.split("::")[0],
             "markers": sorted({m.name for m in item.iter_markers()}),
             "doctest": type(item).__name__ == "DoctestItem"} for item in session.items]
    with open(os.environ["COLLECTED_JSON"], "w") as f:
        json.dump(rows, f)
"""


def collected_items(root: Path, tmp: Path) -> list[dict]:
    """Every item pytest collects in ``root`` with its configuration (``-m ""``: no deselection)."""
    (tmp / "collected_plugin.py").write_text(_PLUGIN)
    out = tmp / "collected.json"
    env = {"COLLECTED_JSON": str(out), "PYTHONPATH": str(tmp), "PATH": "/usr/bin:/bin",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "",
                          "-p", "collected_plugin", "--nbval", "--nbval-current-env"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=300)
    if not out.exists():
        raise AssertionError(f"collection failed in {root}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    return json.loads(out.read_text())


def site_files(root: Path) -> set[str]:
    """The test files ``make test-site`` names (its recipe in the Makefile)."""
    recipe = re.search(r"^test-site:.*?\n((?:\t.*\n)+)", (root / "Makefile").read_text(), re.M)
    return set(re.findall(r"tests/[\w/]+\.py", recipe.group(1))) if recipe else set()


def tier(item: dict, site: set[str]) -> str | None:
    """The tier that runs ``item``, or None."""
    marks = set(item["markers"])
    if "extended" in marks:
        return "make test-extended" if item["file"].startswith("tests/") or item["file"].endswith(".ipynb") else None
    if "site" in marks:
        return "make test-site" if item["file"] in site else None
    return "make test"


def uncollected(root: Path, tmp: Path) -> list[str]:
    """What no tier runs in the checkout at ``root``: test files, doctest modules, notebooks."""
    items = collected_items(root, tmp)
    site = site_files(root)
    run_files = {i["file"] for i in items if tier(i, site)}
    doctest_files = {i["file"] for i in items if i["doctest"] and tier(i, site) == "make test"}
    notebooks = {i["file"] for i in items if i["file"].endswith(".ipynb") and tier(i, site) in ("make test",
                                                                                                "make test-extended")}
    missing = [f"{p.relative_to(root)}: no tier runs its tests" for p in sorted(root.glob("tests/**/test_*.py"))
               if str(p.relative_to(root)) not in run_files]
    for folder in ("attention_course", "book/_ext"):
        for p in sorted((root / folder).glob("**/*.py")):
            if ">>> " in p.read_text(encoding="utf-8") and str(p.relative_to(root)) not in doctest_files:
                missing.append(f"{p.relative_to(root)}: its doctests are not in make test")
    missing += [f"{p.relative_to(root)}: no tier runs it" for p in sorted(root.glob("book/**/*.ipynb"))
                if ".ipynb_checkpoints" not in p.parts and str(p.relative_to(root)) not in notebooks]
    return missing


@pytest.mark.extended  # collects the whole suite in a fresh process (seconds): a check of the tiers, not of the course
def test_every_test_file_doctest_and_notebook_runs_in_some_tier(tmp_path):
    assert uncollected(ROOT, tmp_path) == []


def test_site_files_are_read_from_the_makefile():
    assert {"tests/book/test_site.py", "tests/book/test_lab.py"} <= site_files(ROOT)
