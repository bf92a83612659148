"""Words a reader reads in each chapter: the main text, and the collapsed details apart.

Usage: ``python .ci/word_count.py [book/NN_name.ipynb ...]`` (default: every chapter). Prints one
line per chapter: main-text words, words in collapsed dropdowns (``:class: dropdown``, ``{dropdown}``,
``{solution}``, "How this was tested"), and words in the Exercises section. Code, maths, MyST
directives' option lines, labels and roles' targets are not words; an inline number
(``{eval}`value_of(...)```) counts as one word. The budget (issue 25): main text at most 4,000 words per
chapter, collapsed details under 2,500.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

FENCE = re.compile(r"^(?P<fence>:{3,}|`{3,})\{?(?P<name>[\w:-]*)\}?\s*(?P<arg>.*)$")
ROLE = re.compile(r"\{[\w:-]+\}`([^`]*)`")
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’.,%-]*")


def _words(text: str) -> int:
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)  # display maths
    text = re.sub(r"\$[^$\n]+\$", " x ", text)  # inline maths: one word
    text = re.sub(r"\{eval\}`[^`]*`", " 1 ", text)  # an inline number: one word
    text = ROLE.sub(lambda m: m.group(1).split("<")[0], text)  # a role's text, not its target
    text = re.sub(r"`[^`]*`", " x ", text)  # inline code: one word
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    text = re.sub(r"^\s*:[\w-]+:.*$", "", text, flags=re.M)  # directive options
    text = re.sub(r"^\s*\([\w-]+\)=\s*$", "", text, flags=re.M)  # labels
    return len(WORD.findall(text))


def chapter_words(path: Path) -> dict[str, int]:
    """``{"main": ..., "collapsed": ..., "exercises": ...}`` for one chapter notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    counts = {"main": 0, "collapsed": 0, "exercises": 0}
    section = "main"
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        stack: list[tuple[str, bool]] = []  # open fences: (fence, collapsed?)
        lines = "".join(cell["source"]).splitlines()
        for i, line in enumerate(lines):
            if line.startswith("## "):  # a new section: the Exercises, or main text again (the Summary)
                section = "exercises" if line[3:].strip().startswith("Exercises") else "main"
            m = FENCE.match(line.strip())
            if m and stack and line.strip() == stack[-1][0]:
                stack.pop()
                continue
            if m and m.group("name"):
                plain_code = m.group("fence").startswith("`") and "{" not in line  # ```python: code, not a directive
                if plain_code or m.group("name") in ("code-cell", "code-block", "code", "literalinclude", "math"):
                    stack.append((m.group("fence"), None))  # code or maths: no words
                else:
                    options = " ".join(lines[i + 1:i + 4])
                    collapsed = (m.group("name") in ("dropdown", "solution")
                                 or ":class: dropdown" in options or bool(stack and stack[-1][1]))
                    stack.append((m.group("fence"), collapsed))
                continue
            if stack and stack[-1][1] is None:  # inside code or maths
                continue
            where = "collapsed" if stack and stack[-1][1] else ("exercises" if section == "exercises" else "main")
            counts[where] += _words(line)
    return counts


COLLAPSED_BLOCK = re.compile(r"(:{3,}|`{3,})\{(dropdown|solution|hint)[^\n]*\n.*?\n\1", re.S)


def whitespace_words(path: Path) -> int:
    """The coarsest count: every whitespace-separated token of the markdown outside a collapsed
    ``{dropdown}``, ``{solution}`` or ``{hint}`` block, maths, directive lines, box titles and the
    exercises included: the count a quick script makes, usually well above :func:`chapter_words`'
    main text. The budget holds by both.
    """
    nb = json.loads(path.read_text(encoding="utf-8"))
    return sum(len(COLLAPSED_BLOCK.sub("", "".join(c["source"])).split())
               for c in nb["cells"] if c["cell_type"] == "markdown")


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(Path(__file__).resolve().parents[1].glob("book/[0-9][0-9]_*.ipynb"))
    print(f"{'chapter':24s} {'main':>6s} {'collapsed':>10s} {'exercises':>10s} {'whitespace':>11s}")
    for path in paths:
        c = chapter_words(path)
        print(f"{path.stem:24s} {c['main']:6d} {c['collapsed']:10d} {c['exercises']:10d} {whitespace_words(path):11d}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
