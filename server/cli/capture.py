"""``capture``: the spec of a kernel from a run of the program that launches it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    pass
from server.cli.common import JobFailed, UserError, json_option
from server.cli.files import write_rewrite
from server.cli.render import emit_json


@click.command(context_settings={"ignore_unknown_options": True})
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
