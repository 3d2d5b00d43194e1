"""``capture``: the spec of a kernel from a run of the program that launches it."""

from __future__ import annotations

from pathlib import Path

import click

from server.cli.common import JobFailed, UserError, json_option
from server.cli.files import write_rewrite
from server.cli.render import emit_json, print_capture


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

    \b
    cuda-agent capture [OPTIONS] -- PROGRAM [ARGS]...

    The spec is shown as a diff of the kernel's file; --write applies it."""
    import re

    from agent import capture as cap
    from sandbox.capture import run_program
    from server.cli.reports import capture_report

    if kernel_re:
        try:
            re.compile(kernel_re)
        except re.error as exc:
            raise UserError(f"--kernel {kernel_re}: not a regular expression ({exc})") from exc
    run = run_program(
        program,
        kernel=kernel_re,
        launch=launch_index,
        max_launches=max_launches,
        save_dir=save_inputs,
        timeout=timeout,
    )
    if not run.launches:
        raise JobFailed(cap.nothing_captured(program[0], run))
    try:
        found = cap.propose(run.launches, launch_index, sources or (".",))
    except cap.CaptureMismatch as exc:
        recorded = ", ".join(sorted({x.kernel for x in run.launches}))
        raise JobFailed(f"{exc} (recorded: {recorded}; --source names the kernel's files)") from exc
    errors = found.errors
    path = Path(found.doc.path or "")
    written = backup = None
    if write and not errors:
        written, backup = write_rewrite(path, found.doc.text, found.new_text)
    if as_json:
        emit_json(capture_report(program, run, found, written, backup))
    else:
        print_capture(run, found, written, backup, write)
    if errors:
        raise JobFailed(f"the captured spec does not resolve: {errors[0]}")
