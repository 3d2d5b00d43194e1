"""``kernels`` and ``check``: what the source says, with no GPU."""

from __future__ import annotations

import click

from server.cli.common import BuildFlags, JobFailed, build_flags, json_option
from server.cli.files import read_source
from server.cli.render import emit_json, print_check, print_kernels


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


@click.command()
@click.argument("file")
@click.option("--arch", default="sm_90", show_default=True, help="Target architecture for NVRTC.")
@json_option
@build_flags
def check(file: str, arch: str, build: BuildFlags, as_json: bool) -> None:
    """Compile each kernel of FILE on its own with NVRTC (no GPU needed); report errors and resources."""
    from agent.check import check_document
    from cudasrc.source import Document
    from server.cli.reports import check_report

    path, text = read_source(file)
    options = build.options(path)
    result = check_document(Document(text, str(path)), arch=arch, options=options)
    if as_json:
        emit_json(check_report(result))
    else:
        print_check(path, result)
    failed = sum(not k.ok for k in result.kernels)
    broken = sum(bool(k.spec_errors) for k in result.kernels)
    if failed or broken:
        why = [f"{failed} kernel(s) failed to compile"] if failed else []
        why += [f"{broken} spec(s) have errors"] if broken else []
        raise JobFailed("; ".join(why))
