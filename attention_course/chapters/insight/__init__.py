"""Chapter 7, The insight: everything the chapter computes, draws and checks.

One module per concept (``four_lenses``, ``position_content``, ``figures``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import insight as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .four_lenses import HeadLenses, head_lenses
from .position_content import (
    CATEGORIES,
    ContentPositionScores,
    content_position_scores,
    word_maps,
    follow_scores,
    best_offset_share,
    classify_heads,
    count_categories,
    rule_maps,
    rule_scores,
)
from .figures import KIND_COLORS, plot_head_lenses, plot_head_kinds, plot_verdicts

__all__ = [
    "HeadLenses",
    "head_lenses",
    "CATEGORIES",
    "ContentPositionScores",
    "content_position_scores",
    "word_maps",
    "follow_scores",
    "best_offset_share",
    "classify_heads",
    "count_categories",
    "rule_maps",
    "rule_scores",
    "KIND_COLORS",
    "plot_head_lenses",
    "plot_head_kinds",
    "plot_verdicts",
]
