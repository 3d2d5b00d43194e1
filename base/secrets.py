"""Where a secret lives (``env:NAME`` or ``file:PATH``), never the secret itself.

Settings (a worker's token, an LLM endpoint's API key) name the place; the value is read when it is
needed and never stored, logged or sent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Secret:
    """Where a secret lives: ``env:NAME`` or ``file:PATH``; empty for none."""

    source: str = ""

    def resolve(self) -> str:
        """The secret's value ("" when unset or unreadable)."""
        kind, _, where = self.source.partition(":")
        if kind == "env":
            return os.environ.get(where, "")
        if kind == "file":
            try:
                return Path(where).expanduser().read_text(encoding="utf-8").strip().splitlines()[0]
            except (OSError, IndexError):
                return ""
        return ""
