"""The Colab launch button opens the chapter's plain edition; Binder keeps the MyST notebook.

Colab renders plain Markdown only, so a chapter opened there from ``main`` shows its MyST markup
as written. CI publishes the plain edition of every chapter
(``attention_course/course/plain_edition.py``) to the ``notebooks`` branch, one file per
chapter at its root (``01_mechanics.ipynb``).

sphinx-book-theme builds every launch link from the same ``repository.url``, ``branch`` and
``path_to_book`` (``header_buttons/launch.py``: Colab gets
``{colab_url}/github/{org}/{repo}/blob/{branch}/{path}``, Binder
``{binderhub_url}/v2/gh/{org}/{repo}/{branch}?urlpath=...``), so no setting moves Colab to
another branch without moving Binder too. This extension runs after the theme's
``html-page-context`` handler (priority 501) and rewrites only the Colab button of each chapter
page. ``colab_plain_branch`` (default ``notebooks``) and ``colab_plain_pages`` (a regular
expression for the page names that have a plain edition, default ``NN_name`` and ``ledger``) can be set in
``_config.yml`` under ``sphinx.config``.
"""

from __future__ import annotations

import re
from typing import Any, Optional


def plain_colab_url(colab_url: str, repository_url: str, pagename: str, branch: str) -> Optional[str]:
    """The Colab address of a page's plain edition, or None when the repository is not on GitHub.

    >>> plain_colab_url("https://colab.research.google.com/", "https://github.com/org/repo",
    ...                 "book/01_mechanics", "notebooks")
    'https://colab.research.google.com/github/org/repo/blob/notebooks/01_mechanics.ipynb'
    """
    m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", repository_url or "")
    if m is None or not colab_url:
        return None
    name = pagename.rsplit("/", 1)[-1]
    return f"{colab_url.rstrip('/')}/github/{m[1]}/{m[2]}/blob/{branch}/{name}.ipynb"


def point_colab_to_plain(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """``html-page-context`` handler: the Colab launch button of a chapter -> its plain edition."""
    if not re.fullmatch(app.config.colab_plain_pages, pagename.rsplit("/", 1)[-1]):
        return
    theme = app.config.html_theme_options or {}
    url = plain_colab_url((theme.get("launch_buttons") or {}).get("colab_url", ""),
                          theme.get("repository_url", ""), pagename, app.config.colab_plain_branch)
    if url is None:
        return
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("text") == "Colab":
                button["url"] = url
                button["tooltip"] = "Launch the plain edition on Colab"


def setup(app):
    app.add_config_value("colab_plain_branch", "notebooks", "html")
    app.add_config_value("colab_plain_pages", r"\d\d_\w+|ledger", "html")
    # after sphinx-book-theme's add_launch_buttons (priority 501), before the page is rendered
    app.connect("html-page-context", point_colab_to_plain, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
