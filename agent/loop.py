"""The optimize loop: propose candidates, evaluate them in the sandbox, keep the best verified one.

::

    proposer thread                          evaluator (caller's thread)
    ───────────────                          ───────────────────────────
    observe(results of batches < k-1)
    propose(context, history, n) ─ batch k ─▶ queue ─▶ executor.evaluate(EvalRequest)
    ...                                                   │
    ◀──────────────── attempts of batch k ────────────────┘  → trajectory, best, progress events

A :class:`Proposer` (the built-in rewrite/autotune engine, :class:`agent.llm.LLMProposer`, or a
test's own) turns a :class:`Target` and the history of earlier :class:`Attempt` s into
:class:`Proposal` s.  The loop splices each proposal into the kernel's standalone translation unit,
sends batches to an :class:`~sandbox.executor.Executor` and feeds the verdicts back.  Proposing batch
*k* overlaps evaluating batch *k-1*; the proposer sees exactly the results of batches up to *k-2*
(more if it asks to wait by returning nothing), so a deterministic proposer and executor give the
same run for the same seed.

Stops at the first of: the wall-time, candidate or token budget; cancellation (``cancel`` event,
honoured between batches and passed to the executor, which returns unfinished candidates as
``cancelled``); the proposer having nothing more to propose; the proposer or executor failing.
The best verified candidate so far is always kept: the caller gets an :class:`OptimizeResult`.

Untrusted proposals are never compiled or run here: they only travel inside ``EvalRequest`` s.
"""

from __future__ import annotations

import abc
import ast
import difflib
import hashlib
import logging
import math
import queue
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Literal

import tree_sitter

from agent import spec as spec_mod
from agent.dtypes import canonical_dtype
from agent.source import Document, Expr, Kernel, LaunchSite, Param
from agent.spec import KernelSpec, ScalarSpec, parse_dims
from agent.trajectory import RunInfo, TrajectoryLog, hack_rule, reward
from sandbox.compiler import carry_headers, parse_diagnostics
from sandbox.contract import (
    PRECISIONS,
    Budget,
    Candidate,
    CandidateResult,
    Check,
    DeviceInfo,
    Diagnostic,
    EvalOptions,
    EvalRequest,
    EvalResult,
    KernelSource,
    Launch,
    Problem,
    Progress,
    Status,
    Tolerance,
)
from sandbox.errors import InputError
from sandbox.executor import Executor, ExecutorError

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- what is optimized


@dataclass(frozen=True)
class LaunchChange:
    """A new launch configuration as expressions over the spec's size variables and ``block``
    (the spec's vocabulary, e.g. ``grid="cdiv(n, block*4)"``, ``block="128"``); None keeps the
    spec's own expression."""

    grid: str | None = None
    block: str | None = None
    shared: str | None = None


@dataclass(frozen=True)
class TextEdit:
    """Replace ``text[start:end]`` (character offsets into the original file) with ``new_text``."""

    start: int
    end: int
    new_text: str


@dataclass(frozen=True)
class LaunchEdits:
    """What a launch change does to the file: ``edits`` to the kernel's launch sites and to its
    spec's ``launch`` line (so the spec keeps describing what the code launches); ``sites`` the
    number of launch sites rewritten; ``todo`` what the user must still change by hand ("" when
    nothing), e.g. when the file has no launch site of the kernel."""

    edits: tuple[TextEdit, ...] = ()
    sites: int = 0
    todo: str = ""


Relauncher = Callable[[LaunchChange], tuple[Launch, ...]]
SiteEditor = Callable[[LaunchChange], LaunchEdits]


@dataclass(frozen=True)
class Target:
    """One kernel of one file, resolved for evaluation.

    ``definition`` is the kernel's definition exactly as it appears in ``text`` (at character
    offset ``definition_start``) and in ``baseline.source``; a proposal replaces it in both.
    ``relaunch`` turns a :class:`LaunchChange` into one :class:`Launch` per verify problem and then
    the bench problem (raising ``ValueError`` for a bad expression); ``site_edits`` gives the edits
    to this file's launch sites of the kernel and to its spec's ``launch`` line for a change.
    Without them, launch changes are refused.
    """

    path: str
    text: str
    definition: str
    definition_start: int
    baseline: KernelSource
    verify_problems: tuple[Problem, ...]
    bench_problem: Problem
    tolerance: Tolerance | None = None
    tolerances: tuple[Tolerance, ...] = ()  # per output
    allow_precision: tuple[str, ...] = ()
    spec_text: str = ""  # the kernel's spec as written, for prompts
    relaunch: Relauncher | None = field(default=None, compare=False, repr=False)
    site_edits: SiteEditor | None = field(default=None, compare=False, repr=False)
    # 0-based file line of each 0-based line of ``baseline.source`` (-1: generated), to place
    # compiler messages (``agent.source.Standalone.line_map``)
    line_map: tuple[int, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.text[self.definition_start : self.definition_start + len(self.definition)] != self.definition:
            raise ValueError("definition_start does not point at the definition in text")
        if self.definition not in self.baseline.source:
            raise ValueError("the standalone unit does not contain the kernel's definition verbatim")

    @property
    def kernel(self) -> str:
        return self.baseline.name

    @cached_property
    def original_kernel(self) -> Kernel:
        """The kernel as defined in ``definition`` (its parameters, for checking rewrites)."""
        return Document(self.definition, self.path).kernels[-1]

    def _fit(self, code: str) -> str:
        """``code`` ending in as many newlines as the definition it replaces."""
        return code.rstrip("\n") + "\n" * (len(self.definition) - len(self.definition.rstrip("\n")))

    @property
    def problems(self) -> tuple[Problem, ...]:
        return (*self.verify_problems, self.bench_problem)

    def unit_with(self, code: str) -> str:
        """The standalone unit with the kernel's definition replaced by ``code``."""
        return self.baseline.source.replace(self.definition, self._fit(code), 1)

    def candidate(self, cid: str, proposal: Proposal) -> tuple[Candidate | None, str]:
        """What the sandbox evaluates for ``proposal`` (its launches resolved per problem), or None
        and why it cannot run: a launch the spec cannot resolve, a kernel whose parameter list is
        not the original's (the harness launches it with the original's arguments)."""
        unit = proposal.unit or self.unit_with(proposal.code)
        name = proposal.kernel or self.kernel
        if why := _precision_refusal(self, proposal.precision):
            return None, why
        if why := _replaces(
            self, Document(proposal.code), name.partition("<")[0], proposal.unit or self.text
        ):
            return None, why
        launches: tuple[Launch, ...] | None = None
        if proposal.launch is not None:
            if self.relaunch is None:
                return None, "this kernel's spec cannot relaunch with another configuration"
            try:
                launches = self.relaunch(proposal.launch)
            except ValueError as exc:
                return None, f"bad launch configuration: {exc}"
        options = tuple(dict.fromkeys((*self.baseline.options, *proposal.options)))
        kernel = replace(self.baseline, source=unit, name=name, options=options)
        return Candidate(cid, kernel, launches), ""

    def request(
        self,
        request_id: str,
        candidates: tuple[Candidate, ...],
        *,
        seeds: tuple[int, ...] = (1, 2, 3),
        budget: Budget | None = None,
        options: EvalOptions | None = None,
    ) -> EvalRequest:
        """An evaluation of ``candidates`` against the kernel under its spec: problems, tolerances
        and the lower precisions the spec allows."""
        return EvalRequest(
            id=request_id,
            baseline=self.baseline,
            candidates=candidates,
            verify_problems=self.verify_problems,
            bench_problem=self.bench_problem,
            seeds=seeds,
            tolerance=self.tolerance,
            tolerances=self.tolerances,
            allow_precision=self.allow_precision,
            budget=budget or Budget(),
            options=options or EvalOptions(),
        )

    def file_line(self, unit_line: int, proposal: Proposal | None = None) -> int:
        """The 1-based line of the file that 1-based line ``unit_line`` of the compiled unit comes
        from: of the original file, or, with ``proposal``, of the file with the proposal's code in
        place of the definition (a whole-unit proposal: of that unit); 0 for a generated line."""
        if proposal is not None and proposal.unit:
            return unit_line
        u = unit_line - 1
        source = self.baseline.source
        u0 = source.count("\n", 0, source.index(self.definition))
        f0 = self.text.count("\n", 0, self.definition_start)
        old = self.definition.count("\n")
        new = self._fit(proposal.code).count("\n") if proposal is not None else old
        if u0 <= u <= u0 + new:
            return f0 + (u - u0) + 1
        if u > u0 + new:
            u += old - new
        mapped = self.line_map[u] if 0 <= u < len(self.line_map) else -1
        if mapped < 0:
            return 0
        return mapped + 1 + (new - old if mapped > f0 else 0)

    def compile_error(self, result: CandidateResult, proposal: Proposal | None = None) -> Diagnostic | None:
        """The first compiler error of ``result`` at its line and column of the file (see
        :meth:`file_line`; line 0 when it is in a header or a generated line); None without one."""
        names = {self.baseline.filename, ""}
        for d in parse_diagnostics(result.compile_log):
            if d.severity == "error":
                line = self.file_line(d.line, proposal) if d.file in names else 0
                return replace(d, line=line, column=d.column if line else 0, file=self.path)
        return None

    def located(self, result: CandidateResult, proposal: Proposal | None = None) -> str:
        """``result``'s message, a compile error's placed at ``FILE:LINE:COL`` of the file."""
        d = self.compile_error(result, proposal) if result.status is Status.COMPILE_ERROR else None
        if d is None or d.line == 0:
            return result.message
        column = f":{d.column}" if d.column else ""
        return f"{self.path or 'kernel.cu'}:{d.line}{column}: {d.message}"

    def file_with(self, code: str, edits: Sequence[TextEdit] = ()) -> str:
        """The original file with the definition replaced by ``code`` and ``edits`` applied."""
        end = self.definition_start + len(self.definition)
        all_edits = sorted(
            [TextEdit(self.definition_start, end, self._fit(code)), *edits], key=lambda e: e.start
        )
        out, pos = [], 0
        for e in all_edits:
            if e.start < pos:
                raise ValueError("overlapping edits")
            out += [self.text[pos : e.start], e.new_text]
            pos = e.end
        out.append(self.text[pos:])
        return "".join(out)


def _precision_refusal(target: Target, claimed: Sequence[str]) -> str:
    """Why a rewrite claiming the lower precisions ``claimed`` cannot be evaluated ('' when it can):
    each must be a known kind the spec allows (``precision allow=``), since the claim widens the
    tolerance to that precision's roundoff."""
    if unknown := [k for k in claimed if k not in PRECISIONS]:
        return f"unknown precision `{unknown[0]}` ({', '.join(PRECISIONS)})"
    if barred := [k for k in claimed if k not in target.allow_precision]:
        return (
            f"the rewrite claims {', '.join(barred)}, which the spec of {target.kernel} does not allow "
            f"(add `// @cuda-agent precision allow={','.join(barred)}` to it to permit that)"
        )
    return ""


def signature_mismatch(
    original: Kernel,
    candidate: Kernel,
    aliases: Mapping[str, str] | None = None,
    candidate_aliases: Mapping[str, str] | None = None,
) -> str:
    """Why ``candidate`` cannot be launched with ``original``'s arguments ('' when it can): the
    parameter count, each parameter's element type (through the files' type aliases), pointer
    depth and reference-ness must agree; names and ``const``/``__restrict__`` may differ."""
    a, b = original.params, candidate.params
    if len(a) != len(b):
        return f"it takes {len(b)} parameter(s), {original.name} takes {len(a)} ({_signature(original)})"
    for i, (p, q) in enumerate(zip(a, b, strict=True)):
        if _param_type(p, aliases) != _param_type(q, candidate_aliases):
            return (
                f"parameter {i + 1} `{q.name}` is `{q.type_text}` where {original.name} has "
                f"`{p.type_text}` ({_signature(original)})"
            )
    return ""


def _param_type(p: Param, aliases: Mapping[str, str] | None) -> tuple[str, int, bool]:
    base = " ".join(p.base_type.split())
    return (canonical_dtype(base, aliases) or base, p.pointer, p.reference)


def _signature(k: Kernel) -> str:
    return f"{k.name}({', '.join(f'{p.type_text} {p.name}'.strip() for p in k.params)})"


def _replaces(target: Target, code: Document, name: str, context: str) -> str:
    """Why the kernel ``name`` defined in ``code`` cannot stand in for the target's kernel ('' when
    it can, or when ``code`` defines no such kernel: the compiler then says what is wrong).
    ``context`` is the text whose type aliases the rewrite's parameter types use."""
    cand = next((k for k in reversed(code.kernels) if name in (k.qualified_name, k.name)), None)
    if cand is None:
        return ""
    aliases = Document(target.text, target.path).type_aliases
    why = signature_mismatch(target.original_kernel, cand, aliases, Document(context).type_aliases)
    return f"the rewrite's parameter list differs: {why}" if why else ""


class TargetError(InputError, ValueError):
    """The kernel cannot be optimized as asked (not found, ambiguous, no usable spec); one line."""


def target_for(doc: Document, kernel: str | None = None, options: tuple[str, ...] = ()) -> Target:
    """Resolve kernel ``kernel`` of ``doc`` (the only kernel when None) under its written spec;
    ``options``: the file's build configuration (``-I``/``-D``, :func:`agent.check.build_options`).

    An inferred spec is not trusted for optimizing: the user must write (or accept) one first."""
    if not doc.kernels:
        raise TargetError(
            f"{doc.path or 'file'}: no CUDA kernel (`__global__` function) found; "
            "cuda-agent optimizes the kernels of .cu/.cuh files"
        )
    if kernel is None:
        if len(doc.kernels) != 1:
            names = ", ".join(k.name for k in doc.kernels) or "none"
            raise TargetError(
                f"{doc.path or 'file'} has {len(doc.kernels)} kernels ({names}); pick one with --kernel"
            )
        k = doc.kernels[0]
    else:
        found = doc.kernel(kernel)
        if found is None:
            names = ", ".join(k.name for k in doc.kernels) or "none"
            raise TargetError(f"no kernel {kernel!r} in {doc.path or 'file'} (kernels: {names})")
        k = found
    spec, errors = spec_mod.parse(k, doc.type_aliases)
    where = f"{doc.path or 'file'}:{k.span.start_line + 1}"
    if spec is None:
        raise TargetError(
            f"{where}: kernel {k.name} has no spec; `cuda-agent kernels` shows an inferred one to add"
        )
    if errors:
        first = min(errors, key=lambda e: (e.line < 0, e.line))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise TargetError(f"{doc.path or 'file'}:{first.line + 1}: spec error: {first.message}{more}")
    try:
        problems = spec_mod.problems(spec)
    except spec_mod.InvalidSpec as exc:
        raise TargetError(f"{where}: {exc}") from None
    unit = doc.standalone(k, also=spec_mod.template_names(spec.template_args))
    # the file's own headers travel with the unit: a request is compiled without the host's files
    headers, carried = carry_headers(
        unit.source, doc.path or "kernel.cu", tuple(dict.fromkeys((*unit.options, *options)))
    )
    start = _char(doc, k.span.start_byte)
    definition = doc.data[k.span.start_byte : k.span.end_byte].decode("utf-8", errors="replace")
    sites = doc.launches_of(k.name)

    def relaunch(change: LaunchChange) -> tuple[Launch, ...]:
        try:
            return tuple(p.launch for p in spec_mod.problems(_with_launch(spec, change)))
        except spec_mod.InvalidSpec as exc:
            raise ValueError(str(exc)) from None

    def site_edits(change: LaunchChange) -> LaunchEdits:
        edits, rewritten = _site_edits(doc, k, spec, sites, change)
        new = _with_launch(spec, change)
        how = _launch_directive(new).removeprefix("launch ")
        todo = ""
        if not sites:
            todo = f"no launch site of {k.name} in this file: launch it with {how}"
        elif rewritten < len(sites):
            todo = (
                f"{len(sites) - rewritten} launch site(s) of {k.name} could not be rewritten: "
                f"launch them with {how}"
            )
        spec_edit = _spec_launch_edit(doc.text, k, spec, new)
        return LaunchEdits(tuple(sorted((*edits, spec_edit), key=lambda e: e.start)), rewritten, todo)

    return Target(
        path=doc.path,
        text=doc.text,
        definition=definition,
        definition_start=start,
        baseline=KernelSource(
            unit.source, spec.name_expression, carried, Path(doc.path).name or "kernel.cu", headers
        ),
        verify_problems=problems[:-1],
        bench_problem=problems[-1],
        tolerance=spec.tolerance,
        tolerances=spec.output_tolerances,
        allow_precision=spec.allow_precision,
        spec_text="\n".join(f"//{text}" for _, text in k.comment),
        relaunch=relaunch,
        site_edits=site_edits,
        line_map=unit.line_map,
    )


def _char(doc: Document, byte: int) -> int:
    return len(doc.data[:byte].decode("utf-8", errors="replace"))


def _launch_directive(spec: KernelSpec) -> str:
    """The spec's ``launch`` directive as written by :func:`agent.spec.render`."""
    out = f"launch grid={spec_mod.render_dims(spec.grid)} block={spec_mod.render_dims(spec.block)}"
    return out + (f" smem={spec.smem}" if spec.smem != "0" else "")


def _spec_launch_edit(text: str, k: Kernel, old: KernelSpec, new: KernelSpec) -> TextEdit:
    """The edit of ``k``'s spec that makes its ``launch`` line say ``new``'s launch: the line
    rewritten in place, or (when the spec had none) inserted after the spec's last line."""
    starts = [0, *(i + 1 for i, ch in enumerate(text) if ch == "\n")]
    line = old.lines.get("launch")
    directive = _launch_directive(new)
    if line is not None:
        begin = starts[line]
        end = starts[line + 1] - 1 if line + 1 < len(starts) else len(text)
        row = text[begin:end]
        at = row.index(spec_mod.MARKER) + len(spec_mod.MARKER)
        content = row[at:]
        lead = len(content) - len(content.lstrip())
        return TextEdit(begin + at + lead, begin + at + len(content.rstrip()), directive)
    last = max(n for n, body in k.comment if spec_mod.MARKER in body)
    begin = starts[last]
    row = text[begin : starts[last + 1] if last + 1 < len(starts) else len(text)]
    prefix = row[: row.index(spec_mod.MARKER)]
    at = starts[last + 1] if last + 1 < len(starts) else len(text)
    return TextEdit(at, at, f"{prefix}{spec_mod.MARKER} {directive}\n")


def _with_launch(spec: KernelSpec, change: LaunchChange) -> KernelSpec:
    return replace(
        spec,
        grid=parse_dims(change.grid) if change.grid else spec.grid,
        block=parse_dims(change.block) if change.block else spec.block,
        smem=change.shared or spec.smem,
    )


class _ToHost(ast.NodeTransformer):
    """A spec expression as C host code: sizes become the launch site's argument expressions."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.names:
            raise KeyError(node.id)
        host = self.names[node.id]
        return ast.Name(id=host if re.fullmatch(r"\w+", host) else f"({host})")

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if not isinstance(node.func, ast.Name) or node.func.id not in ("cdiv", "min", "max"):
            raise KeyError(ast.unparse(node.func))
        args = [self.visit(x) for x in node.args]
        if node.func.id == "cdiv" and len(args) == 2:  # (a + b - 1) / b
            a, b = args
            return ast.BinOp(ast.BinOp(a, ast.Add(), ast.BinOp(b, ast.Sub(), ast.Constant(1))), ast.Div(), b)
        return ast.Call(node.func, args, [])

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        raise KeyError(ast.unparse(node))


def _host(expr: str, names: dict[str, str]) -> str:
    tree = _ToHost(names).visit(ast.parse(expr, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree)).replace("//", "/")


def _site_edits(
    doc: Document, k: Kernel, spec: KernelSpec, sites: tuple[LaunchSite, ...], change: LaunchChange
) -> tuple[tuple[TextEdit, ...], int]:
    """Edits of this file's launch sites of ``k`` for ``change``, and how many sites they cover:
    each size variable must be passed to the kernel as a scalar argument (``arg n = n``) so it has
    a host expression there.  Sites that cannot be translated are left alone."""
    params = [p.name for p in k.params]
    new = _with_launch(spec, change)
    edits: list[TextEdit] = []
    rewritten = 0
    for site in sites:
        names: dict[str, str] = {}
        for a in spec.args:
            if isinstance(a, ScalarSpec) and a.value in spec.sizes and a.name in params:
                i = params.index(a.name)
                if i < len(site.args):
                    names[a.value] = site.args[i].text
        parts: list[tuple[Expr | None, str]] = []
        try:
            block = ", ".join(_host(e, names) for e in new.block)
            block_host = block if len(new.block) == 1 else f"dim3({block})"
            names_b = {**names, "block": block_host, "block_x": _host(new.block[0], names)}
            grid = ", ".join(_host(e, names_b) for e in new.grid)
            if change.grid or change.block:
                parts.append((site.grid, grid if len(new.grid) == 1 else f"dim3({grid})"))
            if change.block:
                parts.append((site.block, block_host))
            if change.shared:
                parts.append((site.shared, _host(new.smem, names_b)))
        except (KeyError, SyntaxError):
            log.info(
                "launch site at line %d not rewritten: its sizes have no host expression",
                site.span.start_line + 1,
            )
            continue
        rewritten += 1
        replaced: list[Expr] = []
        for expr, text in parts:
            if expr is None:  # no shared-memory argument at the site: insert one after the block
                assert site.block is not None
                at = _char(doc, site.block.span.end_byte)
                edits.append(TextEdit(at, at, f", {text}"))
                continue
            start, end = _char(doc, expr.span.start_byte), _char(doc, expr.span.end_byte)
            if doc.text[start:end] != text:
                edits.append(TextEdit(start, end, text))
                replaced.append(expr)
        edits += _dead_declarations(doc, site, replaced, " ".join(t for _, t in parts))
    return tuple(sorted(set(edits), key=lambda e: e.start)), rewritten


def _dead_declarations(
    doc: Document, site: LaunchSite, replaced: list[Expr], new_text: str
) -> list[TextEdit]:
    """Edits deleting the local declarations (``const int threads = 32;``, each on a line of its
    own) that only the replaced launch expressions of ``site`` used, directly or through another
    declaration deleted here."""
    if not replaced or site.caller_span is None:
        return []
    root = doc.tree.root_node
    fn = root.descendant_for_byte_range(site.caller_span.start_byte, site.caller_span.end_byte)
    if fn is None:
        return []
    kept = set(re.findall(r"[A-Za-z_]\w*", new_text))
    gone = [(e.span.start_byte, e.span.end_byte) for e in replaced]
    edits: list[TextEdit] = []
    suspects = [n for a, b in gone for n in _identifiers(root.descendant_for_byte_range(a, b))]
    while suspects:
        name = doc.node_text(suspects.pop())
        if name in kept:
            continue
        left = [n for n in _identifiers(fn) if doc.node_text(n) == name and not _inside(n, gone)]
        init = left[0].parent if len(left) == 1 else None
        decl = init.parent if init is not None else None
        if (
            init is None
            or decl is None
            or init.type != "init_declarator"
            or decl.type != "declaration"
            or sum(c.type == "init_declarator" for c in decl.named_children) != 1
        ):
            continue
        start, end = _char(doc, decl.start_byte), _char(doc, decl.end_byte)
        line_start = doc.text.rfind("\n", 0, start) + 1
        line_end = doc.text.find("\n", end)
        line_end = len(doc.text) if line_end < 0 else line_end + 1
        after = doc.text[end:line_end].strip()
        if doc.text[line_start:start].strip() or (after and not after.startswith("//")):
            continue  # shares its line with other code: leave it
        edits.append(TextEdit(line_start, line_end, ""))
        gone.append((decl.start_byte, decl.end_byte))
        suspects += _identifiers(decl)
    return edits


def _inside(node: tree_sitter.Node, ranges: list[tuple[int, int]]) -> bool:
    return any(a <= node.start_byte < b for a, b in ranges)


def _identifiers(node: tree_sitter.Node | None) -> list[tree_sitter.Node]:
    if node is None:
        return []
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            out.append(n)
        stack.extend(n.children)
    return out


# --------------------------------------------------------------------------- proposer interface


@dataclass(frozen=True)
class Proposal:
    """A rewrite to evaluate.

    ``code`` replaces the kernel's definition (helper ``__device__`` functions may precede the
    kernel in it); the kernel keeps its parameter list, since the spec launches it.  ``kernel``
    renames the launched name expression (e.g. other template arguments).  ``assumptions`` are
    what the rewrite relies on beyond the spec ("a and c never alias"), reported with the result.
    ``key`` is the proposer's own handle (the loop never reads it); ``transcript`` the chat that
    produced the proposal, as (role, content) pairs, kept in the trajectory for training.
    ``unit`` (a rewrite written elsewhere, e.g. ``cuda-agent compare``) is a whole translation unit
    evaluated as it is, with ``code`` the kernel's definition as it reads there; ``options`` are
    NVRTC options it needs (checked by the sandbox like every option of a request).
    ``precision`` is the lower precision the rewrite claims (``("fp16",)``): refused before it runs
    unless the spec allows it (``precision allow=``); the sandbox reports what it detects anyway.

    This is the one candidate format: ``cuda-agent compare`` (a kernel the user wrote), the built-in
    engine (a transformation's result) and the LLM proposer (a tool call or a fenced reply) all
    produce it, and :meth:`Target.candidate` checks every one the same way (parameter list, launch,
    precision) before anything runs.
    """

    code: str
    description: str
    assumptions: tuple[str, ...] = ()
    launch: LaunchChange | None = None
    kernel: str | None = None
    key: str = ""
    transcript: tuple[tuple[str, str], ...] = ()
    unit: str = ""  # a whole translation unit holding the kernel (a rewrite written elsewhere)
    options: tuple[str, ...] = ()  # NVRTC options the candidate needs beyond the baseline's
    precision: tuple[
        str, ...
    ] = ()  # lower precisions it claims to use (PRECISIONS); the spec must allow them


@dataclass(frozen=True)
class Attempt:
    """A proposal and its verdict. ``reward`` is :func:`agent.trajectory.reward` (None when cancelled)."""

    index: int  # 0-based, in evaluation order
    batch: int
    candidate_id: str
    proposal: Proposal
    result: CandidateResult
    reward: float | None
    duplicate_of: str = ""  # candidate id of an identical earlier proposal whose verdict this reuses


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt's verdict as a run's result reports it (CLI ``--attempts``/``--json``, the
    editor's run result): flat, JSON-ready.  Numbers are 0 (``first_bad_index`` -1, ``reward``
    None) where the verdict has none."""

    index: int  # 0-based, in evaluation order
    candidate_id: str
    description: str
    status: str  # sandbox.contract.Status value: ok, compile_error, mismatch, rejected...
    message: str  # the sandbox's words (a compile error at FILE:LINE:COL of the candidate's file)
    rule: str = ""  # the rule a rejected/implausible candidate broke (agent.trajectory.hack_rule)
    duplicate_of: str = ""  # the earlier identical candidate whose verdict this reuses
    problem: str = ""  # the failing check's problem size (else the one closest to its bound)
    output: str = ""  # that check's output argument
    first_bad_index: int = -1  # its first element out of bounds (-1: none)
    values: str = ""  # what that check saw ("expected 1.5, got 2 (error 0.5, bound 0.001: ...)")
    error_ratio: float = 0.0  # its largest error as a share of its bound (<= 1 passes)
    compile_line: int = 0  # the first compile error, 1-based, in the candidate's file (0: none)
    compile_column: int = 0
    compile_log: str = ""  # the compiler's log from the first error (a few lines)
    speedup: float = 0.0
    speedup_low: float = 0.0
    speedup_high: float = 0.0
    median_ms: float = 0.0
    registers: int = 0
    spill_stores: int = 0  # bytes
    spill_loads: int = 0  # bytes
    reward: float | None = None


COMPILE_LOG_LINES = 8  # lines of the compiler's log an AttemptRecord keeps


def attempt_record(target: Target, attempt: Attempt) -> AttemptRecord:
    """``attempt`` as the run's result reports it, its compile error placed in the candidate's file."""
    r = attempt.result
    failing = [c for c in r.checks if not c.ok]
    check = failing[0] if failing else max(r.checks, key=lambda c: c.error_ratio, default=None)
    error = target.compile_error(r, attempt.proposal) if r.status is Status.COMPILE_ERROR else None
    log_lines = r.compile_log.splitlines()
    first = next((i for i, line in enumerate(log_lines) if ": error" in line), 0) if error else 0
    res = r.resources
    return AttemptRecord(
        index=attempt.index,
        candidate_id=attempt.candidate_id,
        description=attempt.proposal.description,
        status=r.status.value,
        message=target.located(r, attempt.proposal),
        rule=hack_rule(r),
        duplicate_of=attempt.duplicate_of,
        problem=check.label if check else "",
        output=check.arg if check else "",
        first_bad_index=check.first_bad_index if check else -1,
        values=check.detail if check and not check.ok else "",
        error_ratio=check.error_ratio if check else 0.0,
        compile_line=error.line if error else 0,
        compile_column=error.column if error else 0,
        compile_log="\n".join(log_lines[first : first + COMPILE_LOG_LINES]) if error else "",
        speedup=r.speedup,
        speedup_low=r.speedup_low,
        speedup_high=r.speedup_high,
        median_ms=r.timing.median_ms if r.timing else 0.0,
        registers=res.registers if res else 0,
        spill_stores=res.spill_stores if res else 0,
        spill_loads=res.spill_loads if res else 0,
        reward=attempt.reward,
    )


def verdict_summary(records: Sequence[AttemptRecord]) -> str:
    """One line: ``12 candidates: 4 ok, 5 mismatch, 3 compile_error`` (most frequent first)."""
    counts: dict[str, int] = {}
    for a in records:
        counts[a.status] = counts.get(a.status, 0) + 1
    n = len(records)
    head = f"{n} candidate{'' if n == 1 else 's'}"
    if not counts:
        return head
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return f"{head}: " + ", ".join(f"{v} {k}" for k, v in ranked)


@dataclass(frozen=True)
class OptimizeContext:
    """What a proposer gets: the target, where it runs, the baseline's measured verdict, the seed.

    ``cancel`` is set when the run stops; a proposer blocked on I/O should give up promptly.
    ``profile`` evaluates a proposal once more under Nsight Compute (the result's ``profile``); it
    blocks the proposer's thread while the sandbox works and raises ``ExecutorError`` like an evaluation.
    """

    target: Target
    device: DeviceInfo | None
    baseline: CandidateResult
    seed: int
    budget: OptimizeBudget
    cancel: threading.Event
    profile: Callable[[Proposal], CandidateResult] | None = None  # verify + Nsight Compute, blocking


class Proposer(abc.ABC):
    """Proposes rewrites.  All methods are called from one thread (the loop's proposer thread).

    ``propose`` returns up to ``n`` proposals; it may block (an LLM request) but should return
    promptly once ``context.cancel`` is set.  Returning an empty list means "nothing until I see
    more results": the loop then waits for the outstanding evaluations, calls :meth:`observe` and
    asks again; if nothing is outstanding the run ends (the proposer is exhausted).
    ``history`` holds every attempt observed so far, in order.  Raising ends the run (the best
    candidate so far is kept) with the exception's message as the stop reason.
    """

    name: str = "proposer"

    @abc.abstractmethod
    def propose(self, context: OptimizeContext, history: Sequence[Attempt], n: int) -> list[Proposal]: ...

    def observe(self, attempts: Sequence[Attempt]) -> None:  # noqa: B027 - optional hook
        """Results of the proposals of one batch, in proposal order."""

    @property
    def tokens_used(self) -> int:
        """LLM tokens spent so far (prompt + completion); counted against the token budget."""
        return 0

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and pools."""


# --------------------------------------------------------------------------- budget, settings


@dataclass(frozen=True)
class OptimizeBudget:
    """When to stop: wall seconds, candidates evaluated, LLM tokens (None: unlimited).

    The wall time is the search's: it counts from the moment the original kernel has been measured
    (the baseline: compile, verification at every size, timing), so a slow original does not eat
    the time its candidates need.  The baseline's own time is reported
    (:attr:`OptimizeResult.baseline_seconds`) and bounded by the sandbox's per-request timeout."""

    wall_s: float | None = 60.0
    candidates: int | None = None
    tokens: int | None = None


_BUDGET_PART = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|c|k|M|t)?$")


def parse_budget(text: str) -> OptimizeBudget:
    """``"60s"``, ``"5m"``, ``"40c"`` (candidates), ``"200k"`` / ``"1M"`` / ``"5000t"`` (tokens),
    comma-separated; a plain number is seconds.  Unnamed parts are unlimited, except wall time,
    which defaults to 60 s when no part is given.  Raises ``ValueError`` with a one-line reason."""
    wall: float | None = None
    candidates: int | None = None
    tokens: int | None = None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError("empty budget")
    for part in parts:
        m = _BUDGET_PART.match(part)
        if not m:
            raise ValueError(f"bad budget part {part!r} (examples: 60s, 5m, 40c, 200k)")
        value, unit = float(m[1]), m[2] or "s"
        if value <= 0:
            raise ValueError(f"budget part {part!r} must be positive")
        if value > 1e12:  # 400 digits would be an infinite float and no integer
            raise ValueError(f"budget part {part[:20]!r}... is too large (at most 10^12)")
        if unit in "smh":
            wall = value * {"s": 1, "m": 60, "h": 3600}[unit]
        elif unit == "c":
            candidates = int(value)
        else:
            tokens = int(value * {"k": 1_000, "M": 1_000_000, "t": 1}[unit])
    return OptimizeBudget(wall_s=wall, candidates=candidates, tokens=tokens)


@dataclass(frozen=True)
class LoopSettings:
    batch_size: int = 8  # proposals asked for per batch (one EvalRequest)
    lookahead: int = 1  # batches proposed ahead of the evaluation results
    seeds: int = 3  # verification seeds (drawn from the run's seed)
    eval_budget: Budget = field(default_factory=Budget)
    options: EvalOptions = field(default_factory=EvalOptions)
    sanitize_winner: bool = True  # re-run the winner under compute-sanitizer before reporting it


# --------------------------------------------------------------------------- events, result


EventKind = Literal["baseline", "evaluating", "evaluated", "improved", "finished"]


@dataclass(frozen=True)
class LoopEvent:
    """Progress of a run, for progress bars. ``fraction`` (0..1) is the largest share of any budget
    spent, None when no budget bounds the run."""

    kind: EventKind
    evaluated: int
    fraction: float | None
    best_speedup: float
    message: str = ""


EventFn = Callable[[LoopEvent], None]


class Outcome(str, Enum):
    IMPROVED = "improved"  # a verified candidate is faster, even pessimistically (speedup_low > 1)
    NOT_IMPROVED = "not_improved"  # nothing verified was reliably faster
    BASELINE_FAILED = "baseline_failed"  # the original kernel did not pass its own checks


@dataclass(frozen=True)
class SizeCheck:
    """Verification of the winner at one problem size, over all seeds."""

    label: str
    seeds: int
    ok: bool
    max_abs_err: float
    max_rel_err: float
    detail: str = ""  # the failing check's, else the one closest to its bound: measured error and bound
    error_ratio: float = 0.0  # the largest measured error as a share of its bound (<= 1 passes)


@dataclass(frozen=True)
class OptimizeResult:
    outcome: Outcome
    stop_reason: str
    baseline: CandidateResult
    best: Attempt | None  # the fastest verified attempt (even when not reliably faster)
    attempts: int
    tokens: int
    seconds: float
    device: DeviceInfo | None
    rewritten: str = ""  # the whole file with the rewrite (empty unless improved)
    diff: str = ""  # unified diff against the original file (empty unless improved)
    launch: LaunchChange | None = None  # the winner's launch change, if any
    launch_edits: tuple[TextEdit, ...] = ()  # its edits to the launch sites and the spec (in `rewritten`)
    launch_sites: int = 0  # launch sites of the kernel rewritten
    launch_todo: str = ""  # what the user must still change by hand for the launch ("" when nothing)
    verification: tuple[SizeCheck, ...] = ()
    history: tuple[Attempt, ...] = ()  # every attempt with its verdict, in evaluation order
    baseline_seconds: float = 0.0  # measuring the original (before the wall-time budget starts)
    records: tuple[AttemptRecord, ...] = ()  # ``history`` as reported (attempt_record)

    @property
    def simulated(self) -> bool:
        """The numbers come from the simulated GPU (``sandbox.testing``), not a measurement."""
        return self.device is not None and self.device.simulated

    @property
    def speedup(self) -> float:
        return self.best.result.speedup if self.best else 0.0

    @property
    def speedup_low(self) -> float:
        return self.best.result.speedup_low if self.best else 0.0

    @property
    def speedup_high(self) -> float:
        return self.best.result.speedup_high if self.best else 0.0

    @property
    def assumptions(self) -> tuple[str, ...]:
        return self.best.proposal.assumptions if self.best else ()

    @property
    def cancelled(self) -> bool:
        return self.stop_reason == "cancelled"


# --------------------------------------------------------------------------- the loop


def optimize(
    target: Target,
    proposer: Proposer,
    executor: Executor,
    *,
    budget: OptimizeBudget | None = None,
    seed: int = 0,
    settings: LoopSettings | None = None,
    on_event: EventFn | None = None,
    cancel: threading.Event | None = None,
    trajectory: TrajectoryLog | None = None,
) -> OptimizeResult:
    """Run the loop (see the module docstring).  Raises :class:`~sandbox.executor.ExecutorError`
    only when the baseline cannot be evaluated at all (no GPU, worker unreachable)."""
    run = _Run(
        target,
        proposer,
        executor,
        budget or OptimizeBudget(),
        seed,
        settings or LoopSettings(),
        on_event,
        cancel or threading.Event(),
        trajectory,
    )
    return run.run()


@dataclass(frozen=True)
class _Batch:
    index: int
    proposals: tuple[Proposal, ...]


class _Run:
    def __init__(
        self,
        target: Target,
        proposer: Proposer,
        executor: Executor,
        budget: OptimizeBudget,
        seed: int,
        settings: LoopSettings,
        on_event: EventFn | None,
        cancel: threading.Event,
        trajectory: TrajectoryLog | None,
    ) -> None:
        self.target = target
        self.proposer = proposer
        self.executor = executor
        self.budget = budget
        self.seed = seed
        self.settings = settings
        self.on_event = on_event
        self.user_cancel = cancel
        self.trajectory = trajectory
        rng = random.Random(seed)
        self.seeds = tuple(rng.randrange(1, 2**31) for _ in range(settings.seeds))
        self.run_id = hashlib.sha256(
            f"{target.path}:{target.kernel}:{seed}:{time.time_ns()}".encode()
        ).hexdigest()[:12]
        self.stop = threading.Event()  # set on cancel, deadline, or the end of the run
        self.stop_reason = ""
        self.start = time.monotonic()
        self.search_start = math.inf  # when the baseline was measured: the wall-time budget starts
        self.queue: queue.Queue[_Batch] = queue.Queue(maxsize=max(1, settings.lookahead))
        self.done = threading.Condition()
        self.batches_done: list[tuple[Attempt, ...]] = []  # guarded by done
        self.submitted = 0  # batches put on the queue; guarded by done
        self.attempts: list[Attempt] = []  # evaluator thread only
        self.seen: dict[str, Attempt] = {}  # proposal fingerprint -> first attempt
        self.best: Attempt | None = None
        self.device: DeviceInfo | None = None
        self.baseline: CandidateResult | None = None
        self.info: RunInfo | None = None

    # ------------------------------------------------------------------ driver

    def run(self) -> OptimizeResult:
        baseline_result = self._evaluate_baseline()
        self.search_start = time.monotonic()
        baseline = baseline_result.baseline
        self.baseline = baseline
        self.device = baseline_result.device
        timed = f"{baseline.timing.median_ms:.4g} ms, " if baseline.timing else ""
        took = f"measured in {self.search_start - self.start:.1f} s"
        self._emit("baseline", f"baseline {baseline.status.value} ({timed}{took})")
        if baseline.status is not Status.OK:
            return self._result(
                Outcome.BASELINE_FAILED,
                f"baseline {baseline.status.value}: {self.target.located(baseline)}",
            )
        if self.user_cancel.is_set():
            return self._result(Outcome.NOT_IMPROVED, "cancelled")
        self.info = RunInfo(
            run_id=self.run_id,
            file=self.target.path,
            kernel=self.target.kernel,
            proposer=self.proposer.name,
            seed=self.seed,
            device=self.device.name if self.device else "",
            original=self.target.definition,
            spec=self.target.spec_text,
            baseline_ms=baseline.timing.median_ms if baseline.timing else 0.0,
        )
        context = OptimizeContext(
            self.target, self.device, baseline, self.seed, self.budget, self.stop, self._profile
        )
        watcher = threading.Thread(target=self._watch, name="optimize-watch", daemon=True)
        producer = threading.Thread(
            target=self._produce, args=(context,), name="optimize-propose", daemon=True
        )
        watcher.start()
        producer.start()
        try:
            self._consume()
        finally:
            self._finish("finished")
            producer.join(timeout=10)
            watcher.join(timeout=1)
            if producer.is_alive():
                log.warning("the proposer did not stop within 10 s of the end of the run")
        if self.settings.sanitize_winner:
            self._sanitize_winner()
        best = self.best
        improved = best is not None and best.result.speedup_low > 1.0
        self._emit("finished", self.stop_reason)
        return self._result(Outcome.IMPROVED if improved else Outcome.NOT_IMPROVED, self.stop_reason)

    def _sanitize_winner(self, tries: int = 3) -> None:
        """Re-run the winner under compute-sanitizer (memcheck, racecheck) before it is reported; a
        rejected winner is recorded and gives way to the next faster one (``tries`` at most).
        Skipped on cancel; not counted in the budget.  Without the tool the sandbox says so in
        ``sanitizer``."""
        ranked = sorted(
            (a for a in self.attempts if a.result.status is Status.OK and not a.duplicate_of),
            key=lambda a: -a.result.speedup,
        )
        self.best = None
        for attempt in ranked:
            if attempt.result.speedup_low <= 1.0 or self.user_cancel.is_set():
                self.best = attempt
                return
            if tries == 0:  # the fastest ones all failed: report none of them
                return
            tries -= 1
            self._emit("evaluating", f"{attempt.candidate_id}: compute-sanitizer")
            candidate, _ = self._candidate(attempt.candidate_id, attempt.proposal)
            assert candidate is not None  # it was evaluated before
            request = replace(
                self._request(f"{self.run_id}-sanitize-{attempt.candidate_id}", (candidate,)),
                options=replace(self.settings.options, sanitize=True, time=False),
            )
            try:
                verdict = self.executor.evaluate(request, cancel=self.user_cancel).candidates[0]
            except ExecutorError as exc:
                log.warning("compute-sanitizer run failed: %s", exc)
                self.best = attempt
                return
            if verdict.status in (Status.OK, Status.CANCELLED):
                self.best = replace(attempt, result=replace(attempt.result, sanitizer=verdict.sanitizer))
                return
            rejected = Attempt(
                len(self.attempts),
                attempt.batch,
                f"{attempt.candidate_id}-sanitized",
                attempt.proposal,
                verdict,
                reward(verdict, self.target.allow_precision),
                attempt.candidate_id,
            )
            self.attempts.append(rejected)
            if self.trajectory is not None and self.info is not None:
                self.trajectory.record(self.info, rejected, retracts=attempt.candidate_id)
            self._emit("evaluated", f"{rejected.candidate_id}: {verdict.status.value} ({verdict.message})")

    def _evaluate_baseline(self) -> EvalResult:
        request = self._request(f"{self.run_id}-baseline", ())
        return self.executor.evaluate(request, progress=self._on_progress, cancel=self.user_cancel)

    def _watch(self) -> None:
        deadline = self.search_start + self.budget.wall_s if self.budget.wall_s else math.inf
        while not self.stop.wait(0.02):
            if self.user_cancel.is_set():
                self._finish("cancelled")
            elif time.monotonic() >= deadline:
                self._finish("budget: wall time")

    def _finish(self, reason: str) -> None:
        with self.done:
            if not self.stop_reason:
                self.stop_reason = reason
            self.stop.set()
            self.done.notify_all()

    # ------------------------------------------------------------------ proposer thread

    def _produce(self, context: OptimizeContext) -> None:
        try:
            reason = self._produce_batches(context)
        except Exception as exc:
            log.warning("proposer %s failed: %s", self.proposer.name, exc, exc_info=True)
            reason = f"proposer failed: {exc}"
        with self.done:  # let the submitted batches finish, then end the run
            while len(self.batches_done) < self.submitted and not self.stop.is_set():
                self.done.wait(0.1)
        self._finish(reason)

    def _produce_batches(self, context: OptimizeContext) -> str:
        observed, proposed = 0, 0
        history: list[Attempt] = []
        limit = self.budget.candidates
        while not self.stop.is_set():
            # Deterministic view: before proposing batch k, observe exactly batches < k - lookahead.
            observed = self._observe_until(self.submitted - self.settings.lookahead, observed, history)
            if self.stop.is_set():
                break
            n = self.settings.batch_size if limit is None else min(self.settings.batch_size, limit - proposed)
            proposals = self.proposer.propose(context, tuple(history), n)[:n]
            if proposals:
                self._submit(_Batch(self.submitted, tuple(proposals)))
                proposed += len(proposals)
            if self.budget.tokens is not None and self.proposer.tokens_used >= self.budget.tokens:
                return "budget: tokens"
            if limit is not None and proposed >= limit:
                return "budget: candidates"
            if not proposals:
                if observed == self.submitted:
                    return "proposer exhausted"
                observed = self._observe_until(observed + 1, observed, history)
        return "cancelled"

    def _observe_until(self, upto: int, observed: int, history: list[Attempt]) -> int:
        """Wait until batches < ``upto`` are evaluated, hand the new ones to the proposer."""
        with self.done:
            while len(self.batches_done) < upto and not self.stop.is_set():
                self.done.wait(0.1)
            ready = self.batches_done[observed:upto] if upto > observed else []
        for attempts in ready:
            history.extend(attempts)
            self.proposer.observe(attempts)
        return observed + len(ready)

    def _submit(self, batch: _Batch) -> None:
        while not self.stop.is_set():
            try:
                self.queue.put(batch, timeout=0.1)
            except queue.Full:
                continue
            with self.done:
                self.submitted += 1
            return

    # ------------------------------------------------------------------ evaluator (caller's thread)

    def _consume(self) -> None:
        while not self.stop.is_set():
            try:
                batch = self.queue.get(timeout=0.05)
            except queue.Empty:
                continue
            try:
                attempts = self._evaluate(batch)
            except ExecutorError as exc:
                log.warning("executor failed: %s", exc)
                self._finish(f"executor failed: {exc}")
                return
            with self.done:
                self.batches_done.append(attempts)
                self.done.notify_all()

    def _evaluate(self, batch: _Batch) -> tuple[Attempt, ...]:
        cids = [f"b{batch.index}-c{i}" for i in range(len(batch.proposals))]
        verdicts: dict[str, CandidateResult] = {}  # decided here or by the executor, by candidate id
        reuse: dict[str, tuple[str, CandidateResult | None]] = {}  # duplicate -> (its original, verdict)
        owners: dict[str, str] = {}  # fingerprint -> candidate id in this batch
        to_run: list[Candidate] = []
        for cid, proposal in zip(cids, batch.proposals, strict=True):
            fp = _fingerprint(proposal)
            if fp in self.seen:
                reuse[cid] = (self.seen[fp].candidate_id, self.seen[fp].result)
            elif fp in owners:
                reuse[cid] = (owners[fp], None)
            else:
                owners[fp] = cid
                candidate, error = self._candidate(cid, proposal)
                if candidate is None:
                    verdicts[cid] = CandidateResult(cid, Status.LAUNCH_ERROR, message=error)
                else:
                    to_run.append(candidate)
        if to_run:
            self._emit("evaluating", f"batch {batch.index}: evaluating {len(to_run)} candidates")
            request = self._request(f"{self.run_id}-b{batch.index}", tuple(to_run))
            result = self.executor.evaluate(request, progress=self._on_progress, cancel=self.stop)
            verdicts.update({r.candidate_id: r for r in result.candidates})
        attempts = []
        for cid, proposal in zip(cids, batch.proposals, strict=True):
            original, earlier = reuse.get(cid, ("", None))
            res = (
                earlier
                or verdicts.get(original or cid)
                or CandidateResult(cid, Status.CANCELLED, "no result")
            )
            attempts.append(
                self._record(batch.index, cid, proposal, replace(res, candidate_id=cid), original)
            )
        return tuple(attempts)

    def _candidate(self, cid: str, proposal: Proposal) -> tuple[Candidate | None, str]:
        return self.target.candidate(cid, proposal)

    def _record(self, batch: int, cid: str, proposal: Proposal, res: CandidateResult, dup: str) -> Attempt:
        attempt = Attempt(
            index=len(self.attempts),
            batch=batch,
            candidate_id=cid,
            proposal=proposal,
            result=res,
            reward=None if res.status is Status.CANCELLED else reward(res, self.target.allow_precision),
            duplicate_of=dup,
        )
        self.attempts.append(attempt)
        if res.status is not Status.CANCELLED:
            self.seen.setdefault(_fingerprint(proposal), attempt)
        if self.trajectory is not None and self.info is not None:
            self.trajectory.record(self.info, attempt)
        if res.status is Status.OK and (self.best is None or res.speedup > self.best.result.speedup):
            self.best = attempt
            self._emit("improved", f"{cid}: {res.speedup:.2f}x ({proposal.description})")
        else:
            self._emit("evaluated", f"{cid}: {res.status.value}")
        return attempt

    def _request(self, request_id: str, candidates: tuple[Candidate, ...]) -> EvalRequest:
        return self.target.request(
            request_id,
            candidates,
            seeds=self.seeds,
            budget=self.settings.eval_budget,
            options=self.settings.options,
        )

    def _profile(self, proposal: Proposal) -> CandidateResult:
        """``proposal`` verified and profiled under Nsight Compute (``EvalOptions.profile``) on the
        bench problem; for a proposer's ``profile`` tool (``OptimizeContext.profile``)."""
        cid = f"profile-{len(self.attempts)}"
        candidate, error = self._candidate(cid, proposal)
        if candidate is None:
            return CandidateResult(cid, Status.LAUNCH_ERROR, message=error)
        options = replace(self.settings.options, profile=True, time=False, sanitize=False)
        request = replace(self._request(f"{self.run_id}-{cid}", (candidate,)), options=options)
        return self.executor.evaluate(request, cancel=self.stop).candidates[0]

    # ------------------------------------------------------------------ events and result

    def _on_progress(self, p: Progress) -> None:
        self._emit("evaluating", p.message or f"{p.done}/{p.total}")

    def _fraction(self) -> float | None:
        shares = []
        if self.budget.wall_s and self.search_start < math.inf:
            shares.append((time.monotonic() - self.search_start) / self.budget.wall_s)
        if self.budget.candidates:
            shares.append(len(self.attempts) / self.budget.candidates)
        if self.budget.tokens:
            shares.append(self.proposer.tokens_used / self.budget.tokens)
        return min(1.0, max(shares)) if shares else None

    def _emit(self, kind: EventKind, message: str) -> None:
        if self.on_event is None:
            return
        best = self.best.result.speedup if self.best else 0.0
        fraction = 1.0 if kind == "finished" else self._fraction()
        try:
            self.on_event(LoopEvent(kind, len(self.attempts), fraction, best, message))
        except Exception:  # a broken progress bar must not end the run
            log.exception("progress callback failed")

    def _result(self, outcome: Outcome, reason: str) -> OptimizeResult:
        assert self.baseline is not None
        best = self.best
        res = OptimizeResult(
            outcome=outcome,
            stop_reason=reason,
            baseline=self.baseline,
            best=best,
            attempts=len(self.attempts),
            tokens=self.proposer.tokens_used,
            seconds=time.monotonic() - self.start,
            baseline_seconds=min(self.search_start, time.monotonic()) - self.start,
            device=self.device,
            verification=size_checks(best.result) if best else (),
            history=tuple(self.attempts),
            records=tuple(attempt_record(self.target, a) for a in self.attempts),
        )
        if outcome is not Outcome.IMPROVED or best is None:
            return res
        change = best.proposal.launch
        launch = self.target.site_edits(change) if change and self.target.site_edits else LaunchEdits()
        edits = launch.edits
        rewritten = self.target.file_with(best.proposal.code, edits)
        name = self.target.path or "kernel.cu"
        old, new = (name, name) if Path(name).is_absolute() else (f"a/{name}", f"b/{name}")
        diff = "".join(
            difflib.unified_diff(
                self.target.text.splitlines(keepends=True),
                rewritten.splitlines(keepends=True),
                fromfile=old,
                tofile=new,
            )
        )
        return replace(
            res,
            rewritten=rewritten,
            diff=diff,
            launch=change,
            launch_edits=edits,
            launch_sites=launch.sites,
            launch_todo=launch.todo,
        )


def _fingerprint(p: Proposal) -> str:
    return hashlib.sha256(
        repr((p.code, p.launch, p.kernel, p.unit, p.options, p.precision)).encode()
    ).hexdigest()


def size_checks(r: CandidateResult) -> tuple[SizeCheck, ...]:
    """A result's checks per problem size, over all seeds."""
    by_label: dict[str, list[Check]] = {}
    for c in r.checks:
        by_label.setdefault(c.label, []).append(c)
    return tuple(
        SizeCheck(
            label=label,
            seeds=len(checks),
            ok=all(c.ok for c in checks),
            max_abs_err=max(c.max_abs_err for c in checks),
            max_rel_err=max(c.max_rel_err for c in checks),
            detail=max(checks, key=lambda c: (not c.ok, c.error_ratio)).detail,
            error_ratio=max(c.error_ratio for c in checks),
        )
        for label, checks in by_label.items()
    )
