"""Every ``cuda-agent …`` example of README.md and docs/ runs as a test.

The examples are read from the Markdown's code blocks (a line that starts with ``cuda-agent``, ``$
cuda-agent`` or holds ``&& cuda-agent``; ``\\`` continues a line).  A *synopsis* (``[OPTIONS]``,
``FILE``, ``DIR``...) cannot run: its command and every option it names must exist.  Every other
example runs as written, in a folder that holds the repository's ``bench``, ``tests`` and ``docs``:

- on the simulated GPU where it needs a GPU (``CUDA_AGENT_TEST_EXECUTOR=1``, as ``--simulate``);
- servers (``worker``, ``reward serve``) start on a free port, simulated, must listen, then stop;
- an LLM endpoint is a scripted one on loopback; a worker URL is a simulated worker started here;
- the files an example names that a user would have (``answer.txt``, a token file) are made first.

:data:`NOT_RUN` lists the examples that cannot run here, each with its reason; their commands and
options are still checked, and an entry that matches no example fails."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from server.cli.main import cli, main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# substring of an example -> why it cannot run on a CPU-only test machine
NOT_RUN = {
    "cuda-agent capture --kernel": "runs the user's program on a GPU under CUPTI (tests/test_capture.py runs "
    "capture against recorded launches)",
    "cuda-agent profile bench/kernels/saxpy.cu": "needs a GPU with Nsight Compute; the output shown is checked "
    "against a recorded profile by tests/test_profile.py",
    "reward score torch.relu model_new.py": "a PyTorch answer runs only in a GPU worker inside bubblewrap",
    "cuda-agent speedup --": "builds and runs the user's program on a GPU (tests/test_program.py runs speedup "
    "end to end on a fixture project with the simulated GPU)",
    "--allow-programs": "a worker runs programs only where bubblewrap confines them, and refuses to start "
    "otherwise, as here (tests/test_remote_program.py serves programs over loopback and checks the refusal)",
    "CUDA_AGENT_RAY_ADDRESS=": "needs a Ray cluster with GPUs (tests/test_ray.py runs the Ray executor on a "
    "local CPU-only Ray)",
}
SERVERS = (("worker",), ("reward", "serve"))
PLACEHOLDER = re.compile(r"^(\[.*|.*\]|[A-Z][A-Z0-9_.]*(\.\.\.)?|.*\|.*)$")


@dataclass(frozen=True)
class Example:
    where: str  # page:line
    text: str  # the command line as written, from `cuda-agent`
    env: tuple[tuple[str, str], ...]  # VAR=value before the command
    argv: tuple[str, ...]  # after `cuda-agent`
    stdout: str | None  # `> FILE`

    @property
    def synopsis(self) -> bool:
        return any(PLACEHOLDER.match(arg) for arg in self.argv if arg not in ("-I", "-D", "-k", "-w"))


def _logical_lines(block: str) -> Iterator[tuple[int, str]]:
    pending, start = "", 0
    for number, line in enumerate(block.splitlines()):
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line
        pending = ""


def examples() -> list[Example]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            if block.group(1) not in ("", "bash", "sh", "console", "text"):
                continue
            first = text[: block.start(2)].count("\n") + 1
            for offset, line in _logical_lines(block.group(2)):
                line = line.strip().removeprefix("$ ")
                at = line.find("cuda-agent ")
                if at < 0 or not (at == 0 or line[:at].rstrip().endswith("&&") or "=" in line[:at]):
                    continue
                prefix = "" if "&&" in line[:at] else line[:at]
                env = tuple(re.findall(r"([A-Z_]+)=(\$\([^)]*\)|\S+)", prefix))
                words = shlex.split(line[at:], comments=True)
                stdout = None
                if ">" in words:
                    stdout = words[words.index(">") + 1]
                    words = words[: words.index(">")]
                words = [w for w in words if w != "&"]
                found.append(
                    Example(
                        f"{page.relative_to(ROOT)}:{first + offset}",
                        (prefix + line[at:]).split("  #")[0].strip(),
                        env,
                        tuple(words[1:]),
                        stdout,
                    )
                )
    return found


EXAMPLES = examples()


def _command(argv: tuple[str, ...]) -> tuple[tuple[str, ...], click.Command]:
    command: click.Command = cli
    path: tuple[str, ...] = ()
    for word in argv:
        if not isinstance(command, click.Group) or word not in command.commands:
            break
        command = command.commands[word]
        path += (word,)
    return path, command


def _option_names(command: click.Command) -> set[str]:
    return {name for p in command.params for name in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}


def test_the_docs_have_examples_of_every_command() -> None:
    shown = {_command(e.argv)[0][:1] for e in EXAMPLES}
    missing = {(name,) for name in cli.commands} - shown - {("serve",)}  # serve: the editors start it
    assert not missing, f"commands without an example in the docs: {missing}"


def test_every_not_run_entry_names_an_example() -> None:
    for key in NOT_RUN:
        assert any(key in e.text for e in EXAMPLES), f"NOT_RUN entry matches no example: {key}"


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.where for e in EXAMPLES])
def test_the_command_and_its_options_exist(example: Example) -> None:
    path, command = _command(example.argv)
    assert path, f"{example.where}: `cuda-agent {example.argv[0]}` is no command"
    assert not isinstance(command, click.Group), f"{example.where}: `{' '.join(path)}` needs a subcommand"
    names = _option_names(command)
    for word in example.argv[len(path) :]:
        if word == "--":
            break
        option = word.strip("[]").split("=", 1)[0]
        if option.startswith("-") and not re.match(r"^-\d", option):
            assert option in names, f"{example.where}: `{' '.join(path)}` has no option {option}"


# ---------------------------------------------------------------------------------- running them


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's folder: the repository's bench/, tests/ and docs/, a home with token files, the
    simulated GPU, no worker or Ray named."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("bench", "tests", "docs"):
        (work / name).symlink_to(ROOT / name)
    home = tmp_path / "home"
    home.mkdir()
    for token in (".cuda-agent-token", ".cuda-agent-reward-token"):
        (home / token).write_text("doc-example-token-0123456789\n")
        (home / token).chmod(0o600)
    saxpy = (ROOT / "bench" / "kernels" / "saxpy.cu").read_text()
    (work / "answer.txt").write_text(f"A faster saxpy:\n```cuda\n{saxpy}\n```\n")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CUDA_AGENT_TEST_EXECUTOR", "1")
    for name in ("CUDA_AGENT_WORKER_URL", "CUDA_AGENT_TOKEN", "CUDA_AGENT_RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    return work


def _argv(example: Example, home: str) -> list[str]:
    return [os.path.expanduser(w) if w.startswith("~/") else w for w in example.argv]


def _serve(argv: list[str], cwd: Path, env: dict[str, str], deadline_s: float = 90.0) -> None:
    """Start a server example (simulated, on a free port), wait until it listens, stop it."""
    port = _free_port()
    if "--port" in argv:
        argv[argv.index("--port") + 1] = str(port)
    else:
        argv += ["--port", str(port)]
    if "--simulate" not in argv:
        argv.append("--simulate")
    if "--tls-cert" in argv:
        subprocess.run(
            [
                *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem"),
                *("-out", "cert.pem", "-days", "1", "-subj", "/CN=localhost"),
            ],
            cwd=cwd,
            check=True,
            capture_output=True,
        )
    proc = subprocess.Popen(
        [sys.executable, "-m", "server", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        end = time.monotonic() + deadline_s
        while not _listening(port):
            if proc.poll() is not None:
                out = proc.stdout.read().decode() if proc.stdout else ""
                pytest.fail(f"`cuda-agent {' '.join(argv)}` exited {proc.returncode}: {out[-2000:]}")
            if time.monotonic() > end:
                pytest.fail(f"`cuda-agent {' '.join(argv)}` did not listen within {deadline_s} s")
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _simulated_worker(cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    argv = [
        "worker",
        "--simulate",
        "--port",
        str(port),
        "--token-file",
        str(Path(env["HOME"]) / ".cuda-agent-token"),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "server", *argv], cwd=cwd, env=env, stderr=subprocess.DEVNULL
    )
    end = time.monotonic() + 90
    while not _listening(port):
        assert proc.poll() is None and time.monotonic() < end, "the simulated worker did not start"
        time.sleep(0.1)
    return proc, port


RUNNABLE = [e for e in EXAMPLES if not e.synopsis and not any(key in e.text for key in NOT_RUN)]


@pytest.mark.slow
@pytest.mark.parametrize("example", RUNNABLE, ids=[e.where for e in RUNNABLE])
def test_the_example_runs(
    example: Example, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _argv(example, os.environ["HOME"])
    if _command(example.argv)[0] in SERVERS:
        if "--tls-cert" in argv and shutil.which("openssl") is None:
            pytest.skip("no openssl to make the example's certificate")
        _serve(argv, workdir, dict(os.environ))
        return
    worker = None
    for name, value in example.env:
        value = os.path.expanduser(value)
        if name == "CUDA_AGENT_WORKER_URL":
            worker, port = _simulated_worker(workdir, dict(os.environ))
            value = re.sub(r":\d+", f":{port}", value)
            monkeypatch.delenv("CUDA_AGENT_TEST_EXECUTOR")
        if value.startswith("$(cat "):
            value = Path(os.path.expanduser(value.removeprefix("$(cat ").rstrip(")"))).read_text().strip()
        monkeypatch.setenv(name, value)
    try:
        if "--llm-url" in argv:
            from scripted_llm import Say, ScriptedLLM

            saxpy = (ROOT / "bench" / "kernels" / "saxpy.cu").read_text()
            with ScriptedLLM(lambda body, n: Say(f"```cuda\n{saxpy}\n```")) as llm:
                argv[argv.index("--llm-url") + 1] = llm.url
                rc = main(argv)
        else:
            rc = main(argv)
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=30)
    out = capsys.readouterr()
    if example.stdout:
        Path(example.stdout).write_text(out.out)
    assert rc == 0, f"{example.where}: `{example.text}` exited {rc}: {out.err[-2000:]}"
