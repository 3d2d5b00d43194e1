"""``cuda-agent speedup`` through a worker (``POST /program``, :class:`agent.program_remote.RemoteMachine`)
on loopback: a real uvicorn worker whose program host runs the simulated GPU
(:class:`agent.program_sim.SimulatedMachine`) or, unconfined, a tiny C program built with ``cc``.

Covers the whole flow run remotely (baseline, capture with the saved inputs put in the worker's
recorded store, patch applied here only, rebuild and re-runs there, outputs brought back), the
re-upload of only the changed files, a worker that lost its files, and the refusals: the endpoint
off by default, no token, bad paths, oversize requests, outputs through a link, and the worker
command without bubblewrap."""

from __future__ import annotations

import hashlib
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from test_program import TABLE, OneRewrite, settings
from test_remote import TOKEN, auth, running_worker

from agent import program as prog
from agent.program_remote import RemoteMachine
from agent.program_sim import SimulatedMachine, load_kernels
from sandbox.capture import CaptureError
from sandbox.program_wire import (
    PROGRAM_PATH,
    PROGRAMS_OFF,
    ProgramLimits,
    ProgramReply,
    ProgramRequest,
    ProjectFile,
    decode,
    encode,
)
from sandbox.programs import LocalMachine, ProgramHost
from sandbox.remote import RemoteExecutor
from sandbox.testing import FakeExecutor

DATA = Path(__file__).parent / "data"
OUTPUTS = ["out.bin", "out.txt"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(DATA / "capture" / "multi", root)
    shutil.copy(DATA / "program" / "run.py", root / "run.py")
    monkeypatch.setenv("CUDA_AGENT_RECORDED_DIR", str(tmp_path / "recorded"))
    return root


def simulated_host(
    project: Path, tmp_path: Path, speedup: float = 50.0
) -> tuple[ProgramHost, SimulatedMachine]:
    """A program host whose machine is the simulated GPU, its definitions those of ``project``
    as it is now (the worker's copy is compared with them)."""
    sim = SimulatedMachine(load_kernels(TABLE), ["."], speedup=speedup, root=str(project))
    return ProgramHost(lambda folder: sim, root=tmp_path / "host"), sim


def post(url: str, request: ProgramRequest, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Content-Type": "application/json", **(auth(token) if token else {})}
    return httpx.post(f"{url}{PROGRAM_PATH}", content=encode(request), headers=headers, timeout=60)


def one_file(path: str, body: bytes = b"x") -> ProgramRequest:
    digest = hashlib.sha256(body).hexdigest()
    return ProgramRequest((ProjectFile(path, digest),), {digest: body}, argv=("true",))


# ------------------------------------------------------------------------------ the flow


def test_speedup_runs_on_the_worker_end_to_end(project: Path, tmp_path: Path) -> None:
    host, sim = simulated_host(project, tmp_path)
    build = "echo built > build.log"
    with running_worker(FakeExecutor(), programs=host) as (url, _):
        machine = RemoteMachine(url, TOKEN, build=build, outputs=OUTPUTS)
        executor = RemoteExecutor(url, TOKEN)
        try:
            report = prog.speedup(
                settings(project, apply=True, build=build),
                machine,
                executor,
                OneRewrite,
            )
        finally:
            executor.close()
            machine.close()
    assert report.outcome in (prog.Outcome.FASTER, prog.Outcome.NOT_FASTER), report.message
    assert report.compared_equal and report.measured_gpu > 1.5  # the worker ran the patched kernel
    applied = [r for r in report.rewrites if r.applied]
    assert applied and "recorded" in applied[0].verified  # the saved inputs, in the worker's store
    # the patch changed the local file; the worker built and ran every time
    assert "// tuned" in (project / "inc" / "kernels.cuh").read_text()
    assert sim.builds and all(b == build for b in sim.builds)
    assert len(sim.runs) == len(machine.sent) - 1  # every request but the patched build ran
    assert (project / "out.bin").is_file() and (project / "out.txt").read_text().startswith("0 ")
    # the first request carried the whole project, the next ones nothing until the patch: then
    # only the patched file; the build's own products stay on the worker (never here)
    assert set(machine.sent[0]) >= {"inc/kernels.cuh", "src/launch.cu", "src/main.cpp", "run.py"}
    later = [s for s in machine.sent[1:] if s]
    assert later == [("inc/kernels.cuh",)], machine.sent
    assert not (project / "build.log").exists()
    assert list((host.runs).iterdir()) == []  # each request's folder removed


def test_speedup_command_uses_the_worker_named_by_the_environment(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.cli.main import main

    host, sim = simulated_host(project, tmp_path)
    with running_worker(FakeExecutor(), programs=host) as (url, _):
        monkeypatch.chdir(project)
        monkeypatch.setenv("CUDA_AGENT_WORKER_URL", url)
        monkeypatch.setenv("CUDA_AGENT_TOKEN", TOKEN)
        argv = ["speedup", "--budget", "10s", "--top", "1", "--runs", "1", "--output", "out.bin:float32"]
        assert main([*argv, "--", sys.executable, "run.py"]) == 0
    out = capsys.readouterr().out
    assert "PATCH ONLY" in out and "rewrite void scale_shift<float, 4>" in out, out
    assert sim.runs and (project / "cuda-agent-speedup.patch").is_file()


def test_a_worker_that_lost_the_files_gets_them_again(project: Path, tmp_path: Path) -> None:
    host, _ = simulated_host(project, tmp_path)
    with running_worker(FakeExecutor(), programs=host) as (url, _):
        machine = RemoteMachine(url, TOKEN, outputs=OUTPUTS)
        first = machine.run([sys.executable, "run.py"], str(project), watch=False)
        shutil.rmtree(host.store)  # the worker restarted
        second = machine.run([sys.executable, "run.py"], str(project), watch=False)
        machine.close()
    assert first.returncode == second.returncode == 0 and first.stdout == second.stdout
    assert machine.sent[1] == () and set(machine.sent[2]) == set(machine.sent[0])  # 409, then all again


# ------------------------------------------------------------------------------ a real program


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_c_program_is_built_and_run_in_a_fresh_folder_and_its_outputs_come_back(tmp_path: Path) -> None:
    src = tmp_path / "proj"
    src.mkdir()
    (src / "main.c").write_text(
        '#include <stdio.h>\nint main(int c, char **v) { FILE *f = fopen("out/r.txt", "w");\n'
        '  fprintf(f, "%d\\n", c); fclose(f); printf("hello %s\\n", v[1]); return 3; }\n'
    )
    (src / "out").mkdir()
    host = ProgramHost(lambda folder: LocalMachine(None, (), str(folder / "scratch")), root=tmp_path / "host")
    with running_worker(FakeExecutor(), programs=host) as (url, _):
        machine = RemoteMachine(url, TOKEN, build="mkdir -p out && cc -o main main.c", outputs=["out/r.txt"])
        run = machine.run(["./main", "x"], str(src), watch=False)
        status, tail = machine.build("cc -o main missing.c", str(src))
        with pytest.raises(CaptureError, match="failed on the worker"):
            RemoteMachine(url, TOKEN, build="exit 7").run(["./main"], str(src), watch=False)
        machine.close()
    assert (run.returncode, run.stdout) == (3, b"hello x\n")
    assert (src / "out" / "r.txt").read_text() == "2\n" and not (src / "main").exists()
    assert status != 0 and "missing.c" in tail


def test_the_store_lets_the_files_used_longest_ago_go_past_its_cap(tmp_path: Path) -> None:
    limits = ProgramLimits(max_store_bytes=100)
    host = ProgramHost(
        lambda folder: LocalMachine(None, (), str(folder / "scratch")), root=tmp_path / "host", limits=limits
    )

    def serve(*bodies: bytes) -> set[str]:
        digests = [hashlib.sha256(b).hexdigest() for b in bodies]
        files = tuple(ProjectFile(f"f{i}", d) for i, d in enumerate(digests))
        reply = host.serve(ProgramRequest(files, dict(zip(digests, bodies, strict=True)), build="true"))
        assert reply.build_status == 0
        return set(digests)

    first = serve(b"a" * 60)
    second = serve(b"b" * 60)  # 120 bytes stored: the first project's file goes
    assert {p.name for p in host.store.iterdir()} == second
    both = serve(b"c" * 60, b"d" * 60)  # one project over the cap on its own: all of it is kept
    assert {p.name for p in host.store.iterdir()} == both and not first & both


def test_outputs_through_a_link_are_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("host file")
    src = tmp_path / "proj"
    src.mkdir()
    (src / "a").write_text("a")
    host = ProgramHost(lambda folder: LocalMachine(None, (), str(folder / "scratch")), root=tmp_path / "host")
    with running_worker(FakeExecutor(), programs=host) as (url, _):
        machine = RemoteMachine(url, TOKEN, outputs=["out.txt", "sub/x"])
        script = f"ln -s {secret} out.txt; mkdir real; ln -s real sub; echo no > real/x"
        run = machine.run(["sh", "-c", script], str(src), watch=False)
        machine.close()
    assert run.returncode == 0
    assert not (src / "out.txt").exists() and not (src / "sub").exists()


# ------------------------------------------------------------------------------ cancel


def spinning(pidfile: Path) -> str:
    """A shell command that starts a 30 s child, writes its pid to ``pidfile`` and waits for it."""
    return f"sleep 30 & echo $! > {pidfile}; wait"


def started(pidfile: Path) -> int:
    """The pid ``pidfile`` names, once it is written (10 s at most)."""
    deadline = time.monotonic() + 10
    while not (pidfile.is_file() and pidfile.read_text().strip()):
        assert time.monotonic() < deadline, "the program never started"
        time.sleep(0.02)
    return int(pidfile.read_text())


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def unconfined_host(tmp_path: Path) -> ProgramHost:
    return ProgramHost(lambda folder: LocalMachine(None, (), str(folder / "scratch")), root=tmp_path / "host")


@pytest.mark.parametrize("step", ["build", "run"])
def test_cancel_stops_the_build_or_run_on_the_worker_and_frees_it(tmp_path: Path, step: str) -> None:
    src = tmp_path / "proj"
    src.mkdir()
    (src / "a").write_text("a")
    pidfile = tmp_path / "pid"
    host = unconfined_host(tmp_path)
    cancel = threading.Event()
    with running_worker(FakeExecutor(), programs=host) as (url, _), ThreadPoolExecutor(1) as pool:
        machine = RemoteMachine(url, TOKEN)
        if step == "build":
            future = pool.submit(machine.build, spinning(pidfile), str(src), 60.0, cancel)
        else:
            argv = ["sh", "-c", spinning(pidfile)]
            future = pool.submit(machine.run, argv, str(src), timeout=60.0, cancel=cancel, watch=False)
        pid = started(pidfile)
        began = time.monotonic()
        cancel.set()
        with pytest.raises(CaptureError, match="cancelled"):
            future.result(timeout=10)
        took = time.monotonic() - began
        assert gone_within(pid, 2.0), "the program's child outlived the cancel"
        after = post(url, one_file("b"))  # the one program slot is free again
        machine.close()
    assert took < 3.0, took
    assert after.status_code == 200 and decode(ProgramReply, after.content).run is not None
    assert list(host.runs.iterdir()) == []


def test_a_client_that_leaves_stops_its_program(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    host = unconfined_host(tmp_path)
    request = replace(one_file("a"), argv=("sh", "-c", spinning(pidfile)), watch=False)
    with running_worker(FakeExecutor(), programs=host) as (url, _):
        with pytest.raises(httpx.ReadTimeout):  # the client gives up: its connection closes
            httpx.post(
                f"{url}{PROGRAM_PATH}",
                content=encode(request),
                headers={"Content-Type": "application/json", **auth()},
                timeout=httpx.Timeout(10, read=1.0),
            )
        pid = started(pidfile)
        assert gone_within(pid, 5.0), "the program outlived its client"
        deadline = time.monotonic() + 5
        while (after := post(url, one_file("b"))).status_code == 429 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert after.status_code == 200


def test_only_the_requester_can_cancel_its_program(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    host = unconfined_host(tmp_path)
    request = replace(one_file("a"), argv=("sh", "-c", spinning(pidfile)), watch=False)
    mine, theirs = {"Authorization": "Bearer a"}, {"Authorization": "Bearer b"}
    with running_worker(FakeExecutor(), token=None, programs=host) as (url, _), ThreadPoolExecutor(1) as pool:
        future = pool.submit(
            httpx.post,
            f"{url}{PROGRAM_PATH}",
            content=encode(request),
            headers={"Content-Type": "application/json", **mine},
            timeout=60,
        )
        pid = started(pidfile)
        refused = httpx.post(f"{url}/cancel", json={"id": request.id}, headers=theirs)
        time.sleep(0.3)
        still = alive(pid)
        accepted = httpx.post(f"{url}/cancel", json={"id": request.id}, headers=mine)
        answer = future.result(timeout=10)
        stopped = gone_within(pid, 2.0)
        late = httpx.post(f"{url}/cancel", json={"id": request.id}, headers=mine)
    assert refused.status_code == 404 and still  # as if there were no such program
    assert accepted.json() == {"id": request.id, "cancelled": True, "finished": False}
    assert answer.status_code == 200 and decode(ProgramReply, answer.content) == ProgramReply(cancelled=True)
    assert stopped and late.status_code == 404


# ------------------------------------------------------------------------------ refusals


def test_programs_are_off_by_default_and_need_the_token(project: Path, tmp_path: Path) -> None:
    with running_worker(FakeExecutor()) as (url, _):
        off = post(url, one_file("a"))
        assert off.status_code == 403 and off.json()["error"] == PROGRAMS_OFF
        with pytest.raises(CaptureError, match="--allow-programs"):
            RemoteMachine(url, TOKEN).run([sys.executable, "run.py"], str(project), watch=False)
    host, sim = simulated_host(project, tmp_path)
    with running_worker(FakeExecutor(), programs=host) as (url, _):
        assert post(url, one_file("a"), token=None).status_code == 401
        assert post(url, one_file("a"), token="nope").status_code == 401
        with host.busy:  # another program runs
            busy = post(url, one_file("a"))
        assert busy.status_code == 429 and busy.headers["Retry-After"]
    assert sim.runs == []


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "a/./b", "a//b", "", "a\\b", "a\x00b"])
def test_bad_paths_are_refused_naming_the_field(project: Path, tmp_path: Path, path: str) -> None:
    host, sim = simulated_host(project, tmp_path)
    with running_worker(FakeExecutor(), programs=host) as (url, _):
        bad = post(url, one_file(path))
        out = post(
            url, ProgramRequest(one_file("a").files, one_file("a").bodies, argv=("true",), outputs=(path,))
        )
    assert bad.status_code == 422 and bad.json()["field"] == "files[0].path", bad.text
    assert out.status_code == 422 and out.json()["field"] == "outputs[0]", out.text
    assert sim.runs == []


def test_malformed_requests_are_refused(project: Path, tmp_path: Path) -> None:
    host, sim = simulated_host(project, tmp_path)
    digest = hashlib.sha256(b"x").hexdigest()
    with running_worker(FakeExecutor(), programs=host) as (url, _):
        wrong = post(url, ProgramRequest((ProjectFile("a", digest),), {digest: b"y"}, argv=("true",)))
        dual = ProgramRequest(
            (ProjectFile("a", digest), ProjectFile("a/b", digest)), {digest: b"x"}, argv=("true",)
        )
        missing = post(url, ProgramRequest((ProjectFile("a", digest),), argv=("true",)))
        nothing = post(url, ProgramRequest((ProjectFile("a", digest),), {digest: b"x"}))
        both = post(url, dual)
        no_id = post(url, replace(one_file("a"), id=""))
        responses = [wrong, both, missing, nothing, no_id]
        not_json = httpx.post(f"{url}{PROGRAM_PATH}", content=b"{", headers=auth())
    assert [r.status_code for r in responses] == [422, 422, 409, 422, 422]
    assert wrong.json()["field"] == f"bodies[{digest}]" and both.json()["field"] == "files"
    assert no_id.json()["field"] == "id"
    assert missing.json()["missing"] == [digest] and nothing.json()["field"] == "argv"
    assert not_json.status_code == 422 and sim.runs == []


def test_oversize_requests_are_refused_naming_the_field(project: Path, tmp_path: Path) -> None:
    limits = ProgramLimits(max_body_bytes=4096, max_files=2, max_file_bytes=8, max_outputs=1)
    sim = SimulatedMachine(load_kernels(TABLE), ["."], root=str(project))
    host = ProgramHost(lambda folder: sim, root=tmp_path / "host", limits=limits)
    files = tuple(ProjectFile(f"f{i}", hashlib.sha256(b"x").hexdigest()) for i in range(3))
    with running_worker(FakeExecutor(), programs=host) as (url, _):
        many = post(url, ProgramRequest(files, argv=("true",)))
        big = post(url, one_file("a", b"123456789"))
        outs = post(url, ProgramRequest(files[:1], argv=("true",), outputs=("a", "b")))
        body = post(url, ProgramRequest(files[:1], argv=("x" * 5000,)))
    assert (many.status_code, many.json()["field"]) == (413, "files")
    assert big.status_code == 413 and big.json()["field"].startswith("bodies[")
    assert (outs.status_code, outs.json()["field"]) == (413, "outputs")
    assert body.status_code == 413 and "larger than 4096 bytes" in body.json()["error"]
    assert sim.runs == []


def test_the_worker_refuses_to_run_programs_unconfined(monkeypatch: pytest.MonkeyPatch) -> None:
    from server.cli import serve

    monkeypatch.setattr("sandbox.isolation.bwrap_prefix", lambda: ())
    with pytest.raises(serve.UserError, match="refusing --allow-programs: bubblewrap cannot run here"):
        serve._program_host()


def test_the_workers_program_is_confined_to_its_folder_without_our_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.cli import serve

    base = ("bwrap", "--ro-bind", "/", "/", "--tmpfs", "/tmp")
    monkeypatch.setattr("sandbox.isolation.bwrap_prefix", lambda: base)
    monkeypatch.setenv("CUDA_AGENT_TOKEN", "worker-secret")
    host = serve._program_host()
    try:
        machine = host.machine_for(tmp_path / "req")
    finally:
        shutil.rmtree(host.root)
    assert isinstance(machine, LocalMachine) and machine.env is not None
    assert "worker-secret" not in machine.env.values()
    assert machine.wrap[: len(base)] == base  # the GPU workers' bubblewrap...
    assert machine.wrap[-3:] == ("--bind", str(tmp_path / "req"), str(tmp_path / "req"))  # ...and its folder
    assert machine.scratch == str(tmp_path / "req" / "scratch")


def test_speedup_through_a_worker_refuses_paths_outside_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_AGENT_WORKER_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("CUDA_AGENT_TOKEN", TOKEN)
    assert main(["speedup", "--source", "/usr/include", "--", "true"]) == 2
    assert main(["speedup", "--output", "../out.bin", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "/usr/include: outside the current folder" in err and "../out.bin: outside" in err


def test_the_machine_is_the_workers_only_when_one_is_named_with_its_token(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.program_remote import MachineError, program_machine
    from base.secrets import Secret
    from sandbox.executors import ExecutorSettings

    job = settings(project)
    local = LocalMachine()
    assert program_machine(ExecutorSettings(kind="test"), job, lambda: local) is local
    assert program_machine(ExecutorSettings(kind="remote"), job, lambda: local) is local  # no URL
    monkeypatch.setenv("WORKER_TOKEN_OF_TEST", TOKEN)
    named = ExecutorSettings(
        kind="remote", url="http://127.0.0.1:9/", token=Secret("env:WORKER_TOKEN_OF_TEST")
    )
    machine = program_machine(named, job, lambda: local)
    assert isinstance(machine, RemoteMachine) and machine.url == "http://127.0.0.1:9"
    machine.close()
    monkeypatch.delenv("WORKER_TOKEN_OF_TEST")
    with pytest.raises(MachineError, match="WORKER_TOKEN_OF_TEST gives none"):
        program_machine(named, job, lambda: local)
