"""The chapters' inline numbers, ``{eval}`value_of("name:fmt")```, rendered from stored outputs.

The prose quotes each measured number with an ``{eval}`` role, because that is the role
JupyterLab's MyST renderer (``jupyterlab-myst``) can fill in from the notebook itself; see
``attention_course/course/book.py``. myst-nb's own ``{eval}`` asks a running kernel, and the
book does not execute notebooks (they are committed with their outputs). So this extension
replaces ``{eval}`` with a role that accepts only the course's form, ``value_of("name:fmt")``,
and renders it exactly as myst-nb's ``{glue:text}`name:fmt``` does: from the value the
notebook glued when it was executed. Anything else is a build warning (``make book`` runs
with ``-W``), as is a name the notebook never glued.
"""

from __future__ import annotations

import re

from myst_nb.ext.glue.roles import PasteTextRole
from myst_nb.ext.glue.utils import glue_warning

BODY = re.compile(r'value_of\("(?P<spec>[A-Za-z_]\w*(?::[^"`]*)?)"\)')


class GluedValueRole(PasteTextRole):
    """``{eval}`value_of("name:fmt")``` -> the text ``{glue:text}`name:fmt``` would give."""

    def run(self):
        m = BODY.fullmatch(self.text.strip())
        if m is None:
            return [], [glue_warning(f"the book's {{eval}} role takes value_of(\"name:fmt\"), not {self.text!r}",
                                     self.document, self.line)]
        self.text = m["spec"]
        return super().run()


def setup(app):
    # Local extensions load after myst_nb, so this replaces its kernel-backed {eval} role.
    app.add_role("eval", GluedValueRole(), override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
