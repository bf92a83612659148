"""Reading the chapters: their glued numbers and their verdict boxes, checked against the ledger.

Reads the committed notebooks: their glued values (:func:`read_glue`) and verdict boxes
(:func:`chapter_verdicts`); :func:`chapter_problems` lists where they and the ledger disagree;
:func:`write_evidence` writes the evidence file the package ships.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
from pathlib import Path
from typing import Any, Iterable, Optional, Union

from .claims import CLAIMS, EVIDENCE_FILE, VERDICT_CLASS, Claim
from .expressions import glued_texts, load_notebook
from .verdict_boxes import stale_boxes

__all__ = ["read_glue", "parse_verdict", "chapter_verdicts", "constant_glues",
           "chapter_problems", "collect_evidence", "write_evidence"]


_NP_SCALAR = re.compile(r"^np\.\w+\((.*)\)$", re.S)


def _literal(text: str) -> Any:
    """Turn a glue's stored ``text/plain`` back into a Python value."""
    m = _NP_SCALAR.match(text.strip())
    text = m.group(1) if m else text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def read_glue(path: Union[str, Path]) -> dict[str, Any]:
    """Read every value a notebook glued, from its stored outputs.

    Parameters
    ----------
    path : str or Path
        A notebook (``.ipynb``) committed with its outputs.

    Returns
    -------
    dict
        Glue name -> value (numbers and strings come back as such).
    """
    return {name: _literal(text) for name, text in glued_texts(load_notebook(path)).items()}


_ADMONITION = re.compile(r"^(?P<fence>:{3,}|`{3,})\{admonition\}[ \t]*(?P<title>[^\n]*)\n(?P<opts>(?::[^\n]*\n)*)",
                         re.M)


def parse_verdict(title: str) -> Optional[str]:
    """The verdict kind in a verdict box's title, or None when it has none.

    Examples
    --------
    >>> parse_verdict("Verdict: rows are distributions — holds (with one edge case)")
    'holds'
    >>> parse_verdict("Verdict: A is n × n — holds when queries and keys are one sequence")
    'holds when'
    >>> parse_verdict("Verdict: the gradient vanishes — wrong as stated; it is larger")
    'wrong as stated'
    >>> parse_verdict("Verdict: two lookups need two layers — undecided")
    'undecided'
    >>> parse_verdict("What the table shows") is None
    True
    """
    _, dash, rest = title.rpartition(" — ")
    if not dash:
        return None
    for kind in ("wrong as stated", "holds when", "holds", "undecided"):  # longest first
        if re.match(re.escape(kind) + r"\b", rest.strip()):
            return kind
    return None


def chapter_verdicts(path: Union[str, Path]) -> dict[str, dict[str, Any]]:
    """The labelled verdict boxes of a chapter notebook.

    Returns
    -------
    dict
        Label (``claim-<id>``) -> ``{"title", "verdict", "class", "cell", "name_last", "body"}``
        (``cell``: the markdown cell's index; ``name_last``: ``:name:`` is the last option line).
    """
    boxes = {}
    for i, cell in enumerate(load_notebook(path)["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        for m in _ADMONITION.finditer(source):
            opts = dict(re.findall(r"^:(\w+):[ \t]*(.*)$", m.group("opts"), re.M))
            if "name" in opts:
                title = m.group("title").strip()
                last = m.group("opts").rstrip("\n").rpartition("\n")[2]
                boxes[opts["name"].strip()] = {"title": title, "verdict": parse_verdict(title),
                                               "class": opts.get("class", "").strip(), "cell": i,
                                               "name_last": last.startswith(":name:"),
                                               "body": source[m.end():]}
    return boxes


def _box_problems(c: Claim, path: Path, stale: set[str]) -> list[str]:
    """A generated box that differs from what the ledger writes (the sync step was not run)."""
    if c.label in stale:
        return [f"{c.id}: the verdict box differs from the one the ledger writes; run "
                f"`python .ci/execute_notebooks.py --sync-only book/{path.name}`"]
    return []


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def constant_glues(path: Union[str, Path]) -> set[str]:
    """The glue names a notebook sets from a number typed in its cell, not from a computation.

    A number literal, or a name the notebook assigns a number literal anywhere. Cached per
    content of the code cells.
    """
    sources = tuple("".join(c["source"]) for c in load_notebook(path)["cells"] if c["cell_type"] == "code")
    return set(_constant_glues(sources))


@functools.lru_cache(maxsize=64)
def _constant_glues(sources: tuple[str, ...]) -> frozenset[str]:
    """:func:`constant_glues` of a notebook whose code cells have these ``sources``."""
    trees = []
    for source in sources:
        lines = source.splitlines()
        try:  # IPython magics (%matplotlib, !pip) are not Python
            trees.append(ast.parse("\n".join(x for x in lines if not x.lstrip().startswith(("%", "!")))))
        except SyntaxError:
            continue
    literal, names = set(), set()
    for tree in trees:  # first every literal assignment: glue cells are split from the cells they report
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    pairs = (zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple)
                             and isinstance(node.value, ast.Tuple) else [(target, node.value)])
                    literal.update(t.id for t, v in pairs if isinstance(t, ast.Name) and _is_number(v))
    for tree in trees:
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "glue" and len(node.args) >= 2
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                value = node.args[1]
                if _is_number(value) or (isinstance(value, ast.Name) and value.id in literal):
                    names.add(node.args[0].value)
    return frozenset(names)


#: Words after which a glued number is presented as the size of an error.
_ERROR_PHRASE = re.compile(r"(?:within|below|less than)\s+\{(\w+)")
#: Glue names that promise a measured error.
_ERROR_NAME = re.compile(r"(?:_err|_error|_gap)\d*$")


def _threshold_problems(c: Claim, constants: set[str]) -> list[str]:
    """A claim that presents a number its chapter chose (a threshold) as a measured error."""
    presented = {name for text in (c.evidence, c.robustness) for name in _ERROR_PHRASE.findall(text)}
    problems = [f"{c.id}: {name} is presented as a measured error, but {c.chapter} glues it from a number "
                "it chose (a threshold)" for name in c.glue_names if name in presented & constants]
    problems += [f"{c.id}: {name} is named as a measured error, but {c.chapter} glues it from a number it "
                 "chose (a threshold)" for name in c.glue_names
                 if _ERROR_NAME.search(name) and name in constants - presented]
    return problems


def collect_evidence(book_dir: Union[str, Path], claims: Iterable[Claim] = CLAIMS) -> dict[str, dict[str, Any]]:
    """Gather every claim's glued numbers from the chapter notebooks in ``book_dir``.

    Raises
    ------
    KeyError
        When a chapter does not glue a name that a claim's evidence or robustness uses.
    """
    book_dir, cache, evidence = Path(book_dir), {}, {}
    for c in claims:
        if c.chapter not in cache:
            cache[c.chapter] = read_glue(book_dir / f"{c.chapter}.ipynb")
        glued = cache[c.chapter]
        missing = [n for n in c.glue_names if n not in glued]
        if missing:
            raise KeyError(f"claim {c.id!r}: chapter {c.chapter} glues no {', '.join(missing)}")
        evidence[c.id] = {n: glued[n] for n in c.glue_names}
    return evidence


def chapter_problems(book_dir: Union[str, Path], claims: Iterable[Claim] = CLAIMS) -> list[str]:
    """Where the ledger and the chapters in ``book_dir`` disagree (empty when they agree).

    Per claim: the box exists, is the one the ledger writes, and its glue names exist and are
    not typed constants. Per chapter: every "Verdict..." box has a known ``claim-`` label.
    """
    book_dir, claims = Path(book_dir), list(claims)
    problems, known, boxes = [], {c.label for c in claims}, {}
    for c in claims:
        path = book_dir / f"{c.chapter}.ipynb"
        if not path.is_file():
            problems.append(f"{c.id}: chapter notebook {path.name} not found")
            continue
        if c.chapter not in boxes:
            stale = set(stale_boxes(path, [k for k in claims if k.chapter == c.chapter]))
            boxes[c.chapter] = (chapter_verdicts(path), read_glue(path), constant_glues(path), stale)
        labelled, glued, constants, stale = boxes[c.chapter]
        box = labelled.get(c.label)
        if box is None:
            problems.append(f"{c.id}: {c.chapter} has no verdict box labelled {c.label}")
        else:
            if box["verdict"] != c.verdict:
                problems.append(f"{c.id}: the ledger says {c.verdict!r}, {c.chapter} says "
                                f"{box['verdict']!r} ({box['title']})")
            if box["class"] != VERDICT_CLASS.get(c.verdict):
                problems.append(f"{c.id}: box class {box['class']!r} should be {VERDICT_CLASS.get(c.verdict)!r}")
            problems += _box_problems(c, path, stale)
        missing = [n for n in c.glue_names if n not in glued]
        if missing:
            problems.append(f"{c.id}: {c.chapter} glues no {', '.join(missing)}")
        problems += _threshold_problems(c, constants)
    for chapter, (labelled, _, _, _) in boxes.items():
        for label, box in labelled.items():
            if label.startswith("claim-") and label not in known:
                problems.append(f"{chapter}: box {label} is not in the ledger")
        for title in _unlabelled_verdicts(book_dir / f"{chapter}.ipynb"):
            problems.append(f"{chapter}: verdict box without a claim label: {title}")
    return problems


def _unlabelled_verdicts(path: Path) -> list[str]:
    titles = []
    for cell in load_notebook(path)["cells"]:
        if cell["cell_type"] == "markdown":
            for m in _ADMONITION.finditer("".join(cell["source"])):
                title = m.group("title")
                if (title.startswith("Verdict") or parse_verdict(title)) and ":name: claim-" not in m.group("opts"):
                    titles.append(m.group("title").strip())
    return titles



def write_evidence(book_dir: Union[str, Path], path: Union[str, Path] = EVIDENCE_FILE) -> Path:
    """Collect the evidence from ``book_dir`` and write it as JSON to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(collect_evidence(book_dir), indent=1, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    return path


def add_arguments(parser: Any) -> None:
    """The ``evidence`` command's arguments, added to an argparse ``parser``."""
    parser.add_argument("--book", default="book", help="folder of the chapter notebooks (default: book)")
    parser.add_argument("--out", default=None, help="where to write (default: the package's data/evidence.json)")


def cli(args: Any, parser: Any) -> int:
    """The ``evidence`` command: refuse to write while the ledger and the chapters disagree."""
    book = Path(args.book)
    if not book.is_dir():
        parser.error(f"no folder {book}: run this in the course folder or pass --book")
    problems = chapter_problems(book)
    if problems:
        print("The ledger and the chapters disagree; nothing was written:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    out = write_evidence(book, args.out or EVIDENCE_FILE)
    print(f"wrote the evidence of {len(CLAIMS)} claims to {out}")
    return 0
