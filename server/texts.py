"""Wording shared by the CLI and the editor's views, so one result reads the same everywhere."""

from __future__ import annotations

import re

from sandbox.timing import spread_text

__all__ = ["SIMULATED", "markdown_text", "plural", "spread_text"]

# what every number from the simulated GPU (sandbox.testing, ``executor.kind test``) says with it
SIMULATED = "simulated GPU, not measured"

_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~])")


def plural(n: int, word: str) -> str:
    """``1 candidate``, ``2 candidates``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def markdown_text(text: str) -> str:
    """``text`` shown literally in Markdown (``__restrict__`` stays ``__restrict__``, not bold)."""
    return _MARKDOWN.sub(r"\\\1", text)
