"""Issue 37's smaller holes, each attacked: task paths that never end or block, a capture folder
that cannot be made, secrets in a captured program's environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.cli.main import main
from server.settings import parse_settings, program_environment


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_reward_tasks_refuse_devices_and_fifos_at_once(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "tasks.cu")
        os.mkfifo(path)  # nobody writes it: opening it for reading would block forever
    assert main(["reward", "tasks", "--tasks", path]) == 2
    err = capsys.readouterr().err
    assert "not a regular file" in err and len(err.strip().splitlines()) == 1


def test_capture_into_a_folder_that_cannot_be_made_is_one_line() -> None:
    cli = [sys.executable, "-m", "server", "capture", "--save-inputs", "/proc/nonexistent/x", "--", "true"]
    done = subprocess.run(cli, capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent.parent)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "cuda-agent: error: /proc/nonexistent/x: cannot create the folder for the inputs (No such file or directory)"
    ]


def test_the_editors_captured_program_gets_none_of_our_secrets() -> None:
    settings, _ = parse_settings({"machine": {"proposer": {"apiKey": "env:MY_LLM_KEY"}}}, env={})
    base = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "CUDA_AGENT_TOKEN": "tok",
        "OPENAI_API_KEY": "sk",
        "MY_LLM_KEY": "sk2",
        "CUDA_AGENT_WORKER_URL": "http://w:1",
        "HF_TOKEN": "the user's own",
    }
    env = program_environment(settings, base)
    assert env == {"PATH": "/usr/bin", "HOME": "/home/u", "HF_TOKEN": "the user's own"}


def test_the_editors_speedup_program_and_build_get_none_of_our_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from agent.program import LocalMachine, ProgramSettings
    from server.speedup import _machine

    monkeypatch.setenv("CUDA_AGENT_TOKEN", "tok")
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    settings, _ = parse_settings({}, env={})
    machine = _machine(SimpleNamespace(settings=settings), ProgramSettings(("true",)))  # type: ignore[arg-type]
    assert isinstance(machine, LocalMachine) and machine.env is not None
    assert "CUDA_AGENT_TOKEN" not in machine.env and "OPENAI_API_KEY" not in machine.env
    assert machine.env.get("PATH") == os.environ.get("PATH")


# --------------------------------------------------------------------------- the worker's requesters


def test_only_the_requester_can_cancel_or_attach_and_ids_on_the_wire_are_unguessable() -> None:
    import httpx
    from test_remote import WatchedExecutor, make_request, running_worker

    from sandbox.contract import to_json
    from sandbox.remote import RemoteExecutor

    fake = WatchedExecutor(delay_s=0.4)
    victim = to_json(make_request("victim", candidates=2))
    with running_worker(fake, token=None) as (url, service):
        mine, theirs = {"Authorization": "Bearer a"}, {"Authorization": "Bearer b"}
        with httpx.stream("POST", f"{url}/evaluate", content=victim, headers=mine) as r:
            stream = r.iter_lines()
            next(stream)
            assert fake.running.wait(5)
            refused = httpx.post(f"{url}/cancel", json={"id": "victim"}, headers=theirs)
            assert refused.status_code == 404  # as if there were no such job
            lines = list(stream)
        assert not fake.saw_cancel.is_set() and '"event":"result"' in lines[-1]
        assert httpx.post(f"{url}/cancel", json={"id": "victim"}, headers=mine).json()["finished"]
        with RemoteExecutor(url, "t") as one, RemoteExecutor(url, "t") as two:
            one.evaluate(make_request("same", candidates=1))
            two.evaluate(make_request("same", candidates=1))
    wire = [r.id for r in fake.requests[1:]]
    assert len(set(wire)) == 2 and all(w.startswith("same~") and len(w) >= len("same~") + 22 for w in wire)
    assert {owner for owner, _ in service.done} == {service_owner("a"), service_owner("t")}


def service_owner(token: str) -> str:
    import hashlib

    return "token:" + hashlib.sha256(f"Bearer {token}".encode()).hexdigest()[:16]


def test_worker_caps_are_per_token_and_in_total_not_per_source_address() -> None:
    import concurrent.futures

    import httpx
    from test_remote import TOKEN, WatchedExecutor, auth, make_request, running_worker

    from sandbox.contract import to_json
    from sandbox.service import Limits

    # each admitted evaluation holds its slot 4 s: long enough that all six requests overlap on a loaded machine
    with running_worker(WatchedExecutor(delay_s=4.0), limits=Limits(max_per_client=2)) as (url, _):

        def post(i: int) -> int:
            transport = httpx.HTTPTransport(local_address=f"127.0.0.{20 + i}")
            with httpx.Client(transport=transport, timeout=30) as client:
                body = to_json(make_request(f"r{i}", candidates=1))
                with client.stream("POST", f"{url}/evaluate", content=body, headers=auth(TOKEN)) as r:
                    r.read()
                    return r.status_code

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            statuses = list(pool.map(post, range(6)))
    assert statuses.count(429) >= 4, statuses


def test_at_a_low_open_file_limit_the_worker_logs_one_line_not_a_traceback_per_accept(tmp_path: Path) -> None:
    import resource
    import socket
    import time

    from simulated_worker import free_port

    token = tmp_path / "token"
    token.write_text("tok-0123456789abcdef\n")
    token.chmod(0o600)
    port = free_port()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    cli = [
        sys.executable,
        "-m",
        "server",
        "worker",
        "--simulate",
        "--port",
        str(port),
        "--token-file",
        str(token),
    ]
    proc = subprocess.Popen(
        cli,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (30, hard)),
    )
    held = []
    try:
        assert proc.stderr is not None
        assert "serving" in proc.stderr.readline()
        for _ in range(40):  # more than the process can hold
            held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(2.5)  # asyncio retries accept() every second
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
        for s in held:
            s.close()
    assert "Traceback" not in err
    assert err.count("cannot accept connections: Too many open files") == 1, err[-2000:]


@pytest.mark.parametrize("works", [2, 1, 0], ids=["all hidden", "homes hidden", "neither"])
def test_a_gpu_worker_never_runs_in_a_bwrap_that_shows_the_homes(
    works: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyTorch answers run Python in the GPU worker: where bubblewrap cannot hide everything it
    hides at least /home and /root, or is not used (and PyTorch answers are refused)."""
    import sandbox.isolation as iso

    tried: list[list[str]] = []

    def probe(prefix: list[str], code: str) -> bool:
        tried.append(prefix)
        return len(tried) > 2 - works

    monkeypatch.setattr(iso.shutil, "which", lambda name: "/usr/bin/bwrap")
    monkeypatch.setattr(iso, "_probe", probe)
    got = iso.bwrap_prefix.__wrapped__()
    for prefix in tried:
        hidden = {prefix[i + 1] for i, arg in enumerate(prefix) if arg == "--tmpfs"}
        assert {"/home", "/root"} <= hidden, prefix
    assert (got == ()) == (works == 0) and (not got or list(got) == tried[-1])


@pytest.mark.slow
def test_the_isolation_check_bench_runs_on_the_cpu_and_finds_no_leak(tmp_path: Path) -> None:
    import json

    root = Path(__file__).parent.parent
    cli = [
        sys.executable,
        str(root / "bench/isolation_check.py"),
        "--out",
        str(tmp_path),
        "--deadline",
        "90",
        "--simulate",
    ]
    subprocess.run(cli, check=True, timeout=120, cwd=root)
    rows = [json.loads(line) for line in (tmp_path / "isolation_check.jsonl").read_text().splitlines()]
    probes = [r for r in rows if r["kind"] == "probes"]
    assert len(probes) == 6 and all(
        r["simulate"] and r["leaks"] == [] and r["unguarded_reads"] for r in probes
    )
