"""One folder per chapter, in reading order; a chapter imports from earlier chapters only.

``mechanics`` (1), ``kernels`` (2), ``lowrank`` (3), ``heads`` (4), ``graphs`` (5), ``scaling`` (6),
``insight`` (7), ``encoder`` (8), ``decoder`` (9), ``gpt`` (10). Each folder holds the chapter's concept
modules and long runs (each an ``Experiment`` of :mod:`attention_course.models.experiments`, stored as
JSON), its static ``figures``, its interactive ``sliders`` and its ``exercises``. Importing this
package imports every chapter, and so registers every exercise and every experiment (the command
line's long runs).
"""

from . import mechanics, kernels, lowrank, heads, graphs, scaling, insight, encoder, decoder, gpt  # noqa: F401  (reading order)

__all__ = ["mechanics", "kernels", "lowrank", "heads", "graphs", "scaling", "insight", "encoder", "decoder", "gpt"]
