"""``kernels`` and ``check``: what the source says, with no GPU."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from server.cli.common import BuildFlags, JobFailed, UserError, build_flags, json_option
from server.cli.files import read_source
from server.cli.render import emit_json, print_issues, print_kernel_check, print_kernels

if TYPE_CHECKING:
    from cudasrc.syntax import Issue
    from sandbox.contract import Diagnostic


def _not_cuda(path: Path, kernels: Sequence[object], issues: Sequence[Issue]) -> None:
    """No kernel, and the parser could not read the file: most likely not CUDA at all (exit 1)."""
    errors = sum(issue.severity == "error" for issue in issues)
    if not kernels and errors:
        raise JobFailed(f"{path}: no CUDA kernels and {errors} syntax error(s): is it CUDA source?")


@click.command()
@click.argument("file")
@json_option
def kernels(file: str, as_json: bool) -> None:
    """List the kernels in FILE: ranges, parameters, launch sites and benchmark spec."""
    from cudasrc.source import Document
    from server.cli.reports import kernels_report

    path, text = read_source(file)
    doc = Document(text, str(path))
    report = kernels_report(doc)
    if as_json:
        emit_json(report)
    else:
        print_kernels(doc, report)
    _not_cuda(path, doc.kernels, report.issues)


@click.command()
@click.argument("file")
@click.option("--arch", default="sm_90", show_default=True, help="Target architecture for NVRTC.")
@json_option
@build_flags
def check(file: str, arch: str, build: BuildFlags, as_json: bool) -> None:
    """Compile each kernel of FILE on its own with NVRTC (no GPU needed); report errors and resources."""
    from agent.check import check_document
    from cudasrc.source import Document
    from sandbox.compiler import arch_error
    from server.cli.reports import check_report

    path, text = read_source(file)
    options = build.options(path)
    if why := arch_error(arch):
        raise UserError(f"--arch: {why}")
    doc = Document(text, str(path))
    shown: set[Diagnostic] = set()
    if not as_json:
        print_issues(path, doc.issues)
    result = check_document(
        doc,
        arch=arch,
        options=options,
        on_kernel=None if as_json else lambda k: print_kernel_check(path, k, shown),
    )
    if as_json:
        emit_json(check_report(result))
    elif not result.kernels:
        click.echo(f"{path}: no CUDA kernels (`__global__` functions) found")
    _not_cuda(path, result.kernels, result.issues)
    failed = sum(not k.ok for k in result.kernels)
    broken = sum(bool(k.spec_errors) for k in result.kernels)
    if failed or broken:
        reasons = [f"{failed} kernel(s) failed to compile"] if failed else []
        reasons += [f"{broken} spec(s) have errors"] if broken else []
        raise JobFailed("; ".join(reasons))
