"""Rendering: a spec (or an inferred one, with its guesses) back into ``// @cuda-agent`` lines."""

from __future__ import annotations

from cudasrc.specs.model import MARKER, Inference, KernelSpec, ScalarSpec

_RENDER_DTYPE = {"float32": "float", "float64": "double", "int32": "int"}


def render(spec: KernelSpec) -> str:
    """The comment block for ``spec`` (what an editor inserts above the kernel), ending in a newline."""
    out = ["sizes " + " ".join(f"{k}={v}" for k, v in spec.sizes.items())]
    if spec.verify and all(v.keys() == spec.verify[0].keys() for v in spec.verify):
        out.append("verify " + " ".join(f"{k}={','.join(v[k] for v in spec.verify)}" for k in spec.verify[0]))
    else:
        out += ["verify " + " ".join(f"{k}={v}" for k, v in ver.items()) for ver in spec.verify]
    launch = f"launch grid={render_dims(spec.grid)} block={render_dims(spec.block)}"
    out.append(launch + (f" smem={spec.smem}" if spec.smem != "0" else ""))
    if spec.template_args:
        out.append("template " + ", ".join(spec.template_args))
    for a in spec.args:
        if isinstance(a, ScalarSpec):
            out.append(f"arg {a.name} = {a.value}")
        else:
            dist = "" if a.role == "out" else " " + a.dist.text()
            offset = f" offset={a.offset}" if a.offset != "0" else ""
            out.append(
                f"arg {a.name} {a.role} {_RENDER_DTYPE.get(a.dtype, a.dtype)}[{a.count}]{dist}{offset}"
            )
    for c in spec.constants:
        out.append(f"const {c.name} {_RENDER_DTYPE.get(c.dtype, c.dtype)}[{c.count}] {c.dist.text()}")
    for tol in (*([spec.tolerance] if spec.tolerance else []), *spec.output_tolerances):
        out.append(f"tolerance {tol.text()}")
    if spec.allow_precision:
        out.append("precision allow=" + ",".join(spec.allow_precision))
    out += [f"require {condition}" for condition, _ in spec.requires]
    out += [f"compare {c.text()}" for c in spec.compares]
    if spec.defines:
        out.append("define " + " ".join(f"{k}={v}" for k, v in spec.defines.items()))
    work = " ".join(f"{k}={v}" for k, v in (("bytes", spec.bytes), ("flops", spec.flops)) if v)
    work += "" if spec.floor else " floor=off"
    if work:
        out.append("work " + work)
    return "".join(f"// {MARKER} {line}\n" for line in out)


def render_inference(inference: Inference) -> str:
    """:func:`render` of an inferred spec with a ``// guess: ...`` line above each directive whose
    value is not certain (what an editor inserts for the user to check)."""
    guesses = inference.guesses()
    out = []
    for line in render(inference.spec).splitlines(keepends=True):
        words = line.split(MARKER, 1)[1].split()
        keys = {
            "sizes": [f for f in guesses if f.startswith("size ")],
            "launch": ["launch", "grid", "block", "smem"],
            "template": ["template"],
        }
        fields = keys.get(words[0], [f"{words[0]} {words[1]}"] if len(words) > 1 else [])
        notes = [f"{f}: {guesses[f]}" if words[0] == "sizes" else guesses[f] for f in fields if f in guesses]
        if notes:
            out.append(f"// guess: {'; '.join(notes)}\n")
        out.append(line)
    return "".join(out)


def render_dims(dims: tuple[str, ...]) -> str:
    """The inverse of :func:`parse_dims`."""
    return dims[0] if len(dims) == 1 else "(" + ", ".join(dims) + ")"
