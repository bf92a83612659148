"""The statements of the exercises, as the learner reads them, for the contract tests.

A statement lives in its chapter's notebook, in an ``{exercise}`` directive with ``:label: ex-<id>``.
A statement written for a notebook that is being restructured elsewhere waits in
``tests/exercises/pending_statements/<id>.md`` (the whole directive) until it is applied there; the
tests read the pending text first, and ``test_contracts.py`` says when a pending file is already
applied (then delete it).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PENDING = Path(__file__).with_name("pending_statements")
_DIRECTIVE = re.compile(r"(?P<fence>:{3,}|`{3,})\{exercise\}[^\n]*\n(?P<body>.*?)\n(?P=fence)\s*$", re.S | re.M)


@lru_cache(maxsize=1)
def notebook_statements() -> dict[str, str]:
    """``{exercise id: the whole {exercise} directive}`` from every chapter notebook."""
    out = {}
    for nb in sorted(ROOT.glob("book/[0-9][0-9]_*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            text = "".join(cell["source"])
            for m in _DIRECTIVE.finditer(text):
                label = re.search(r":label: ex-([\w-]+)", m.group(0))
                if label:
                    out[label.group(1)] = m.group(0)
    return out


def pending(eid: str) -> str | None:
    path = PENDING / f"{eid}.md"
    return path.read_text().strip() if path.exists() else None


def statement(eid: str) -> str:
    """The statement the learner will read: the pending text if there is one, else the notebook's."""
    return pending(eid) or notebook_statements().get(eid, "")


def normalise(text: str) -> str:
    return " ".join(text.split())


def body(directive: str) -> str:
    """The statement's prose: without the fences, the :label: line and code blocks."""
    lines = [l for l in directive.splitlines()[1:-1] if not l.strip().startswith(":label:")]
    text = "\n".join(lines)
    text = re.sub(r"```.*?```", " ", text, flags=re.S)  # a code example inside a statement
    return normalise(text)


def sentences(directive: str) -> list[str]:
    """The statement's sentences: split after . ? ! followed by a capital, a backtick, $ or a bracket."""
    text = body(directive)
    parts = re.split(r"(?<=[.?!])\s+(?=[A-Z`$(\[])", text)
    return [p for p in (s.strip() for s in parts) if p]
