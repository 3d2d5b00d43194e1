"""The ``cuda-agent`` command line: the top layer, beside the language server.

Each subcommand is a thin wrapper: parse options, call into ``agent``/``sandbox``/``server``,
render the result for humans (default) or as JSON (``--json``).  Heavy modules are imported
inside the commands so ``cuda-agent --help`` stays instant and ``serve`` never loads CuPy.

User mistakes (missing file, unknown kernel, bad option) print one line on stderr and exit
with status 2; a failed job exits 1; never a traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sandbox.errors import Failed, InputError

if TYPE_CHECKING:
    from agent.attempts import AttemptRecord
    from agent.llm import LLMSettings
    from agent.loop import LoopEvent, OptimizeResult
    from agent.proposer import Proposer
    from agent.target import Target
    from sandbox.contract import Budget
    from sandbox.executor import Executor


class UserError(InputError, click.ClickException):
    """A mistake the user can fix; printed as one line, exit status 2 (from :class:`InputError`)."""


class JobFailed(Failed, click.ClickException):
    """The job ran and failed (no GPU, compile errors found...); exit status 1 (from :class:`Failed`)."""


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


MAX_SOURCE_BYTES = 16 << 20


def read_regular_file(path: str, what: str, limit: int = MAX_SOURCE_BYTES) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes; else one clear
    :class:`UserError` naming ``what`` was expected (a FIFO, device or socket is refused before
    it is opened: it could block or never end)."""
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{path}: is a directory, expected {what}")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: not a regular file (a device, FIFO or socket), expected {what}")
    too_large = UserError(f"{path}: larger than {limit >> 20} MiB, expected {what}")
    if st.st_size > limit:
        raise too_large
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    if len(data) > limit:
        raise too_large
    return data


def read_source(path: str) -> tuple[Path, str]:
    """Read a CUDA file as text; undecodable bytes become U+FFFD (and are reported by the parser)."""
    data = read_regular_file(path, "a .cu/.cuh file")
    return Path(path), data.decode("utf-8", errors="replace")


def executor_failed(exc: Exception) -> JobFailed:
    """The executor could not run (no GPU, worker unreachable...): one line, with the way out."""
    from sandbox.executor import NoGpuError

    if isinstance(exc, NoGpuError):
        return JobFailed(
            f"{exc}. Ways forward: a GPU here (an NVIDIA driver and the `gpu` extra: pip install "
            "'cuda-agent[gpu]') or elsewhere (CUDA_AGENT_WORKER_URL and CUDA_AGENT_TOKEN of a `cuda-agent worker`); "
            "or, to try the flow without one, the simulated GPU (CUDA_AGENT_TEST_EXECUTOR=1)"
        )
    return JobFailed(str(exc))


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")


@dataclasses.dataclass(frozen=True)
class BuildFlags:
    """``-I``/``-D``/``--compile-commands`` as given: one build configuration for every command."""

    include: tuple[str, ...] = ()
    define: tuple[str, ...] = ()
    compile_commands: str | None = None

    def options(self, source: Path) -> tuple[str, ...]:
        from agent.check import build_options

        try:
            return build_options(source, self.include, self.define, self.compile_commands)
        except ValueError as exc:
            raise UserError(str(exc)) from exc


def build_flags(f: Callable[..., None]) -> Callable[..., None]:
    """Adds ``-I``, ``-D`` and ``--compile-commands``, handed to the command as ``build: BuildFlags``."""

    @functools.wraps(f)
    def command(
        *args: Any, include: tuple[str, ...], define: tuple[str, ...], compile_commands: str | None, **kw: Any
    ) -> None:
        f(*args, build=BuildFlags(include, define, compile_commands), **kw)

    for option in (
        click.option(
            "--compile-commands", type=click.Path(), help="compile_commands.json to take -I/-D from."
        ),
        click.option(
            "-D", "define", multiple=True, help="Preprocessor definition NAME[=VALUE] (repeatable)."
        ),
        click.option("-I", "include", multiple=True, help="Include directory (repeatable)."),
    ):
        command = option(command)
    return command


def memory_option(f: Callable[..., None]) -> Callable[..., None]:
    """Adds ``--max-memory-gb``: the GPU memory one evaluation may allocate (``Budget.gpu_memory_bytes``),
    handed to the command as ``eval_budget`` (None: the default cap)."""

    @click.option(
        "--max-memory-gb",
        type=click.FloatRange(min=0, min_open=True),
        help="GPU memory one evaluation may allocate, in GiB (default 4; a worker allows up to its own limit).",
    )
    @functools.wraps(f)
    def wrapper(*args: Any, max_memory_gb: float | None, **kw: Any) -> None:
        from sandbox.contract import Budget

        cap = (
            None if max_memory_gb is None else Budget(gpu_memory_bytes=max(1, int(max_memory_gb * (1 << 30))))
        )
        f(*args, eval_budget=cap, **kw)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cuda-agent")
def cli() -> None:
    """CUDA Agent: find, verify and measure faster CUDA kernels."""


@cli.command()
@click.option("--tcp", metavar="HOST:PORT", help="Listen on TCP instead of stdio (for debugging).")
def serve(tcp: str | None) -> None:
    """Run the language server on stdio."""
    if tcp is not None:
        _, sep, port = tcp.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserError(f"--tcp {tcp}: expected HOST:PORT, e.g. 127.0.0.1:2087")
    from server.lsp import serve as run_server

    run_server(tcp)


@cli.command()
@click.argument("file")
@json_option
def kernels(file: str, as_json: bool) -> None:
    """List the kernels in FILE: ranges, parameters, launch sites and benchmark spec."""
    from agent.source import Document
    from agent.spec import render, spec_for
    from sandbox.contract import to_dict

    path, text = read_source(file)
    doc = Document(text, str(path))
    listed = []
    for k in doc.kernels:
        result = spec_for(doc, k)
        listed.append(
            {
                **to_dict(k),
                "launches": [to_dict(s) for s in doc.launches_of(k.name)],
                "spec": {
                    "source": result.source,
                    "text": render(result.spec) if result.spec is not None else "",
                    "errors": [to_dict(e) for e in result.errors],
                    "confidence": result.inference.confidence if result.inference else None,
                    "reasons": list(result.inference.reasons) if result.inference else [],
                    "evidence": [to_dict(e) for e in result.inference.evidence] if result.inference else [],
                },
            }
        )
    if as_json:
        emit_json({"path": str(path), "kernels": listed, "issues": [to_dict(i) for i in doc.issues]})
        return
    click.echo(f"{path}: {len(doc.kernels)} kernel(s), {len(doc.launches)} launch site(s)")
    for k, info in zip(doc.kernels, listed, strict=True):
        params = ", ".join(f"{p.type_text} {p.name}".strip() for p in k.params)
        templ = f"template <{', '.join(t.name for t in k.template_params)}> " if k.template_params else ""
        click.echo(
            f"\n{templ}{k.qualified_name}({params})  lines {k.span.start_line + 1}-{k.span.end_line + 1}"
        )
        if k.launch_bounds:
            click.echo(
                f"  __launch_bounds__({k.launch_bounds.max_threads}{', ' + k.launch_bounds.min_blocks if k.launch_bounds.min_blocks else ''})"
            )
        for site in doc.launches_of(k.name):
            config = ", ".join(e.text for e in (site.grid, site.block, site.shared, site.stream) if e)
            targs = f"<{', '.join(site.template_args)}>" if site.template_args else ""
            args = ", ".join(a.text for a in site.args)
            click.echo(
                f"  launched at line {site.span.start_line + 1}: {site.kernel}{targs}<<<{config}>>>({args})"
            )
        spec = info["spec"]
        how = "parsed" if spec["source"] == "parsed" else f"inferred, {spec['confidence']} confidence"
        click.echo(f"  spec ({how}):")
        for line in spec["text"].splitlines():
            click.echo(f"    {line}")
        for reason in spec["reasons"]:
            click.echo(f"    - {reason}")
        for e in spec["errors"]:
            click.echo(f"  spec error, line {e['line'] + 1}: {e['message']}")
    for issue in doc.issues:
        click.echo(f"{path}:{issue.line + 1}: {issue.severity}: {issue.message}")


@cli.command()
@click.argument("file")
@click.option("--arch", default="sm_90", show_default=True, help="Target architecture for NVRTC.")
@json_option
@build_flags
def check(file: str, arch: str, build: BuildFlags, as_json: bool) -> None:
    """Compile each kernel of FILE on its own with NVRTC (no GPU needed); report errors and resources."""
    from agent.check import check_document
    from agent.source import Document
    from sandbox.compiler import CompilerUnavailable
    from sandbox.contract import to_dict

    path, text = read_source(file)
    options = build.options(path)
    try:
        result = check_document(Document(text, str(path)), arch=arch, options=options)
    except CompilerUnavailable as exc:
        raise JobFailed(str(exc)) from exc
    if as_json:
        emit_json({**to_dict(result), "ok": result.ok})
    else:
        for issue in result.issues:
            click.echo(f"{path}:{issue.line + 1}: {issue.severity}: {issue.message}")
        for d in result.diagnostics:
            click.echo(f"{d.file}:{d.line}:{d.column}: {d.severity}: {d.message}")
        for k in result.kernels:
            for e in k.spec_errors:
                click.echo(f"{path}:{e.line + 1}: error: spec of {k.kernel}: {e.message}")
        if not result.kernels:
            click.echo(f"{path}: no CUDA kernels (`__global__` functions) found")
        for k in result.kernels:
            r = k.resources
            usage = (
                f"{r.registers} registers, {r.spill_stores}/{r.spill_loads} bytes spilled (st/ld), "
                f"{r.shared_bytes} bytes smem, {r.stack_bytes} bytes stack"
                if r
                else "no resource report"
            )
            name = k.name_expression or k.kernel
            click.echo(
                f"{'ok  ' if k.ok and not k.spec_errors else 'FAIL'} {name}: {usage}"
                + (f" ({k.note})" if k.note else "")
            )
    failed = sum(not k.ok for k in result.kernels)
    broken = sum(bool(k.spec_errors) for k in result.kernels)
    if failed or broken:
        why = [f"{failed} kernel(s) failed to compile"] if failed else []
        why += [f"{broken} spec(s) have errors"] if broken else []
        raise JobFailed("; ".join(why))


@cli.command()
@click.argument("file")
@click.option("--kernel", "-k", "kernel", help="Kernel name (default: the only kernel in FILE).")
@click.option("--gpu", default=0, show_default=True, type=click.IntRange(min=0), help="GPU index.")
@json_option
@build_flags
@memory_option
def bench(
    file: str, kernel: str | None, gpu: int, build: BuildFlags, as_json: bool, eval_budget: Budget | None
) -> None:
    """Time a kernel under its spec on the local GPU: median, spread, GB/s, % of peak."""
    from agent.source import Document
    from agent.target import TargetError, target_for
    from sandbox.contract import to_dict
    from sandbox.executor import ExecutorError
    from sandbox.local import bench_request

    path, text = read_source(file)
    try:
        target = target_for(Document(text, str(path)), kernel, build.options(path))
    except TargetError as exc:
        raise UserError(str(exc)) from exc
    try:
        with _make_executor(gpu) as executor:
            result = executor.evaluate(
                bench_request(target.baseline, target.bench_problem, budget=eval_budget)
            )
    except ExecutorError as exc:
        raise executor_failed(exc) from exc
    r = result.baseline
    simulated = result.device is not None and result.device.simulated
    if as_json:
        emit_json(
            {
                "path": str(path),
                "kernel": target.kernel,
                "problem": target.bench_problem.label,
                "device": to_dict(result.device),
                "simulated": simulated,
                "result": to_dict(r),
            }
        )
    else:
        from sandbox.timing import measured_text
        from server.texts import SIMULATED

        device = result.device.name if result.device else "GPU"
        device = f"the {SIMULATED}" if simulated else device
        click.echo(f"{target.kernel} at {target.bench_problem.label} on {device}: {r.status.value}")
        click.echo(f"  {measured_text(r, detail=True)}")
        if r.message:
            click.echo(f"  {target.located(r)}")
    if r.status.value != "ok":
        raise JobFailed(f"{target.kernel} did not pass its own checks: {r.status.value}")


@cli.command()
@click.argument("file")
@click.option("--kernel", "-k", "kernel", help="Kernel name (default: the only kernel in FILE).")
@click.option("--proposer", type=click.Choice(["builtin", "llm"]), default="builtin", show_default=True)
@click.option("--llm-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (vllm serve).")
@click.option("--model", help="Model name at the endpoint.")
@click.option("--api-key-file", type=click.Path(), help="File holding the endpoint's API key.")
@click.option("--samples", type=click.IntRange(1, 64), help="Parallel LLM conversations (default 4).")
@click.option("--max-turns", type=click.IntRange(1, 200), help="Replies per LLM conversation (default 8).")
@click.option("--temperature", type=click.FloatRange(0, 2), help="LLM sampling temperature (default 0.7).")
@click.option(
    "--budget",
    default="60s",
    show_default=True,
    help="Budget: wall time (60s, 5m), candidates (40c) and/or tokens (200k), comma-separated.",
)
@click.option("--seed", default=0, show_default=True, help="Random seed (runs are reproducible).")
@click.option("--gpu", default=0, show_default=True, type=click.IntRange(min=0), help="GPU index.")
@click.option(
    "--trajectory",
    metavar="PATH|off",
    help="Append every attempt to this JSONL file (default $XDG_DATA_HOME/cuda-agent/trajectories.jsonl).",
)
@click.option("--diff", "show_diff", is_flag=True, help="Print the verified rewrite as a unified diff.")
@click.option("--write", is_flag=True, help="Apply the verified rewrite to FILE (a backup is kept).")
@click.option("--force", is_flag=True, help="With --write: write FILE even if it is read-only (mode 444).")
@click.option("--attempts", "show_attempts", is_flag=True, help="List every candidate's verdict in a table.")
@json_option
@build_flags
@memory_option
def optimize(
    file: str,
    kernel: str | None,
    proposer: str,
    llm_url: str | None,
    model: str | None,
    api_key_file: str | None,
    samples: int | None,
    max_turns: int | None,
    temperature: float | None,
    budget: str,
    seed: int,
    gpu: int,
    trajectory: str | None,
    show_diff: bool,
    write: bool,
    force: bool,
    show_attempts: bool,
    build: BuildFlags,
    as_json: bool,
    eval_budget: Budget | None,
) -> None:
    """Search for a faster kernel, verify it against the original, and report the speedup."""
    import threading

    from agent import loop
    from agent.proposer import parse_budget
    from agent.source import Document
    from agent.target import TargetError, target_for
    from agent.trajectory import TrajectoryLog, default_path
    from sandbox.executor import ExecutorError

    path, text = read_source(file)
    if write and not force and (why := read_only(path)):
        raise UserError(why)
    try:
        limits = parse_budget(budget)
    except ValueError as exc:
        raise UserError(f"--budget {budget}: {exc}") from exc
    try:
        target = target_for(Document(text, str(path)), kernel, build.options(path))
    except TargetError as exc:
        raise UserError(str(exc)) from exc
    if proposer == "llm":
        from agent.llm import LLMSettings

        llm = LLMSettings.from_env(
            base_url=llm_url,
            model=model,
            api_key_file=api_key_file,
            samples=samples,
            max_turns=max_turns,
            temperature=temperature,
        )
        if not llm.model:
            raise UserError("--proposer llm needs --model (or CUDA_AGENT_LLM_MODEL)")
        if llm.api_key_file:  # a missing or odd key file: one line now, not a failed run later
            read_regular_file(os.path.expanduser(llm.api_key_file), "a file holding the API key", 64 << 10)
    log_path = None if trajectory == "off" else Path(trajectory) if trajectory else default_path()
    cancel = threading.Event()
    outcome: list[loop.OptimizeResult | BaseException] = []
    with _progress_bar(enabled=not as_json and sys.stderr.isatty()) as on_event:

        def work() -> None:
            try:
                with _make_executor(gpu) as executor:
                    search = _make_proposer(proposer, llm if proposer == "llm" else None)
                    try:
                        outcome.append(
                            loop.optimize(
                                target,
                                search,
                                executor,
                                budget=limits,
                                seed=seed,
                                settings=loop.LoopSettings(eval_budget=eval_budget) if eval_budget else None,
                                on_event=on_event,
                                cancel=cancel,
                                trajectory=TrajectoryLog(log_path) if log_path else None,
                            )
                        )
                    finally:
                        search.close()
            except BaseException as exc:  # handed to the main thread, which reports it
                outcome.append(exc)
            finally:
                finished.set()

        # The search runs in a thread so that Ctrl-C (delivered to this thread) can cancel it
        # and still report the best candidate so far.
        finished = threading.Event()
        threading.Thread(target=work, name="optimize", daemon=True).start()
        try:
            while not finished.wait(0.1):
                pass
        except KeyboardInterrupt:
            click.echo("cuda-agent: cancelling (the best candidate so far is kept)", err=True)
            cancel.set()
            finished.wait()
    result = outcome[0]
    if isinstance(result, ExecutorError):
        raise executor_failed(result)
    if isinstance(result, click.ClickException):
        raise result
    if isinstance(result, BaseException):
        raise JobFailed(f"{type(result).__name__}: {result}")
    written = backup = None
    if write and result.outcome is loop.RunOutcome.IMPROVED:
        written, backup = write_rewrite(path, text, result.rewritten, force=force)
    if as_json:
        emit_json(_optimize_json(target, result, written, backup, log_path))
    else:
        _print_optimize(target, result, show_diff, written, backup, write, show_attempts)
    if result.outcome is loop.RunOutcome.BASELINE_FAILED:
        raise JobFailed(f"the original kernel failed its own checks ({result.stop})")
    if result.attempts == 0 and result.stop.failed:
        raise JobFailed(str(result.stop))


def _make_executor(gpu: int, gpus: tuple[int, ...] = ()) -> Executor:
    """The local GPUs' sandbox (``gpus``, else ``gpu``: one worker per GPU), a Ray cluster when
    ``CUDA_AGENT_RAY_ADDRESS`` is set, or a remote worker when ``CUDA_AGENT_WORKER_URL`` is set
    (token in ``CUDA_AGENT_TOKEN``); ``CUDA_AGENT_TEST_EXECUTOR=1`` swaps in the simulated GPU (one
    per GPU index: tests, demos)."""
    import os

    from server.settings import ExecutorSettings, Secret, make_executor

    url = os.environ.get("CUDA_AGENT_WORKER_URL")
    if os.environ.get("CUDA_AGENT_TEST_EXECUTOR") == "1":
        if not url:
            return make_executor(ExecutorSettings(kind="test", gpu=gpu, gpus=gpus))
        click.echo(
            f"cuda-agent: CUDA_AGENT_WORKER_URL is set: evaluating on the worker at {url}, not on a local "
            "simulated GPU (to simulate there: `cuda-agent worker --simulate`)",
            err=True,
        )
    if address := os.environ.get("CUDA_AGENT_RAY_ADDRESS"):
        return make_executor(ExecutorSettings(kind="ray", ray_address=address))
    if url:
        if not os.environ.get("CUDA_AGENT_TOKEN"):
            raise UserError("CUDA_AGENT_WORKER_URL is set but CUDA_AGENT_TOKEN is not")
        return make_executor(ExecutorSettings(kind="remote", url=url, token=Secret("env:CUDA_AGENT_TOKEN")))
    return make_executor(ExecutorSettings(kind="local", gpu=gpu, gpus=gpus))


def _make_proposer(kind: str, llm: LLMSettings | None) -> Proposer:
    if llm is not None:
        from agent.llm import LLMProposer
        from sandbox.compile_pool import CompilePool

        return LLMProposer(llm, compiler=CompilePool(workers=2))
    try:
        from agent.builtin import BuiltinProposer
    except ImportError as exc:
        raise JobFailed(f"the built-in engine is not available ({exc}); try --proposer llm") from exc
    return BuiltinProposer()


@contextlib.contextmanager
def _progress_bar(enabled: bool) -> Iterator[Callable[[LoopEvent], None] | None]:
    """A progress bar on stderr (a terminal only), fed by loop events from any thread."""
    if not enabled:
        yield None
        return
    import threading

    lock = threading.Lock()
    with click.progressbar(length=1000, label="optimizing", file=sys.stderr, show_eta=False) as bar:

        def on_event(ev: LoopEvent) -> None:
            with lock:
                if ev.fraction is not None:
                    bar.update(max(0, int(ev.fraction * 1000) - bar.pos))
                best = f", best {ev.best_speedup:.2f}x" if ev.best_speedup else ""
                bar.label = f"{ev.evaluated} candidates{best}"
                bar.render_progress()

        yield on_event


def read_only(path: Path) -> str | None:
    """Why ``--write`` must not write ``path`` without ``--force`` (no write permission bit)."""
    try:
        mode = path.resolve().stat().st_mode
    except OSError:
        return None  # reading it already failed or will: that error is clearer
    if not mode & 0o222:
        return f"{path} is read-only (mode {mode & 0o777:o}); nothing written (--force writes it anyway)"
    return None


def write_rewrite(path: Path, original: str, rewritten: str, *, force: bool = False) -> tuple[Path, Path]:
    """Write ``rewritten`` over FILE, keeping a backup; returns (the file written, its backup).

    A symlink is followed to the real file (the link stays a link).  Unchanged lines keep their
    exact bytes (undecodable bytes outside the rewrite survive) and a CRLF file stays CRLF.  The
    backup is a new file (``FILE.bak``, ``FILE.bak1``...) created without following a symlink at
    that name, with the file's mode and owner; the file is replaced atomically, keeping its mode
    and owner, or, when it has other hard links, rewritten in place (the links keep sharing it).
    Refused (JobFailed) when FILE changed during the run, and when it is read-only unless
    ``force``; any failure leaves nothing behind.
    """
    import contextlib
    import errno
    import os
    import tempfile

    real = path.resolve()
    try:
        raw = real.read_bytes()
        st = real.stat()
    except OSError as exc:
        raise JobFailed(f"{path}: cannot read ({exc.strerror}); nothing written") from None
    if raw.decode("utf-8", errors="replace") != original:
        raise JobFailed(f"{path} changed during the run; nothing written (rerun to optimize the new version)")
    if not force and (why := read_only(real)):
        raise JobFailed(why)
    mode = st.st_mode & 0o7777
    created: list[Path] = []

    def own(fd: int) -> None:
        os.fchmod(fd, mode)
        if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
            with contextlib.suppress(PermissionError):  # not ours to give away: keep our ownership
                os.fchown(fd, st.st_uid, st.st_gid)

    try:
        i = 0
        while True:
            backup = real.with_name(f"{real.name}.bak{i or ''}")
            try:
                fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                break
            except FileExistsError:
                i += 1
        created.append(backup)
        with os.fdopen(fd, "wb") as f:
            own(f.fileno())
            f.write(raw)
        new = _spliced_bytes(raw, original, rewritten)
        if st.st_nlink > 1:  # a rename would split the hard links: write the shared file itself
            fd = os.open(real, os.O_WRONLY | os.O_NOFOLLOW)
            try:
                os.ftruncate(fd, 0)
                os.write(fd, new)  # a regular file: one write writes it all
            except OSError:
                os.pwrite(fd, raw, 0)  # as it was (the backup holds it too)
                raise
            finally:
                os.close(fd)
        else:
            fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.")
            created.append(Path(tmp))
            with os.fdopen(fd, "wb") as f:
                own(f.fileno())
                f.write(new)
            os.replace(tmp, real)
            created.remove(Path(tmp))
    except OSError as exc:
        for leftover in created:
            leftover.unlink(missing_ok=True)
        why = exc.strerror or str(exc)
        if exc.errno in (errno.EPERM, errno.EACCES, errno.EROFS):
            why += " (is the file immutable or its folder read-only?)"
        raise JobFailed(f"{path}: cannot write ({why}); nothing changed") from None
    return real, backup


def _spliced_bytes(raw: bytes, original: str, rewritten: str) -> bytes:
    """``rewritten`` as bytes, where lines it shares with ``original`` keep ``raw``'s exact bytes
    (``original`` is ``raw`` decoded with replacement, line for line: a newline is never part
    of an undecodable sequence)."""
    import difflib

    old, raw_lines, new = original.split("\n"), raw.split(b"\n"), rewritten.split("\n")
    crlf = b"\r\n" in raw and raw.count(b"\n") == raw.count(b"\r\n")  # a CRLF file stays one

    def encoded(j: int) -> bytes:
        line = new[j].encode("utf-8")
        return line + b"\r" if crlf and j < len(new) - 1 and not line.endswith(b"\r") else line

    if len(old) != len(raw_lines):
        return b"\n".join(encoded(j) for j in range(len(new)))
    out: list[bytes] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        out += raw_lines[i1:i2] if tag == "equal" else [encoded(j) for j in range(j1, j2)]
    return b"\n".join(out)


def _print_optimize(
    target: Target,
    result: OptimizeResult,
    show_diff: bool,
    written: Path | None,
    backup: Path | None,
    write: bool,
    show_attempts: bool = False,
) -> None:
    from agent.attempts import verdict_summary
    from agent.loop import RunOutcome
    from sandbox.timing import measured_text
    from server.texts import SIMULATED, plural

    device = result.device.name if result.device else "unknown device"
    device = f"the {SIMULATED}: every number below is made up" if result.simulated else device
    click.echo(f"{target.kernel} in {target.path} on {device}")
    click.echo(f"  original: {measured_text(result.baseline)}")
    best = result.best
    if result.outcome is RunOutcome.BASELINE_FAILED:
        click.echo(f"  the original failed its own checks: {result.stop}")
    elif best is None:
        click.echo("  no candidate passed verification")
    else:
        verdict = "faster" if result.outcome is RunOutcome.IMPROVED else "best verified, not reliably faster"
        click.echo(
            f"  {verdict}: {measured_text(best.result)}: {result.speedup:.2f}x "
            f"[{result.speedup_low:.2f}x-{result.speedup_high:.2f}x] ({best.proposal.description})"
        )
        sizes = ", ".join(
            f"{c.label} ({c.seeds} seed{'s' if c.seeds != 1 else ''}, max error {c.error_ratio:.2g} of its bound)"
            for c in result.verification
        )
        click.echo(f"  verified on: {sizes}")
        if best.result.precision:
            click.echo(f"  lower precision: {best.result.precision}")
        if best.result.sanitizer:
            click.echo(f"  compute-sanitizer: {best.result.sanitizer}")
        for a in result.assumptions:
            click.echo(f"  assumes: {a}")
        if result.launch is not None:
            change = ", ".join(
                f"{k}={v}"
                for k, v in (
                    ("grid", result.launch.grid),
                    ("block", result.launch.block),
                    ("smem", result.launch.shared),
                )
                if v
            )
            sites = plural(result.launch_sites, "launch site")
            click.echo(f"  launch: {change} (the spec's launch line and {sites} in this file updated)")
            if result.launch_todo:
                click.echo(f"  to do: {result.launch_todo}")
    tokens = f", {result.tokens} tokens" if result.tokens else ""
    click.echo(
        f"  {verdict_summary(result.records)} in {result.seconds:.1f} s{tokens} (measuring the original: "
        f"{result.baseline_seconds:.1f} s); stopped: {result.stop}"
    )
    if show_attempts:
        click.echo(attempts_table(result.records))
    if show_diff and result.diff:
        click.echo(result.diff, nl=False)
    if written is not None:
        click.echo(f"wrote {written} (backup: {backup})")
    elif write:
        click.echo(f"{target.path}: not changed (no verified faster rewrite)")


def attempts_table(records: Sequence[AttemptRecord]) -> str:
    """Every attempt's verdict, one row each: id, status, speedup, registers, what went wrong."""
    rows = [("#", "candidate", "status", "speedup", "regs", "verdict")]
    for a in records:
        if a.status == "ok":
            detail = a.description
        elif a.compile_line:
            detail = f"line {a.compile_line}:{a.compile_column}: {a.message.split(': ', 1)[-1]}"
        elif a.values or a.first_bad_index >= 0:
            at = f"[{a.first_bad_index}]" if a.first_bad_index >= 0 else ""
            detail = f"{a.output}{at} at {a.problem}: {a.values or a.message}"
        else:
            detail = a.message
        if a.rule:
            detail = f"[{a.rule}] {detail}"
        if a.duplicate_of:
            detail = f"same as {a.duplicate_of}: {detail}"
        speed = f"{a.speedup:.2f}x" if a.speedup else "-"
        regs = str(a.registers) if a.registers else "-"
        rows.append((str(a.index), a.candidate_id, a.status, speed, regs, " ".join(detail.split())[:100]))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join(
        "  " + "  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5] for r in rows
    )


def _optimize_json(
    target: Target, result: OptimizeResult, written: Path | None, backup: Path | None, log_path: Path | None
) -> dict[str, Any]:
    from agent.attempts import verdict_summary
    from sandbox.contract import to_dict

    best = result.best
    return {
        "file": target.path,
        "kernel": target.kernel,
        "outcome": result.outcome.value,
        "stop_reason": str(result.stop),
        "stop_kind": result.stop.kind.value,
        "cancelled": result.cancelled,
        "speedup": result.speedup,
        "speedup_low": result.speedup_low,
        "speedup_high": result.speedup_high,
        "baseline": to_dict(result.baseline),
        "best": None
        if best is None
        else {
            "candidate_id": best.candidate_id,
            "description": best.proposal.description,
            "code": best.proposal.code,
            "kernel": best.proposal.kernel,
            "result": to_dict(best.result),
        },
        "assumptions": list(result.assumptions),
        "verification": to_dict(result.verification),
        "launch": to_dict(result.launch) if result.launch else None,
        "launch_edits": to_dict(result.launch_edits),
        "launch_sites": result.launch_sites,
        "launch_todo": result.launch_todo,
        "diff": result.diff,
        "candidates": result.attempts,
        "verdicts": verdict_summary(result.records),
        "attempts": to_dict(result.records),
        "simulated": result.simulated,
        "tokens": result.tokens,
        "seconds": result.seconds,
        "baseline_seconds": result.baseline_seconds,
        "device": to_dict(result.device) if result.device else None,
        "written": str(written) if written else None,
        "backup": str(backup) if backup else None,
        "trajectory": str(log_path) if log_path else None,
    }


@cli.command()
@click.argument("file")
@click.option("--kernel", "-k", "kernel", help="The original kernel (default: the only kernel in FILE).")
@click.option(
    "--with",
    "-w",
    "with_",
    required=True,
    metavar="KERNEL|OTHER.cu[:KERNEL]",
    help="The rewrite: another kernel of FILE, or a kernel of another file.",
)
@click.option(
    "--launch",
    metavar="'grid=.. block=.. smem=..'",
    help="The rewrite's launch, in the spec's vocabulary (default: its own `launch` line, else the original's).",
)
@click.option("--seed", default=0, show_default=True, help="Random seed for the verification inputs.")
@click.option("--gpu", default=0, show_default=True, type=click.IntRange(min=0), help="GPU index.")
@click.option("--no-sanitize", is_flag=True, help="Skip compute-sanitizer on a verified rewrite.")
@json_option
@build_flags
def compare(
    file: str,
    kernel: str | None,
    with_: str,
    launch: str | None,
    seed: int,
    gpu: int,
    no_sanitize: bool,
    build: BuildFlags,
    as_json: bool,
) -> None:
    """Verify a rewrite you already have against a kernel and measure the speedup.

    Sizes, arguments and tolerance come from the original's spec; exit status 0 when the rewrite
    verified, 1 when it did not, 2 for mistakes."""
    import random

    from agent import compare as cmp
    from agent.source import Document
    from agent.target import TargetError
    from sandbox.executor import ExecutorError

    path, text = read_source(file)

    def open_document(name: str) -> Document:
        cand_path, cand_text = read_source(name)
        return Document(cand_text, str(cand_path))

    try:
        target, proposal, cand_doc = cmp.prepare(
            Document(text, str(path)), kernel, with_, launch, open_document, build.options(path)
        )
    except TargetError as exc:
        raise UserError(str(exc)) from exc
    rng = random.Random(seed)
    seeds = tuple(rng.randrange(1, 2**31) for _ in range(3))
    try:
        with _make_executor(gpu) as executor:
            found = cmp.compare(
                target,
                proposal,
                executor,
                candidate_path=cand_doc.path,
                seeds=seeds,
                sanitize=not no_sanitize,
            )
    except TargetError as exc:
        raise UserError(str(exc)) from exc
    except ExecutorError as exc:
        raise executor_failed(exc) from exc
    if as_json:
        emit_json(_compare_json(found))
    else:
        _print_compare(found)
    if not found.verified:
        raise JobFailed(
            f"{proposal.kernel} did not verify against {target.kernel}: {found.candidate.status.value}"
        )


@cli.command()
@click.argument("file")
@click.option("--kernel", "-k", "kernel", help="Kernel name (default: the only kernel in FILE).")
@click.option(
    "--with",
    "with_",
    metavar="NAME|FILE|FILE:NAME",
    help="Also profile this rewrite of the kernel (verified against it first), e.g. a winner written out.",
)
@click.option("--gpu", default=0, show_default=True, type=click.IntRange(0), help="GPU index.")
@json_option
@build_flags
def profile(
    file: str, kernel: str | None, with_: str | None, gpu: int, build: BuildFlags, as_json: bool
) -> None:
    """Profile a kernel under Nsight Compute on its spec's bench problem: speed of light (memory,
    compute), achieved occupancy and its limiter, top stall reasons, DRAM and L2 bytes.

    Exit status 1 when no metrics came back (no GPU, no `ncu`, counters not permitted)."""
    from agent import compare as cmp
    from agent import profile as prof
    from agent.source import Document
    from agent.target import TargetError, target_for
    from sandbox.contract import to_dict
    from sandbox.executor import ExecutorError

    path, text = read_source(file)
    doc = Document(text, str(path))

    def open_document(name: str) -> Document:
        other_path, other_text = read_source(name)
        return Document(other_text, str(other_path))

    try:
        if with_ is None:
            target, rewrite = target_for(doc, kernel, build.options(path)), None
        else:
            target, rewrite, _ = cmp.prepare(doc, kernel, with_, None, open_document, build.options(path))
        with _make_executor(gpu) as executor:
            report = prof.profile(target, executor, rewrite=rewrite)
    except TargetError as exc:
        raise UserError(str(exc)) from exc
    except ExecutorError as exc:
        raise executor_failed(exc) from exc
    if as_json:
        emit_json(
            {
                "path": str(path),
                "kernel": report.kernel,
                "problem": report.problem,
                "device": to_dict(report.device),
                "kernels": [
                    {
                        "label": k.label,
                        "description": k.description,
                        "status": k.result.status.value,
                        "message": k.result.message,
                        "profile": to_dict(k.profile),
                    }
                    for k in report.kernels
                ],
            }
        )
    else:
        click.echo("\n".join(report.lines()))
    if not report.available:
        why = next(k.profile.message for k in report.kernels if not k.profile.available)
        raise JobFailed(f"no Nsight Compute metrics for {report.kernel}: {why}")


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--kernel", "kernel_re", metavar="REGEX", help="Record only kernels whose demangled name matches."
)
@click.option(
    "--launch",
    "launch_index",
    type=click.IntRange(0),
    help="Which matching launch (0-based; default the first).",
)
@click.option(
    "--max-launches", default=8, show_default=True, type=click.IntRange(1), help="Launches recorded at most."
)
@click.option(
    "--save-inputs",
    metavar="DIR",
    help="Save the recorded launch's input data (raw, per argument) in DIR, 256 MiB at most.",
)
@click.option(
    "--source",
    "sources",
    multiple=True,
    metavar="PATH",
    help="A file or folder holding the kernel's source (repeatable; default: the current folder).",
)
@click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), help="Stop the program after this many seconds."
)
@click.option("--write", is_flag=True, help="Write the spec above the kernel in its file (a backup is kept).")
@json_option
@click.argument("program", nargs=-1, required=True, type=click.UNPROCESSED)
def capture(
    kernel_re: str | None,
    launch_index: int | None,
    max_launches: int,
    save_inputs: str | None,
    sources: tuple[str, ...],
    timeout: float | None,
    write: bool,
    as_json: bool,
    program: tuple[str, ...],
) -> None:
    """Run PROGRAM on this machine's GPU, watch its kernel launches (CUPTI) and write the spec of one.

    cuda-agent capture [OPTIONS] -- PROGRAM [ARGS]...  The spec is shown as a diff of the kernel's
    file; --write applies it."""
    import re

    from agent import capture as cap
    from sandbox.capture import CaptureError, run_program

    if kernel_re:
        try:
            re.compile(kernel_re)
        except re.error as exc:
            raise UserError(f"--kernel {kernel_re}: not a regular expression ({exc})") from exc
    try:
        run = run_program(
            program,
            kernel=kernel_re,
            launch=launch_index,
            max_launches=max_launches,
            save_dir=save_inputs,
            timeout=timeout,
        )
    except CaptureError as exc:
        raise JobFailed(str(exc)) from exc
    if not run.launches:
        raise JobFailed(cap.nothing_captured(program[0], run))
    try:
        found = cap.propose(run.launches, launch_index, sources or (".",))
    except cap.CaptureMismatch as exc:
        recorded = ", ".join(sorted({x.kernel for x in run.launches}))
        raise JobFailed(f"{exc} (recorded: {recorded}; --source names the kernel's files)") from exc
    launch, doc, captured, new_text, errors = (
        found.launch,
        found.doc,
        found.captured,
        found.new_text,
        found.errors,
    )
    path = Path(doc.path or "")
    written = backup = None
    if write and not errors:
        written, backup = write_rewrite(path, doc.text, new_text)
    if as_json:
        emit_json(
            {
                "program": list(program),
                "exit_status": run.returncode,
                "seconds": run.seconds,
                "kernels": dict(run.kernels),
                "launch": {
                    "index": launch.index,
                    "api": launch.api,
                    "kernel": launch.kernel,
                    "grid": launch.grid,
                    "block": launch.block,
                    "smem": launch.smem,
                },
                "file": str(path),
                "kernel": captured.kernel.qualified_name,
                "spec": captured.text,
                "notes": list(captured.notes),
                "errors": list(errors),
                "saved_inputs": {k: str(Path(run.save_dir) / v) for k, v in captured.saved.items()},
                "diff": found.diff,
                "written": str(written) if written else None,
                "backup": str(backup) if backup else None,
            }
        )
    else:
        g, b = launch.grid, launch.block
        click.echo(
            f"{launch.kernel}: launch {launch.index} of {run.kernels.get(launch.kernel, 1)}, grid {g}, "
            f"block {b}, smem {launch.smem} ({run.seconds:.1f} s, exit status {run.returncode})"
        )
        for note in captured.notes:
            click.echo(f"  note: {note}")
        for name, file in captured.saved.items():
            click.echo(f"  input {name} saved: {Path(run.save_dir) / file}")
        for err in errors:
            click.echo(f"  spec error: {err}")
        click.echo(found.diff, nl=False)
        if written is not None:
            click.echo(f"wrote {written} (backup: {backup})")
        elif not write:
            click.echo(f"(not written: --write applies it to {path})")
    if errors:
        raise JobFailed(f"the captured spec does not resolve: {errors[0]}")


def _compare_json(found: Any) -> dict[str, Any]:
    from agent.attempts import size_checks
    from agent.compare import reason_text
    from sandbox.contract import to_dict

    c, base = found.candidate, found.result.baseline
    bad = found.first_failure

    def side(r: Any) -> dict[str, Any]:
        res = r.resources
        return {
            "status": r.status.value,
            "median_ms": r.timing.median_ms if r.timing else None,
            "gbps": r.achieved_gbps,
            "pct_peak_bandwidth": r.pct_peak_bandwidth,
            "pct_peak_flops": r.pct_peak_flops,
            "registers": res.registers if res else None,
            "spill_bytes": (res.spill_stores + res.spill_loads) if res else None,
        }

    return {
        "file": found.target.path,
        "kernel": found.target.kernel,
        "candidate": {"file": found.candidate_path, "kernel": found.proposal.kernel},
        "verified": found.verified,
        "status": c.status.value,
        "message": c.message,
        "reason": reason_text(found),
        "first_failure": to_dict(bad) if bad else None,
        "speedup": c.speedup,
        "speedup_low": c.speedup_low,
        "speedup_high": c.speedup_high,
        "original": side(base),
        "rewrite": side(c),
        "launch": to_dict(found.proposal.launch) if found.proposal.launch else None,
        "precision": {"claimed": list(found.proposal.precision), "detected": c.precision},
        "verification": to_dict(size_checks(c)),
        "sanitizer": c.sanitizer,
        "baseline": to_dict(base),
        "result": to_dict(c),
        "device": to_dict(found.result.device) if found.result.device else None,
        "simulated": found.result.device is not None and found.result.device.simulated,
    }


def _print_compare(found: Any) -> None:
    from agent.attempts import size_checks
    from agent.compare import reason_text
    from sandbox.timing import measured_text
    from server.texts import SIMULATED

    t, c, base = found.target, found.candidate, found.result.baseline
    device = found.result.device.name if found.result.device else "unknown device"
    if found.result.device is not None and found.result.device.simulated:
        device = f"the {SIMULATED}: every number below is made up"
    where = "the same file" if found.candidate_path == t.path else found.candidate_path
    click.echo(f"{t.kernel} ({t.path}) against {found.proposal.kernel} ({where}) on {device}")
    if base.status.value != "ok":
        click.echo(f"  {reason_text(found)}")
        return
    click.echo(f"  verdict: {'verified' if found.verified else reason_text(found)}")
    for check in size_checks(c):
        mark = "ok" if check.ok else "FAILED"
        click.echo(
            f"    {check.label}: {mark} on {check.seeds} seed(s), max abs err {check.max_abs_err:.3g}, "
            f"max rel err {check.max_rel_err:.3g}"
        )
    click.echo(f"  original:  {measured_text(base, detail=True)}")
    if found.verified:
        click.echo(f"  rewrite:   {measured_text(c, detail=True)}")
        click.echo(f"  speedup:   {c.speedup:.2f}x [{c.speedup_low:.2f}x-{c.speedup_high:.2f}x]")
        if c.note:
            click.echo(f"  note: {c.note}")
    elif c.resources:
        click.echo(f"  rewrite:   {c.resources.registers} registers, {c.resources.spill_stores} B spilled")
    if found.proposal.precision or c.precision:
        claimed = ", ".join(found.proposal.precision) or "none"
        click.echo(f"  precision: claimed {claimed}; detected {c.precision or 'none'}")
    if c.sanitizer:
        click.echo(f"  compute-sanitizer: {c.sanitizer}")
    elif found.verified:
        click.echo("  compute-sanitizer: not run")
    if found.proposal.launch is not None:
        lc = found.proposal.launch
        parts = ", ".join(
            f"{k}={v}" for k, v in (("grid", lc.grid), ("block", lc.block), ("smem", lc.shared)) if v
        )
        click.echo(f"  rewrite launched with {parts}")


@cli.command()
@click.argument("directory")
@click.option("--budget", default="60s", show_default=True, help="Budget per kernel (see optimize).")
@click.option("--seed", default=0, show_default=True, help="Random seed (runs are reproducible).")
@click.option("--gpu", type=click.IntRange(min=0), help="Only this GPU (same as --gpus N).")
@click.option(
    "--gpus",
    help="GPUs to use, one worker and one kernel at a time each: 0,1 or all (default: all visible).",
)
@click.option("--match", default="*", show_default=True, help="Only the files whose name matches this glob.")
@click.option(
    "--jsonl",
    type=click.Path(dir_okay=False),
    help="Append each kernel's result to this file as it finishes.",
)
@click.option(
    "--deadline",
    type=click.FloatRange(min=1.0),
    help="Seconds per kernel, everything included (default: the budget's wall time, then as long again, at least 60 s).",
)
@json_option
@build_flags
@memory_option
def suite(
    directory: str,
    budget: str,
    seed: int,
    gpu: int | None,
    gpus: str | None,
    match: str,
    jsonl: str | None,
    deadline: float | None,
    build: BuildFlags,
    as_json: bool,
    eval_budget: Budget | None,
) -> None:
    """Optimize every kernel with a spec in DIRECTORY and print a table with fast_1, fast_1.5, geomean.
    One progress line per kernel goes to stderr as it finishes."""
    from dataclasses import asdict

    from agent import loop
    from agent.proposer import parse_budget
    from agent.suite import SuiteEntry, families, find_targets, run_suite, summarize
    from sandbox.executor import ExecutorError
    from sandbox.scheduler import parse_gpus

    if gpu is not None and gpus is not None:
        raise UserError("give --gpu or --gpus, not both")
    try:
        devices = (gpu,) if gpu is not None else parse_gpus(gpus or "all")
    except ValueError as exc:
        raise UserError(f"--gpus {gpus}: {exc}") from exc
    root = Path(directory)
    if not root.is_dir():
        raise UserError(f"{directory}: no such directory")
    try:
        limits = parse_budget(budget)
    except ValueError as exc:
        raise UserError(f"--budget {budget}: {exc}") from exc
    if next(find_targets(root, match, build.options), None) is None:
        raise UserError(f"{directory}: no kernel with a `// @cuda-agent` spec in its {match} .cu/.cuh files")

    def progress(done: int, total: int, e: SuiteEntry) -> None:
        speed = f" {e.speedup:.2f}x [{e.speedup_low:.2f}-{e.speedup_high:.2f}]" if e.status != "error" else ""
        why = f" ({e.description})" if e.status == "error" or "deadline" in e.description else ""
        on = f" on GPU {','.join(map(str, e.gpus))}" if e.gpus else ""
        click.echo(
            f"[{done}/{total}] {Path(e.file).name} {e.kernel}: {e.status}{speed} in {e.seconds:.1f} s{on}{why}",
            err=True,
        )

    try:
        with _make_executor(devices[0], devices) as executor:
            info = executor.device_info()
            device, simulated = info.name, info.simulated
            entries = run_suite(
                root,
                executor,
                budget=limits,
                seed=seed,
                match=match,
                on_entry=progress,
                jsonl=Path(jsonl) if jsonl else None,
                deadline_s=deadline,
                options=build.options,
                settings=loop.LoopSettings(eval_budget=eval_budget) if eval_budget else None,
            )
    except ExecutorError as exc:
        raise executor_failed(exc) from exc
    summary = summarize(entries)
    groups = families(entries, root)
    if as_json:
        emit_json(
            {
                "directory": str(root),
                "device": device,
                "simulated": simulated,
                "gpus": sorted({g for e in entries for g in e.gpus}),
                "budget": budget,
                "seed": seed,
                "match": match,
                "kernels": [asdict(e) for e in entries],
                "summary": asdict(summary),
                "families": [asdict(g) for g in groups],
            }
        )
        return
    header = (
        f"{'kernel':<28} {'status':<15} {'speedup':>22} {'% peak before':>14} {'% peak after':>13} {'gpu':>4}"
        " of"
    )
    used = sorted({g for e in entries for g in e.gpus})
    where = f" (GPU{'s' if len(used) > 1 else ''} {','.join(map(str, used))})" if used else ""
    if simulated:
        from server.texts import SIMULATED

        device = f"the {SIMULATED} (every number below is made up)"
    click.echo(f"{root} on {device}{where}, budget {budget} per kernel, seed {seed}")
    click.echo(header)
    for e in entries:
        name = f"{Path(e.file).stem}:{e.kernel}" if Path(e.file).stem != e.kernel else e.kernel
        spread = (
            f"{e.speedup:.2f}x [{e.speedup_low:.2f}-{e.speedup_high:.2f}]" if e.status != "error" else "-"
        )
        gpu_col = ",".join(map(str, e.gpus)) or "-"
        click.echo(
            f"{name[:28]:<28} {e.status:<15} {spread:>22} {e.pct_peak_before:>13.0f}% {e.pct_peak_after:>12.0f}%"
            f" {gpu_col:>4} {e.ceiling or '-'}"
        )
    click.echo(
        f"fast_1 {summary.fast_1:.0%}  fast_1.5 {summary.fast_1_5:.0%}  geomean {summary.geomean:.2f}x  "
        f"({summary.improved}/{summary.kernels} improved, {summary.errors} not run)"
    )
    for g in groups if len(groups) > 1 else ():
        s = g.summary
        click.echo(
            f"  {g.family:<26} fast_1.5 {s.fast_1_5:>4.0%}  geomean {s.geomean:6.2f}x  % of {'+'.join(g.ceilings) or '-'}"
            f" {g.pct_peak_before:.0f}% -> {g.pct_peak_after:.0f}%  ({s.kernels} kernels)"
        )
    for e in entries:
        if e.status == "error" or e.status == loop.RunOutcome.BASELINE_FAILED.value:
            click.echo(f"  {e.kernel}: {e.description}")


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token-file",
    type=click.Path(),
    help="File holding the bearer token clients must send (required off loopback).",
)
@click.option("--tls-cert", type=click.Path(), help="PEM certificate (chain): serve HTTPS.")
@click.option("--tls-key", type=click.Path(), help="PEM private key of --tls-cert.")
@click.option(
    "--gpus", default="0", show_default=True, help="Comma-separated GPU indices to serve, one queue each."
)
@click.option(
    "--max-per-client",
    default=8,
    show_default=True,
    type=click.IntRange(1),
    help="Evaluations in flight per client.",
)
@click.option(
    "--max-timeout",
    default=600.0,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    help="Longest per-candidate timeout a request may ask for (seconds).",
)
@click.option(
    "--max-memory-gb",
    default=64.0,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    help="Largest GPU memory cap a request may ask for.",
)
@click.option(
    "--max-candidates",
    default=64,
    show_default=True,
    type=click.IntRange(0),
    help="Candidates per request.",
)
@click.option(
    "--trusted-proxy",
    multiple=True,
    help="Address of a proxy whose X-Forwarded-For names the client (repeatable; default: none).",
)
@click.option(
    "--simulate",
    is_flag=True,
    help="Serve simulated GPUs (no GPU used; code is still compiled): to try the remote flow anywhere.",
)
@click.option(
    "--unsafe-no-isolation",
    is_flag=True,
    help="Serve even where compiles cannot be isolated from this host (no bubblewrap, no Landlock): "
    "a request could then read any file this user can.",
)
def worker(
    host: str,
    port: int,
    token_file: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    gpus: str,
    max_per_client: int,
    max_timeout: float,
    max_memory_gb: float,
    max_candidates: int,
    trusted_proxy: tuple[str, ...],
    simulate: bool,
    unsafe_no_isolation: bool,
) -> None:
    """Serve this machine's GPUs to remote editors and optimizers over HTTP."""
    import logging
    import os
    import signal

    try:
        from sandbox import service
    except ImportError as exc:
        raise UserError(
            f"the worker needs the `worker` extra: pip install 'cuda-agent[worker]' ({exc})"
        ) from exc
    from sandbox.compile_pool import compile_isolation
    from sandbox.contract import RequestLimits
    from sandbox.executor import ExecutorError
    from sandbox.remote import local_gpu_executor
    from server.texts import plural

    token = read_token(token_file) if token_file else None
    why = service.check_listen_policy(host, token) or service.check_tls(tls_cert, tls_key)
    if why:
        raise UserError(why)
    try:
        indices = [int(g) for g in gpus.split(",")]
    except ValueError:
        raise UserError(f"--gpus {gpus!r}: expected comma-separated GPU indices such as 0,1") from None
    isolation = compile_isolation()
    if isolation == "none" and not unsafe_no_isolation:
        raise UserError(
            "refusing to serve: compiles cannot be isolated from this host here (no usable bubblewrap, "
            "no Landlock), so a request could read this host's files through the compiler; install "
            "bubblewrap (or use Linux 5.13+ with Landlock), or pass --unsafe-no-isolation to serve anyway"
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("cuda_agent.worker")
    try:
        sock = service.listen(host, port)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    request_limits = RequestLimits(
        max_timeout_s=max_timeout, max_memory_bytes=int(max_memory_gb * 2**30), max_candidates=max_candidates
    )
    limits = service.Limits(
        max_per_client=max_per_client, request=request_limits, trusted_proxies=trusted_proxy
    )
    executors: list[Executor] = []
    try:
        handler = os.environ.get("CUDA_AGENT_WORKER_HANDLER", "")  # tests: a scripted GPU handler
        for index in indices:
            if simulate:
                from sandbox.testing import FakeExecutor

                executors.append(FakeExecutor.from_env())
            else:
                executors.append(local_gpu_executor(index, request_limits, handler))
        app = service.WorkerService(
            executors, token=token, limits=limits, simulated=simulate, isolation=isolation
        )
        server = service.make_server(app.app, tls_cert=tls_cert, tls_key=tls_key, limits=limits)
        scheme = "https" if tls_cert else "http"
        # uvicorn shuts down gracefully on SIGTERM, then raises the signal again under the handler
        # it found: make that handler an exit, so the pools below are stopped, not orphaned.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        where = f"{scheme}://{host}:{sock.getsockname()[1]}"
        if simulate:
            log.info("serving %s on %s (no GPU is used)", plural(len(indices), "simulated GPU"), where)
        else:
            try:
                names = [e.device_info().name for e in executors]
            except ExecutorError as exc:
                log.warning(
                    "serving GPUs %s on %s, but no usable GPU (%s); /health says so", gpus, where, exc
                )
            else:
                log.info("serving GPUs %s (%s) on %s", gpus, ", ".join(names), where)
        if isolation == "none":
            log.warning(
                "--unsafe-no-isolation: compiles are NOT isolated; a request can read any file this user can"
            )
        else:
            log.info("compiles are isolated from this host by %s", isolation)
        if not token:
            log.warning("no --token-file: any user of this machine can run kernels on its GPUs")
        elif not tls_cert and not service.is_loopback(host):
            log.warning("no TLS: the token crosses the network in clear; use --tls-cert or an SSH tunnel")
        server.run(sockets=[sock])
    except ExecutorError as exc:
        raise JobFailed(str(exc)) from exc
    finally:
        for executor in executors:
            executor.close()
        sock.close()


# --------------------------------------------------------------------------- reward (the learning loop)


def _task_set(paths: tuple[str, ...]) -> Any:
    from agent.reward.tasks import DEFAULT_TASKS, TaskError, TaskSet

    try:
        tasks = TaskSet.load(paths or (DEFAULT_TASKS,))
    except TaskError as exc:
        raise UserError(str(exc)) from exc
    if not len(tasks):
        raise UserError(f"no task in {', '.join(paths) or DEFAULT_TASKS}: " + "; ".join(tasks.skipped[:3]))
    return tasks


tasks_option = click.option(
    "--tasks",
    "task_paths",
    multiple=True,
    type=click.Path(),
    help="A .cu or KernelBench-format .py task file, or a folder of them (repeatable; default: bench/kernels).",
)


@cli.group()
def reward() -> None:
    """Score model completions against CUDA tasks: a reward service for RL trainers."""


@reward.command("tasks")
@tasks_option
@click.option("--split", type=click.Choice(["train", "eval"]), help="Only the tasks of this split.")
@click.option("--prompts", is_flag=True, help="JSON lines {task, split, prompt}: a dataset for a trainer.")
def reward_tasks(task_paths: tuple[str, ...], split: str | None, prompts: bool) -> None:
    """List the tasks (name@hash, split, kernel)."""
    from agent.reward.completion import prompt_messages

    for task in _task_set(task_paths):
        if split and task.split != split:
            continue
        if prompts:
            click.echo(json.dumps({"task": task.ref, "split": task.split, "prompt": prompt_messages(task)}))
        else:
            click.echo(f"{task.ref}  {task.split:5}  {task.kernel}  ({task.path})")


@reward.command("score")
@click.argument("task")
@click.argument("file")
@tasks_option
@click.option(
    "--gpu", default=0, show_default=True, type=click.IntRange(min=0), help="GPU index to evaluate on."
)
@json_option
def reward_score(task: str, file: str, task_paths: tuple[str, ...], gpu: int, as_json: bool) -> None:
    """Score one completion: FILE holds a model's answer (a .cu/.cuh file is the kernel itself, a
    .py file a PyTorch task's ModelNew module)."""
    from agent.reward.engine import Item, RewardEngine
    from agent.reward.tasks import TaskError
    from sandbox.executor import ExecutorError

    tasks = _task_set(task_paths)
    try:
        tasks.resolve(task)
    except TaskError as exc:
        raise UserError(str(exc)) from exc
    path, text = read_source(file)
    if path.suffix in (".cu", ".cuh"):
        text = f"```cuda\n{text}\n```"
    elif path.suffix == ".py":  # a PyTorch task's ModelNew module itself
        text = f"```python\n{text}\n```"
    with _make_executor(gpu) as executor:
        engine = RewardEngine(executor, tasks)
        try:
            scored = engine.score([Item(path.name, task, text)])[0]
        except ExecutorError as exc:
            raise executor_failed(exc) from exc
        finally:
            engine.close()
    if as_json:
        emit_json(scored.to_dict())
    else:
        value = "none" if scored.reward is None else f"{scored.reward:+.3f}"
        rule = f" ({scored.rule})" if scored.rule else ""
        speed = f", speedup {scored.speedup:.2f}x (low {scored.speedup_low:.2f}x)" if scored.speedup else ""
        click.echo(f"{scored.task}: reward {value}, {scored.milestone or 'not scored'}{rule}{speed}")
        if scored.message or scored.reason:
            click.echo(f"  {scored.message or scored.reason}")
    if scored.reward is None:
        raise JobFailed(scored.reason)


@reward.command("serve")
@tasks_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8790, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token-file", type=click.Path(), help="File holding the bearer token (required off loopback)."
)
@click.option("--tls-cert", type=click.Path(), help="PEM certificate (chain): serve HTTPS.")
@click.option("--tls-key", type=click.Path(), help="PEM private key of --tls-cert.")
@click.option("--gpus", default="0", show_default=True, help="Comma-separated local GPU indices.")
@click.option("--workers", type=click.IntRange(1), help="Tasks evaluated at once (default: 2 per GPU).")
@click.option("--max-per-client", default=16, show_default=True, type=click.IntRange(1))
@click.option(
    "--max-items", default=1024, show_default=True, type=click.IntRange(1), help="Items per request."
)
@click.option(
    "--trusted-proxy", multiple=True, help="Address of a proxy whose X-Forwarded-For names the client."
)
@click.option("--simulate", is_flag=True, help="Simulated GPUs (no GPU used; code is still compiled).")
def reward_serve(
    task_paths: tuple[str, ...],
    host: str,
    port: int,
    token_file: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    gpus: str,
    workers: int | None,
    max_per_client: int,
    max_items: int,
    trusted_proxy: tuple[str, ...],
    simulate: bool,
) -> None:
    """Serve rewards over HTTP to RL trainers (TRL, verl, OpenRLHF), on any executor: local GPUs,
    a remote worker (CUDA_AGENT_WORKER_URL), Ray (CUDA_AGENT_RAY_ADDRESS) or --simulate."""
    import logging
    import signal

    try:
        from agent.reward.engine import RewardEngine
        from agent.reward.service import RewardLimits, RewardService
        from sandbox import service
    except ImportError as exc:
        raise UserError(
            f"the reward service needs the `worker` extra: pip install 'cuda-agent[worker]' ({exc})"
        ) from exc
    tasks = _task_set(task_paths)
    token = read_token(token_file) if token_file else None
    why = service.check_listen_policy(host, token) or service.check_tls(tls_cert, tls_key)
    if why:
        raise UserError(why)
    try:
        indices = tuple(int(g) for g in gpus.split(","))
    except ValueError:
        raise UserError(f"--gpus {gpus!r}: expected comma-separated GPU indices such as 0,1") from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("cuda_agent.reward")
    try:
        sock = service.listen(host, port)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    if simulate:
        from sandbox.testing import FakeExecutor

        executor: Executor = FakeExecutor.from_env()
    else:
        executor = _make_executor(indices[0], indices)
    engine = RewardEngine(executor, tasks, workers=workers or 2 * len(indices))
    limits = RewardLimits(max_per_client=max_per_client, max_items=max_items)
    app = RewardService(engine, token=token, limits=limits)
    server = service.make_server(
        app.app, tls_cert=tls_cert, tls_key=tls_key, limits=service.Limits(trusted_proxies=trusted_proxy)
    )
    signal.signal(signal.SIGTERM, _exit_on_signal)
    where = f"{'https' if tls_cert else 'http'}://{host}:{sock.getsockname()[1]}"
    log.info("serving %d tasks on %s%s", len(tasks), where, " (simulated GPU)" if simulate else "")
    try:
        server.run(sockets=[sock])
    finally:
        engine.close()
        executor.close()
        sock.close()


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def read_token(path: str) -> str:
    """The bearer token in ``path`` (surrounding whitespace ignored); a warning if others may read it."""
    import logging
    import stat

    p = Path(path)
    try:
        token = read_regular_file(path, "a token file", 64 << 10).decode("utf-8").strip()
    except UserError as exc:
        raise UserError(f"{path}: cannot read the token ({exc.message.removeprefix(f'{path}: ')})") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: cannot read the token ({exc})") from None
    if not token:
        raise UserError(f"{path}: the token file is empty")
    if p.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        logging.getLogger("cuda_agent.worker").warning("%s is readable by other users; chmod 600 it", path)
    return token


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, turning every user-facing error into one line on stderr."""
    try:
        rv = cli.main(args=argv, prog_name="cuda-agent", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("cuda-agent: aborted", err=True)
        return 130
    except click.ClickException as exc:
        msg = exc.format_message().splitlines()[0] if exc.format_message() else type(exc).__name__
        click.echo(f"cuda-agent: error: {msg}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("cuda-agent: interrupted", err=True)
        return 130
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
