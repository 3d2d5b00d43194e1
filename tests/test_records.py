"""The results a run produces are one record each (agent/records.py): the store keeps them, the
wire carries them as they are (camelCase through pygls' converter and ``server.protocol.register``),
and they come back equal, on the wire and from the store's file."""

from __future__ import annotations

import json
from pathlib import Path

from pygls.protocol import default_converter

from agent import records
from agent.attempts import AttemptRecord
from agent.loop import RunOutcome, StopKind
from agent.records import CompareRole
from sandbox.contract import Profile, Stall, Status, to_dict
from server import protocol as wire
from server.store import ResultStore


def converter() -> object:
    c = default_converter()
    wire.register(c)
    return c


def _attempt() -> AttemptRecord:
    return AttemptRecord(3, "c3", "wider", Status.OK, "", speedup=2.0)


def sample() -> records.KernelResults:
    roof = records.Roofline(4000.0, 60000.0, 900000.0, 3 << 26, 1 << 24)
    profile = Profile(
        True, memory_pct=81.5, stalls=(Stall("long_scoreboard", 2.5),), occupancy_limiter="registers"
    )
    return records.KernelResults(
        benchmark=records.BenchmarkRecord(
            0.5, 0.49, 0.51, 0.04, 1290.0, 30.0, "n=16", "H200", "2026-12-04", roofline=roof
        ),
        optimize=records.OptimizeRecord(
            "r1",
            RunOutcome.IMPROVED,
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
            stop_kind=StopKind.CANDIDATES,
            history=(_attempt(),),
        ),
        compare=records.CompareRecord(
            "r2",
            CompareRole.ORIGINAL,
            "vadd_x4",
            True,
            Status.OK,
            "verified, 2.10x",
            2.1,
            2.0,
            2.2,
            0.5,
            0.24,
            "H200",
            "2026-12-04",
        ),
        profile=records.ProfileRecord(
            "r3", "n=16", "H200", "2026-12-04", (records.ProfiledKernel("original", "", profile),)
        ),
    )


def test_records_go_out_in_camel_case_and_come_back_equal() -> None:
    r = sample()
    results = wire.Results(
        [
            wire.KernelEntry("src/vadd.cu", "vadd", r),
            wire.KernelEntry("src/a.cu", "scale", records.KernelResults()),
        ]
    )
    c = converter()
    data = c.unstructure(results)  # type: ignore[attr-defined]
    first, bare = data["results"]
    kept = first["results"]
    assert kept["benchmark"]["roofline"]["bytesMoved"] == 3 << 26
    assert kept["optimize"]["history"][0]["candidateId"] == "c3"
    assert kept["optimize"]["history"][0]["status"] == "ok" and "reward" not in kept["optimize"]["history"][0]
    assert list(kept["optimize"]["sizes"]) == ["n=16", "n=1000"]
    assert kept["optimize"]["outcome"] == "improved" and kept["optimize"]["stopKind"] == "candidates"
    assert kept["compare"]["speedupLow"] == 2.0 and kept["compare"]["role"] == "original"
    assert [dict(s) for s in kept["profile"]["kernels"][0]["profile"]["stalls"]] == [
        {"reason": "long_scoreboard", "perIssue": 2.5}
    ]
    assert bare == {"file": "src/a.cu", "kernel": "scale", "results": {}}  # what a kernel lacks is left out
    assert c.structure(data, wire.Results) == results  # type: ignore[attr-defined]


def test_the_run_finished_carries_the_stored_record(tmp_path: Path) -> None:
    r = sample()
    store = ResultStore(tmp_path)
    store.put(tmp_path / "vadd.cu", "vadd", optimize=r.optimize)
    again = ResultStore(tmp_path).get(tmp_path / "vadd.cu", "vadd").optimize
    assert again == r.optimize  # the same record back from results.json
    finished = wire.RunFinished(
        "r1",
        wire.RunKind.OPTIMIZE,
        "file:///vadd.cu",
        "vadd",
        wire.RunStatus.OK,
        "",
        False,
        True,
        False,
        optimize=again,
    )
    c = converter()
    data = c.unstructure(finished)  # type: ignore[attr-defined]
    assert data["optimize"]["runId"] == "r1" and "benchmark" not in data
    assert c.structure(data, wire.RunFinished) == finished  # type: ignore[attr-defined]


def test_a_store_written_before_the_enums_and_new_fields_still_loads(tmp_path: Path) -> None:
    r = sample()
    assert r.optimize is not None and r.profile is not None
    old = to_dict(r)
    del old["optimize"]["stop_kind"]  # fields the previous build did not write
    for k in old["profile"]["kernels"]:
        del k["status"], k["message"]
    store_dir = tmp_path / ".cuda-agent"
    store_dir.mkdir()
    (store_dir / "results.json").write_text(json.dumps({"version": 1, "files": {"vadd.cu": {"vadd": old}}}))
    kept = ResultStore(tmp_path).get(tmp_path / "vadd.cu", "vadd")
    assert kept.optimize is not None and kept.optimize.outcome is RunOutcome.IMPROVED
    assert kept.compare is not None and kept.compare.role is CompareRole.ORIGINAL
    assert kept.profile is not None and kept.profile.kernels[0].status is Status.OK
