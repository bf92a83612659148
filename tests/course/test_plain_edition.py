"""The plain edition (issue 30): every chapter as plain Markdown for Colab, GitHub and VS Code.

Each chapter is converted (attention_course/course/plain_edition.py) and every markdown cell is
rendered with the CommonMark renderer nbconvert uses (mistune), as those viewers render it. The tests
fail on MyST left in the prose, on a link the book cannot resolve, on an inline number other
than the book's, and on a code cell or output that differs from the chapter's. The converters
each have small MyST-in, Markdown-out tests; the checkers are tested on broken input too.

The tests marked ``site`` read a built book (``make book``; ``SITE_HTML=/path/to/html`` for
another build; ``make test-site`` runs them): every anchor the plain edition links to exists
there, citations land on their entries, exercise numbers are the book's, and the Colab button
of each chapter opens the plain edition while Binder keeps the MyST notebook.
"""

from __future__ import annotations

import copy
import html
import importlib.util
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from attention_course.course import expressions as ex
from attention_course.course import plain_edition as pe

mistune = pytest.importorskip("mistune", minversion="3")

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))
SITE = Path(os.environ.get("SITE_HTML", ROOT / "_build" / "html")).resolve()
BUILT = (SITE / "book" / "01_mechanics.html").is_file()
needs_site = pytest.mark.skipif(not BUILT, reason=f"no built book in {SITE} (run `make book`)")


#: CommonMark as nbconvert renders a markdown cell: mistune 3, raw HTML kept (``<details>``), maths
#: spans left alone, GitHub's tables. (nbconvert itself takes 4 s to import; mistune 0.1 s.)
render = mistune.create_markdown(escape=False, plugins=["math", "table", "strikethrough", "url"])


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


@pytest.fixture(scope="module")
def targets() -> pe.BookTargets:
    return pe.book_targets(ROOT)


@pytest.fixture(scope="module")
def chapters() -> dict[str, dict]:
    return {p.stem: ex.load_notebook(p) for p in CHAPTERS}


@pytest.fixture(scope="module")
def plain(targets, chapters) -> dict[str, dict]:
    return {p.stem: pe.plain_notebook(chapters[p.stem], p, targets, ROOT) for p in CHAPTERS}


@pytest.fixture(scope="module")
def rendered(plain) -> dict[str, list[str]]:
    return {name: [render(_source(c)) for c in nb["cells"] if c["cell_type"] == "markdown"]
            for name, nb in plain.items()}


# ---------------------------------------------------------------------------------------------
# Checkers, and tests that they catch what they look for
# ---------------------------------------------------------------------------------------------

def myst_left(markdown: str, rendered_html: str) -> list[str]:
    """MyST markup still in a plain cell: in its Markdown, or as text in its rendering."""
    text = re.sub(r"<pre.*?</pre>|<code>.*?</code>", "", rendered_html, flags=re.S)  # code may show anything
    found = []
    found += re.findall(r"\{[A-Za-z][\w:+.-]*\}<code>", rendered_html)                 # {role}`...`
    found += re.findall(r"^[ \t>]*(?:`{3,}|~{3,}|:{3,})[ \t]*\{[^}]*\}.*$", markdown, re.M)  # ```{x} / :::{x}
    found += re.findall(r"language-\{[^\"]*", rendered_html)
    found += re.findall(r":::+", text)
    found += re.findall(r"(?:^|>|\n)[ \t]*\([^()\s<]+\)=[ \t]*(?=\n|<|$)", text)            # (label)=
    found += re.findall(r"(?:^|>|\n)[ \t]*:(?:class|label|name|[a-z-]+):", text)             # :class: ...
    return found


@pytest.mark.parametrize("markup", [
    "see {term}`softmax` here", ":::{note}\nx\n:::", "````{solution} ex-a\n:class: dropdown\nx\n````",
    "(mechanics-formula)=\n## The formula", "(label)=\nText", "> **Box**\n:class: tip\n> body",
    ":label: ex-a\nWrite it.", "a ::: fence",
])
def test_the_markup_check_catches_myst(markup):
    assert myst_left(markup, render(markup))


@pytest.mark.parametrize("plain_text", [
    "> **Verdict: holds**\n>\n> body with `{eval}` in code and a time of 3:15",
    "<details>\n<summary>Solution</summary>\n\n```python\nd = {'a': 1}  # (x)=\n```\n\n</details>",
    "[Fig. 1.1](https://b.io/book/01_mechanics.html#fig-a) and $\\{x\\}$",
])
def test_the_markup_check_passes_plain_markdown(plain_text):
    assert myst_left(plain_text, render(plain_text)) == []


def bad_links(rendered_html: str, targets: pe.BookTargets) -> list[str]:
    """Links that would not work on Colab or GitHub: relative ones, and book links to nowhere."""
    pages = targets.pages()
    bad = []
    rendered_html = re.sub(r'<a class="anchor-link".*?</a>', "", rendered_html)  # nbconvert's heading links
    for href in re.findall(r'href="([^"]*)"', rendered_html):
        href = html.unescape(href)
        if href.startswith(targets.base + "/"):
            page, _, anchor = href[len(targets.base) + 1:].partition("#")
            if anchor not in pages.get(page, ()):
                bad.append(href)
        elif not re.match(r"^(https?|mailto):", href):
            bad.append(href)
    return bad


def test_the_link_check_catches_relative_and_unknown_links(targets):
    ok = targets.terms["softmax"].url(targets.base)
    assert bad_links(render(f"[softmax]({ok})"), targets) == []
    relative = render("[x](#claim-formula) [y](03_low_rank.ipynb)")
    assert bad_links(relative, targets) == ["#claim-formula", "03_low_rank.ipynb"]
    assert bad_links(render(f"[z]({targets.base}/book/glossary.html#term-no-such-term)"), targets)
    assert bad_links(render(f"[z]({targets.base}/book/no_such_page.html)"), targets)


def number_mismatches(chapter: dict, plain_nb: dict, path: Path, targets: pe.BookTargets) -> list[str]:
    """Cells whose rendering differs from the chapter's with each role replaced by its stored value.

    The chapter is converted a second time with every ``{eval}`` role replaced by a sentinel;
    putting the stored ``user_expressions`` value (what JupyterLab and the book show) in place
    of each sentinel must give exactly the rendering of the plain edition.
    """
    sentinel_nb, values = copy.deepcopy(chapter), {}
    for i, cell in enumerate(sentinel_nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        stored = {e["expression"]: e["result"]["data"]["text/plain"]
                  for e in cell["metadata"].get("user_expressions", []) if e["result"]["status"] == "ok"}

        def token(m, i=i, stored=stored):
            key = f"ZQV{len(values)}VQZ"
            values[key] = stored.get(f'value_of("{m["spec"]}")', "<no stored value>")
            return key
        cell["source"] = ex.ROLE.sub(token, _source(cell))
    converted = pe.plain_notebook(sentinel_nb, path, targets, ROOT)
    problems = []
    for k, (real, sent) in enumerate(zip(plain_nb["cells"], converted["cells"])):
        if real["cell_type"] != "markdown" or "ZQV" not in _source(sent):
            if _source(real) != _source(sent):  # a cell without numbers converts the same both times
                problems.append(f"cell {k}")
            continue
        expected = render(_source(sent))
        for key in re.findall(r"ZQV\d+VQZ", expected):
            expected = expected.replace(key, html.escape(values[key], quote=False))
        if render(_source(real)) != expected:
            problems.append(f"cell {k}")
    return problems


def test_the_number_check_catches_a_wrong_number(targets, chapters, plain):
    name = CHAPTERS[0].stem
    nb = copy.deepcopy(plain[name])
    k = next(i for i, c in enumerate(chapters[name]["cells"]) if ex.roles(_source(c)))
    stored = chapters[name]["cells"][k]["metadata"]["user_expressions"][0]["result"]["data"]["text/plain"]
    text = _source(nb["cells"][k])
    assert stored in text
    nb["cells"][k]["source"] = text.replace(stored, stored + "9", 1)
    assert number_mismatches(chapters[name], nb, CHAPTERS[0], targets) == [f"cell {k}"]


# ---------------------------------------------------------------------------------------------
# Every chapter
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_myst_is_left(path, plain, rendered):
    cells = [c for c in plain[path.stem]["cells"] if c["cell_type"] == "markdown"]
    left = {k: myst_left(_source(c), h) for k, (c, h) in enumerate(zip(cells, rendered[path.stem]))}
    assert {k: v for k, v in left.items() if v} == {}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_link_resolves_in_the_book(path, rendered, targets):
    assert [b for h in rendered[path.stem] for b in bad_links(h, targets)] == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_inline_numbers_are_the_books(path, chapters, plain, targets):
    assert number_mismatches(chapters[path.stem], plain[path.stem], path, targets) == []
    # and the stored values are what the book's role renders from the glue outputs
    assert ex.expression_problems(path, chapters[path.stem]) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_code_cells_outputs_and_metadata_are_the_chapters(path, chapters, plain):
    ours, theirs = plain[path.stem], chapters[path.stem]
    assert [c for c in ours["cells"] if c["cell_type"] != "markdown"] == \
           [c for c in theirs["cells"] if c["cell_type"] != "markdown"]
    assert ours["metadata"] == theirs["metadata"]
    assert (ours["nbformat"], ours["nbformat_minor"]) == (theirs["nbformat"], theirs["nbformat_minor"])
    assert [c["cell_type"] for c in ours["cells"]] == [c["cell_type"] for c in theirs["cells"]] or \
           [c["cell_type"] for c in ours["cells"][1:]] == [c["cell_type"] for c in theirs["cells"]]
    assert not any("user_expressions" in c["metadata"] for c in ours["cells"])


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_top_says_this_is_the_plain_edition(path, plain, targets):
    first = next(c for c in plain[path.stem]["cells"] if c["cell_type"] == "markdown")
    page = targets.docs[f"book/{path.stem}"].url(targets.base)
    assert "Plain edition" in _source(first) and f"]({page})" in _source(first)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_code_does_not_depend_on_the_notebooks_folder(path, chapters):
    """Why the plain notebooks need no nbval run of their own: their code is the chapter's, byte for
    byte, and it reads nothing relative to the notebook's folder, so from _build/plain (or Colab's
    /content) it computes what it computes from book/. A relative path here breaks that argument."""
    relative = re.compile(r"""\.\./|["']book/|_static|__file__|os\.getcwd|Path\.cwd|Path\(["']\.|open\(["'][^/]""")
    hits = [(k, m.group(0)) for k, c in enumerate(chapters[path.stem]["cells"]) if c["cell_type"] == "code"
            for m in relative.finditer(_source(c))]
    assert hits == [], "a code cell depends on the notebook's folder: run nbval on _build/plain too"


def test_the_book_address_is_the_notebooks(chapters, targets):
    said = {m[1] for nb in chapters.values() for c in nb["cells"] if c["cell_type"] == "code"
            for m in re.finditer(r'^BOOK = "([^"]+)"', _source(c), re.M)}
    if not said:
        pytest.skip("no chapter names its BOOK address")
    assert said == {targets.base}


def test_every_solution_is_collapsed_and_every_verdict_is_a_quote(plain, chapters):
    for name, nb in plain.items():
        text = "\n".join(_source(c) for c in nb["cells"] if c["cell_type"] == "markdown")
        assert text.count("<summary>Solution to Exercise") == text.count("> **Exercise"), name
        # one quote per verdict box of the chapter (chapter 8 builds a model and tests no claim)
        boxes = sum(_source(c).count(":::{admonition} Verdict") for c in chapters[name]["cells"]
                    if c["cell_type"] == "markdown")
        assert text.count("\n> **Verdict:") + text.startswith("> **Verdict:") == boxes, name


def test_main_converts_every_chapter_by_default(monkeypatch):
    seen = {}
    monkeypatch.setattr(pe, "write_plain_edition", lambda notebooks, out, base, prune: seen.update(
        notebooks=[Path(p).resolve() for p in notebooks], out=out, prune=prune) or [])
    monkeypatch.chdir(ROOT)
    assert pe.main([]) == 0
    assert seen == {"notebooks": CHAPTERS, "out": "_build/plain", "prune": True}


def test_main_writes_the_plain_notebooks_and_prunes_stale_ones(tmp_path, chapters):
    out = tmp_path / "plain"
    out.mkdir()
    (out / "99_stale.ipynb").write_text("{}", encoding="utf-8")
    path = CHAPTERS[0]
    assert pe.main(["--out", str(out), str(path)]) == 0
    assert (out / "99_stale.ipynb").is_file()  # named notebooks: nothing else is touched
    assert pe.write_plain_edition([path], out, prune=True) == [out / path.name]
    assert sorted(p.name for p in out.glob("*.ipynb")) == [path.name]
    written = json.loads((out / path.name).read_text(encoding="utf-8"))
    assert [c for c in written["cells"] if c["cell_type"] == "code"] == \
           [c for c in chapters[path.stem]["cells"] if c["cell_type"] == "code"]
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert f"]({path.name})" in readme and "blob/notebooks/" + path.name in readme


def test_main_reports_what_it_cannot_convert(tmp_path, capsys):
    stray = tmp_path / "01_stray.ipynb"
    stray.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    assert pe.main(["--out", str(tmp_path / "out"), str(stray)]) == 1
    assert "no _config.yml above it" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# Each converter: a little MyST in, plain Markdown out
# ---------------------------------------------------------------------------------------------

B = "https://b.io"
SMALL = pe.BookTargets(
    B,
    labels={"claim-a": pe.Target("book/01_x.html", "claim-a", "Verdict: A holds"),
            "sec-s": pe.Target("book/02_y.html", "sec-s", "The formula"),
            "fig-f": pe.Target("book/01_x.html", "fig-f", "A caption")},
    terms={"mask": pe.Target("book/glossary.html", "term-mask", "mask"),
           "kl divergence": pe.Target("book/glossary.html", "term-KL-divergence", "KL divergence")},
    docs={"book/01_x": pe.Target("book/01_x.html", "", "One"), "book/02_y": pe.Target("book/02_y.html", "", "Two $x$")},
    citations={"v17": pe.Citation("v17", "[V, 2017](u2)", "V \\[[2017](u2)\\]", pe.Target("book/bib.html", "id2"))},
)
CHAPTER = pe.Chapter("book/01_x", values={"n": "500", "e:.0e": "1e-15"},
                     exercises={"ex-a": ("1.1", "Softmax")},
                     read_include=lambda path, opts: f"# {path} {dict(opts)}\ndef f():\n    pass\n",
                     texts={"w": "0.2513"})


def convert(markdown: str) -> str:
    return pe.plain_markdown(markdown, SMALL, CHAPTER, {"fig-f": "1.3"}, "https://raw.x/book")


@pytest.mark.parametrize("myst, plain_text", [
    # inline numbers, from the stored values; not inside code
    ('n = {eval}`value_of("n")`, err {eval}`value_of("e:.0e")`', "n = 500, err 1e-15"),
    ('`{eval}`value_of("n")`` and ```{eval}```', '`{eval}`value_of("n")`` and ```{eval}```'),
    ("{glue:text}`w:.2f`", "0.25"),
    # maths
    ("{math}`x^2`", "$x^2$"),
    # glossary, case-insensitive; Sphinx's anchors
    ("{term}`masks <mask>`, {term}`KL divergence`",
     f"[masks]({B}/book/glossary.html#term-mask), [KL divergence]({B}/book/glossary.html#term-KL-divergence)"),
    # cross-references, figure numbers, pages, their titles
    ("{ref}`the box <claim-a>` and {ref}`sec-s`",
     f"[the box]({B}/book/01_x.html#claim-a) and [The formula]({B}/book/02_y.html#sec-s)"),
    ("{ref}`Fig. 1.3 <fig-f>`, {numref}`fig-f`, {numref}`Figure %s <fig-f>`",
     f"[Fig. 1.3]({B}/book/01_x.html#fig-f), [Fig. 1.3]({B}/book/01_x.html#fig-f), [Figure 1.3]({B}/book/01_x.html#fig-f)"),
    ("{doc}`chapter 2 <02_y>`, {doc}`02_y`, {doc}`/book/01_x`",
     f"[chapter 2]({B}/book/02_y.html), [Two $x$]({B}/book/02_y.html), [One]({B}/book/01_x.html)"),
    ("[the section](sec-s), [box](#claim-a), [page](02_y.ipynb#sec-s), [web](https://a.org/x#y)",
     f"[the section]({B}/book/02_y.html#sec-s), [box]({B}/book/01_x.html#claim-a), "
     f"[page]({B}/book/02_y.html#sec-s), [web](https://a.org/x#y)"),
    ("{term}`[CLS] tokens <mask>`", f"[\\[CLS\\] tokens]({B}/book/glossary.html#term-mask)"),
    ("`[code](not-a-link)` and [box](claim-a)", f"`[code](not-a-link)` and [box]({B}/book/01_x.html#claim-a)"),
    # citations, author-year
    ("{cite:p}`v17` and {cite:t}`v17`", "\\[[V, 2017](u2)\\] and V \\[[2017](u2)\\]"),
    # targets
    ("(sec-s)=\n## The formula\ntext", "## The formula\ntext"),
    # boxes
    (":::{admonition} Verdict: A holds\n:class: tip\n:name: claim-a\n**Reading.** r\n\nIt holds.\n:::",
     "> **Verdict: A holds**\n>\n> **Reading.** r\n>\n> It holds."),
    ("::::{admonition} How this was tested\n:class: dropdown\nSeeds.\n:::{note}\nInner.\n:::\n::::",
     "<details>\n<summary>How this was tested</summary>\n\nSeeds.\n\n> **Note**\n>\n> Inner.\n\n</details>"),
    (":::{dropdown} Hint\nUse the maximum.\n:::",
     "<details>\n<summary>Hint</summary>\n\nUse the maximum.\n\n</details>"),
    (":::{warning}\nCareful.\n:::\nNext paragraph.", "> **Warning**\n>\n> Careful.\n\nNext paragraph."),
    # exercises and solutions, with the included code
    (":::{exercise} Softmax\n:label: ex-a\nWrite `f`.\n:::", "> **Exercise 1.1 (Softmax)**\n>\n> Write `f`."),
    ("````{solution} ex-a\n:class: dropdown\n```{literalinclude} ../pkg/s.py\n:pyobject: f\n```\n````\nAfter.",
     "<details>\n<summary>Solution to Exercise 1.1 (Softmax)</summary>\n\n```python\n"
     "# ../pkg/s.py {'pyobject': 'f'}\ndef f():\n    pass\n```\n\n</details>\n\nAfter."),
    # code and figures
    ("```{code-block} python\n:linenos:\nx = {term}`y`\n```", "```python\nx = {term}`y`\n```"),
    ("```python\n{term}`not a role in code`\n```", "```python\n{term}`not a role in code`\n```"),
    ("```{figure} _static/a.png\n:alt: A plot\n:name: fig-a\nThe caption.\n```",
     "![A plot](https://raw.x/book/_static/a.png)\n\n*The caption.*"),
    ("```{math}\n:label: eq-a\na = b\n```", "$$\na = b\n$$"),
])
def test_each_converter(myst, plain_text):
    assert convert(myst) == plain_text


@pytest.mark.parametrize("myst, message", [
    ('{eval}`value_of("nope")`', "no stored value"),
    ("{eval}`1 + 1`", "quote value_of"),
    ("{term}`no term`", "not in the glossary"),
    ("{ref}`x <no-label>`", "no label 'no-label'"),
    ("{ref}`fig-f`x", None),  # fine: a bare ref takes the caption
    ("{ref}`claim-a`", None),
    ("{numref}`sec-s`", "only figures are numbered"),
    ("{doc}`03_missing`", "no page"),
    ("{cite:p}`nobody2020`", "no bibliography entry"),
    ("{sub}`2`", "roles without a plain form"),
    (":::{margin}\nx\n:::", r"directive \{margin\} has no plain form"),
    (":::{note}\nnever closed", "never closed"),
    ("````{solution} ex-zz\nx\n````", "no exercise labelled 'ex-zz'"),
    ("[broken](no-such-label)", "no label or page"),
])
def test_what_has_no_plain_form_is_an_error(myst, message):
    if message is None:
        assert "](" in convert(myst)
    else:
        with pytest.raises(pe.PlainEditionError, match=message):
            convert(myst)


def test_a_line_after_a_box_is_not_swallowed_by_it():
    page = render(convert(":::{note}\nIn the box.\n:::\nOutside.\n````{solution} ex-a\n:class: dropdown\nx\n````\n**Out.**"))
    assert "<p>Outside.</p>" in page and "<strong>Out.</strong>" in page
    assert page.index("</blockquote>") < page.index("Outside.") < page.index("<details>")


def test_the_dropdown_title_is_html():
    out = convert(":::{admonition} The `x` of **y** < z\n:class: dropdown\nbody\n:::")
    assert "<summary>The <code>x</code> of <strong>y</strong> &lt; z</summary>" in out


def test_exercise_numbers_count_in_order_and_skip_unnumbered():
    cells = [":::{exercise} A\n:label: a\n:::", ":::{exercise} B\n:label: b\n:nonumber:\n:::",
             ":::{exercise}\n:label: c\n:::"]
    assert pe.exercise_numbers(cells, "3") == {"a": ("3.1", "A"), "b": ("", "B"), "c": ("3.2", "")}


def test_the_include_reader_is_sphinxs(tmp_path):
    pytest.importorskip("sphinx")
    src = tmp_path / "m.py"
    src.write_text("import x\n\n\n@decorated\ndef f(a):\n    return a\n\n\ndef g():\n    pass\n", encoding="utf-8")
    assert pe.sphinx_include_reader(src, {"pyobject": "f"}) == "@decorated\ndef f(a):\n    return a\n"
    assert pe.sphinx_include_reader(src, {"lines": "1"}) == "import x\n"


def test_anchors_are_made_as_docutils_and_sphinx_make_them(targets):
    nodes = pytest.importorskip("docutils.nodes")
    sphinx_nodes = pytest.importorskip("sphinx.util.nodes")
    for label in targets.labels:
        assert pe.docutils_id(label) == nodes.make_id(label), label
    for target in targets.terms.values():
        assert pe.sphinx_id("term-" + target.title) == sphinx_nodes._make_id("term-" + target.title)
    for text in ["Ünïcode ß term", "ł and ø", "9 lives", "a.b_c", "--x--"]:
        assert pe.docutils_id(text) == nodes.make_id(text), text
        assert pe.sphinx_id(text) == sphinx_nodes._make_id(text), text


def test_the_targets_cover_the_chapters(targets):
    assert len(targets.terms) > 50 and len(targets.citations) >= 20
    assert targets.labels["mechanics-formula"] == pe.Target("book/01_mechanics.html", "mechanics-formula", "The formula")
    assert targets.labels["claim-formula"].page == "book/01_mechanics_evidence.html"
    assert targets.terms["svd"].page == "book/glossary.html"
    assert targets.citations["vaswani2017"].target.page == "book/bibliography.html"
    assert targets.citations["vaswani2017"].p.startswith("[Vaswani *et al.*, 2017](")


# ---------------------------------------------------------------------------------------------
# The Colab button (book/_ext/colab_plain.py), on a page context like sphinx-book-theme's
# ---------------------------------------------------------------------------------------------

def _extension():
    spec = importlib.util.spec_from_file_location("colab_plain", ROOT / "book" / "_ext" / "colab_plain.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _launch_context(branch: str = "main", page: str = "book/01_mechanics") -> dict:
    repo = "attention-course/attention-is-learned-association"
    return {"header_buttons": [{"label": "launch-buttons", "buttons": [
        {"text": "Binder", "url": f"https://mybinder.org/v2/gh/{repo}/{branch}?urlpath=lab/tree/{page}.ipynb"},
        {"text": "Colab", "url": f"https://colab.research.google.com/github/{repo}/blob/{branch}/{page}.ipynb"}]}]}


def test_the_extension_points_colab_at_the_plain_edition():
    ext = _extension()
    repo_url = "https://github.com/attention-course/attention-is-learned-association"
    app = SimpleNamespace(config=SimpleNamespace(
        colab_plain_branch=pe.PLAIN_BRANCH, colab_plain_pages=r"\d\d_\w+",
        html_theme_options={"repository_url": repo_url,
                            "launch_buttons": {"colab_url": "https://colab.research.google.com"}}))
    context = _launch_context()
    ext.point_colab_to_plain(app, "book/01_mechanics", "page.html", context, None)
    binder, colab = context["header_buttons"][0]["buttons"]
    assert colab["url"] == pe.colab_address(repo_url, "01_mechanics.ipynb")
    assert binder == _launch_context()["header_buttons"][0]["buttons"][0]
    untouched = _launch_context(page="book/glossary")
    ext.point_colab_to_plain(app, "book/glossary", "page.html", untouched, None)
    assert untouched == _launch_context(page="book/glossary")


# ---------------------------------------------------------------------------------------------
# Against the built book (make book; make test-site)
# ---------------------------------------------------------------------------------------------

def _page(name: str) -> str:
    return (SITE / name).read_text(encoding="utf-8")


@pytest.mark.site
@needs_site
def test_every_anchor_the_plain_edition_uses_exists_in_the_built_book(targets):
    missing = []
    for page, anchors in targets.pages().items():
        if not (SITE / page).is_file():
            missing.append(page)
            continue
        ids = set(re.findall(r'\sid="([^"]+)"', _page(page)))
        missing += [f"{page}#{a}" for a in sorted(anchors - {""} - ids)]
    assert missing == []


@pytest.mark.site
@needs_site
def test_citations_land_on_their_entries(targets):
    page = _page("book/bibliography.html")
    for key, cite in targets.citations.items():
        m = re.search(rf'id="{cite.target.anchor}"[^>]*>(.*?)</(?:div|dd|li)>', page, re.S)
        assert m, key
        entry = re.sub(r"<[^>]+>", "", m[1])
        year = re.search(r"\d{4}", cite.p)[0]
        author = re.sub(r"[*\\\[\]]", "", cite.p).split(",")[0].split(" ")[0]
        assert year in entry and author in entry, (key, entry[:120])


@pytest.mark.site
@needs_site
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_citations_are_the_books_in_order_text_and_target(path, plain):
    """The built chapter's citation links, in order: the same anchors and the same words."""
    def words(s):
        return re.sub(r"[*\\]|<[^>]+>", "", html.unescape(s))
    built = [(a, words(t)) for a, t in re.findall(r'href="bibliography\.html#([^"]+)"[^>]*>(.*?)</a>',
                                                   _page(f"book/{path.stem}.html"), re.S)]
    text = "\n".join(_source(c) for c in plain[path.stem]["cells"] if c["cell_type"] == "markdown")
    link = r"\[((?:[^\[\]]|\\\[|\\\])*?)\]\([^)\s]*/book/bibliography\.html#([^)\s]+)\)"  # [text](.../bibliography.html#id)
    ours = [(a, words(t)) for t, a in re.findall(link, text)]
    assert ours == built


@pytest.mark.site
@needs_site
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_exercise_and_solution_titles_are_the_books(path, plain):
    page = re.sub(r"\\\((.*?)\\\)", r"\1", re.sub(r"<[^>]+>", "", _page(f"book/{path.stem}.html")))  # \(x\) -> x
    text = "\n".join(_source(c) for c in plain[path.stem]["cells"] if c["cell_type"] == "markdown")
    ours = re.findall(r"> \*\*(Exercise [\d.]+ \([^\n]*\))\*\*", text) + \
        re.findall(r"<summary>(Solution to Exercise [^<]+)</summary>", text)
    ours = [html.unescape(re.sub(r"\$([^$]*)\$", r"\1", t)) for t in ours]  # $x$ -> x
    assert [t for t in ours if t not in page] == []
    assert {re.match(r"(?:Solution to )?(Exercise [\d.]+)", t)[1] for t in ours} == \
        set(re.findall(r"Exercise \d+\.\d+", page))


@pytest.mark.site
@needs_site
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_colab_button_opens_the_plain_edition_and_binder_the_chapter(path):
    import yaml
    repo_url = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"]
    links = {html.unescape(h) for h in re.findall(r'href="([^"]+)"', _page(f"book/{path.stem}.html"))}
    colab = sorted(h for h in links if "colab.research.google.com" in h)
    binder = sorted(h for h in links if "mybinder.org" in h)
    assert colab == [pe.colab_address(repo_url, path.name)]
    assert len(binder) == 1 and binder[0].endswith(f"/main?urlpath=lab/tree/book/{path.name}")
