"""Inference: a spec proposed for a kernel without one, from its launch (run or read) and its body."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

import tree_sitter

from cudasrc import host
from cudasrc.dtypes import canonical_dtype, is_float
from cudasrc.project import display_path
from cudasrc.source import Document
from cudasrc.specs.from_run import _infer_from_run
from cudasrc.specs.grammar import default_dist, parse
from cudasrc.specs.model import (
    ArraySpec,
    CompareSpec,
    Confidence,
    DistSpec,
    Evidence,
    Inference,
    InvalidSpec,
    KernelSpec,
    ScalarSpec,
    SpecResult,
)
from cudasrc.specs.pointers import _body_node, _walk, roles
from cudasrc.specs.resolve import bench_sizes, problem, problems
from cudasrc.specs.sites import (
    _allocation_count,
    _host_definitions,
    _host_value,
    _launch_from_site,
    _translate,
)
from cudasrc.syntax import Kernel
from sandbox.contract import MEMORY_COPIES, Budget
from sandbox.expr import Number

# ---------------------------------------------------------------------------------------- inference

_SIZE_NAMES = re.compile(r"^(n|N|size|len|length|count|num\w*|n_\w+|N_\w+|numel|nelem\w*|total\w*)$")


def infer(doc: Document, kernel: Kernel) -> Inference:
    """Propose a spec from the signature and, when the program launches the kernel, from running
    the host code to that launch (:mod:`cudasrc.host`), else from the launch site's text.  Says how
    sure it is, and why (each reason with its evidence, file:line).  An output whose stores are
    guarded by more than upper bounds (``j <= i``, ``i < 1``) gets ``compare NAME written``.
    Sizes whose arrays an evaluation cannot hold under the default memory cap say so."""
    inference = _with_memory_note(_infer_spec(doc, kernel))
    spec = inference.spec
    outputs = [a.name for a in spec.args if isinstance(a, ArraySpec) and a.role == "out"]
    compares, evidence = [], []
    for name, (line, guard) in partial_stores(doc, kernel, outputs).items():
        compares.append(CompareSpec(name, written=True))
        where = f"{display_path(doc.path) if doc.path else 'file'}:{line + 1}"
        note = f"stored only where `{guard}`: elements it skips are not compared"
        evidence.append(Evidence(f"compare {name}", where, "medium", note))
    if not compares:
        return inference
    return replace(
        inference,
        spec=replace(spec, compares=tuple(compares)),
        reasons=(*inference.reasons, *(e.note for e in evidence)),
        evidence=(*inference.evidence, *evidence),
    )


def _with_memory_note(inference: Inference) -> Inference:
    """The inference with a note when the benchmark problem's arrays, held :data:`MEMORY_COPIES`
    times over by an evaluation, exceed the default per-evaluation memory cap: the program's own
    sizes (an 8 GiB volume) are kept, and the note says what that takes."""
    try:
        need = problem(inference.spec, bench_sizes(inference.spec)).array_bytes()
    except InvalidSpec:
        return inference
    cap = Budget().gpu_memory_bytes
    if MEMORY_COPIES * need <= cap:
        return inference
    gib = 1 << 30
    note = (
        f"the program's own sizes need {need / gib:.1f} GiB of arrays, {MEMORY_COPIES} times over in an "
        f"evaluation: more than the default {cap / gib:.0f} GiB memory cap (the speedup flow raises it, "
        "up to 80% of the GPU; a smaller `sizes` line fits the default)"
    )
    return replace(inference, reasons=(*inference.reasons, note))


_ORDER = frozenset({"<", "<=", ">", ">="})


def partial_stores(doc: Document, kernel: Kernel, outputs: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Outputs whose stores are all guarded by a comparison that is not an upper bound against a
    parameter: two local indices (``j <= i``, a triangle) or a local against a positive literal
    (``i < 1``, a boundary).  Name -> (0-based line of a store, the guard's text)."""
    body = _body_node(doc, kernel)
    if body is None:
        return {}
    params = {p.name for p in kernel.params}
    found: dict[str, tuple[int, str]] = {}
    unguarded: set[str] = set()
    for n in _walk(body):
        left = n.child_by_field_name("left") if n.type == "assignment_expression" else None
        target = (
            left.child_by_field_name("argument") if left and left.type == "subscript_expression" else None
        )
        name = doc.node_text(target) if target is not None else ""
        if name not in outputs:
            continue
        guard = next((g for c in _guards(n) for g in _partial_comparisons(doc, c, params)), None)
        if guard is None:
            unguarded.add(name)
        else:
            found.setdefault(name, (n.start_point[0], guard))
    return {k: v for k, v in found.items() if k not in unguarded}


def _guards(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """The conditions a statement runs under: enclosing ``if``s it is the consequence of, and
    ``if (...) return;`` statements before it in enclosing blocks."""
    child, up = node, node.parent
    while up is not None:
        if up.type == "if_statement" and up.child_by_field_name("consequence") == child:
            cond = up.child_by_field_name("condition")
            if cond is not None:
                yield cond
        if up.type == "compound_statement":
            for stmt in up.named_children:
                if stmt == child:
                    break
                then = stmt.child_by_field_name("consequence") if stmt.type == "if_statement" else None
                if then is not None and "return_statement" in (
                    then.type,
                    *(c.type for c in then.named_children),
                ):
                    cond = stmt.child_by_field_name("condition")
                    if cond is not None:
                        yield cond
        child, up = up, up.parent


def _partial_comparisons(doc: Document, cond: tree_sitter.Node, params: set[str]) -> Iterator[str]:
    def local(n: tree_sitter.Node | None) -> bool:
        return n is not None and n.type == "identifier" and doc.node_text(n) not in params

    def positive(n: tree_sitter.Node | None) -> bool:
        text = doc.node_text(n) if n is not None and n.type == "number_literal" else ""
        return text.isdigit() and int(text) > 0

    for n in _walk(cond):
        op = n.child_by_field_name("operator") if n.type == "binary_expression" else None
        if op is None or doc.node_text(op) not in _ORDER:
            continue
        a, b = n.child_by_field_name("left"), n.child_by_field_name("right")
        if (local(a) and local(b)) or (local(a) and positive(b)) or (positive(a) and local(b)):
            yield doc.node_text(n)


def _infer_spec(doc: Document, kernel: Kernel) -> Inference:
    found = host.launch_of(doc, kernel.name)
    if found is not None:
        from_run = _infer_from_run(doc, kernel, *found)
        if from_run is not None:
            return from_run
    reasons: list[str] = []
    evidence: list[Evidence] = []
    site = next(iter(doc.launches_of(kernel.name)), None)
    at = (
        f"{display_path(doc.path) if doc.path else 'file'}:{site.span.start_line + 1}"
        if site is not None
        else ""
    )
    # names defined in the launching function win over same-named ones elsewhere in the file
    caller = doc.text_in(site.caller_span) if site is not None and site.caller_span is not None else ""
    defs = {**_host_definitions(doc.text), **_host_definitions(caller)}
    aliases = doc.type_aliases
    ints = [
        p
        for p in kernel.params
        if not p.pointer and (canonical_dtype(p.base_type, aliases) or "").startswith(("int", "uint"))
    ]
    host_args = {p.name: a.text for p, a in zip(kernel.params, site.args, strict=False)} if site else {}
    # an integer is a size when the launch gives its value or, without one, when its name says so
    known = [p for p in ints if _host_value(host_args.get(p.name, ""), defs) is not None]
    sizes = known or [p for p in ints if _SIZE_NAMES.match(p.name)] or ints
    # host expression text -> kernel size name, from the launch site's arguments
    names: dict[str, str] = {}
    if site is not None:
        reasons.append(f"launch site at line {site.span.start_line + 1}")
        for p, a in zip(kernel.params, site.args, strict=False):
            if p in sizes and re.fullmatch(r"[A-Za-z_]\w*", a.text):
                names[a.text] = p.name
    else:
        reasons.append("no launch site in this file: roles and sizes come from the signature only")
    default_size = {1: "1<<24", 2: "4096"}.get(len(sizes), "512")
    size_exprs: dict[str, str] = {}
    for p in sizes:
        value = _host_value(host_args.get(p.name, ""), defs)
        size_exprs[p.name] = value or default_size
        if value is None:
            reasons.append(f"benchmark value of {p.name} guessed as {default_size}")
            evidence.append(
                Evidence(f"size {p.name}", "", "low", f"benchmark value guessed as {default_size}")
            )
    if not size_exprs:
        size_exprs = {"n": "1<<20"}
        reasons.append("no integer size parameter: invented n=1<<20")
    env: dict[str, Number] = {k: 97 for k in size_exprs}
    fallback_count = "*".join(size_exprs)
    args: list[ArraySpec | ScalarSpec] = []
    sure = site is not None
    unknown_types = False  # a struct or unknown type: the proposal is a guess
    template_args = tuple(_host_value(a, defs) or a for a in site.template_args) if site is not None else ()
    tmap = {tp.name: v for tp, v in zip(kernel.template_params, template_args, strict=False)}
    for p in kernel.params:
        dtype = canonical_dtype(tmap.get(p.base_type, p.base_type), aliases)
        if not p.pointer:
            given = _host_value(host_args.get(p.name, ""), defs)
            value = (
                p.name
                if p.name in size_exprs
                else given
                if given is not None
                else ("1.5" if dtype and is_float(dtype) else "1")
            )
            if dtype is None:
                reasons.append(f"type of scalar {p.name} (`{p.base_type}`) unknown: assumed int")
                unknown_types = True
            args.append(ScalarSpec(p.name, dtype or "int32", value))
            if given is not None and p.name not in size_exprs:
                reasons.append(f"scalar {p.name} = {value} at the launch site")
                evidence.append(Evidence(f"arg {p.name}", at, "medium", "read from the launch site's text"))
            elif p.name not in size_exprs:
                reasons.append(f"scalar {p.name} set to {value}")
                evidence.append(Evidence(f"arg {p.name}", "", "low", f"value {value} guessed"))
            continue
        if dtype is None:
            reasons.append(f"element type of {p.name} (`{p.base_type}`) unknown: assumed float")
            dtype, sure, unknown_types = "float32", False, True
        role = roles(doc, kernel).get(p.name, "inout")
        count = _allocation_count(doc.text, host_args.get(p.name, ""), names, defs, env)
        if count is None:
            count, sure = fallback_count, False
            reasons.append(f"count of {p.name} assumed {count}")
            evidence.append(Evidence(f"arg {p.name}", "", "low", f"count {count} assumed"))
        else:
            reasons.append(f"count of {p.name} = {count} from its allocation")
        dist = default_dist(dtype)
        if role == "in" and dist.kind == "randint" and dtype != "bool":  # maybe indices: keep them in range
            dist = DistSpec("randint", ("0", next(iter(size_exprs))))
        args.append(ArraySpec(p.name, role, dtype, count, dist))
    grid: tuple[str, ...] = (f"cdiv({next(iter(size_exprs))}, block)",)
    block: tuple[str, ...] = ("256",)
    if site is not None and site.block is not None and site.grid is not None:
        launch = _launch_from_site(site.grid.text, site.block.text, names, defs, env)
        if launch is not None:
            grid, block = launch
            reasons.append("grid and block from the launch site")
            evidence.append(Evidence("launch", at, "high"))
        else:
            sure = False
            reasons.append("could not read grid/block from the launch site: assumed cdiv(n, 256) x 256")
            evidence.append(Evidence("launch", "", "low", "grid and block not readable at the launch site"))
    smem = "0"
    if site is not None and site.shared is not None:
        smem = _translate(site.shared.text, names, defs) or "0"
    if kernel.template_params and not template_args:
        template_args = tuple(
            "float" if tp.kind == "type" else (tp.default or "256") for tp in kernel.template_params
        )
        sure = False
        reasons.append(f"template arguments guessed: {', '.join(template_args)}")
        evidence.append(Evidence("template", "", "low", "template arguments guessed"))
    spec = KernelSpec(
        kernel=kernel.qualified_name,
        sizes=size_exprs,
        grid=grid,
        block=block,
        smem=smem,
        args=tuple(args),
        template_args=template_args,
    )
    try:
        problems(spec)
    except InvalidSpec as exc:
        spec = replace(spec, grid=(f"cdiv({next(iter(size_exprs))}, block)",), block=("256",), smem="0")
        sure = False
        reasons.append(f"fell back to a default launch ({exc})")
        evidence.append(Evidence("launch", "", "low", "default launch"))
    confidence: Confidence = (
        "low"
        if unknown_types
        else "high"
        if sure
        else "medium"
        if site is not None or len(sizes) == 1
        else "low"
    )
    if site is None:
        evidence.append(Evidence("launch", "", "low", "no launch found: default launch"))
    return Inference(spec, confidence, tuple(reasons), tuple(evidence))


def spec_for(doc: Document, kernel: Kernel) -> SpecResult:
    """The written spec if there is one (with its errors), else an inferred one."""
    spec, errors = parse(kernel, doc.type_aliases, doc.integer_constants)
    if spec is not None:
        return SpecResult(kernel.qualified_name, "parsed", spec, errors)
    inference = infer(doc, kernel)
    return SpecResult(kernel.qualified_name, "inferred", inference.spec, (), inference)
