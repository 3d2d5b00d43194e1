"""Compare a kernel with a rewrite the user already has (``cuda-agent compare``, the editor's
"Compare with…"): the same verification and timing as an optimize run, for one given candidate.

The candidate is another ``__global__`` kernel, in the same file or another one.  It is
evaluated as a :class:`~agent.proposal.Proposal` whose ``unit`` is the candidate's own standalone
translation unit (its helpers, constants and macros come with it), launched under the
original's spec: sizes, arguments, tolerance and problems are the original's; only the launch
(``launch`` line), the template instantiation (``template`` line) and the lower precision it
claims (``precision allow=...`` line: the comparison then allows that precision's roundoff) may
come from the candidate's own spec lines, or a launch from the caller (``--launch``).  A candidate whose parameter list
differs from the original's (count, element types, pointer depth; names and ``const``/
``__restrict__`` qualifiers aside, and an integer scalar's signedness where the spec's values are
never negative) is refused before anything runs.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from agent.proposal import Proposal
from agent.target import Target, TargetError, nonnegative_scalars, signature_mismatch, target_for
from cudasrc import specs as spec_mod
from cudasrc.launch import LaunchChange
from cudasrc.source import Document
from cudasrc.syntax import Kernel
from sandbox.contract import Budget, CandidateResult, Check, EvalOptions, EvalResult, Status
from sandbox.executor import Executor, ProgressFn


@dataclass(frozen=True)
class CandidateRef:
    """Where the candidate is: ``NAME`` (same file), ``FILE`` (its only kernel) or ``FILE:NAME``."""

    path: str | None
    kernel: str | None

    @staticmethod
    def parse(text: str, exists: bool | None = None) -> CandidateRef:
        """``exists``: whether ``text`` names a file (looked up when None)."""
        text = text.strip()
        if not text:
            raise TargetError("--with needs a kernel name, FILE or FILE:KERNEL")
        if exists is None:
            exists = Path(text).is_file()
        if exists:
            return CandidateRef(text, None)
        head, sep, tail = text.rpartition(":")
        if sep and head and tail.isidentifier():
            return CandidateRef(head, tail)
        if text.isidentifier():
            return CandidateRef(None, text)
        raise TargetError(f"--with {text}: no such file, and not a kernel name")


@dataclass(frozen=True)
class Comparison:
    """The evaluated pair: ``result.baseline`` is the original, ``candidate`` the rewrite."""

    target: Target
    candidate_path: str
    proposal: Proposal
    result: EvalResult

    @property
    def candidate(self) -> CandidateResult:
        return self.result.candidates[0]

    @property
    def verified(self) -> bool:
        return self.result.baseline.status is Status.OK and self.candidate.status is Status.OK

    @property
    def first_failure(self) -> Check | None:
        """The first failing check (problem, seed, output, first bad index, error against its bound)."""
        return next((c for c in self.candidate.checks if not c.ok), None)


def find_kernel(doc: Document, name: str | None, what: str) -> Kernel:
    if name is None:
        if len(doc.kernels) != 1:
            names = ", ".join(k.name for k in doc.kernels) or "none"
            raise TargetError(f"{what} {doc.path} has {len(doc.kernels)} kernels ({names}); name one")
        return doc.kernels[0]
    found = doc.kernel(name)
    if found is None:
        names = ", ".join(k.name for k in doc.kernels) or "none"
        raise TargetError(f"{what}: no kernel {name!r} in {doc.path or 'file'} (kernels: {names})")
    return found


def parse_launch(text: str, where: str = "--launch") -> LaunchChange:
    """``grid=EXPR block=EXPR smem=EXPR`` (any subset) as a :class:`LaunchChange`."""
    try:
        values = spec_mod.launch_pairs(text)
    except ValueError as exc:
        raise TargetError(f"{where}: {exc}") from None
    return LaunchChange(grid=values.get("grid"), block=values.get("block"), shared=values.get("smem"))


def _own_lines(kernel: Kernel) -> dict[str, str]:
    """The candidate's own ``launch``, ``template`` and ``precision`` directives, as written (other
    lines are the original's business: sizes, arguments and tolerance come from its spec)."""
    out: dict[str, str] = {}
    for _, text in kernel.comment:
        if spec_mod.MARKER not in text:
            continue
        keyword, _, rest = text.split(spec_mod.MARKER, 1)[1].strip().partition(" ")
        if keyword in spec_mod.REWRITE_LINES:
            out[keyword] = rest.strip()
    return out


def candidate_proposal(
    target: Target,
    original: Kernel,
    original_doc: Document,
    cand_doc: Document,
    cand: Kernel,
    launch: LaunchChange | None = None,
    template: str | None = None,
) -> Proposal:
    """The candidate as a proposal against ``target``; raises :class:`TargetError` (one line) when
    it cannot be compared (a different parameter list, a bad launch or template line).
    ``launch``/``template``: in place of the candidate's own lines."""
    if cand.span == original.span and cand_doc.path == original_doc.path:
        raise TargetError(f"{cand.name} is the kernel itself; --with names the rewrite to compare with")
    nonnegative = nonnegative_scalars(target.problems)
    if why := signature_mismatch(
        original, cand, original_doc.type_aliases, cand_doc.type_aliases, nonnegative
    ):
        raise TargetError(f"{cand.name} cannot replace {original.name}: {why}")
    own = _own_lines(cand) | ({"template": template} if template is not None else {})
    where = f"{cand_doc.path or 'file'}:{cand.span.start_line + 1}"
    if launch is None and "launch" in own:
        launch = parse_launch(own["launch"], f"{where}: launch")
    name = cand.qualified_name
    if "template" in own:
        args = [a for a in spec_mod.split_args(own["template"]) if a]
        if len(args) != len(cand.template_params):
            raise TargetError(
                f"{where}: {cand.name} has {len(cand.template_params)} template parameter(s), got {len(args)}"
            )
        name = f"{name}<{', '.join(args)}>"
    elif cand.template_params:
        original_args = target.kernel.partition("<")[2].removesuffix(">")
        if not original_args or len(spec_mod.split_args(original_args)) != len(cand.template_params):
            raise TargetError(f"{where}: {cand.name} is a template: add `// @cuda-agent template ARG, ...`")
        name = f"{name}<{original_args}>"
    precision: tuple[str, ...] = ()
    if "precision" in own:
        try:
            precision = spec_mod.precision_kinds(own["precision"])
        except ValueError as exc:
            raise TargetError(f"{where}: precision: {exc}") from None
    unit = cand_doc.standalone(cand, inline_headers=True)
    definition = cand_doc.data[cand.span.start_byte : cand.span.end_byte].decode("utf-8", errors="replace")
    return Proposal(
        code=definition,
        description=f"{cand.name} from {Path(cand_doc.path).name or 'the same file'}",
        launch=launch,
        kernel=name,
        unit=unit.source,
        options=unit.options,
        precision=precision,
    )


def prepare(
    doc: Document,
    kernel: str | None,
    with_: str,
    launch: str | None,
    open_document: Callable[[str], Document],
    options: tuple[str, ...] = (),
    template: str | None = None,
    amend: tuple[str, ...] = (),
) -> tuple[Target, Proposal, Document]:
    """The original (``kernel`` of ``doc``), the candidate named by ``with_`` (``NAME``, ``FILE`` or
    ``FILE:NAME``; files read with ``open_document``) as a proposal against it, and the candidate's
    document; ``launch`` (``grid=.. block=.. smem=..``) overrides the candidate's own launch line.
    ``options``: the original's build configuration (``-I``/``-D``); ``template``: the candidate's
    instantiation in place of its own ``template`` line; ``amend``: directive lines that replace the
    original's of their keyword (:func:`~agent.target.target_for`), where the pair only agrees on
    other sizes.  One path for the CLI, the editor and scripts; raises :class:`TargetError` (one line)."""
    ref = CandidateRef.parse(with_)
    target = target_for(doc, kernel, options, amend)
    original = find_kernel(doc, kernel, "FILE")
    cand_doc = doc if ref.path is None else open_document(ref.path)
    cand = find_kernel(cand_doc, ref.kernel, "--with")
    change = parse_launch(launch) if launch is not None else None
    return target, candidate_proposal(target, original, doc, cand_doc, cand, change, template), cand_doc


def compare(
    target: Target,
    proposal: Proposal,
    executor: Executor,
    *,
    candidate_path: str = "",
    seeds: tuple[int, ...] = (1, 2, 3),
    sanitize: bool = True,
    budget: Budget | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> Comparison:
    """Verify and time ``proposal`` against the target in one evaluation (compute-sanitizer on the
    candidate when it verifies and ``sanitize``).  The precision the candidate claims (its own
    ``precision`` line) is allowed for this comparison: the user vouches for their own rewrite.
    Raises :class:`TargetError` for a launch the spec cannot resolve and
    :class:`~sandbox.executor.ExecutorError` when nothing could run."""
    allowed = tuple(dict.fromkeys((*target.allow_precision, *proposal.precision)))
    target = replace(target, allow_precision=allowed)
    candidate, error = target.candidate("candidate", proposal)
    if candidate is None:
        raise TargetError(error)
    request = target.request(
        f"compare-{uuid.uuid4().hex}",
        (candidate,),
        seeds=seeds,
        budget=budget,
        options=EvalOptions(sanitize=sanitize),
    )
    result = executor.evaluate(request, progress=progress, cancel=cancel)
    return Comparison(target, candidate_path, proposal, result)


def reason_text(found: Comparison) -> str:
    """Why the rewrite did not verify, on one line ('' when it did): the status, and for a
    mismatch the output, problem and seed, the first bad index and the error against its bound."""
    c = found.candidate
    if found.verified:
        return ""
    if found.result.baseline.status is not Status.OK:
        base = found.result.baseline
        return f"the original failed its own checks: {base.status.value}: {base.message}".rstrip(": ")
    bad = found.first_failure
    head = f"{c.status.value}: {c.message}".rstrip(": ")
    if bad is None:
        return head
    where = (
        f"output `{bad.arg}` at {bad.label} (seed {bad.seed})"
        if bad.arg
        else f"{bad.label} (seed {bad.seed})"
    )
    parts = [head, where]
    if bad.first_bad_index >= 0:
        parts.append(f"first bad index {bad.first_bad_index}")
    if bad.detail:
        parts.append(bad.detail)
    if bad.error_ratio > 1 and bad.error_ratio != float("inf"):
        parts.append(f"worst element {bad.error_ratio:.3g}x its bound (max abs err {bad.max_abs_err:.3g})")
    return "; ".join(parts)


def headline(found: Comparison) -> str:
    """The comparison in a few words, for hints, hovers and the results view."""
    c = found.candidate
    if found.verified:
        return f"verified, {c.speedup:.2f}x [{c.speedup_low:.2f}-{c.speedup_high:.2f}x]"
    return reason_text(found)
