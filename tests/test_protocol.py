"""The editor <-> server contract (server/protocol.py): one casing on the wire, the TypeScript side
generated from it and checked here, strict inputs."""

from __future__ import annotations

from pathlib import Path

import cattrs
import pytest
from lsprotocol import types as lsp
from pygls.protocol import default_converter

from server import protocol as wire
from server.app import create_server

PROTOCOL_TS = Path(__file__).parent.parent / "extension" / "src" / "protocol.ts"


def converter_of_the_server() -> cattrs.Converter:
    """pygls' converter (lsprotocol's hooks) with the server's strict inputs, as ``server.lsp`` sets it up."""
    converter = default_converter()
    wire.register_strict_inputs(converter)
    return converter


def test_protocol_ts_carries_the_generated_declarations() -> None:
    block = wire.generated_block(PROTOCOL_TS.read_text(encoding="utf-8"))
    assert block, f"{PROTOCOL_TS} has no generated block"
    assert block == wire.typescript(), (
        "extension/src/protocol.ts is out of date: run `python -m server.protocol extension/src/protocol.ts`"
    )


def test_the_generator_follows_the_python_declarations() -> None:
    ts = wire.typescript()
    assert "export interface RunFinished {\n  runId: string;\n  kind: RunKind;" in ts
    assert "  rewriteReady: boolean;" in ts and "  speedupLow: number;" in ts
    assert "export interface KernelRef {\n  uri: string;\n  kernel?: string;\n}" in ts
    assert "  running: RunningStatus | null;" in ts and "  edits: TextEdit[];" in ts
    assert 'export type RunKind = "optimize" | "benchmark" | "compare" | "profile" | "capture";' in ts
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
        [lsp.TextEdit(lsp.Range(lsp.Position(0, 0), lsp.Position(0, 1)), "b")],
        2.0,
        "",
    )
    assert converter.unstructure(rewrite)["edits"][0]["newText"] == "b"
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
