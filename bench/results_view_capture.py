"""The results view's payload after an Optimize run, recorded the way the editor gets it (issue 26).

    python bench/results_view_capture.py --out DIR KERNEL.cu [--kernel NAME] [--budget 20s]
                                         [--deadline-s 170] [--simulate]

Starts the language server as the VS Code extension does (``python -m server serve`` on stdio),
as an LSP client (pygls): copies KERNEL.cu into a fresh workspace folder, opens it, asks for its
code lenses and runs the kernel's "Optimize" lens command (``cudaAgent.optimize`` with the lens's
own arguments), waits for ``cudaAgent/runFinished``, then sends the request the extension's results
view sends (``cudaAgent/results`` with ``{}``) and writes its result, verbatim as it came over the
wire, to DIR/results_view.json.  What the server says meanwhile (``$/progress``,
``cudaAgent/status``, ``window/logMessage``, ``cudaAgent/runFinished``) goes to DIR/progress.jsonl
as one JSON line per message, as it arrives; the last line of stdout is a JSON summary.

``--budget``: the optimize budget (``20s``, ``40c``, ``20s,40c``), given to the server as the
editor's ``cudaAgent.budget`` settings.  ``--simulate``: the simulated GPU (the ``test`` executor
setting) instead of the local GPU.  Everything ends within ``--deadline-s``: past the budget's time
the run is cancelled (``cudaAgent.cancel``), and the server is shut down, or killed.

Render the payload with the extension's own results view (extension/e2e/render_results.mjs)::

    (cd extension && npx tsc -p . && node e2e/render_results.mjs DIR/results_view.json OUT.png)
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient
from pygls.protocol import LanguageServerProtocol

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from agent.proposer import BudgetError, parse_budget  # noqa: E402
from server import protocol as wire  # noqa: E402

LOGGED = (
    "$/progress",
    wire.STATUS_NOTIFICATION,
    wire.RUN_FINISHED_NOTIFICATION,
    lsp.WINDOW_LOG_MESSAGE,
    lsp.WINDOW_SHOW_MESSAGE,
)


class CaptureFailed(Exception):
    """The run could not be captured (no Optimize lens, the run did not start); one line."""


class Recorder:
    """DIR's files: the progress lines as they come, and the raw messages the capture keeps."""

    def __init__(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.start = time.monotonic()
        self.lines = (out / "progress.jsonl").open("w", encoding="utf-8")
        self.responses: dict[Any, dict[str, Any]] = {}  # raw JSON-RPC responses by id, in order
        self.finished: dict[str, dict[str, Any]] = {}  # raw runFinished params by run id
        self.changed = asyncio.Event()

    def line(self, record: dict[str, Any]) -> None:
        text = json.dumps({"t_s": round(time.monotonic() - self.start, 3), **record})
        self.lines.write(text + "\n")
        self.lines.flush()
        print(text[:300], flush=True)

    def message(self, data: dict[str, Any]) -> None:
        """One raw message from the server, copied before pygls structures it (in place)."""
        data = copy.deepcopy(data)
        method = data.get("method")
        if method in LOGGED:
            self.line({"method": method, "params": data.get("params")})
            if method == wire.RUN_FINISHED_NOTIFICATION and isinstance(data.get("params"), dict):
                self.finished[str(data["params"].get("runId"))] = data["params"]
        elif method is None and "id" in data:
            self.responses[data["id"]] = data
        self.changed.set()


def recording_protocol(recorder: Recorder) -> type[LanguageServerProtocol]:
    class Recording(LanguageServerProtocol):
        def structure_message(self, data: dict[str, Any]) -> Any:
            if isinstance(data, dict):
                recorder.message(data)
            return super().structure_message(data)

    return Recording


def answer_server_requests(client: LanguageClient) -> None:
    """What the server asks of an editor: no edits are applied here, refreshes are ignored."""

    @client.feature(lsp.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
        return lsp.ApplyWorkspaceEditResult(applied=False, failure_reason="the capture applies no edits")

    @client.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def progress_create(params: lsp.WorkDoneProgressCreateParams) -> None:
        return None

    for method in (
        lsp.WORKSPACE_CODE_LENS_REFRESH,
        lsp.WORKSPACE_INLAY_HINT_REFRESH,
        lsp.CLIENT_REGISTER_CAPABILITY,
    ):
        client.feature(method)(lambda params: None)
    for method in (*LOGGED, lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS):  # recorded raw, see Recorder
        client.feature(method)(lambda params: None)


async def wait_for(recorder: Recorder, ready: Any, until: float) -> bool:
    """Wait (on the recorder's messages, no polling) until ``ready()`` or the monotonic ``until``."""
    while not ready():
        left = until - time.monotonic()
        if left <= 0:
            return False
        recorder.changed.clear()
        try:
            await asyncio.wait_for(recorder.changed.wait(), left)
        except TimeoutError:
            return bool(ready())
    return True


async def capture(args: argparse.Namespace, recorder: Recorder, workspace: Path) -> dict[str, Any]:
    end = time.monotonic() + args.deadline_s
    budget = parse_budget(args.budget)
    settings: dict[str, Any] = {
        "budget": {
            k: v for k, v in (("seconds", budget.wall_s), ("candidates", budget.candidates)) if v is not None
        }
    }
    if args.simulate:
        settings["executor"] = {"kind": "test"}
    source = workspace / args.kernel_file.name
    shutil.copy(args.kernel_file, source)
    uri = source.as_uri()
    summary: dict[str, Any] = {
        "kernel_file": str(args.kernel_file),
        "budget": args.budget,
        "settings": settings,
    }

    client = LanguageClient("results-view-capture", "1", protocol_cls=recording_protocol(recorder))
    answer_server_requests(client)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    await client.start_io(sys.executable, "-m", "server", "serve", cwd=str(ROOT), env=env)
    try:
        caps = lsp.ClientCapabilities(
            window=lsp.WindowClientCapabilities(work_done_progress=True),
            workspace=lsp.WorkspaceClientCapabilities(
                apply_edit=True,
                code_lens=lsp.CodeLensWorkspaceClientCapabilities(refresh_support=True),
            ),
        )
        await asyncio.wait_for(
            client.initialize_async(
                lsp.InitializeParams(
                    capabilities=caps,
                    root_uri=workspace.as_uri(),
                    workspace_folders=[lsp.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)],
                    initialization_options=settings,
                )
            ),
            max(1.0, end - time.monotonic()),
        )
        client.initialized(lsp.InitializedParams())
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=source.read_text())
            )
        )
        lenses = await client.text_document_code_lens_async(
            lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))
        )
        commands = [
            lens.command
            for lens in lenses or []
            if lens.command is not None and lens.command.command == wire.OPTIMIZE_COMMAND
        ]
        chosen = [
            c
            for c in commands
            if args.kernel is None
            or any(isinstance(a, dict) and a.get("kernel") == args.kernel for a in c.arguments or [])
        ]
        if not chosen:
            raise CaptureFailed(f"no Optimize lens for {args.kernel or 'a kernel'} in {args.kernel_file}")
        command = chosen[0]
        recorder.line({"lens": command.title, "command": command.command, "arguments": command.arguments})
        started = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command.command, list(command.arguments or []))
        )
        # the command's RunStarted, raw (pygls does not structure a command's result)
        started = started if isinstance(started, dict) else {}
        run_id = str(started.get("runId", ""))
        summary["started"] = started
        if started.get("status") != wire.StartStatus.STARTED.value:
            raise CaptureFailed(f"the run did not start: {started.get('message', started)}")
        # the budget's time, then what is left of the deadline but 20 s for cancelling and results
        finish_by = end - 20.0
        if not await wait_for(recorder, lambda: run_id in recorder.finished, finish_by):
            recorder.line({"cancel": run_id, "why": "deadline"})
            await client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(wire.CANCEL_COMMAND, [{"runId": run_id}])
            )
            await wait_for(recorder, lambda: run_id in recorder.finished, end - 8.0)
        done = recorder.finished.get(run_id) or {}
        summary["finished"] = {k: v for k, v in done.items() if k != "attempts"}  # those are in the payload
        # the only request in flight: the last response recorded is its answer
        await asyncio.wait_for(
            client.protocol.send_request_async(wire.RESULTS_REQUEST, {}),
            max(1.0, end - 5.0 - time.monotonic()),
        )
        payload = list(recorder.responses.values())[-1].get("result")
        (recorder.out / "results_view.json").write_text(
            json.dumps(payload, indent=1) + "\n", encoding="utf-8"
        )
        summary["results_view"] = str(recorder.out / "results_view.json")
        summary["kernels"] = [r.get("kernel") for r in (payload or {}).get("results", [])]
        return summary
    finally:
        await shut_down(client, deadline=end)


async def shut_down(client: LanguageClient, deadline: float) -> None:
    """shutdown, exit, then wait for the process; killed when it is not gone by the deadline."""
    process = getattr(client, "_server", None)
    try:
        await asyncio.wait_for(client.shutdown_async(None), max(0.5, min(5.0, deadline - time.monotonic())))
        client.exit(None)
        await asyncio.wait_for(client.stop(), max(0.5, min(5.0, deadline - time.monotonic())))
    except (TimeoutError, RuntimeError, ConnectionError) as exc:
        print(json.dumps({"shutdown": f"{type(exc).__name__}: {exc}; killing the server"}), flush=True)
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel_file", type=Path, metavar="KERNEL.cu")
    ap.add_argument("--out", type=Path, required=True, help="folder for results_view.json and progress.jsonl")
    ap.add_argument("--kernel", help="the kernel to optimize (default: the first Optimize lens)")
    ap.add_argument("--budget", default="20s", help="optimize budget, as the CLI's --budget (default 20s)")
    ap.add_argument("--deadline-s", type=float, default=170.0, help="stop everything by then (default 170)")
    ap.add_argument("--simulate", action="store_true", help="the simulated GPU (executor kind test)")
    args = ap.parse_args()
    if not args.kernel_file.is_file():
        ap.error(f"{args.kernel_file}: no such file")
    try:
        parse_budget(args.budget)
    except BudgetError as exc:
        ap.error(f"--budget {args.budget}: {exc}")
    recorder = Recorder(args.out)
    with tempfile.TemporaryDirectory(prefix="results-view-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        try:
            summary = asyncio.run(asyncio.wait_for(capture(args, recorder, workspace), args.deadline_s + 5))
            ok = True
        except (TimeoutError, CaptureFailed, OSError) as exc:
            summary, ok = {"error": f"{type(exc).__name__}: {exc}"}, False
    print(json.dumps({"ok": ok, **summary}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
