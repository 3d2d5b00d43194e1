"""The one proposer factory: the built-in engine's search or an LLM's, as the CLI and the editor ask.

Both the command line (``--proposer``, ``--llm-url``...) and the language server (the ``proposer``
settings) describe the proposer they want as a kind and, for ``llm``, the client's
:class:`~agent.llm.LLMSettings`, and make it here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # nothing heavy at import: the CLI reads PROPOSER_KINDS for its options
    from agent.llm import LLMSettings
    from agent.proposer import Proposer
    from sandbox.compile_pool import CompilePool

ProposerKind = Literal["builtin", "llm"]
PROPOSER_KINDS: tuple[ProposerKind, ...] = ("builtin", "llm")


def make_proposer(
    kind: ProposerKind, llm: LLMSettings | None, compiler: Callable[[], CompilePool]
) -> Proposer:
    """The proposer ``kind`` names; an LLM's (``llm``: its client's settings) compiles its drafts
    in ``compiler()``.  Close it after the run."""
    if kind == "llm":
        from agent.llm import LLMProposer, LLMSettings

        return LLMProposer(llm or LLMSettings.from_env(), compiler=compiler())
    from agent.builtin import BuiltinProposer

    return BuiltinProposer()
