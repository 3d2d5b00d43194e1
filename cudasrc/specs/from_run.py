"""Inference from a run: the spec of a kernel from the values its launch had in the host program."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import replace

from cudasrc import host
from cudasrc.dtypes import canonical_dtype, dtype_bytes, is_float
from cudasrc.source import Document
from cudasrc.specs.expressions import CONSTANTS, _rename, evaluate
from cudasrc.specs.grammar import default_dist
from cudasrc.specs.model import (
    ArraySpec,
    Confidence,
    ConstantSpec,
    DistSpec,
    Evidence,
    Inference,
    InvalidSpec,
    KernelSpec,
    ScalarSpec,
)
from cudasrc.specs.pointers import _body_identifiers, _body_node, _index_ranges, _walk, roles
from cudasrc.specs.rendering import render_dims
from cudasrc.specs.resolve import _names_in, problems
from cudasrc.syntax import Kernel, Param
from sandbox.expr import operand


def _infer_from_run(
    doc: Document, kernel: Kernel, event: host.LaunchEvent, run: host.HostRun, host_doc: Document
) -> Inference | None:
    """The spec of ``kernel`` from the values its launch had when the program ran to it."""
    aliases = {**host_doc.type_aliases, **doc.type_aliases}
    if len(event.args) != len(kernel.params):
        return None
    tmap = {tp.name: v for tp, v in zip(kernel.template_params, event.template_args, strict=False)}
    body_names = _body_identifiers(doc, kernel)
    values = run.env()
    reasons = [f"launch at {event.where}" + (f", taking {', '.join(event.notes)}" if event.notes else "")]
    if run.command:
        reasons.append(f"the program run as its build file runs it: {run.command}")
    guesses: list[str] = []
    evidence: list[Evidence] = []
    args: list[tuple[Param, str, host.Value]] = []  # (param, dtype, value)
    for p, v in zip(kernel.params, event.args, strict=True):
        dtype = canonical_dtype(tmap.get(p.base_type, p.base_type), aliases)
        if dtype is None:  # a struct or an unknown type: this argument is a guess, the rest stands
            dtype = "float32" if p.pointer else "int32"
            guesses.append(f"type of {p.name}")
            evidence.append(
                Evidence(f"arg {p.name}", "", "low", f"type `{p.base_type}` unknown: {dtype} assumed")
            )
        args.append((p, dtype, v))
    access = roles(doc, kernel)
    specs: list[ArraySpec | ScalarSpec] = []
    data_exprs: list[str] = []
    counts: dict[str, str] = {}
    for p, dtype, v in args:
        if p.pointer:
            if isinstance(v, host.Buffer):
                count = (
                    v.count
                    if v.elem == dtype_bytes(dtype)
                    else f"{operand(v.count)}*{v.elem}/{dtype_bytes(dtype)}"
                )
                if v.offset != "0":
                    count = f"{operand(count)} - {operand(v.offset)}"
                reasons.append(f"count of {p.name} from its allocation at {v.where}")
                evidence.append(Evidence(f"arg {p.name}", v.where, "high"))
            else:
                count = ""
            counts[p.name] = count
            if count:
                data_exprs.append(count)
        elif isinstance(v, host.Num) and not is_float(dtype):
            data_exprs.append(v.expr)
    # a macro or file-scope constant the kernel uses is compiled in: never a size, never the block
    frozen = {n for n, r in run.roots.items() if r.symbol and r.symbol in body_names}
    block_dims = (
        event.block.dims
        if isinstance(event.block, host.Dims)
        else (event.block,)
        if isinstance(event.block, host.Num)
        else ()
    )
    subst: dict[str, str] = {}  # the roots the block is made of follow the block (search, verify)
    axes = ("",) if len(block_dims) == 1 else ("_x", "_y", "_z")
    for axis, d in zip(axes, block_dims, strict=False):
        if d is not None and d.expr in run.roots and d.expr not in frozen:
            subst[d.expr] = f"block{axis}"
    sizes = [
        n
        for n in run.roots
        if n not in frozen and n not in subst and any(n in host.names(e) for e in data_exprs)
    ]
    literal = {n: str(values[n]) for n in run.roots if n not in sizes and n not in subst and n in values}
    # a size passed as is to a parameter of the same name but for case takes its name (`ROWS` -> `rows`)
    taken = set(run.roots)
    for p, _dtype, v in args:
        if (
            isinstance(v, host.Num)
            and v.expr in sizes
            and v.expr.lower() == p.name.lower()
            and v.expr not in literal
            and p.name not in taken
        ):
            literal[v.expr] = p.name
            taken.add(p.name)
    names = {n: literal.get(n, n) for n in sizes}
    # without sizes from the program (a launcher nobody calls with values), each integer argument
    # it leaves unknown is a size of its own name at a guessed benchmark value, said to be a guess
    unknown = [] if sizes else [p.name for p, d, v in args if not p.pointer and not is_float(d) and v is None]
    guessed_sizes = dict.fromkeys(unknown, {1: "1<<24", 2: "4096"}.get(len(unknown), "512"))
    values.update({n: evaluate(e, {}) for n, e in guessed_sizes.items()})
    size_names = [*names.values(), *guessed_sizes]

    def spec_expr(e: str, keep_block: bool = True) -> str:
        return _rename(
            e,
            {
                **literal,
                **(subst if keep_block else {k: literal.get(k, str(values.get(k, 0))) for k in subst}),
            },
        )

    # each launch field falls back on its own: an unreadable grid keeps the block it was read with
    how: Confidence = "medium" if event.notes else "high"
    note = "; ".join(event.notes)
    try:
        if not block_dims or any(d is None for d in block_dims):
            raise ValueError("block not readable")
        block = tuple(str(evaluate(spec_expr(d.expr, False), values)) for d in block_dims if d is not None)
        evidence.append(Evidence("block", event.where, how, note))
    except ValueError:
        block = ("256",)
        guesses.append("block")
        evidence.append(Evidence("block", "", "low", "block not readable at the launch: 256 assumed"))
    grid_dims = (
        event.grid.dims
        if isinstance(event.grid, host.Dims)
        else (event.grid,)
        if isinstance(event.grid, host.Num)
        else ()
    )
    first = next(iter(size_names), "")
    if grid_dims and all(g is not None for g in grid_dims):
        grid = tuple(spec_expr(g.expr) for g in grid_dims if g is not None)
        evidence.append(Evidence("grid", event.where, how, note))
    else:
        grid = (f"cdiv({first}, {'block' if len(block) == 1 else 'block_x'})",) if first else ("1",)
        guesses.append("grid")
        evidence.append(Evidence("grid", "", "low", f"grid unknown at the launch: {grid[0]} assumed"))
    if isinstance(event.smem, host.Num):
        smem = spec_expr(event.smem.expr)
        evidence.append(Evidence("smem", event.where, how, note))
    else:  # one element per thread of the kernel's `extern __shared__ T buf[]`, if it has one
        smem = _smem_guess(doc, kernel, aliases, axes)
        guesses.append("smem")
        evidence.append(Evidence("smem", "", "low", f"dynamic shared memory not readable: {smem} assumed"))
    if event.template_args:
        evidence.append(Evidence("template", event.where, "high"))
    fallback = "*".join(size_names) or "1"
    for p, dtype, v in args:
        if p.pointer:
            count = spec_expr(counts[p.name]) if counts[p.name] else fallback
            if not counts[p.name]:
                guesses.append(f"count of {p.name}")
                evidence.append(Evidence(f"arg {p.name}", "", "low", f"count {count} assumed"))
            role = access.get(p.name, "inout")
            dist = default_dist(dtype)
            if isinstance(v, host.Buffer) and v.fill:
                dist = DistSpec("const", (v.fill,))
            elif isinstance(v, host.Buffer) and v.dist is not None and role != "out":
                dist = _drawn(v.dist)
                evidence.append(
                    Evidence(f"dist {p.name}", event.where, "medium", f"drawn as {dist.text()} by the host")
                )
            specs.append(ArraySpec(p.name, role, dtype, count, dist))
        elif isinstance(v, host.Num):
            specs.append(ScalarSpec(p.name, dtype, spec_expr(v.expr) if not is_float(dtype) else v.expr))
            evidence.append(Evidence(f"arg {p.name}", event.where, "high"))
        elif p.name in guessed_sizes:
            specs.append(ScalarSpec(p.name, dtype, p.name))
            guesses.append(f"size {p.name}")
            note = f"benchmark value guessed as {guessed_sizes[p.name]}: the host code does not give it"
            evidence.append(Evidence(f"size {p.name}", "", "low", note))
        else:
            value = "1.5" if is_float(dtype) else "1"
            guesses.append(f"value of {p.name}")
            evidence.append(Evidence(f"arg {p.name}", "", "low", f"value {value} guessed"))
            specs.append(ScalarSpec(p.name, dtype, value))
    specs = _index_ranges(doc, kernel, specs)
    constants = []
    for name, (ctype, csize) in run.constants.items():
        if name not in body_names:
            continue
        cdtype = (
            canonical_dtype(
                ctype.replace("__constant__", "").replace("__device__", "").replace("static", ""), aliases
            )
            or "float32"
        )
        copy = run.copies.get(name)
        count = ""
        if copy is not None and copy.bytes is not None and copy.bytes.sized is not None:
            count = str(evaluate(spec_expr(copy.bytes.sized[0]), {**values, "block": 1}))
            reasons.append(f"const {name} filled at {copy.where}")
            evidence.append(Evidence(f"const {name}", copy.where, "high"))
        else:
            guesses.append(f"const {name}")
            evidence.append(
                Evidence(f"const {name}", "", "low", "no cudaMemcpyToSymbol seen: count from the declaration")
            )
            count = csize or "1"
        drawn = copy.dist if copy is not None else None
        constants.append(ConstantSpec(name, cdtype, count, _drawn(drawn) if drawn else default_dist(cdtype)))
    requires: list[tuple[str, int]] = []
    allowed = set(names.values()) | {"block", "block_x", "block_y", "block_z"} | set(CONSTANTS)
    for condition, where in run.requires.items():
        translated = spec_expr(condition)
        used = _names_in(translated)
        if used and used <= allowed:
            requires.append((translated, -1))
            reasons.append(f"require {translated} from {where}")
            evidence.append(Evidence(f"require {translated}", where, "high"))
    if "grid" not in guesses:  # `grid=T/128` launches T/128 blocks: the program assumes T % 128 == 0
        for condition in _exact_divisions(grid, set(size_names)):
            requires.append((condition, -1))
            evidence.append(
                Evidence(f"require {condition}", event.where, "medium", "the grid divides exactly")
            )
    spec = KernelSpec(
        kernel=kernel.qualified_name,
        requires=tuple(requires),
        sizes={**{names[n]: run.roots[n].value for n in sizes}, **guessed_sizes} or {"n": "1"},
        grid=grid,
        block=block,
        smem=smem,
        args=tuple(specs),
        constants=tuple(constants),
        template_args=event.template_args,
        defines={name: spec_expr(value.expr) for name, value in event.defines if name in body_names},
    )
    try:
        problems(spec)
    except InvalidSpec as exc:
        if not any(e.message.startswith("launch") for e in exc.errors):
            return None
        # the launch as read does not resolve (a grid beyond the device's limits, too much shared
        # memory): the launch fields fall back, the fewest first, each said to be a guess
        default_grid = (f"cdiv({first}, {'block' if len(block) == 1 else 'block_x'})",) if first else ("1",)
        default_smem = _smem_guess(doc, kernel, aliases, axes)
        shown = {"grid": render_dims(default_grid), "smem": default_smem}
        why = exc.errors[0].message
        for fields in (("smem",), ("grid",), ("grid", "smem")):
            trial = replace(
                spec,
                grid=default_grid if "grid" in fields else spec.grid,
                smem=default_smem if "smem" in fields else spec.smem,
            )
            try:
                problems(trial)
            except InvalidSpec:
                continue
            spec = trial
            guesses += list(fields)
            evidence = [e for e in evidence if e.field not in fields]
            evidence += [
                Evidence(f, "", "low", f"not valid as read ({why}): {shown[f]} assumed") for f in fields
            ]
            break
        else:
            return None
    for n in sizes:
        reasons.append(f"size {names[n]}={run.roots[n].value} from {run.roots[n].where}")
        evidence.append(Evidence(f"size {names[n]}", run.roots[n].where, "high"))
    reasons += [f"guessed: {g}" for g in guesses]
    confidence: Confidence = "low" if guesses else "medium" if event.notes else "high"
    return Inference(spec, confidence, tuple(reasons), tuple(evidence))


def _drawn(dist: tuple[str, float, float]) -> DistSpec:
    """A host buffer's draws (:attr:`cudasrc.host.Buffer.dist`) as a spec distribution."""
    kind, low, high = dist
    if kind == "arange":
        return DistSpec("arange", ())
    text = [f"{x:g}" for x in (low, high)]
    if kind == "const":
        return DistSpec("const", (text[0],))
    return DistSpec("randint" if kind == "randint" else "uniform", (text[0], text[1]))


def _exact_divisions(grid: tuple[str, ...], sizes: set[str]) -> list[str]:
    """``A % B == 0`` for each grid dimension written ``A / B`` with ``A`` a product of sizes and
    ``B`` free of them (``T / 128``, ``B*T / block``; never the ceiling idiom ``(n + 127) / 128``)."""
    out: list[str] = []
    for dim in grid:
        try:
            tree = ast.parse(dim, mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            continue
        if not (isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.Div | ast.FloorDiv)):
            continue
        left, right = tree.left, tree.right
        products = all(
            isinstance(n, ast.Name | ast.Constant | ast.Load | ast.Mult)
            or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult))
            for n in ast.walk(left)
        )
        left_names = {n.id for n in ast.walk(left) if isinstance(n, ast.Name)}
        right_names = {n.id for n in ast.walk(right) if isinstance(n, ast.Name)}
        if products and left_names and left_names <= sizes and not right_names & sizes:
            out.append(f"{operand(ast.unparse(left))} % {operand(ast.unparse(right))} == 0")
    return out


def _smem_guess(doc: Document, kernel: Kernel, aliases: Mapping[str, str], axes: tuple[str, ...]) -> str:
    """Dynamic shared memory when the launch does not say: one element per thread of the kernel's
    ``extern __shared__`` array (``block*4``), else none."""
    element = _dynamic_shared_type(doc, kernel, aliases)
    return f"{'*'.join(f'block{a}' for a in axes)}*{dtype_bytes(element)}" if element else "0"


def _dynamic_shared_type(doc: Document, kernel: Kernel, aliases: Mapping[str, str]) -> str | None:
    """The element type of the kernel's ``extern __shared__ T buf[]``; None without one."""
    body = _body_node(doc, kernel)
    for n in _walk(body) if body is not None else ():
        if n.type == "declaration" and {"extern", "__shared__"} <= {doc.node_text(c) for c in n.children}:
            type_node = n.child_by_field_name("type")
            return canonical_dtype(doc.node_text(type_node), aliases) if type_node is not None else None
    return None
