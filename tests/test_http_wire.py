"""The worker service's HTTP wire (sandbox/http_wire.py): every stream event and the cancel
messages survive a round trip through the contract's converter, in the documented shape; anything
else on the stream is one clear ContractError."""

from __future__ import annotations

import json

import pytest

from sandbox.contract import (
    CandidateResult,
    ContractError,
    DeviceInfo,
    EvalResult,
    Progress,
    Status,
    from_json,
    to_json,
)
from sandbox.http_wire import (
    CancelReply,
    CancelRequest,
    ErrorEvent,
    HeartbeatEvent,
    ProgressEvent,
    QueuedEvent,
    ResultEvent,
    StartedEvent,
    StreamEvent,
    decode_event,
    encode_event,
)

RESULT = EvalResult(
    "run-1",
    CandidateResult("baseline", Status.OK, timing=None),
    (CandidateResult("c0", Status.MISMATCH, "out differs"), CandidateResult("c1", Status.TIMEOUT)),
    DeviceInfo("H200", "9.0", sm_count=132, l2_bytes=50 << 20, memory_bytes=141 << 30),
)
EVENTS: list[StreamEvent] = [
    QueuedEvent(gpu=1, ahead=3),
    StartedEvent(gpu=0),
    ProgressEvent(Progress("run-1", 2, 3, "c0: mismatch")),
    HeartbeatEvent(),
    ResultEvent(RESULT),
    ErrorEvent("no usable GPU 0 (cupy)"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.kind)
def test_every_event_round_trips_as_one_line_named_by_its_kind(event: StreamEvent) -> None:
    line = encode_event(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line)["event"] == event.kind
    assert line.startswith(b'{"event":"' + event.kind.encode() + b'"')
    assert decode_event(line) == event
    assert decode_event(line.decode()) == event


def test_events_keep_the_documented_shape() -> None:
    assert json.loads(encode_event(QueuedEvent(0, 2))) == {"event": "queued", "gpu": 0, "ahead": 2}
    assert json.loads(encode_event(HeartbeatEvent())) == {"event": "heartbeat"}
    result = json.loads(encode_event(ResultEvent(RESULT)))
    assert set(result) == {"event", "result"} and result["result"]["candidates"][0]["status"] == "mismatch"


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b"<html>", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", 'a JSON list without an "event" name'),
        (b'{"gpu": 0}', 'a JSON dict without an "event" name'),
        (b'{"event": 7}', 'without an "event" name'),
        (b'{"event": "finished"}', "unknown event 'finished'"),
        (b'{"event": "queued", "gpu": 0}', "malformed QueuedEvent"),
        (b'{"event": "progress", "progress": {"done": 1}}', "malformed ProgressEvent"),
        (b'{"event": "result", "result": {"x": 1}}', "malformed ResultEvent"),
    ],
)
def test_anything_else_on_the_stream_is_a_contract_error(line: bytes, needle: str) -> None:
    with pytest.raises(ContractError, match=needle.replace("(", r"\(")):
        decode_event(line)


def test_a_result_of_another_schema_version_is_refused() -> None:
    data = json.loads(encode_event(ResultEvent(RESULT)))
    data["result"]["schema_version"] += 1
    with pytest.raises(ContractError, match="schema version"):
        decode_event(json.dumps(data))


def test_cancel_messages_round_trip() -> None:
    request = CancelRequest("optimize/run 1?&#")  # any id: it travels in the body, unescaped
    assert json.loads(to_json(request)) == {"id": "optimize/run 1?&#"}
    assert from_json(CancelRequest, to_json(request)) == request
    for reply in (CancelReply("r", cancelled=True), CancelReply("r", cancelled=False, finished=True)):
        assert from_json(CancelReply, to_json(reply)) == reply
    assert json.loads(to_json(CancelReply("r", cancelled=True))) == {
        "id": "r",
        "cancelled": True,
        "finished": False,
    }
    with pytest.raises(ContractError):
        from_json(CancelRequest, b'{"request": "r"}')
