"""``kernels`` and ``check``: what the source says, with no GPU."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    pass
from server.cli.common import BuildFlags, JobFailed, build_flags, json_option
from server.cli.files import read_source
from server.cli.render import emit_json


@click.command()
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


@click.command()
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
