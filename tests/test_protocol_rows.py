"""The results view's rows are typed wire types: field for field the store's records, camelCase on
the wire through pygls' converter, and back."""

from __future__ import annotations

import dataclasses

import attrs
import pytest
from pygls.protocol import default_converter

from agent.attempts import AttemptRecord
from sandbox.contract import Profile, Stall, to_dict
from server import protocol as wire
from server import store


def converter() -> object:
    c = default_converter()
    wire.register_strict_inputs(c)
    return c


@pytest.mark.parametrize(
    ("record", "row"),
    [
        (store.BenchmarkRecord, wire.BenchmarkRow),
        (store.OptimizeRecord, wire.OptimizeRow),
        (store.CompareRecord, wire.CompareRow),
        (store.ProfileRecord, wire.ProfileRow),
        (store.Roofline, wire.Roofline),
        (store.ProfiledKernel, wire.ProfiledKernel),
        (Profile, wire.ProfileMetrics),
        (Stall, wire.Stall),
        (AttemptRecord, wire.AttemptRecord),
    ],
)
def test_a_row_has_every_field_of_its_record(record: type, row: type) -> None:
    assert {f.name for f in dataclasses.fields(record)} == {f.name for f in attrs.fields(row)}


def _attempt() -> AttemptRecord:
    names = [f for f in dataclasses.fields(AttemptRecord)]
    values = {
        f.name: (0 if f.type in ("int", "float") else None if "None" in str(f.type) else "") for f in names
    }
    return AttemptRecord(**{**values, "index": 3, "candidate_id": "c3", "status": "ok", "speedup": 2.0})


def records() -> store.KernelResults:
    roof = store.Roofline(4000.0, 60000.0, 900000.0, 3 << 26, 1 << 24)
    profile = Profile(
        True, memory_pct=81.5, stalls=(Stall("long_scoreboard", 2.5),), occupancy_limiter="registers"
    )
    return store.KernelResults(
        benchmark=store.BenchmarkRecord(
            0.5, 0.49, 0.51, 0.04, 1290.0, 30.0, "n=16", "H200", "2026-12-04", roofline=roof
        ),
        optimize=store.OptimizeRecord(
            "r1",
            "improved",
            2.5,
            2.4,
            2.6,
            0.5,
            0.01,
            0.2,
            0.02,
            ("n=16", "n=1000"),
            3,
            "calibrated",
            "H200",
            "2026-12-04",
            "block 32 -> 256",
            7,
            "budget",
            history=(_attempt(),),
        ),
        compare=store.CompareRecord(
            "r2",
            "original",
            "vadd_x4",
            True,
            "ok",
            "verified, 2.10x",
            2.1,
            2.0,
            2.2,
            0.5,
            0.24,
            "H200",
            "2026-12-04",
        ),
        profile=store.ProfileRecord(
            "r3", "n=16", "H200", "2026-12-04", (store.ProfiledKernel("original", "", profile),)
        ),
    )


def test_rows_go_out_in_camel_case_and_come_back_equal() -> None:
    r = records()
    results = wire.Results(
        [
            wire.KernelResults(
                "src/vadd.cu",
                "vadd",
                wire.row(wire.BenchmarkRow, to_dict(r.benchmark)),
                wire.row(wire.OptimizeRow, to_dict(r.optimize)),
                wire.row(wire.CompareRow, to_dict(r.compare)),
                wire.row(wire.ProfileRow, to_dict(r.profile)),
            ),
            wire.KernelResults("src/a.cu", "scale"),
        ]
    )
    c = converter()
    data = c.unstructure(results)  # type: ignore[attr-defined]
    first, bare = data["results"]
    assert first["benchmark"]["roofline"]["bytesMoved"] == 3 << 26
    assert first["optimize"]["history"][0]["candidateId"] == "c3" and first["optimize"]["sizes"] == [
        "n=16",
        "n=1000",
    ]
    assert first["compare"]["speedupLow"] == 2.0
    assert first["profile"]["kernels"][0]["profile"]["stalls"] == [
        {"reason": "long_scoreboard", "perIssue": 2.5}
    ]
    assert bare == {"file": "src/a.cu", "kernel": "scale"}  # what a kernel lacks is left out
    assert c.structure(data, wire.Results) == results  # type: ignore[attr-defined]
