"""The app's wiring: features find each other's state by type, lifecycle hooks, and the JSON-RPC
error code of a request that fails with one of our exceptions (from the exception tree)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from agent.target import TargetError
from sandbox.executor import NoGpuError
from server.app import create_server
from server.compare import Comparisons
from server.diagnostics import Checker
from server.runs import Runs


def test_every_feature_with_state_registers_it_on_the_server() -> None:
    ls = create_server()
    try:
        for kind in (Runs, Checker, Comparisons):
            assert isinstance(ls.part(kind), kind)
            assert ls.need(kind) is ls.part(kind)
        assert ls.on_ready and ls.on_shutdown  # the runs' status line, cancel-all on shutdown
    finally:
        ls.stop()


def test_a_part_no_feature_registered_is_none_or_a_clear_error() -> None:
    ls = create_server()
    try:
        assert ls.part(int) is None
        with pytest.raises(LookupError, match="no int"):
            ls.need(int)
    finally:
        ls.stop()


def _answer(error: BaseException) -> dict[str, Any]:
    """What the server's protocol sends for a request whose handler raised ``error``."""
    ls = create_server()
    sent: list[dict[str, Any]] = []
    ls.protocol._send_response = lambda msg_id, result=None, error=None: sent.append(  # type: ignore[method-assign]
        {"id": msg_id, "result": result, "error": error}
    )
    future: Future[Any] = Future()
    future.set_exception(error)
    try:
        ls.protocol._send_handler_result(future, msg_id=7)
    finally:
        ls.stop()
    assert len(sent) == 1 and sent[0]["id"] == 7
    return sent[0]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (TargetError("no kernel 'vadd' in a.cu"), -32602),  # an InputError: invalid params
        (NoGpuError("no usable GPU"), -32603),  # Unavailable: internal error
    ],
)
def test_our_errors_answer_with_the_code_of_their_branch_and_their_message(
    error: Exception, code: int
) -> None:
    answer = _answer(error)
    assert answer["error"].code == code == type(error).rpc_code
    assert answer["error"].message == str(error)


def test_other_errors_answer_as_pygls_does() -> None:
    answer = _answer(KeyError("x"))
    assert answer["error"].code == -32603
    assert "KeyError" in answer["error"].message or "x" in answer["error"].message


def test_the_run_table_has_one_row_per_run_kind_each_with_its_command() -> None:
    """Every kind of run starts through the one table (server.runs.start_run), from its own command."""
    from server import protocol as wire
    from server.protocol import RunKind

    ls = create_server()
    try:
        table = ls.need(Runs).table
        assert set(table) == set(RunKind)
        commands = {row.command for row in table.values()}
        assert len(commands) == len(RunKind)
        assert commands <= set(ls.protocol.fm.commands)
        assert table[RunKind.COMPARE].params is wire.CompareRef
        assert table[RunKind.CAPTURE].params is wire.CaptureRef
    finally:
        ls.stop()
