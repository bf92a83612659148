"""Yours once it passes, the package's until then: chapter 8's rule, used for the decoder's parts."""

from __future__ import annotations

from ..encoder.fallback import describe_parts, solved, yours_or_ours

__all__ = ["solved", "yours_or_ours", "describe_parts"]
