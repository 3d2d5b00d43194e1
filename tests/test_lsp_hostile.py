"""Issue 28's language-server items, over the real server's stdio: a notification sent with an id
is answered (an error), not left waiting; a command without arguments is InvalidParams (-32602);
``exit`` without ``shutdown`` ends the server with status 1, as the LSP specification says."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_server_lsp import RawConnection, raw_server

from server import protocol as wire


@pytest.fixture
async def server() -> AsyncIterator[tuple[asyncio.subprocess.Process, RawConnection]]:
    async with raw_server() as started:
        yield started


async def test_a_notification_sent_with_an_id_is_answered(
    server: tuple[asyncio.subprocess.Process, RawConnection], tmp_path: Path
) -> None:
    _, conn = server
    item = {"uri": (tmp_path / "k.cu").as_uri(), "languageId": "cuda", "version": 1, "text": ""}
    for method, params in (
        ("textDocument/didOpen", {"textDocument": item}),
        ("workspace/didChangeConfiguration", {"settings": {}}),
        ("$/cancelRequest", {"id": 1}),
    ):
        reply = await asyncio.wait_for(conn.request(method, params), 10)
        assert reply["error"]["code"] == -32600 and "notification" in reply["error"]["message"]
    assert (await asyncio.wait_for(conn.request("shutdown", None), 10))["result"] is None


@pytest.mark.parametrize("arguments", [None, []], ids=["no arguments", "empty arguments"])
async def test_a_command_without_its_arguments_is_invalid_params(
    server: tuple[asyncio.subprocess.Process, RawConnection], arguments: list[object] | None
) -> None:
    _, conn = server
    params: dict[str, object] = {"command": wire.OPTIMIZE_COMMAND}
    if arguments is not None:
        params["arguments"] = arguments
    reply = await asyncio.wait_for(conn.request("workspace/executeCommand", params), 10)
    assert reply["error"]["code"] == -32602, json.dumps(reply)


async def test_exit_without_shutdown_exits_with_status_1(
    server: tuple[asyncio.subprocess.Process, RawConnection],
) -> None:
    proc, conn = server
    conn.send(b'{"jsonrpc": "2.0", "method": "exit"}')
    assert await asyncio.wait_for(proc.wait(), 10) == 1


@pytest.mark.parametrize("bad_id", [{"a": 1}, [1, 2], True], ids=["object", "list", "boolean"])
async def test_an_invalid_request_id_is_answered_with_a_null_id(
    server: tuple[asyncio.subprocess.Process, RawConnection], bad_id: object
) -> None:
    proc, conn = server
    conn.send(
        json.dumps({"jsonrpc": "2.0", "id": bad_id, "method": "textDocument/hover", "params": {}}).encode()
    )

    async def error_reply() -> dict[str, object]:
        assert proc.stdout is not None
        while True:
            length = 0
            while (line := await proc.stdout.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            msg = json.loads(await proc.stdout.readexactly(length))
            if "error" in msg:
                return msg  # type: ignore[no-any-return]

    reply = await asyncio.wait_for(error_reply(), 10)
    assert "id" in reply and reply["id"] is None and reply["error"]["code"] == -32600  # type: ignore[index]
    assert (await asyncio.wait_for(conn.request("shutdown", None), 10))["result"] is None
