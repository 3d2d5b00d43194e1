"""The language server app: every feature wired onto one :class:`~server.lsp.CudaLanguageServer`, the
LSP lifecycle, and the stdio/TCP transport."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from pathlib import Path

from lsprotocol import types as lsp

from server import (
    benchmark,
    capture,
    compare,
    diagnostics,
    hints,
    hover,
    lenses,
    optimize,
    profile,
    results,
    rewrites,
    runs,
    speedup,
    symbols,
)
from server.lsp import GC_YOUNG_THRESHOLD, CudaLanguageServer, install_logging
from server.settings import SECTION
from server.stdio import GuardedStdin

log = logging.getLogger(__name__)


def create_server() -> CudaLanguageServer:
    """The server with every feature registered."""
    ls = CudaLanguageServer()
    _setup_lifecycle(ls)
    # the runs first: each run feature (optimize ... capture) adds its row to the runs' table
    views = (symbols, lenses, hints, hover, diagnostics, rewrites, results)
    for feature in (runs, *views, optimize, benchmark, compare, profile, capture, speedup):
        feature.setup(ls)
    return ls


def _setup_lifecycle(ls: CudaLanguageServer) -> None:
    @ls.feature(lsp.INITIALIZE)
    def initialize(ls: CudaLanguageServer, params: lsp.InitializeParams) -> None:
        ls.loop = asyncio.get_running_loop()
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get(SECTION), dict):
            options = options[SECTION]
        ls.initialization_options = options if isinstance(options, dict) else {}
        ls.apply_settings(None)
        root = ls.workspace.root_path
        ls.open_workspace(Path(root) if root else None)

    @ls.feature(lsp.INITIALIZED)
    async def initialized(ls: CudaLanguageServer, params: lsp.InitializedParams) -> None:
        caps = ls.client_capabilities.workspace
        dcc = caps.did_change_configuration if caps else None
        if dcc is not None and dcc.dynamic_registration:
            reg = lsp.Registration(id="cuda-agent-config", method=lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
            ls.client_register_capability(lsp.RegistrationParams(registrations=[reg]))
        ls.ready = True
        gc.collect()
        gc.freeze()  # what start-up built lives forever: keep it out of every later collection
        # Fewer, younger collections: a document version is thousands of small objects, and the
        # default thresholds turned typing into full collections (~10 ms each) inside requests.
        gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 20)
        await _pull_configuration(ls)
        for fn in ls.on_ready:
            fn()

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: CudaLanguageServer, params: lsp.DidChangeConfigurationParams
    ) -> None:
        pushed = params.settings.get(SECTION) if isinstance(params.settings, dict) else None
        if not await _pull_configuration(ls) and pushed is not None:
            ls.apply_settings(pushed)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CudaLanguageServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.open(params.text_document)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CudaLanguageServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.change(params)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: CudaLanguageServer, params: lsp.DidSaveTextDocumentParams) -> None:
        ls.saved(params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CudaLanguageServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.close(params.text_document.uri)

    @ls.feature(lsp.SHUTDOWN)
    async def shutdown(ls: CudaLanguageServer, params: None) -> None:
        ls.shut_down = True
        for fn in ls.on_shutdown:  # e.g. answer in-flight commands before pygls cancels what is left
            await fn()
        ls.stop()


async def _pull_configuration(ls: CudaLanguageServer) -> bool:
    """Ask the client for the ``cudaAgent`` section; False when it cannot answer."""
    caps = ls.client_capabilities.workspace
    if caps is None or not caps.configuration:
        return False
    try:
        result = await ls.workspace_configuration_async(
            lsp.ConfigurationParams(items=[lsp.ConfigurationItem(section=SECTION)])
        )
    except Exception as exc:
        log.warning("workspace/configuration failed: %s", exc)
        return False
    if result and result[0] is not None:
        ls.apply_settings(result[0])
    return True


def serve(tcp: str | None = None) -> None:
    """Run the server on stdio (or on ``HOST:PORT`` for debugging).

    On stdio, LSP gets a private duplicate of the stdout descriptor and descriptor 1 becomes
    stderr: a stray print here, or in any process the server spawns (compiler, GPU workers), can
    never corrupt the protocol stream.  Frames come through :class:`~server.stdio.GuardedStdin`;
    ``exit``, stdin closing and SIGTERM all end the server and its checker process within moments,
    whatever they are doing.
    """
    ls = create_server()
    install_logging(ls)
    try:
        if tcp:
            host, _, port = tcp.rpartition(":")
            ls.start_tcp(host or "127.0.0.1", int(port))
        else:
            lsp_out = os.fdopen(os.dup(1), "wb", buffering=0)
            os.dup2(2, 1)
            sys.stdout = sys.stderr
            stdin = GuardedStdin(sys.stdin.fileno())

            exited: list[int] = []

            @ls.feature(lsp.EXIT)
            def on_exit(ls: CudaLanguageServer, params: None) -> None:
                exited.append(0 if ls.shut_down else 1)  # the LSP spec: 1 without `shutdown` first
                ls.stop()
                stdin.close()

            def on_sigterm(signum: int, frame: object) -> None:
                ls.stop()
                stdin.close()
                raise SystemExit(128 + signum)

            signal.signal(signal.SIGTERM, on_sigterm)
            ls.start_io(stdin, lsp_out)  # type: ignore[arg-type]
            if exited and exited[0]:
                raise SystemExit(exited[0])
    finally:
        ls.stop()
