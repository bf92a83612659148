"""The plain edition: each chapter as a notebook that Colab, GitHub and VS Code render (issue 30).

Inline numbers become the text the book shows, admonitions blockquotes, dropdowns ``<details>``,
references links to the published book (read from the sources by :func:`book_targets`) and
``{literalinclude}`` the code it includes; code cells and outputs are copied unchanged. Each
converter is a pure function of its text; unknown markup is an error, not a pass-through.
``python -m attention_course.course.plain_edition [--out _build/plain] [notebooks...]``.
"""

from __future__ import annotations

import argparse
import copy
import html
import re
import sys
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence, Union

from .book import format_value
from .expressions import glued_texts, load_notebook, save_notebook, user_expressions
from .figure_refs import figure_numbers

__all__ = ["BookTargets", "Chapter", "Target", "Citation", "Directive", "PlainEditionError", "PLAIN_BRANCH",
           "book_url", "colab_address", "docutils_id", "sphinx_id", "book_targets", "glossary_terms",
           "load_citations", "exercise_numbers", "sphinx_include_reader",
           "inline_values", "math_roles", "term_roles", "ref_roles", "doc_roles", "cite_roles",
           "markdown_links", "target_lines",
           "admonition_block", "dropdown_block", "exercise_block", "solution_block", "literalinclude_block",
           "code_block", "math_block", "figure_block", "directives",
           "plain_markdown", "plain_notebook", "write_plain_edition", "main"]

#: The branch that CI publishes the plain edition to; Colab opens notebooks from a branch.
PLAIN_BRANCH = "notebooks"

PathLike = Union[str, Path]


class PlainEditionError(ValueError):
    """Markup the plain edition cannot write: an unknown role or directive, a missing target."""


# ---------------------------------------------------------------------------------------------
# Targets: what a link points to, read from the book's sources
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A place in the book: ``page`` relative to the site root, the ``anchor`` on it, its title."""

    page: str
    anchor: str = ""
    title: Optional[str] = None

    def url(self, base: str) -> str:
        """The absolute address of this target under the book's ``base`` URL.

        Examples
        --------
        >>> Target("book/glossary.html", "term-mask").url("https://x.io/book-site/")
        'https://x.io/book-site/book/glossary.html#term-mask'
        """
        return f"{base.rstrip('/')}/{self.page}" + (f"#{self.anchor}" if self.anchor else "")


@dataclass(frozen=True)
class Citation:
    """A bibliography entry as the book cites it: Markdown for ``{cite:p}`` and ``{cite:t}``.

    ``p``: a parenthetical item without brackets; ``t``: a textual item.
    """

    key: str
    p: str
    t: str
    target: Target
    order: int = 0  #: its place in the bibliography, which orders the keys of one citation


@dataclass(frozen=True)
class BookTargets:
    """Everything a chapter can link to, and the base URL of the published book.

    ``labels``: ``{ref}`` targets (sections, verdict boxes, exercises, figures);
    ``terms``: glossary terms, keyed in lower case as Sphinx looks them up;
    ``docs``: pages by docname (``"book/01_mechanics"``); ``citations``: bibliography keys.
    """

    base: str
    labels: Mapping[str, Target] = field(default_factory=dict)
    terms: Mapping[str, Target] = field(default_factory=dict)
    docs: Mapping[str, Target] = field(default_factory=dict)
    citations: Mapping[str, Citation] = field(default_factory=dict)

    def pages(self) -> dict[str, set[str]]:
        """Page -> the anchors on it that some target uses (``""`` for the page itself)."""
        out: dict[str, set[str]] = {}
        everything = [*self.labels.values(), *self.terms.values(), *self.docs.values(),
                      *(c.target for c in self.citations.values())]
        for t in everything:
            out.setdefault(t.page, set()).add(t.anchor)
        return out


@dataclass(frozen=True)
class Chapter:
    """What converting one notebook needs besides the book's targets.

    ``doc``: its docname; ``values``: glue spec -> shown text; ``exercises``: label -> (number,
    title); ``read_include(file, options)``: a ``{literalinclude}``'s text; ``texts``: glued name
    -> stored ``text/plain``.
    """

    doc: str
    values: Mapping[str, str] = field(default_factory=dict)
    exercises: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    read_include: Optional[Callable[[str, Mapping[str, str]], str]] = None
    texts: Mapping[str, str] = field(default_factory=dict)


_DIGRAPHS = {"ß": "sz", "æ": "ae", "œ": "oe", "ȸ": "db", "ȹ": "qp"}
_SINGLE = str.maketrans({"ø": "o", "đ": "d", "ħ": "h", "ı": "i", "ł": "l", "ŧ": "t", "ƀ": "b",
                         "ƃ": "b", "ƈ": "c", "ƌ": "d", "ƒ": "f", "ƙ": "k", "ƚ": "l", "ƞ": "n",
                         "ƥ": "p", "ƫ": "t", "ƭ": "t", "ƴ": "y", "ƶ": "z", "ǥ": "g"})


def _ascii(text: str) -> str:
    for k, v in _DIGRAPHS.items():
        text = text.replace(k, v)
    return unicodedata.normalize("NFKD", text.translate(_SINGLE)).encode("ascii", "ignore").decode("ascii")


def docutils_id(name: str) -> str:
    """The HTML id docutils gives a label (``(label)=``, ``:name:``): ``docutils.nodes.make_id``.

    Lower case, runs of other characters as one hyphen, no leading digit or hyphen.

    Examples
    --------
    >>> docutils_id("claim-rows-sum-to-one"), docutils_id("Fig. 3 / Part_B")
    ('claim-rows-sum-to-one', 'fig-3-part-b')
    """
    ident = _ascii(name.lower())
    ident = re.sub(r"[^a-z0-9]+", "-", " ".join(ident.split()))
    return re.sub(r"^[-0-9]+|-+$", "", ident)


def sphinx_id(text: str) -> str:
    """The HTML id Sphinx makes from a term (``sphinx.util.nodes._make_id``): case and ``._`` kept.

    A glossary term's anchor is ``sphinx_id("term-" + term)``.

    Examples
    --------
    >>> sphinx_id("term-KL divergence"), sphinx_id("term-[CLS] and [SEP]")
    ('term-KL-divergence', 'term-CLS-and-SEP')
    """
    ident = re.sub(r"[^a-zA-Z0-9._]+", "-", " ".join(_ascii(text).split()))
    return re.sub(r"^[-0-9._]+|-+$", "", ident)


def book_url(config: Mapping) -> str:
    """The published book's address, from ``_config.yml`` (as a dict).

    ``html.baseurl`` when set; otherwise GitHub Pages' address for ``repository.url``.

    Examples
    --------
    >>> book_url({"repository": {"url": "https://github.com/org/my-course"}})
    'https://org.github.io/my-course'
    >>> book_url({"html": {"baseurl": "https://course.example.org/"}})
    'https://course.example.org'
    """
    base = (config.get("html") or {}).get("baseurl")
    if base:
        return base.rstrip("/")
    url = (config.get("repository") or {}).get("url", "")
    m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", url)
    if m is None:
        raise PlainEditionError(f"_config.yml: cannot derive the book's address from repository.url {url!r}; "
                                "set html.baseurl")
    return f"https://{m[1]}.github.io/{m[2]}"


def colab_address(repository_url: str, notebook: str, branch: str = PLAIN_BRANCH,
                  colab: str = "https://colab.research.google.com") -> str:
    """Where Colab opens the plain edition of ``notebook`` (its file name) from ``branch``.

    Examples
    --------
    >>> colab_address("https://github.com/org/repo", "01_mechanics.ipynb")
    'https://colab.research.google.com/github/org/repo/blob/notebooks/01_mechanics.ipynb'
    """
    m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", repository_url)
    if m is None:
        raise PlainEditionError(f"Colab opens notebooks from GitHub only, not from {repository_url!r}")
    return f"{colab.rstrip('/')}/github/{m[1]}/{m[2]}/blob/{branch}/{notebook}"


# ---------------------------------------------------------------------------------------------
# Scanning: which parts of a Markdown text are prose (where roles live) and which are code
# ---------------------------------------------------------------------------------------------

_DIRECTIVE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,}|:{3,})\{(?P<name>[^}\s]+)\}[ \t]*(?P<arg>.*?)\s*$")
_CODE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
#: Directives whose body is code or maths, where roles are not roles.
_LITERAL_DIRECTIVES = {"code", "code-block", "sourcecode", "code-cell", "literalinclude", "math", "raw"}


def _closes(line: str, fence: str) -> bool:
    s = line.strip()
    return len(s) >= len(fence) and set(s) == {fence[0]}


def _prose_segments(markdown: str) -> list[tuple[bool, str]]:
    """Split ``markdown`` into ``(is_prose, text)`` pieces, in order.

    Not prose: code blocks, literal directives, and other directives' fences and options.

    Examples
    --------
    >>> for piece in _prose_segments(":::{note} A {term}`t`\\n:class: x\\ntext\\n```\\n{term}`c`\\n```\\n:::\\n"):
    ...     print(piece)
    (False, ':::{note} ')
    (True, 'A {term}`t`\\n')
    (False, ':class: x\\n')
    (True, 'text\\n')
    (False, '```\\n{term}`c`\\n```\\n')
    (False, ':::\\n')
    """
    lines = markdown.splitlines(keepends=True)
    out: list[tuple[bool, str]] = []
    fences: list[str] = []  # the directives open around the current line
    i = 0
    while i < len(lines):
        line = lines[i]
        if fences and _closes(line, fences[-1]):
            fences.pop()
            out.append((False, line))
            i += 1
            continue
        d = _DIRECTIVE_OPEN.match(line)
        c = None if d else _CODE_OPEN.match(line)
        if c or (d and d["name"] in _LITERAL_DIRECTIVES):
            fence = (d or c)["fence"]
            j = i + 1
            while j < len(lines) and not _closes(lines[j], fence):
                j += 1
            out.append((False, "".join(lines[i:j + 1])))
            i = j + 1
            continue
        if d:
            fences.append(d["fence"])
            out.append((False, line[:d.start("arg")]))
            if line[d.start("arg"):]:
                out.append((True, line[d.start("arg"):]))
            i += 1
            while i < len(lines) and re.match(r"^\s*:[\w-]+:", lines[i]):
                out.append((False, lines[i]))
                i += 1
            continue
        out.append((True, line))
        i += 1
    return out


_INLINE = re.compile(r"\{(?P<name>[A-Za-z][\w:+.-]*)\}(?P<ticks>`+)(?P<body>.*?)(?P=ticks)"
                     r"|(?P<code>(?P<cticks>`+).+?(?P=cticks))", re.S)


def _sub_roles(markdown: str, names: Iterable[str], fn: Callable[[str, str], str]) -> str:
    """Replace each role ``{name}`body``` with ``fn(name, body)``, outside code spans and code blocks."""
    names = set(names)

    def one(m: re.Match) -> str:
        if m["name"] and m["name"] in names:
            return fn(m["name"], m["body"])
        return m.group(0)
    return "".join(_INLINE.sub(one, text) if prose else text for prose, text in _prose_segments(markdown))


def _split_target(body: str) -> tuple[Optional[str], str]:
    """``"text <target>"`` -> ``("text", "target")``; ``"target"`` -> ``(None, "target")``."""
    m = re.fullmatch(r"(?P<text>.*?)\s*<(?P<target>[^<>]+)>", body, re.S)
    if m and m["text"]:
        return m["text"], m["target"].strip()
    return None, body.strip()


def _link_text(text: str) -> str:
    return re.sub(r"([\[\]])", r"\\\1", text)


def _md_escape(text: str) -> str:
    """Text the book shows literally, escaped so Markdown shows it the same."""
    return re.sub(r"([\\`*_\[\]<>$|])", r"\\\1", text)


# ---------------------------------------------------------------------------------------------
# Inline markup: one converter per family of roles
# ---------------------------------------------------------------------------------------------


def inline_values(markdown: str, values: Mapping[str, str], texts: Mapping[str, str] = {}) -> str:
    """Each ``{eval}`value_of("spec")``` replaced by the text the book shows for it.

    ``values`` maps a spec (``"name:.2f"``) to that text; myst-nb's ``{glue}`` roles are filled
    from ``texts`` (name -> stored ``text/plain``).

    Raises
    ------
    PlainEditionError
        For a spec without a value, or an ``{eval}`` of anything but ``value_of("...")``.

    Examples
    --------
    >>> inline_values('the error is {eval}`value_of("err:.0e")` at n = {eval}`value_of("n")`.',
    ...               {"err:.0e": "1e-15", "n": "500"})
    'the error is 1e-15 at n = 500.'
    >>> inline_values('{glue:text}`w:.2f` and `{eval}` in code', {}, {"w": "0.2513"})
    '0.25 and `{eval}` in code'
    >>> inline_values('{eval}`value_of("missing")`', {})
    Traceback (most recent call last):
    ...
    attention_course.course.plain_edition.PlainEditionError: no stored value for {eval}`value_of("missing")`
    """
    def one(name: str, body: str) -> str:
        if name == "eval":
            m = re.fullmatch(r'value_of\("(?P<spec>[^"]+)"\)', body.strip())
            if m is None:
                raise PlainEditionError(f"{{eval}}`{body}`: the course's {{eval}} roles quote value_of(\"name:fmt\")")
            if m["spec"] not in values:
                raise PlainEditionError(f"no stored value for {{eval}}`{body}`")
            return _md_escape(values[m["spec"]])
        name_, _, fmt = body.strip().partition(":")
        if name_ not in texts:
            raise PlainEditionError(f"{{{name}}}`{body}`: nothing is glued under {name_!r}")
        if name == "glue" and not fmt:
            return _md_escape(texts[name_])
        if name == "glue:text":
            return _md_escape(format_value(texts[name_], fmt))
        raise PlainEditionError(f"{{{name}}}`{body}` has no plain form (only text can be pasted)")
    return _sub_roles(markdown, {"eval", "glue", "glue:text"}, one)


def math_roles(markdown: str) -> str:
    """``{math}`x^2``` -> ``$x^2$``.

    Examples
    --------
    >>> math_roles(r"the scale {math}`1/\\sqrt{d_k}` matters")
    'the scale $1/\\\\sqrt{d_k}$ matters'
    """
    return _sub_roles(markdown, {"math"}, lambda _, body: f"${body}$")


def term_roles(markdown: str, targets: BookTargets) -> str:
    """``{term}`text <term>``` -> a link to the term in the book's glossary.

    Terms are matched without regard to case, as Sphinx does.

    Examples
    --------
    >>> t = BookTargets("https://b.io", terms={"mask": Target("book/glossary.html", "term-mask")})
    >>> term_roles("{term}`masks <mask>` and the {term}`Mask`", t)
    '[masks](https://b.io/book/glossary.html#term-mask) and the [Mask](https://b.io/book/glossary.html#term-mask)'
    """
    def one(_: str, body: str) -> str:
        text, term = _split_target(body)
        target = targets.terms.get(term.lower())
        if target is None:
            raise PlainEditionError(f"{{term}}`{body}`: {term!r} is not in the glossary")
        return f"[{_link_text(text or term)}]({target.url(targets.base)})"
    return _sub_roles(markdown, {"term"}, one)


def ref_roles(markdown: str, targets: BookTargets, figure_numbers: Mapping[str, str] = {}) -> str:
    """``{ref}`text <label>``` and ``{numref}`` -> links to the label's page and anchor in the book.

    A bare ``{ref}`label``` takes the target's title; ``{numref}`` takes ``Fig. %s`` with the number
    from ``figure_numbers``.

    Examples
    --------
    >>> t = BookTargets("https://b.io", labels={
    ...     "fig-a": Target("book/01_x.html", "fig-a", "A caption"),
    ...     "sec": Target("book/02_y.html", "sec", "The formula")})
    >>> print(ref_roles("see {ref}`Fig. 1.1 <fig-a>`,\\n{ref}`sec` and {numref}`fig-a`", t, {"fig-a": "1.1"}))
    see [Fig. 1.1](https://b.io/book/01_x.html#fig-a),
    [The formula](https://b.io/book/02_y.html#sec) and [Fig. 1.1](https://b.io/book/01_x.html#fig-a)
    """
    def one(role: str, body: str) -> str:
        text, label = _split_target(body)
        target = targets.labels.get(label)
        if target is None:
            raise PlainEditionError(f"{{{role}}}`{body}`: no label {label!r} in the book")
        if role == "numref":
            if label not in figure_numbers:
                raise PlainEditionError(f"{{numref}}`{body}`: only figures are numbered")
            text = (text or "Fig. %s").replace("%s", figure_numbers[label])
        elif text is None:
            if not target.title:
                raise PlainEditionError(f"{{ref}}`{body}`: {label!r} has no title; write {{ref}}`text <{label}>`")
            text = target.title
        return f"[{_link_text(text)}]({target.url(targets.base)})"
    return _sub_roles(markdown, {"ref", "numref"}, one)


def _resolve_doc(name: str, current_doc: str) -> str:
    """A ``{doc}`` or link target as a docname: relative to the current page's folder, ``/`` = root."""
    name = re.sub(r"\.(ipynb|md)$", "", name)
    if name.startswith("/"):
        return name.lstrip("/")
    parts = [*current_doc.split("/")[:-1], *name.split("/")]
    out: list[str] = []
    for p in parts:
        if p == "..":
            out.pop() if out else None
        elif p not in ("", "."):
            out.append(p)
    return "/".join(out)


def doc_roles(markdown: str, targets: BookTargets, current_doc: str) -> str:
    """``{doc}`text <page>``` -> a link to that page of the book; a bare ``{doc}`` shows its title.

    Examples
    --------
    >>> t = BookTargets("https://b.io", docs={"book/03_low_rank": Target("book/03_low_rank.html", "", "Low rank")})
    >>> doc_roles("from {doc}`chapter 3 <03_low_rank>` on, see {doc}`03_low_rank`", t, "book/01_mechanics")
    'from [chapter 3](https://b.io/book/03_low_rank.html) on, see [Low rank](https://b.io/book/03_low_rank.html)'
    """
    def one(_: str, body: str) -> str:
        text, name = _split_target(body)
        target = targets.docs.get(_resolve_doc(name, current_doc))
        if target is None:
            raise PlainEditionError(f"{{doc}}`{body}`: no page {name!r} in the book")
        return f"[{_link_text(text or target.title or name)}]({target.url(targets.base)})"
    return _sub_roles(markdown, {"doc"}, one)


def cite_roles(markdown: str, targets: BookTargets) -> str:
    """``{cite:p}`` and ``{cite:t}`` -> the book's author-year citations, linked to the bibliography.

    As sphinxcontrib-bibtex's ``author_year`` style writes them, in the bibliography's order.

    Examples
    --------
    >>> c = Citation("v17", "[Vaswani *et al.*, 2017](u#id2)", "Vaswani *et al.* \\\\[[2017](u#id2)\\\\]",
    ...              Target("book/bibliography.html", "id2"))
    >>> d = Citation("n64", "[Nadaraya, 1964](u#id3)", "Nadaraya \\\\[[1964](u#id3)\\\\]",
    ...              Target("book/bibliography.html", "id3"))
    >>> t = BookTargets("https://b.io", citations={"v17": c, "n64": d})
    >>> print(cite_roles("as in {cite:p}`v17,n64`; {cite:t}`n64` showed", t))
    as in \\[[Vaswani *et al.*, 2017](u#id2), [Nadaraya, 1964](u#id3)\\]; Nadaraya \\[[1964](u#id3)\\] showed
    >>> from dataclasses import replace
    >>> print(cite_roles("{cite:p}`v17,n64`", BookTargets("", citations={"v17": c, "n64": replace(d, order=-1)})))
    \\[[Nadaraya, 1964](u#id3), [Vaswani *et al.*, 2017](u#id2)\\]
    """
    def one(role: str, body: str) -> str:
        keys = [k.strip() for k in body.split(",") if k.strip()]
        missing = [k for k in keys if k not in targets.citations]
        if missing or not keys:
            raise PlainEditionError(f"{{{role}}}`{body}`: no bibliography entry for {missing or body!r}")
        cited = sorted({targets.citations[k].key: targets.citations[k] for k in keys}.values(), key=lambda c: c.order)
        if role == "cite:p":
            return "\\[" + ", ".join(c.p for c in cited) + "\\]"
        return ", ".join(c.t for c in cited)
    return _sub_roles(markdown, {"cite:p", "cite:t"}, one)


def _no_unknown_roles(markdown: str) -> None:
    left = [m.group(0) for prose, text in _prose_segments(markdown) if prose
            for m in _INLINE.finditer(text) if m["name"]]
    if left:
        raise PlainEditionError(f"roles without a plain form: {left[:3]}")


def markdown_links(markdown: str, targets: BookTargets, current_doc: str, image_base: str = "") -> str:
    """MyST links to labels or pages (``[text](label)``, ``[text](#label)``, ``[t](03_x.ipynb)``) -> the book.

    Web links are left alone; an image's relative path is read from ``image_base``.

    Examples
    --------
    >>> t = BookTargets("https://b.io", labels={"sec": Target("book/04_h.html", "sec")},
    ...                 docs={"book/03_x": Target("book/03_x.html")})
    >>> markdown_links("the [last section](sec), [chapter 3](03_x.ipynb), [web](https://a.org)", t, "book/04_h")
    'the [last section](https://b.io/book/04_h.html#sec), [chapter 3](https://b.io/book/03_x.html), [web](https://a.org)'
    """
    def one(m: re.Match) -> str:
        dest = m["dest"]
        if m["code"] or re.match(r"^[a-zA-Z][\w+.-]*:", dest):
            return m.group(0)
        label = dest[1:] if dest.startswith("#") else dest
        path, _, anchor = dest.partition("#")
        if label in targets.labels:
            target = targets.labels[label]
        elif path and _resolve_doc(path, current_doc) in targets.docs:
            doc = targets.docs[_resolve_doc(path, current_doc)]
            target = Target(doc.page, anchor)
        elif m["bang"] and image_base:  # an image next to the page: from the repository
            return f"![{m['text']}]({image_base.rstrip('/')}/{dest.lstrip('/')})"
        else:
            raise PlainEditionError(f"link [{m['text']}]({dest}): no label or page {dest!r} in the book")
        return f"{m['bang']}[{m['text']}]({target.url(targets.base)})"
    return "".join(_LINK.sub(one, text) if prose else text for prose, text in _prose_segments(markdown))


#: A Markdown link or image (and, so that they are left alone, code spans).
_LINK = re.compile(r"(?P<code>(?P<ticks>`+).+?(?P=ticks))"
                   r"|(?P<bang>!?)\[(?P<text>[^\]\n]*)\]\((?P<dest>[^)\s]+)\)", re.S)


def target_lines(markdown: str) -> str:
    """Drop MyST's ``(label)=`` target lines (links go to the book, which keeps the anchors) and
    its ``% comment`` lines (the book does not show them either).

    Examples
    --------
    >>> target_lines("(mechanics-formula)=\\n## The formula\\n% claim-line: x\\nText\\n")
    '## The formula\\nText\\n'
    """
    markdown = re.sub(r"^% [^\n]*(\n|$)", "", markdown, flags=re.M)  # not %magic lines in code
    return re.sub(r"^[ \t]*\([^()\s]+\)=[ \t]*(\n|$)", "", markdown, flags=re.M)


# ---------------------------------------------------------------------------------------------
# Block markup: directives
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Directive:
    """One MyST directive: ``name``, its argument, ``:key: value`` options and body text."""

    name: str
    arg: str
    options: Mapping[str, str]
    body: str
    indent: str = ""


def _parse_blocks(markdown: str) -> list[Union[str, Directive]]:
    """Markdown as text pieces and (outermost) directives; plain code fences stay text."""
    lines = markdown.splitlines(keepends=True)
    out: list[Union[str, Directive]] = []
    i = 0
    while i < len(lines):
        d = _DIRECTIVE_OPEN.match(lines[i])
        c = None if d else _CODE_OPEN.match(lines[i])
        if c:  # a plain code block: copied as it is
            j = i + 1
            while j < len(lines) and not _closes(lines[j], c["fence"]):
                j += 1
            out.append("".join(lines[i:j + 1]))
            i = j + 1
            continue
        if not d:
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not _closes(lines[j], d["fence"]):
            j += 1
        if j == len(lines):
            raise PlainEditionError(f"directive {{{d['name']}}} opened with {d['fence']} is never closed")
        body = [ln[len(d["indent"]):] if ln.startswith(d["indent"]) else ln for ln in lines[i + 1:j]]
        options: dict[str, str] = {}
        k = 0
        if body and body[0].strip() == "---":  # options as a YAML block
            end = next((n for n in range(1, len(body)) if body[n].strip() == "---"), None)
            if end is None:
                raise PlainEditionError(f"directive {{{d['name']}}}: its --- options block is never closed")
            for opt in body[1:end]:
                key, _, value = opt.partition(":")
                options[key.strip()] = value.strip()
            k = end + 1
        else:
            while k < len(body) and (m := re.match(r"^:(?P<key>[\w-]+):(?P<value>.*)$", body[k].rstrip("\n"))):
                options[m["key"]] = m["value"].strip()
                k += 1
        text = "".join(body[k:]).strip("\n")
        out.append(Directive(d["name"], d["arg"], options, text, d["indent"]))
        i = j + 1
    return out


def _quote(markdown: str) -> str:
    return "\n".join("> " + ln if ln.strip() else ">" for ln in markdown.split("\n"))


def _html_inline(text: str) -> str:
    """A title for ``<summary>``, where Markdown is not rendered: emphasis and code as HTML."""
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", text)


def _details(title: str, body: str, open_: bool = False) -> str:
    return (f"<details{' open' if open_ else ''}>\n<summary>{_html_inline(title)}</summary>\n\n"
            f"{body.strip(chr(10))}\n\n</details>")


def _box(title: str, body: str) -> str:
    return _quote(f"**{title}**" + (f"\n\n{body.strip(chr(10))}" if body.strip() else ""))


#: Admonitions with a fixed title, as Sphinx titles them (the generic one takes its own).
ADMONITION_TITLES = {"note": "Note", "tip": "Tip", "hint": "Hint", "important": "Important",
                     "warning": "Warning", "caution": "Caution", "attention": "Attention",
                     "danger": "Danger", "error": "Error", "seealso": "See also"}


def _is_dropdown(d: Directive) -> bool:
    return "dropdown" in d.options.get("class", "").split() or "dropdown" in d.options.get("class-container", "").split()


def admonition_block(d: Directive, body: str) -> str:
    """An admonition (a verdict box, a note...) as a blockquote with a bold title; as
    ``<details>`` when its class is ``dropdown``.

    ``body`` is the directive's body, already converted.

    Examples
    --------
    >>> d = Directive("admonition", "Verdict: rows sum to one — holds", {"class": "tip", "name": "claim-x"}, "")
    >>> print(admonition_block(d, "Every row sums to 1.\\n\\n**Reading.** rows"))
    > **Verdict: rows sum to one — holds**
    >
    > Every row sums to 1.
    >
    > **Reading.** rows
    >>> print(admonition_block(Directive("note", "", {"class": "dropdown"}, ""), "How this was tested."))
    <details>
    <summary>Note</summary>
    <BLANKLINE>
    How this was tested.
    <BLANKLINE>
    </details>
    """
    title = d.arg if d.name == "admonition" else (ADMONITION_TITLES[d.name] + (f": {d.arg}" if d.arg else ""))
    if not title:
        raise PlainEditionError("an {admonition} needs a title")
    return _details(title, body) if _is_dropdown(d) else _box(title, body)


def dropdown_block(d: Directive, body: str) -> str:
    """sphinx-design's ``{dropdown}`` (and sphinx-togglebutton's ``{toggle}``) as ``<details>``.

    Examples
    --------
    >>> print(dropdown_block(Directive("dropdown", "How this was tested", {"open": ""}, ""), "Seeds 0-9."))
    <details open>
    <summary>How this was tested</summary>
    <BLANKLINE>
    Seeds 0-9.
    <BLANKLINE>
    </details>
    """
    return _details(d.arg or "Show", body, open_="open" in d.options)


def exercise_block(d: Directive, body: str, number: str) -> str:
    """sphinx-exercise's ``{exercise}`` as a blockquote titled as the book titles it.

    Examples
    --------
    >>> print(exercise_block(Directive("exercise", "A stable softmax", {"label": "ex-s"}, ""), "Write it.", "1.1"))
    > **Exercise 1.1 (A stable softmax)**
    >
    > Write it.
    """
    title = "Exercise" + ("" if "nonumber" in d.options or not number else f" {number}")
    return _box(title + (f" ({d.arg})" if d.arg else ""), body)


def solution_block(d: Directive, body: str, exercises: Mapping[str, tuple[str, str]]) -> str:
    """sphinx-exercise's ``{solution}``: ``<details>`` when it is a dropdown, else a blockquote.

    Its title is the book's: ``Solution to Exercise 1.1 (subtitle)``.

    Examples
    --------
    >>> print(solution_block(Directive("solution", "ex-s", {"class": "dropdown"}, ""), "`x - x.max()`",
    ...                      {"ex-s": ("1.1", "A stable softmax")}))
    <details>
    <summary>Solution to Exercise 1.1 (A stable softmax)</summary>
    <BLANKLINE>
    `x - x.max()`
    <BLANKLINE>
    </details>
    """
    label = d.arg.strip()
    if label not in exercises:
        raise PlainEditionError(f"{{solution}} {label}: no exercise labelled {label!r} in this chapter")
    number, subtitle = exercises[label]
    title = f"Solution to Exercise {number}".rstrip() + (f" ({subtitle})" if subtitle else "")
    return _details(title, body) if _is_dropdown(d) else _box(title, body)


def _fence(code: str, language: str = "") -> str:
    ticks = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", code)), default=0))
    return f"{ticks}{language}\n{code.rstrip(chr(10))}\n{ticks}"


_INCLUDE_LANGUAGES = {".py": "python", ".toml": "toml", ".json": "json", ".yml": "yaml", ".yaml": "yaml",
                      ".sh": "bash", ".cfg": "ini", ".txt": ""}


def literalinclude_block(d: Directive, read_include: Callable[[str, Mapping[str, str]], str]) -> str:
    """``{literalinclude}`` as a fenced code block holding the code the book includes.

    ``read_include(path, options)`` returns that code (:func:`sphinx_include_reader` reads it
    as Sphinx does, ``:pyobject:``, ``:lines:``, ``:start-after:`` and the rest).

    Examples
    --------
    >>> d = Directive("literalinclude", "../pkg/solutions.py", {"pyobject": "f"}, "")
    >>> print(literalinclude_block(d, lambda path, opts: f"def {opts['pyobject']}():\\n    return 1\\n"))
    ```python
    def f():
        return 1
    ```
    """
    language = d.options.get("language", _INCLUDE_LANGUAGES.get(Path(d.arg).suffix, ""))
    return _fence(read_include(d.arg.strip(), d.options), language)


def code_block(d: Directive) -> str:
    """``{code-block} python`` (or ``{code}``) as a plain fenced code block.

    Examples
    --------
    >>> print(code_block(Directive("code-block", "python", {"linenos": ""}, "x = 1")))
    ```python
    x = 1
    ```
    """
    return _fence(d.body, d.arg.strip())


def math_block(d: Directive) -> str:
    """``{math}`` as display maths, ``$$...$$``.

    Examples
    --------
    >>> print(math_block(Directive("math", "", {"label": "eq-a"}, "a = b")))
    $$
    a = b
    $$
    """
    return "$$\n" + (d.arg + "\n" if d.arg else "") + d.body + "\n$$"


def figure_block(d: Directive, body: str, image_base: str) -> str:
    """``{figure}`` (or ``{image}``) as a Markdown image, from ``image_base`` + its path, and its caption.

    Examples
    --------
    >>> d = Directive("figure", "_static/a.png", {"alt": "A plot", "name": "fig-a"}, "")
    >>> print(figure_block(d, "The caption.", "https://raw.example/main/book"))
    ![A plot](https://raw.example/main/book/_static/a.png)
    <BLANKLINE>
    *The caption.*
    """
    path = d.arg.strip()
    url = path if re.match(r"^[a-z]+:", path) else f"{image_base.rstrip('/')}/{path.lstrip('/')}"
    image = f"![{_link_text(d.options.get('alt', ''))}]({url})"
    return image + (f"\n\n*{body.strip()}*" if body.strip() else "")


def directives(markdown: str, chapter: Chapter, image_base: str = "") -> str:
    """Every directive in ``markdown`` in its plain form (the converters above), nested ones too.

    Raises
    ------
    PlainEditionError
        For a directive the plain edition has no form for.

    Examples
    --------
    >>> md = ":::{admonition} Verdict: it holds\\n:class: tip\\n:name: claim-a\\nThe **number** is 3.\\n:::\\n"
    >>> print(directives(md, Chapter("book/01_x")))
    > **Verdict: it holds**
    >
    > The **number** is 3.
    <BLANKLINE>
    """
    out = []
    for block in _parse_blocks(markdown):
        if isinstance(block, str):
            out.append(block)
            continue
        d = block
        name = d.name
        if name in ("admonition", *ADMONITION_TITLES):
            text = admonition_block(d, directives(d.body, chapter, image_base))
        elif name in ("dropdown", "toggle"):
            text = dropdown_block(d, directives(d.body, chapter, image_base))
        elif name == "exercise":
            number = chapter.exercises.get(d.options.get("label", ""), ("", ""))[0]
            text = exercise_block(d, directives(d.body, chapter, image_base), number)
        elif name == "solution":
            text = solution_block(d, directives(d.body, chapter, image_base), chapter.exercises)
        elif name == "literalinclude":
            if chapter.read_include is None:
                raise PlainEditionError(f"{{literalinclude}} {d.arg}: no include reader given")
            text = literalinclude_block(d, chapter.read_include)
        elif name in ("code", "code-block", "sourcecode"):
            text = code_block(d)
        elif name == "math":
            text = math_block(d)
        elif name in ("figure", "image"):
            text = figure_block(d, directives(d.body, chapter, image_base), image_base)
        else:
            raise PlainEditionError(f"directive {{{name}}} has no plain form; add one to plain_edition.py")
        out.append(_BlockText("\n".join(d.indent + ln if ln else ln for ln in text.split("\n")) + "\n"))
    return _join_blocks(out)


class _BlockText(str):
    """A converted directive: it must stand apart from the text around it."""


def _join_blocks(pieces: Sequence[str]) -> str:
    """Join text and converted directives with a blank line between a directive and its neighbours.
    """
    text = ""
    for k, piece in enumerate(pieces):
        after_block = k > 0 and isinstance(pieces[k - 1], _BlockText)
        if (isinstance(piece, _BlockText) or after_block) and text.strip() and piece.strip():
            text = text.rstrip("\n") + "\n\n"
        text += piece
    return text


# ---------------------------------------------------------------------------------------------
# A whole cell, a whole notebook
# ---------------------------------------------------------------------------------------------


def plain_markdown(markdown: str, targets: BookTargets, chapter: Chapter,
                   figure_numbers: Mapping[str, str] = {}, image_base: str = "") -> str:
    """One markdown cell of a chapter in plain Markdown: numbers, links, roles, then directives.

    Examples
    --------
    >>> t = BookTargets("https://b.io", terms={"softmax": Target("book/glossary.html", "term-softmax")})
    >>> md = ':::{note}\\nThe {term}`softmax` of {eval}`value_of("n")` rows.\\n:::'
    >>> print(plain_markdown(md, t, Chapter("book/01_x", values={"n": "6"})))
    > **Note**
    >
    > The [softmax](https://b.io/book/glossary.html#term-softmax) of 6 rows.
    """
    text = inline_values(markdown, chapter.values, chapter.texts)
    text = markdown_links(text, targets, chapter.doc, image_base)  # before the roles write their links
    text = math_roles(text)
    text = term_roles(text, targets)
    text = ref_roles(text, targets, figure_numbers)
    text = doc_roles(text, targets, chapter.doc)
    text = cite_roles(text, targets)
    _no_unknown_roles(text)
    text = directives(target_lines(text), chapter, image_base)
    return text if markdown.endswith("\n") else text.rstrip("\n")


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _chapter_number(path: Path) -> str:
    m = re.match(r"(\d\d)_", path.name)
    return str(int(m[1])) if m else ""


def exercise_numbers(markdown_cells: Sequence[str], chapter_number: str, start: int = 1) -> dict[str, tuple[str, str]]:
    """Exercise label -> (its number in the book, ``"1.3"``, its subtitle), in order of appearance,
    from ``start`` (an evidence page continues its lesson's numbers, as its figures do).

    Examples
    --------
    >>> exercise_numbers([":::{exercise} A\\n:label: ex-a\\nx\\n:::", ":::{exercise}\\n:label: ex-b\\ny\\n:::"], "4")
    {'ex-a': ('4.1', 'A'), 'ex-b': ('4.2', '')}
    >>> exercise_numbers([":::{exercise} A\\n:label: ex-a\\nx\\n:::"], "4", start=5)
    {'ex-a': ('4.5', 'A')}
    """
    out: dict[str, tuple[str, str]] = {}
    k = start - 1

    def walk(text: str) -> None:
        nonlocal k
        for block in _parse_blocks(text):
            if isinstance(block, Directive):
                if block.name == "exercise":
                    numbered = "nonumber" not in block.options
                    k += numbered
                    number = f"{chapter_number}.{k}" if chapter_number else str(k)
                    out[block.options.get("label", f"_unlabelled_{k}")] = (number if numbered else "", block.arg)
                walk(block.body)
    for text in markdown_cells:
        walk(text)
    return out


def _note(targets: BookTargets, doc: str, repo_url: str, source: str) -> str:
    page = targets.docs[doc].url(targets.base) if doc in targets.docs else targets.base
    return (f"> *Plain edition* of [this chapter of the book]({page}), for Colab, GitHub and VS Code: "
            f"the same code and outputs, with the book's boxes as quotes and its references as links. "
            f"Generated from `{source}` in the [course repository]({repo_url}); in JupyterLab, open that "
            "notebook instead.")


def plain_notebook(nb: dict, path: PathLike, targets: BookTargets, root: PathLike, repo_url: str = "",
                   read_include: Optional[Callable[[Path, Mapping[str, str]], str]] = None,
                   image_base: str = "") -> dict:
    """The plain edition of one chapter notebook (``nb``, read from ``path`` under ``root``).

    Markdown cells go through :func:`plain_markdown`; code cells and metadata are the very objects
    of ``nb`` (do not change them in place). A one-line note linking the book goes on top.
    """
    path, root = Path(path).resolve(), Path(root).resolve()
    doc = path.relative_to(root).with_suffix("").as_posix()
    texts = glued_texts(nb)
    markdown = [_source(c) for c in nb["cells"] if c["cell_type"] == "markdown"]
    lesson = path.with_name(path.name.replace("_evidence.ipynb", ".ipynb"))
    before = 0
    if lesson != path and lesson.exists():  # an evidence page: its exercises follow the lesson's
        lesson_md = [_source(c) for c in load_notebook(lesson)["cells"] if c["cell_type"] == "markdown"]
        before = sum(1 for number, _ in exercise_numbers(lesson_md, "").values() if number)
    exercises = exercise_numbers(markdown, _chapter_number(path), start=before + 1)
    figure_numbers = _figure_numbers(nb, path)
    reader = read_include or sphinx_include_reader

    def include(name: str, options: Mapping[str, str]) -> str:
        file = (root / name.lstrip("/")) if name.startswith("/") else (path.parent / name)
        return reader(file.resolve(), options)

    # code cells are shared with ``nb``, not copied: they are not changed
    out = {**nb, "cells": [copy.deepcopy(c) if c["cell_type"] == "markdown" else c for c in nb["cells"]]}
    for cell in out["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = _source(cell)
        values = {}
        for entry in user_expressions(source, texts):
            spec = re.fullmatch(r'value_of\("(.*)"\)', entry["expression"])[1]
            if entry["result"]["status"] != "ok":
                raise PlainEditionError(f"{path.name}: {entry['result']['evalue']}")
            values[spec] = entry["result"]["data"]["text/plain"]
        chapter = Chapter(doc, values, exercises, include, texts)
        try:
            new = plain_markdown(source, targets, chapter, figure_numbers, image_base)
        except PlainEditionError as err:
            raise PlainEditionError(f"{path.name}, cell {cell.get('id', '?')}: {err}") from None
        cell["source"] = new.splitlines(keepends=True)
        cell.get("metadata", {}).pop("user_expressions", None)
    note = _note(targets, doc, repo_url or targets.base, path.relative_to(root).as_posix())
    first = out["cells"][0] if out["cells"] else None
    if first is not None and first["cell_type"] == "markdown" and _source(first).startswith("# "):
        head, _, rest = _source(first).partition("\n")
        first["source"] = f"{head}\n\n{note}\n{rest}".splitlines(keepends=True)
    else:
        cell = {"cell_type": "markdown", "metadata": {}, "source": note.splitlines(keepends=True)}
        if out.get("nbformat", 4) == 4 and out.get("nbformat_minor", 0) >= 5:
            cell["id"] = "plain-edition-note"
        out["cells"].insert(0, cell)
    return out


def _figure_numbers(nb: dict, path: Path) -> dict[str, str]:
    """The numbers of the figures in ``nb`` (the notebook at ``path``), as the book gives them: an
    evidence page continues its lesson's (:func:`~attention_course.course.figure_refs.book_figure_numbers`)."""
    number = _chapter_number(path)
    if not number:
        return figure_numbers(nb, None)
    lesson = path.with_name(path.name.replace("_evidence.ipynb", ".ipynb"))
    start = len(figure_numbers(load_notebook(lesson), 0)) + 1 if lesson != path and lesson.exists() else 1
    return figure_numbers(nb, int(number), start)


def sphinx_include_reader(file: Path, options: Mapping[str, str]) -> str:
    """The text Sphinx's ``literalinclude`` shows for ``file`` with ``options`` (Sphinx's own reader)."""
    from types import SimpleNamespace

    from sphinx.directives.code import LiteralIncludeReader

    opts: dict = dict(options)
    for key in ("dedent", "tab-width", "lineno-start"):
        if key in opts:
            opts[key] = int(opts[key]) if opts[key] else None
    for key in ("language", "caption", "name", "class", "linenos", "emphasize-lines", "force"):
        opts.pop(key, None)
    text, _ = LiteralIncludeReader(str(file), opts, SimpleNamespace(source_encoding="utf-8-sig")).read()
    return text


# ---------------------------------------------------------------------------------------------
# Reading the targets from the sources
# ---------------------------------------------------------------------------------------------


def _doc_markdown(path: Path) -> tuple[list[str], dict]:
    """The Markdown texts of a page (one per cell for a notebook) and, for a notebook, the JSON."""
    if path.suffix == ".ipynb":
        nb = load_notebook(path)
        return [_source(c) for c in nb["cells"] if c["cell_type"] == "markdown"], nb
    return [path.read_text(encoding="utf-8")], {}


def _title(texts: Sequence[str]) -> Optional[str]:
    for text in texts:
        for prose, seg in _prose_segments(text):
            m = prose and re.search(r"^#\s+(.+?)\s*#*\s*$", seg, re.M)
            if m:
                return m[1]
    return None


def _labels_in(text: str, page: str) -> dict[str, Target]:
    """``(label)=`` targets and the ``:name:`` / ``:label:`` of directives in one Markdown text."""
    out: dict[str, Target] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.fullmatch(r"\s*\((?P<label>[^()\s]+)\)=\s*", line)
        if m:
            heading = next((re.sub(r"^#+\s+", "", ln).strip() for ln in lines[i + 1:i + 3]
                            if re.match(r"^#+\s", ln)), None)
            out[m["label"]] = Target(page, docutils_id(m["label"]), heading)

    def walk(t: str) -> None:
        for block in _parse_blocks(t):
            if isinstance(block, Directive):
                for key in ("name", "label"):
                    if block.options.get(key):
                        title = block.arg or None if block.name == "admonition" else None
                        out[block.options[key]] = Target(page, docutils_id(block.options[key]), title)
                if block.name not in _LITERAL_DIRECTIVES:
                    walk(block.body)
    walk(text)
    return out


def glossary_terms(text: str, page: str) -> dict[str, Target]:
    """Lower-cased term -> its anchor, for every term of the ``{glossary}`` directives in ``text``.

    Examples
    --------
    >>> md = ("```{glossary}\\n:sorted:\\n\\nattention weights\\nattention matrix\\n  The matrix A.\\n\\n"
    ...       "KL divergence\\n  A divergence.\\n```")
    >>> for term, target in sorted(glossary_terms(md, "g.html").items()):
    ...     print(term, "->", target.anchor)
    attention matrix -> term-attention-matrix
    attention weights -> term-attention-weights
    kl divergence -> term-KL-divergence
    """
    out: dict[str, Target] = {}
    anchors: set[str] = set()
    for block in _parse_blocks(text):
        if not (isinstance(block, Directive) and block.name == "glossary"):
            continue
        for line in block.body.splitlines():
            if not line.strip() or line[0].isspace() or re.match(r"^:[\w-]+:", line):
                continue
            term = re.split(r"\s+:\s+", line.strip())[0]  # "term : classifier"
            anchor = sphinx_id("term-" + term)
            if anchor in anchors or anchor == "term":
                raise PlainEditionError(f"glossary term {term!r}: its anchor {anchor!r} is not unique; "
                                        "Sphinx would number it, and the plain edition cannot know how")
            anchors.add(anchor)
            out[term.lower()] = Target(page, anchor, term)
    return out


def _bibliography_ids(keys: Sequence[str], cite_id: str = "", bibliography_id: str = "") -> dict[str, str]:
    """Key -> the anchor sphinxcontrib-bibtex gives its entry on the (one) bibliography page.

    ``bibtex_cite_id``'s template when set; else docutils' automatic ids in order (``id1`` is the
    bibliography itself, then every entry of the bib files).

    Examples
    --------
    >>> _bibliography_ids(["a", "b"])
    {'a': 'id2', 'b': 'id3'}
    >>> _bibliography_ids(["a"], cite_id="cite-{key}")
    {'a': 'cite-a'}
    """
    if cite_id:
        return {k: docutils_id(cite_id.format(bibliography_count=1, key=k)) for k in keys}
    first = 1 if bibliography_id else 2
    return {k: f"id{first + i}" for i, k in enumerate(keys)}


def load_citations(bibfiles: Sequence[Path], page: str, base: str, cite_id: str = "",
                   bibliography_id: str = "", bibliography_style: str = "alpha") -> dict[str, Citation]:
    """Key -> :class:`Citation`, formatted by sphinxcontrib-bibtex's own ``author_year`` templates.

    ``order`` is the entry's place in the sorted bibliography.
    """
    import pybtex.plugin
    from pybtex.database import parse_file
    from pybtex.richtext import BaseMultipartText, Tag
    from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
    from sphinxcontrib.bibtex.style.template import SphinxReferenceInfo, SphinxReferenceText

    entries = {}
    for bib in bibfiles:
        entries.update(parse_file(str(bib)).entries)
    anchors = _bibliography_ids(list(entries), cite_id, bibliography_id)
    style = AuthorYearReferenceStyle()
    sorting = pybtex.plugin.find_plugin("pybtex.style.formatting", bibliography_style)()
    order = {entry.key: k for k, entry in enumerate(sorting.sort(list(entries.values())))}

    def md(node, url: str) -> str:
        if isinstance(node, SphinxReferenceText):
            return f"[{''.join(md(p, url) for p in node.parts)}]({url})"
        if isinstance(node, Tag):
            inner = "".join(md(p, url) for p in node.parts)
            return {"em": f"*{inner}*", "i": f"*{inner}*", "strong": f"**{inner}**", "b": f"**{inner}**"}.get(
                node.name, inner)
        if isinstance(node, BaseMultipartText):
            return "".join(md(p, url) for p in node.parts)
        return _md_escape(str(node)) if not hasattr(node, "value") else _md_escape(node.value)

    out = {}
    for key, entry in entries.items():
        target = Target(page, anchors[key])
        info = SphinxReferenceInfo(builder=None, fromdocname="", todocname=page, citation_id=anchors[key],
                                   title=None, pre_text="", post_text="")
        data = {"entry": entry, "formatted_entry": None, "reference_info": info, "style": style}
        p, t = (md(style.inner(role).format_data(data=data), target.url(base)) for role in ("p", "t"))
        out[key] = Citation(key, p, t, target, order[key])
    return out


def _config(root: Path) -> dict:
    import yaml
    return yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8")) or {}


def book_targets(root: PathLike, base: Optional[str] = None) -> BookTargets:
    """Every link target of the book under ``root`` (the folder of ``_config.yml``), from its sources.

    Labels from ``(label)=`` lines, directives' ``:name:`` and ``:label:`` and figure names;
    glossary terms; citations from the ``bibtex_bibfiles``.
    """
    root = Path(root).resolve()
    config = _config(root)
    base = (base or book_url(config)).rstrip("/")
    labels: dict[str, Target] = {}
    terms: dict[str, Target] = {}
    docs: dict[str, Target] = {}
    bib_page = None
    sources = sorted([*root.glob("book/*.ipynb"), *root.glob("book/*.md")])
    for path in sources:
        doc = path.relative_to(root).with_suffix("").as_posix()
        page = doc + ".html"
        texts, nb = _doc_markdown(path)
        docs[doc] = Target(page, "", _title(texts))
        for text in texts:
            for label, target in _labels_in(text, page).items():
                if label in labels and labels[label] != target:
                    raise PlainEditionError(f"label {label!r} is defined twice ({labels[label].page}, {page})")
                labels[label] = target
            terms.update(glossary_terms(text, page))
            if re.search(r"^\s*(`{3,}|:{3,})\{bibliography\}", text, re.M):
                bib_page = page
        for cell in nb.get("cells", []):
            fig = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
            if cell["cell_type"] == "code" and fig.get("name"):
                labels[fig["name"]] = Target(page, docutils_id(fig["name"]), fig.get("caption"))
    citations: dict[str, Citation] = {}
    sphinx_config = (config.get("sphinx") or {}).get("config") or {}
    bibfiles = [root / b for b in config.get("bibtex_bibfiles", [])]
    if bibfiles and bib_page:
        citations = load_citations(bibfiles, bib_page, base, sphinx_config.get("bibtex_cite_id", ""),
                                   sphinx_config.get("bibtex_bibliography_id", ""),
                                   sphinx_config.get("bibtex_default_style", "alpha"))
    return BookTargets(base, labels, terms, docs, citations)


# ---------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------


def _root_of(path: Path) -> Path:
    for parent in path.resolve().parents:
        if (parent / "_config.yml").is_file():
            return parent
    raise PlainEditionError(f"{path}: no _config.yml above it; is it a chapter of the book?")


README = """# The plain edition of *Attention Is Learned Association*

Generated by `python -m attention_course.course.plain_edition` from the chapters in `book/` of
the course repository ({repo}); do not edit these files, the next build replaces them.

Each notebook is one chapter for Colab, GitHub and VS Code, which render plain Markdown only:
its numbers are filled in, verdict boxes are quotes, solutions are collapsed and references
link to the book, {base}. Code and outputs are the chapter's, unchanged. In JupyterLab, open
the chapters themselves (`make lab` in a clone of the course): they show all that the book does.

{chapters}
"""


def _readme(targets: BookTargets, repo_url: str, names: Sequence[str]) -> str:
    lines = []
    for name in names:
        doc = targets.docs.get(f"book/{Path(name).stem}")
        colab = f" · [open in Colab]({colab_address(repo_url, name)})" if repo_url.startswith("https://github.com/") else ""
        book = f" · [in the book]({doc.url(targets.base)})" if doc else ""
        lines.append(f"- [{(doc.title if doc and doc.title else name)}]({name}){colab}{book}")
    return README.format(repo=repo_url or "the course repository", base=targets.base, chapters="\n".join(lines))


def write_plain_edition(notebooks: Sequence[PathLike], out: PathLike, base: Optional[str] = None,
                        prune: bool = False) -> list[Path]:
    """Write the plain edition of each chapter in ``notebooks`` to ``out``; return the files written.

    Also a README.md listing them. With ``prune``, stale chapter notebooks in ``out`` are deleted.
    """
    paths = [Path(p) for p in notebooks]
    if not paths:
        raise PlainEditionError("no chapter notebooks to convert")
    root = _root_of(paths[0])
    targets = book_targets(root, base)
    config = _config(root)
    repo_url = (config.get("repository") or {}).get("url", "")
    branch = (config.get("repository") or {}).get("branch", "main")
    m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", repo_url)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in paths:
        image_base = (f"https://raw.githubusercontent.com/{m[1]}/{m[2]}/{branch}/"
                      f"{path.resolve().parent.relative_to(root).as_posix()}" if m else "")
        nb = plain_notebook(load_notebook(path), path, targets, root, repo_url, image_base=image_base)
        save_notebook(out / path.name, nb)
        written.append(out / path.name)
    if prune:
        for stale in set(out.glob("*.ipynb")) - set(written):
            stale.unlink()
    readme = out / "README.md"
    text = _readme(targets, repo_url, sorted(p.name for p in out.glob("*.ipynb")))
    if not readme.is_file() or readme.read_text(encoding="utf-8") != text:
        readme.write_text(text, encoding="utf-8")
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m attention_course.course.plain_edition [--out DIR] [notebooks...]``."""
    parser = argparse.ArgumentParser(prog="python -m attention_course.course.plain_edition",
                                     description="Write the plain-Markdown edition of the chapters "
                                                 "(for Colab, GitHub and VS Code).")
    parser.add_argument("notebooks", nargs="*", help="chapter notebooks (default: book/[0-9][0-9]_*.ipynb)")
    parser.add_argument("--out", default="_build/plain", help="output folder (default: _build/plain)")
    parser.add_argument("--book-url", default=None,
                        help="the published book's address (default: from _config.yml)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    notebooks = args.notebooks or sorted(Path.cwd().glob("book/*.ipynb"))
    try:
        written = write_plain_edition(notebooks, args.out, args.book_url, prune=not args.notebooks)
    except (PlainEditionError, FileNotFoundError) as err:
        print(f"plain edition: {err}", file=sys.stderr)
        return 1
    print(f"plain edition: {len(written)} notebooks in {args.out} ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
