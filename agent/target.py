"""What is optimized: one kernel of one file resolved under its spec (:class:`Target`,
:func:`target_for`), and the checks every :class:`~agent.proposal.Proposal` passes before it runs
(parameter list, launch, precision)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from agent.proposal import Proposal
from base.errors import InputError
from cudasrc import specs as spec_mod
from cudasrc.dtypes import canonical_dtype, is_float
from cudasrc.launch import LaunchChange, LaunchEdits, TextEdit, char_offset, launch_edits, with_launch
from cudasrc.source import Document
from cudasrc.syntax import Kernel, Param
from sandbox.compiler import carry_headers, parse_diagnostics
from sandbox.contract import (
    PRECISIONS,
    Budget,
    Candidate,
    CandidateResult,
    Diagnostic,
    EvalOptions,
    EvalRequest,
    KernelSource,
    Launch,
    Problem,
    Status,
    Tolerance,
)

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
    # compiler messages (``cudasrc.syntax.Standalone.line_map``)
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
    nonnegative: Collection[str] = (),
) -> str:
    """Why ``candidate`` cannot be launched with ``original``'s arguments ('' when it can): the
    parameter count, each parameter's element type (through the files' type aliases), pointer
    depth and reference-ness must agree; names and ``const``/``__restrict__`` may differ.
    ``nonnegative``: the original's integer scalars whose every value is at least 0 and fits the
    signed type: there ``int`` and ``unsigned int`` (of one width) read the same bits alike."""
    a, b = original.params, candidate.params
    if len(a) != len(b):
        return f"it takes {len(b)} parameter(s), {original.name} takes {len(a)} ({_signature(original)})"
    for i, (p, q) in enumerate(zip(a, b, strict=True)):
        mine, theirs = _param_type(p, aliases), _param_type(q, candidate_aliases)
        if p.name in nonnegative and not p.pointer:
            mine, theirs = _unsigned(mine), _unsigned(theirs)
        if mine != theirs:
            return (
                f"parameter {i + 1} `{q.name}` is `{q.type_text}` where {original.name} has "
                f"`{p.type_text}` ({_signature(original)})"
            )
    return ""


def _param_type(p: Param, aliases: Mapping[str, str] | None) -> tuple[str, int, bool]:
    base = " ".join(p.base_type.split())
    return (canonical_dtype(base, aliases) or base, p.pointer, p.reference)


def _amended(kernel: Kernel, amend: Sequence[str]) -> Kernel:
    """``kernel`` with its spec's lines of each keyword in ``amend`` replaced by ``amend``'s."""
    if not amend:
        return kernel

    def keyword(directive: str | None) -> str:
        return next(iter((directive or "").split()), "")

    keywords = {keyword(line) for line in amend}
    kept = [
        (line, text)
        for line, text in kernel.comment
        if keyword(spec_mod.directive_text(text)) not in keywords
    ]
    at = kernel.span.start_line - 1  # the amendments' errors point above the kernel
    return replace(kernel, comment=(*kept, *((at, f"{spec_mod.MARKER} {line}") for line in amend)))


def _unsigned(t: tuple[str, int, bool]) -> tuple[str, int, bool]:
    """A signed integer parameter type as its unsigned twin (``int32`` -> ``uint32``)."""
    dtype, pointer, reference = t
    return (f"u{dtype}" if dtype.startswith("int") else dtype, pointer, reference)


def nonnegative_scalars(problems: Iterable[Problem]) -> frozenset[str]:
    """The integer scalars whose value is in [0, 2^31) in every one of ``problems``: a kernel that
    takes one as ``unsigned`` reads what a kernel taking it as ``int`` reads."""
    found: dict[str, bool] = {}
    for problem in problems:
        for a in problem.args:
            if a.role == "scalar":
                ok = not is_float(a.dtype) and float(a.value).is_integer() and 0 <= a.value < 2**31
                found[a.name] = found.get(a.name, True) and ok
    return frozenset(name for name, ok in found.items() if ok)


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
    nonnegative = nonnegative_scalars(target.problems)
    why = signature_mismatch(
        target.original_kernel, cand, aliases, Document(context).type_aliases, nonnegative
    )
    return f"the rewrite's parameter list differs: {why}" if why else ""


class TargetError(InputError, ValueError):
    """The kernel cannot be optimized as asked (not found, ambiguous, no usable spec); one line."""


def target_for(
    doc: Document, kernel: str | None = None, options: tuple[str, ...] = (), amend: Sequence[str] = ()
) -> Target:
    """Resolve kernel ``kernel`` of ``doc`` (the only kernel when None) under its written spec;
    ``options``: the file's build configuration (``-I``/``-D``, :func:`agent.check.build_options`);
    ``amend``: directive lines (``sizes n=1024 verify n=1024``, no marker) that replace every
    written line of their keyword, for a comparison the written spec does not fit.

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
    spec, errors = spec_mod.parse(_amended(k, amend), doc.type_aliases, doc.integer_constants)
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
    # the template arguments' names, and the spec's __constant__ data even where the kernel does not
    # read it (a comparison's spec fills a constant only its rewrite reads: both modules declare it)
    unit = doc.standalone(
        k, also=spec_mod.template_names((*spec.template_args, *(c.name for c in spec.constants)))
    )
    # the file's own headers travel with the unit: a request is compiled without the host's files
    headers, carried = carry_headers(
        unit.source, doc.path or "kernel.cu", tuple(dict.fromkeys((*unit.options, *options)))
    )
    start = char_offset(doc, k.span.start_byte)
    definition = doc.data[k.span.start_byte : k.span.end_byte].decode("utf-8", errors="replace")
    sites = doc.launches_of(k.name)

    def relaunch(change: LaunchChange) -> tuple[Launch, ...]:
        try:
            return tuple(p.launch for p in spec_mod.problems(with_launch(spec, change)))
        except spec_mod.InvalidSpec as exc:
            raise TargetError(str(exc)) from None

    def site_edits(change: LaunchChange) -> LaunchEdits:
        return launch_edits(doc, k, spec, sites, change)

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
