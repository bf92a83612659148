"""The data an interactive figure's page carries, read back from its HTML (for every chapter's slider tests)."""

from __future__ import annotations

import json
import re


def page_spec(fig, html: str | None = None) -> dict:
    """The JSON in the page's ``<script id="{fig.name}-data">`` (of ``html``, or of ``fig.to_html()``): its frames."""
    html = fig.to_html() if html is None else html
    m = re.search(rf'<script type="application/json" id="{fig.name}-data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))
