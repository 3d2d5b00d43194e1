"""The editor <-> server contract (server/protocol.py): one casing on the wire, the TypeScript side
generated from it (server/protocol_ts.py) and checked here, strict inputs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cattrs
import pytest
from lsprotocol import types as lsp
from pygls.protocol import default_converter

from agent.loop import RunOutcome
from sandbox.contract import Status
from server import protocol as wire
from server import protocol_ts
from server.app import create_server
from server.texts import SIMULATED

GENERATED = Path(__file__).parent.parent / "extension" / "src" / "protocol.generated.ts"


def converter_of_the_server() -> cattrs.Converter:
    """pygls' converter (lsprotocol's hooks) with the server's records and strict inputs, as
    ``server.lsp`` sets it up."""
    converter = default_converter()
    wire.register(converter)
    return converter


def test_the_checked_in_typescript_is_current() -> None:
    assert GENERATED.read_text(encoding="utf-8") == protocol_ts.typescript(), (
        "extension/src/protocol.generated.ts is out of date: run `python -m server.protocol_ts`"
    )


def test_the_generator_follows_the_python_declarations() -> None:
    ts = protocol_ts.typescript()
    assert "export interface RunFinished {\n  runId: string;\n  kind: RunKind;" in ts
    assert "  rewriteReady: boolean;" in ts and "  speedupLow: number;" in ts
    assert "export interface KernelRef {\n  uri: string;\n  kernel?: string;\n}" in ts
    assert "  running: RunningStatus | null;" in ts and "  optimize?: OptimizeRecord;" in ts
    assert "  outcome: RunOutcome;" in ts and "  history: AttemptRecord[];" in ts
    assert "  status: Status;" in ts and "  stalls: Stall[];" in ts
    assert (
        'export type RunKind = "optimize" | "benchmark" | "compare" | "profile" | "capture" | "speedup";'
        in ts
    )
    assert "export interface CompareRef {\n  uri: string;\n  with: string;\n  kernel?: string;\n}" in ts
    assert f'export const RUN_FINISHED_NOTIFICATION = "{wire.RUN_FINISHED_NOTIFICATION}";' in ts


def test_camel_case_on_the_wire_both_ways() -> None:
    converter = converter_of_the_server()
    status = wire.ServerStatus("test", "", wire.RunningStatus("r1", wire.RunKind.OPTIMIZE, "vadd", 42))
    assert converter.unstructure(status) == {
        "executor": "test",
        "device": "",
        "running": {"runId": "r1", "kind": "optimize", "kernel": "vadd", "percent": 42},
    }
    assert converter.unstructure(wire.ServerStatus("test", "", None))["running"] is None
    rewrite = wire.Rewrite(
        "r1",
        "file:///a.cu",
        3,
        "k",
        "a",
        "b",
        2.0,
        "",
        True,
    )
    assert converter.unstructure(rewrite)["simulated"] is True
    assert converter.structure({"runId": "r1"}, wire.RunRef) == wire.RunRef("r1")
    assert converter.structure({"uri": "file:///a.cu"}, wire.KernelRef) == wire.KernelRef("file:///a.cu")


@pytest.mark.parametrize(
    ("data", "cls"),
    [
        ({"runId": 7}, wire.RunRef),
        ({}, wire.RunRef),
        ({"uri": 3}, wire.KernelRef),
        ({"uri": 42}, wire.ResultsParams),
    ],
)
def test_inputs_are_strict(data: dict[str, object], cls: type) -> None:
    converter = converter_of_the_server()
    with pytest.raises(cattrs.ClassValidationError):
        converter.structure(data, cls)


def test_every_command_the_server_registers_is_declared() -> None:
    ls = create_server()
    declared = set(wire.METHODS.values())
    assert set(ls.protocol.fm.commands) <= declared
    for method in (wire.REWRITE_REQUEST, wire.RESULTS_REQUEST):
        assert method in ls.protocol.fm.features


def test_run_status_names_every_status_the_server_sends() -> None:
    """Optimize sends ``ok`` for an improvement, else its outcome; benchmark and compare the sandbox's
    verdict; profile ``unavailable``; every run ``error``."""
    sent = {s.value for s in Status} | {o.value for o in RunOutcome if o is not RunOutcome.IMPROVED}
    assert {s.value for s in wire.RunStatus} == sent | {"error", "unavailable"}


def test_apply_result_carries_the_clients_answer_as_a_reason() -> None:
    converter = converter_of_the_server()
    ok = wire.ApplyResult.answered(lsp.ApplyWorkspaceEditResult(applied=True))
    assert converter.unstructure(ok) == {"applied": True, "reason": "applied", "message": "applied"}
    refused = wire.ApplyResult.answered(lsp.ApplyWorkspaceEditResult(applied=False, failure_reason="busy"))
    assert (refused.applied, refused.reason, refused.message) == (False, wire.ApplyReason.DECLINED, "busy")
    bare = wire.ApplyResult.answered(lsp.ApplyWorkspaceEditResult(applied=False))
    assert (bare.reason, bare.message) == (wire.ApplyReason.DECLINED, "declined")


def test_the_simulated_label_is_the_servers_wording() -> None:
    assert f'export const SIMULATED = "{SIMULATED}";' in protocol_ts.typescript()


def test_a_record_off_the_wire_list_cannot_reach_the_typescript() -> None:
    @dataclasses.dataclass(frozen=True)
    class Stray:
        n: int

    with pytest.raises(TypeError, match="Stray is on the wire but not in"):
        protocol_ts._ts_type(Stray)
