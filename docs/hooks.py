"""MkDocs hooks (``mkdocs.yml``: ``hooks``): the reference pages generated from the code at every
build (``docs/gen_reference.py``), ARCHITECTURE.md as the internals' first page, a module's
docstring where a page says ``<!-- docstring: PATH -->`` (the passes' pages), and a check of every
relative link: a page or file of the site, or a file or folder of the repository (``../bench/results/``);
anything else is a warning, which ``mkdocs build --strict`` turns into a failed build.  MkDocs' own
check of a missing target is off (``mkdocs.yml``: ``validation``), as it takes every file outside
docs/ for missing; it still checks the anchors."""

from __future__ import annotations

import importlib.util
import logging
import posixpath
import re
from pathlib import Path
from urllib.parse import urlsplit

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.cuda_agent")
DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _generator():  # docs/ is not a package: load gen_reference.py by path
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rebased(markdown: str, source: Path, page: str) -> str:
    """``markdown`` written at ``source`` (a file of the repository) with its relative links made
    relative to ``page`` (a path under docs/)."""

    def move(match: re.Match[str]) -> str:
        target = match.group(1)
        scheme, netloc, path, _, anchor = urlsplit(target)
        if scheme or netloc or not path or path.startswith("/"):
            return match.group(0)
        where = (source.parent / path).resolve()
        moved = posixpath.relpath(where.as_posix(), (DOCS / page).parent.as_posix())
        return match.group(0).replace(target, moved + (f"#{anchor}" if anchor else ""), 1)

    return _LINK.sub(move, markdown)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, text in _generator().pages().items():
        files.append(File.generated(config, path, content=text))
    # ARCHITECTURE.md stays at the repository's root, where readers of the code look for it
    architecture = ROOT / "ARCHITECTURE.md"
    page = "internals/index.md"
    files.append(
        File.generated(config, page, content=rebased(architecture.read_text("utf-8"), architecture, page))
    )
    return files


def repo_links(markdown: str) -> list[str]:
    """The link targets of ``markdown`` outside code (fenced blocks and inline spans)."""
    text = _CODE.sub("", _FENCE.sub("", markdown))
    return [m.group(1) for m in _LINK.finditer(text)]


_DOCSTRING = re.compile(r"^<!-- docstring: (\S+) -->$", re.M)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    # `<!-- docstring: engine/stencil.py -->`: that module's docstring, as the code says it now
    markdown = _DOCSTRING.sub(lambda m: _generator().docstring_markdown(m.group(1)), markdown)
    for target in repo_links(markdown):
        scheme, netloc, path, _, _ = urlsplit(target)
        if scheme or netloc or not path or path.startswith("/"):
            continue
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page.file.src_uri), path))
        if resolved.startswith("../"):
            if not (DOCS / resolved).exists():
                log.warning(
                    "Doc file '%s' links to '%s', not a file of the repository", page.file.src_uri, target
                )
        elif files.get_file_from_path(resolved) is None:
            log.warning(
                "Doc file '%s' links to '%s', not a page or file of the site", page.file.src_uri, target
            )
    return markdown
