"""Make a program faster (``cuda-agent speedup``): from runs of the user's own program to a
verified, applied, end-to-end speedup.

::

    baseline runs ──▶ rank kernels by GPU time ──▶ capture the hot ones ──▶ optimize each
    (times, outputs)   (every launch, all streams)   (specs, recorded inputs)  (budget by share)
          │                                                                         │
          │        ◀── compare outputs, time ◀── run again ◀── rebuild ◀── patch ◀──┘
          └──────────────▶ report: shares, each rewrite's speedup, measured vs Amdahl

1. **Baseline.** The program runs as the user runs it: once under the capture library with
   kernel timing only (CUPTI activity records: every launch, every stream; no launch recorded,
   nothing synchronized) for each kernel's GPU time, then ``runs`` times plainly, without the
   library, for its wall time; every run's standard output and the files named as outputs
   (removed before each run, so a run that does not write one is caught).  Two runs whose
   outputs disagree under the tolerance stop the job: the comparison could not tell a broken
   rewrite from the program's own noise.
2. **Ranking.** Kernels by share of GPU time; the hottest are taken until their shares reach
   ``share`` or ``top`` kernels are taken.
3. **Capture.** One run per chosen kernel records its launches (up to ``max_shapes``) and saves
   the first one's input data; :mod:`agent.capture` turns them into a spec of the kernel's
   definition (found under the source roots: headers, other translation units, template
   instantiations); the sizes of every other recorded shape become verification sizes, and the
   saved data (:mod:`sandbox.recorded`) one more verification problem, so each candidate is
   verified on the program's real inputs as well as on drawn data.
4. **Optimize.** The optimize loop (:func:`agent.loop.optimize`) per kernel, the wall budget split
   by time share.  A winner that changes the launch configuration is kept only when every
   launch site is in the kernel's own file (the loop rewrites those); else it is refused, with why.
5. **Patch.** Every winner's definition replaced in its file (several in one file compose),
   one unified diff over the project.  Nothing is written unless ``apply``.
6. **Apply, rebuild, re-run.** Files written, the user's build command run, the program run
   ``runs`` times again, each run's outputs compared with the baseline's.  Any difference, a
   failed build or a failed run: every file is restored byte for byte (and rebuilt), and the
   report says refused.  A program whose outputs changed is never reported faster.
7. **Report.** Kernels by share, each rewrite's speedup, the end-to-end speedup measured (median
   wall time before over after, with the spread) against the one Amdahl's law predicts from the
   kernels' shares of the wall time and their speedups.

Where the program runs is a :class:`~sandbox.programs.Machine`:
:class:`~sandbox.programs.LocalMachine` (this machine's GPU, :mod:`sandbox.capture`), a worker's
(:class:`agent.program_remote.RemoteMachine`: the project uploaded, the program built and run
there, its files brought back), or a simulated one for tests (:mod:`agent.program_sim`).  Each
step is told to the caller as it ends (:mod:`agent.program_steps`).
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path

from agent import capture as cap
from agent.loop import LoopSettings, OptimizeResult, RunOutcome, optimize
from agent.outputs import Difference, OutputFile, OutputTolerance, Produced, compare
from agent.program_steps import ProgressFn, Steps
from agent.proposal import Attempt, Proposal
from agent.proposer import OptimizeBudget, Proposer
from agent.target import Relauncher, Target, TargetError, target_for
from base.errors import Failed
from cudasrc import specs
from cudasrc.launch import LaunchChange, TextEdit, sites_edits
from cudasrc.source import Document
from sandbox import recorded
from sandbox.capture import CaptureError, CaptureRun, RecordedLaunch
from sandbox.contract import MEMORY_COPIES, ArgSpec, Budget, Distribution, Launch, Problem, Status
from sandbox.executor import Executor
from sandbox.programs import LocalMachine as LocalMachine
from sandbox.programs import Machine as Machine

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- settings and report


@dataclass(frozen=True)
class ProgramSettings:
    """The job: the program (``argv`` run in ``cwd``), where its kernels' sources are, how to
    build it, what it produces and how close the outputs must stay."""

    argv: tuple[str, ...]
    cwd: str = "."
    sources: tuple[str, ...] = (".",)
    build: str = ""
    outputs: tuple[OutputFile, ...] = ()
    tolerance: OutputTolerance = field(default_factory=OutputTolerance)
    ignore: tuple[str, ...] = ()  # regular expressions: standard output lines not compared (timings)
    top: int = 3
    share: float = 0.8
    budget_s: float = 120.0
    runs: int = 3
    max_shapes: int = 4
    timeout_s: float | None = 600.0
    apply: bool = False
    keep: bool = (
        True  # with apply: False restores the files after the end-to-end check (the editor proposes the edit)
    )
    seed: int = 0
    options: tuple[str, ...] = ()  # -I/-D for the kernels' files


class Outcome(str, Enum):
    """How the job ended.  Only ``FASTER`` claims a speedup, and only after the outputs compared equal."""

    FASTER = "faster"  # applied, outputs equal, measurably faster
    NOT_FASTER = "not_faster"  # applied, outputs equal, not measurably faster
    PATCH_ONLY = "patch_only"  # rewrites verified, patch written, not applied (no --apply)
    NO_REWRITE = "no_rewrite"  # no kernel got a verified faster rewrite
    OUTPUTS_DIFFER = "outputs_differ"  # the patched program's outputs changed: reverted
    BUILD_FAILED = "build_failed"  # the patched program did not build: reverted
    RUN_FAILED = "run_failed"  # the program failed (before: nothing done; after: reverted)
    UNSTABLE = "unstable"  # the program's own runs disagree: outputs cannot be compared
    NO_KERNELS = "no_kernels"  # no kernel launch was timed

    @property
    def failed(self) -> bool:
        return self in (
            Outcome.OUTPUTS_DIFFER,
            Outcome.BUILD_FAILED,
            Outcome.RUN_FAILED,
            Outcome.UNSTABLE,
            Outcome.NO_KERNELS,
        )


@dataclass(frozen=True)
class KernelShare:
    """One kernel's part of the program's GPU time (summed over the baseline runs' median)."""

    kernel: str  # demangled name
    launches: int
    ns: int
    share: float  # of the program's kernel time
    wall_fraction: float  # of the program's wall time
    streams: int
    shapes: int
    chosen: bool


@dataclass(frozen=True)
class KernelOutcome:
    """What became of one chosen kernel: ``applied`` (in the patch) or refused, with why."""

    kernel: str
    path: str
    share: float
    budget_s: float
    applied: bool
    reason: str = ""
    speedup: float = 0.0
    speedup_low: float = 0.0
    speedup_high: float = 0.0
    verified: tuple[str, ...] = ()  # the problems each winner passed (sizes, ``recorded``)
    attempts: int = 0
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileEdit:
    """One hunk of the patch: lines ``start``..``end`` (0-based, end exclusive) of ``path`` as it
    was become ``new_text`` (what an editor applies; the unified diff says the same)."""

    path: str
    start: int
    end: int
    new_text: str


def hunks(path: str, old: str, new: str) -> tuple[FileEdit, ...]:
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    ops = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    return tuple(FileEdit(path, i1, i2, "".join(b[j1:j2])) for tag, i1, i2, j1, j2 in ops if tag != "equal")


@dataclass(frozen=True)
class RunTimes:
    """Several runs of the program: wall seconds and kernel seconds per run."""

    wall_s: tuple[float, ...]
    gpu_s: tuple[float, ...]

    @property
    def wall(self) -> float:
        return statistics.median(self.wall_s) if self.wall_s else 0.0

    @property
    def gpu(self) -> float:
        return statistics.median(self.gpu_s) if self.gpu_s else 0.0


@dataclass(frozen=True)
class ProgramReport:
    argv: tuple[str, ...]
    outcome: Outcome
    message: str
    kernels: tuple[KernelShare, ...] = ()
    rewrites: tuple[KernelOutcome, ...] = ()
    patch: str = ""
    files: tuple[str, ...] = ()  # files the patch changes
    edits: tuple[FileEdit, ...] = ()  # the patch as line hunks
    before: RunTimes | None = None
    after: RunTimes | None = None
    predicted: float = 0.0  # Amdahl: wall before / predicted wall after
    predicted_gpu: float = 0.0  # the same over kernel time only
    differences: tuple[str, ...] = ()
    applied: bool = False
    reverted: bool = False

    @property
    def compared_equal(self) -> bool:
        """The patched program ran and its outputs equalled the original's."""
        return self.outcome in (Outcome.FASTER, Outcome.NOT_FASTER)

    @property
    def measured(self) -> float:
        """Median wall time before over after; 0 unless the outputs compared equal (a program
        whose outputs changed has no speedup to speak of)."""
        if not self.compared_equal or self.before is None or self.after is None or not self.after.wall:
            return 0.0
        return self.before.wall / self.after.wall

    @property
    def measured_range(self) -> tuple[float, float]:
        """The slowest and fastest ratios the runs allow: (min before / max after ... max / min)."""
        if not self.compared_equal or self.before is None or self.after is None or not self.after.wall_s:
            return (0.0, 0.0)
        return (
            min(self.before.wall_s) / max(self.after.wall_s),
            max(self.before.wall_s) / min(self.after.wall_s),
        )

    @property
    def measured_gpu(self) -> float:
        if not self.compared_equal or self.before is None or self.after is None or not self.after.gpu:
            return 0.0
        return self.before.gpu / self.after.gpu

    @property
    def faster(self) -> bool:
        """Claimed faster: applied, outputs compared equal, and faster end to end."""
        return self.outcome is Outcome.FASTER


class Cancelled(Failed, RuntimeError):
    """The caller cancelled; files already restored."""


# --------------------------------------------------------------------------- steps


def rank(
    times: Mapping[str, tuple[int, int, int, int]], wall_ns: float, top: int, share: float
) -> tuple[KernelShare, ...]:
    """Kernels by GPU time (``times``: kernel -> (launches, ns, streams, shapes)); the hottest
    chosen until their summed share reaches ``share`` or ``top`` are chosen."""
    total = sum(t[1] for t in times.values()) or 1
    ordered = sorted(times.items(), key=lambda kv: (-kv[1][1], kv[0]))
    out: list[KernelShare] = []
    covered = 0.0
    for name, (launches, ns, streams, shapes) in ordered:
        chosen = len([k for k in out if k.chosen]) < top and covered < share and ns > 0
        if chosen:
            covered += ns / total
        out.append(
            KernelShare(
                name, launches, ns, ns / total, ns / wall_ns if wall_ns else 0.0, streams, shapes, chosen
            )
        )
    return tuple(out)


def amdahl(fractions: Sequence[tuple[float, float]]) -> float:
    """The whole's speedup when parts taking ``fraction`` of the time each get ``speedup`` faster."""
    rest = 1.0 - sum(f for f, _ in fractions)
    new = max(rest, 0.0) + sum(f / s for f, s in fractions if s > 0)
    return 1.0 / new if new > 0 else 0.0


def _produced(run: CaptureRun, cwd: str, outputs: Sequence[OutputFile]) -> Produced:
    files: dict[str, bytes | None] = {}
    for o in outputs:
        try:
            files[o.path] = (Path(cwd) / o.path).read_bytes()
        except OSError:
            files[o.path] = None
    return Produced(run.returncode, run.stdout, files)


def _clear_outputs(cwd: str, outputs: Sequence[OutputFile]) -> None:
    for o in outputs:
        (Path(cwd) / o.path).unlink(missing_ok=True)


@dataclass(frozen=True)
class _Observed:
    runs: RunTimes
    produced: tuple[Produced, ...]  # the watched run's, then each plain run's
    timed: CaptureRun  # the watched run: each kernel's GPU time
    returncode: int  # the first non-zero exit status, else 0


def _run_times(
    machine: Machine, s: ProgramSettings, cancel: threading.Event | None, say: Steps, phase: str
) -> _Observed:
    """One watched run (each kernel's GPU time; the library's callbacks cost time, so its wall
    time is not used) and ``s.runs`` plain runs (wall time); every run's outputs.  Each run is a
    step (``phase``: before or after the patch)."""
    _clear_outputs(s.cwd, s.outputs)
    timed = machine.run(s.argv, s.cwd, timeout=s.timeout_s, cancel=cancel)
    say.timed_run(phase, timed)
    produced = [_produced(timed, s.cwd, s.outputs)]
    walls: list[float] = []
    returncode = timed.returncode
    runs = max(s.runs, 1) if returncode == 0 else 0
    for i in range(runs):
        _clear_outputs(s.cwd, s.outputs)
        run = machine.run(s.argv, s.cwd, timeout=s.timeout_s, cancel=cancel, watch=False)
        say.run(phase, i + 1, runs, run)
        walls.append(run.seconds)
        produced.append(_produced(run, s.cwd, s.outputs))
        if run.returncode != 0:
            returncode = run.returncode
            break
    return _Observed(RunTimes(tuple(walls), (timed.gpu_ns / 1e9,)), tuple(produced), timed, returncode)


_ECMA_SPECIAL = frozenset("\\^$.|?*+()[]{}")


def _kernel_regex(name: str) -> str:
    """The exact demangled name as a regular expression both ECMAScript (the capture library's
    ``std::regex``) and Python read the same way: only the characters special to both escaped."""
    return "^" + "".join("\\" + c if c in _ECMA_SPECIAL else c for c in name) + "$"


@dataclass(frozen=True)
class _Prepared:
    """A chosen kernel resolved for optimizing: its file, the file with the captured spec, the target."""

    share: KernelShare
    doc: Document
    kernel_name: str  # qualified name in the source
    spec_text: str  # the file's text with the captured spec above the kernel
    target: Target
    notes: tuple[str, ...]


def _documents(roots: Sequence[str]) -> list[Document]:
    """The project's files that define or launch kernels."""
    paths = dict.fromkeys([*cap.source_files(roots), *cap.source_files(roots, mention=b"<<<")])
    return [Document(p.read_bytes().decode("utf-8", errors="replace"), str(p)) for p in paths]


def _sizes_of(c: cap.Captured) -> dict[str, str]:
    return dict(c.spec.sizes)


def _recorded_problem(
    target: Target, captured: cap.Captured, save_dir: str, stored: Mapping[str, str]
) -> tuple[Problem | None, str]:
    """The bench problem with the program's saved inputs in place of drawn ones (None, and why,
    when an input was not saved): each by its digest in ``stored`` (already in a recorded store:
    a worker's), else read from ``save_dir`` and put in this machine's."""
    args: list[ArgSpec] = []
    for a in target.bench_problem.args:
        if a.role not in ("in", "inout"):
            args.append(a)
            continue
        file = captured.saved.get(a.name)
        if not file:
            return None, f"{a.name}: input not saved (over the capture's save cap)"
        digest = stored.get(file) or recorded.put((Path(save_dir) / file).read_bytes())
        args.append(replace(a, dist=Distribution("recorded", source=digest)))
    return replace(target.bench_problem, label="recorded", args=tuple(args)), ""


def prepare(
    share: KernelShare,
    launches: Sequence[RecordedLaunch],
    docs: Sequence[Document],
    save_dir: str,
    options: tuple[str, ...] = (),
    stored: Mapping[str, str] | None = None,
) -> _Prepared:
    """The captured spec of the kernel's definition, covering every recorded shape, and its
    target with a verification problem on the recorded inputs.  Raises
    :class:`~agent.capture.CaptureMismatch` or :class:`~agent.target.TargetError` with why not."""
    if not launches:
        raise cap.CaptureMismatch(f"{share.kernel}: no launch recorded")
    doc, kernel = cap.find_kernel(docs, launches[0])
    first = cap.spec_from_launch(doc, kernel, launches[0])
    notes = list(first.notes)
    verify = [_sizes_of(first)] if first.spec.sizes else []
    for other in launches[1:]:
        c = cap.spec_from_launch(doc, kernel, other)
        if replace(c.spec, sizes=first.spec.sizes, verify=first.spec.verify) != first.spec:
            notes.append(
                f"launch {other.index} differs in more than its sizes: verified at the first launch's only"
            )
            continue
        if c.spec.sizes and _sizes_of(c) not in verify:
            verify.append(_sizes_of(c))
    spec = replace(first.spec, verify=tuple(verify))
    block = cap.render(spec)
    spec_text = cap.with_spec(doc, kernel, block)
    target = target_for(Document(spec_text, doc.path), kernel.qualified_name, options)
    problem, why = _recorded_problem(target, first, save_dir, stored or {})
    if problem is not None:
        target = replace(
            target,
            verify_problems=(*target.verify_problems, problem),
            relaunch=_with_recorded_launch(target.relaunch),
        )
    else:
        notes.append(f"not verified on the recorded inputs: {why}")
    return _Prepared(share, doc, kernel.qualified_name, spec_text, target, tuple(notes))


def _with_recorded_launch(relaunch: Relauncher | None) -> Relauncher | None:
    """``relaunch`` for a target whose verification problems gained the recorded problem (the
    benchmark problem's sizes with the program's own data): a launch for it too, the benchmark
    problem's, before the benchmark problem's own."""
    if relaunch is None:
        return None
    inner = relaunch

    def with_recorded(change: LaunchChange) -> tuple[Launch, ...]:
        launches = inner(change)
        return (*launches[:-1], launches[-1], launches[-1])

    return with_recorded


def memory_cap(target: Target, device_bytes: int) -> tuple[Budget | None, str]:
    """The per-evaluation memory cap the program's own sizes need (None: the default is enough),
    and the note that says why it was raised: every array of the largest problem, three times over
    (the original's outputs, a candidate's, and rotated input sets for timing), at most 80% of the
    device's memory."""
    default = Budget().gpu_memory_bytes
    need = max(p.array_bytes() for p in target.problems)
    if need <= default // MEMORY_COPIES:
        return None, ""
    copies = MEMORY_COPIES * need
    cap = min(max(copies, default), int(0.8 * device_bytes)) if device_bytes else max(copies, default)
    gib = 1 << 30
    note = (
        f"the program's own sizes need {need / gib:.1f} GiB of arrays: the per-evaluation memory cap raised "
        f"from {default / gib:.0f} to {cap / gib:.1f} GiB"
    )
    if cap < need:
        note += " (more than this GPU allows: evaluations will be refused)"
    return Budget(gpu_memory_bytes=cap), note


def _edits(
    p: _Prepared, proposal: Proposal, docs: Sequence[Document]
) -> tuple[dict[str, list[TextEdit]], str]:
    """A winning proposal as edits of the project's original files (without the captured spec):
    the kernel's definition, and for a launch change every launch site in every file; or why it
    cannot be applied."""
    if proposal.unit:
        return {}, "rewrites a whole translation unit, not the kernel's definition"
    delta = len(p.spec_text) - len(p.doc.text)
    start = p.target.definition_start - delta
    end = start + len(p.target.definition)
    if p.doc.text[start:end] != p.target.definition:
        return {}, "the kernel's definition moved in its file"
    edits: dict[str, list[TextEdit]] = {p.doc.path: [TextEdit(start, end, p.target._fit(proposal.code))]}
    if proposal.launch is None:
        return edits, ""
    kernel = p.doc.kernel(p.kernel_name)
    if kernel is None or kernel.template_params:
        return (
            {},
            "changes the launch configuration of a template kernel (each instantiation launches its own way)",
        )
    spec = _captured_spec(p)
    total = 0
    for doc in docs:
        found, rewritten, sites = sites_edits(doc, kernel, spec, proposal.launch)
        if rewritten < sites:
            return (
                {},
                f"changes the launch configuration; {sites - rewritten} launch site(s) in {doc.path} cannot be rewritten",
            )
        total += sites
        if found:
            edits.setdefault(doc.path, []).extend(found)
    if total == 0:
        return {}, "changes the launch configuration, and no launch site of the kernel was found to rewrite"
    return edits, ""


def _captured_spec(p: _Prepared) -> specs.KernelSpec:
    doc = Document(p.spec_text, p.doc.path)
    k = doc.kernel(p.kernel_name)
    spec = specs.parse(k, doc.type_aliases)[0] if k is not None else None
    if spec is None:
        raise TargetError(f"{p.kernel_name}: the captured spec does not read back")
    return spec


def _winners(result: OptimizeResult) -> list[Attempt]:
    """The verified, reliably faster attempts of a run, the loop's best first, then the fastest."""
    ok = [
        a
        for a in result.history
        if a.result.status is Status.OK and a.result.speedup_low > 1.0 and not a.duplicate_of
    ]
    ok.sort(key=lambda a: -a.result.speedup)
    best = [result.best] if result.best is not None and result.outcome is RunOutcome.IMPROVED else []
    return list(dict.fromkeys([*best, *ok]))


def _choose(
    k: KernelShare, p: _Prepared, result: OptimizeResult, budget: float, docs: Sequence[Document]
) -> tuple[KernelOutcome, dict[str, list[TextEdit]]]:
    """The fastest verified rewrite that can be applied to the project (the loop's best, else the
    next fastest), or the refusal that says why none can."""
    base = KernelOutcome(
        k.kernel, p.doc.path, k.share, budget, False, attempts=result.attempts, notes=p.notes
    )
    winners = _winners(result)
    if not winners:
        return replace(base, reason=f"no faster verified rewrite ({result.stop})"), {}
    recorded_problem = any(q.label == "recorded" for q in p.target.verify_problems)
    refusals: list[str] = []
    for a in winners:
        verified = tuple(dict.fromkeys(c.label for c in a.result.checks))
        if recorded_problem and "recorded" not in verified:
            refusals.append(f"{a.candidate_id}: not verified on the recorded inputs")
            continue
        edits, why = _edits(p, a.proposal, docs)
        if why:
            refusals.append(f"{a.candidate_id}: {why}")
            continue
        r = a.result
        passed = dict.fromkeys(x.partition(": ")[2] for x in refusals)
        notes = (*p.notes, *(f"faster rewrites passed over: {x}" for x in passed))
        return replace(
            base,
            applied=True,
            speedup=r.speedup,
            speedup_low=r.speedup_low,
            speedup_high=r.speedup_high,
            verified=verified,
            notes=notes,
            reason=a.proposal.description,
        ), edits
    return replace(base, reason="; ".join(dict.fromkeys(x.partition(": ")[2] for x in refusals))), {}


def apply_edits(text: str, edits: Sequence[TextEdit]) -> str:
    out, pos = [], 0
    for e in sorted(edits, key=lambda e: e.start):
        if e.start < pos:
            raise ValueError("overlapping edits")
        out += [text[pos : e.start], e.new_text]
        pos = e.end
    out.append(text[pos:])
    return "".join(out)


def unified_patch(changes: Mapping[str, tuple[str, str]], root: str) -> str:
    """One unified diff over every changed file, paths relative to ``root``."""
    parts = []
    for path in sorted(changes):
        old, new = changes[path]
        rel = os.path.relpath(path, root)
        parts.append(
            "".join(
                difflib.unified_diff(
                    old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}"
                )
            )
        )
    return "".join(parts)


class Applied:
    """Files written with their originals kept in memory; :meth:`revert` restores them byte for
    byte (a file someone changed since is left as it is, and named in ``untouched``)."""

    def __init__(self, changes: Mapping[str, str]) -> None:
        self.originals: dict[str, bytes] = {}
        self.written: dict[str, bytes] = {}
        self.untouched: list[str] = []
        for path in changes:
            self.originals[path] = Path(path).read_bytes()
        for path, text in changes.items():
            data = text.encode("utf-8")
            Path(path).write_bytes(data)
            self.written[path] = data

    def revert(self) -> None:
        for path, data in self.originals.items():
            try:
                current = Path(path).read_bytes()
            except OSError:
                current = None
            if current is not None and current != self.written[path]:
                self.untouched.append(path)
                continue
            Path(path).write_bytes(data)


# --------------------------------------------------------------------------- the job


def speedup(
    settings: ProgramSettings,
    machine: Machine,
    executor: Executor,
    new_proposer: Callable[[], Proposer],
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> ProgramReport:
    """Run the whole flow (see the module docstring); ``progress`` is told each step as it ends
    (:class:`~agent.program_steps.Step`)."""
    say = Steps(progress)
    s = settings
    base = _run_times(machine, s, cancel, say, "before")
    if base.returncode != 0:
        return ProgramReport(
            s.argv, Outcome.RUN_FAILED, f"the program exited with status {base.returncode}", before=base.runs
        )
    if len(base.produced) > 1 and (
        diffs := compare(base.produced[0], base.produced[1], _kinds(s), s.tolerance, _ignored(s))
    ):
        return ProgramReport(
            s.argv,
            Outcome.UNSTABLE,
            "two runs of the unchanged program disagree, so a rewrite's effect could not be told apart: "
            "loosen --rtol/--atol or make the program deterministic",
            before=base.runs,
            differences=tuple(str(d) for d in diffs),
        )
    times = {k: (t.launches, t.ns, t.streams, len(t.shapes)) for k, t in base.timed.times.items()}
    if not times:
        why = "; ".join(base.timed.errors) or "no kernel launch was timed"
        return ProgramReport(s.argv, Outcome.NO_KERNELS, why, before=base.runs)
    wall_ns = base.runs.wall * 1e9
    kernels = rank(times, wall_ns, s.top, s.share)
    chosen = [k for k in kernels if k.chosen]
    say.ranked([(k.kernel, k.launches, k.share, k.chosen) for k in kernels], base.runs.wall, base.runs.gpu)
    docs = _documents(s.sources)
    device = executor.device_info()
    device_bytes = device.memory_bytes if device is not None else 0
    total_share = sum(k.share for k in chosen) or 1.0
    rewrites: list[KernelOutcome] = []
    per_file: dict[str, list[TextEdit]] = {}
    seen_definitions: dict[tuple[str, str], str] = {}
    with tempfile.TemporaryDirectory(prefix="cuda-agent-speedup-") as tmp:
        for i, k in enumerate(chosen):
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled")
            budget = s.budget_s * k.share / total_share
            save = str(Path(tmp) / f"k{i}")
            began = time.monotonic()
            try:
                run = machine.run(
                    s.argv,
                    s.cwd,
                    kernel=_kernel_regex(k.kernel),
                    max_launches=s.max_shapes,
                    save_dir=save,
                    timeout=s.timeout_s,
                    cancel=cancel,
                )
                prepared = prepare(k, run.launches, docs, save, s.options, run.stored)
            except (CaptureError, cap.CaptureMismatch, TargetError) as exc:
                say.not_captured(k.kernel, began, exc)
                rewrites.append(KernelOutcome(k.kernel, "", k.share, budget, False, f"no spec: {exc}"))
                continue
            say.captured(k.kernel, began, run, prepared.target)
            key = (prepared.doc.path, prepared.kernel_name)
            if key in seen_definitions:
                rewrites.append(
                    KernelOutcome(
                        k.kernel,
                        prepared.doc.path,
                        k.share,
                        0.0,
                        False,
                        f"same definition as {seen_definitions[key]} (another instantiation): optimized "
                        "once, its rewrite changes this one too (predicted with its speedup, verified end "
                        "to end only)",
                    )
                )
                continue
            seen_definitions[key] = k.kernel
            on_event = say.optimize_start(k.kernel, budget)
            memory, why = memory_cap(prepared.target, device_bytes)
            if why:
                prepared = replace(prepared, notes=(*prepared.notes, why))
            proposer = new_proposer()
            try:
                result = optimize(
                    prepared.target,
                    proposer,
                    executor,
                    budget=OptimizeBudget(wall_s=budget),
                    seed=s.seed,
                    settings=LoopSettings(eval_budget=memory) if memory else None,
                    on_event=on_event,
                    cancel=cancel,
                )
            finally:
                proposer.close()
            rewrite, edits = _choose(k, prepared, result, budget, docs)
            rewrites.append(rewrite)
            say.optimize_end(k.kernel, result, rewrite.applied, rewrite.speedup, rewrite.reason)
            for path, found in edits.items():
                per_file.setdefault(path, []).extend(found)
    originals = {d.path: d.text for d in docs}
    changes = {path: (originals[path], apply_edits(originals[path], e)) for path, e in per_file.items()}
    patch = unified_patch(changes, s.cwd)
    applied_shares = {r.kernel: r.speedup for r in rewrites if r.applied}
    # another instantiation of a rewritten template (chosen or not) changes with it: its best
    # estimate is that speedup (a specialization of the same name would not: the end-to-end run says)
    templates = {
        cap.parse_name(name).qualified: speed
        for name, speed in applied_shares.items()
        if cap.parse_name(name).template_args
    }
    for k in kernels:
        name = cap.parse_name(k.kernel)
        if k.kernel not in applied_shares and name.template_args and name.qualified in templates:
            applied_shares[k.kernel] = templates[name.qualified]
    fractions = [(k.wall_fraction, applied_shares[k.kernel]) for k in kernels if k.kernel in applied_shares]
    predicted = amdahl(fractions)
    gpu_total = sum(k.ns for k in kernels) or 1
    predicted_gpu = amdahl(
        [(k.ns / gpu_total, applied_shares[k.kernel]) for k in kernels if k.kernel in applied_shares]
    )
    report = ProgramReport(
        s.argv,
        Outcome.NO_REWRITE,
        "",
        tuple(kernels),
        tuple(rewrites),
        patch,
        tuple(sorted(changes)),
        tuple(e for path in sorted(changes) for e in hunks(path, *changes[path])),
        base.runs,
        None,
        predicted,
        predicted_gpu,
    )
    say.patch(list(changes), [r.kernel for r in rewrites if r.applied], predicted)
    if not changes:
        return replace(report, message="no kernel got a verified faster rewrite that could be applied")
    if not s.apply:
        return replace(
            report,
            outcome=Outcome.PATCH_ONLY,
            message="patch written, not applied: --apply builds, runs and compares the program",
        )
    return _apply_and_compare(report, changes, s, machine, base, say, cancel)


def _kinds(s: ProgramSettings) -> dict[str, str]:
    return {o.path: o.kind for o in s.outputs}


def _ignored(s: ProgramSettings) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in s.ignore)


def _apply_and_compare(
    report: ProgramReport,
    changes: Mapping[str, tuple[str, str]],
    s: ProgramSettings,
    machine: Machine,
    base: _Observed,
    say: Steps,
    cancel: threading.Event | None,
) -> ProgramReport:
    applied = Applied({p: new for p, (_, new) in changes.items()})
    say.tell("applied", f"patch applied to {len(changes)} file(s)", files=sorted(changes))

    def build(why: str, stop: threading.Event | None = None) -> tuple[int, str]:
        began = time.monotonic()
        code, out = machine.build(s.build, s.cwd, s.timeout_s, stop)
        say.build(why, s.build, began, code)
        return code, out

    def undo_checked(done: ProgramReport) -> ProgramReport:
        """Restore the files after a successful check (``keep=False``), and rebuild."""
        applied.revert()
        say.tell(
            "reverted", "files restored (the patch is proposed, not applied)", outcome=done.outcome.value
        )
        if s.build:
            build("restored")
        return replace(done, reverted=True)

    def undo(
        outcome: Outcome, message: str, after: RunTimes | None = None, diffs: Sequence[Difference] = ()
    ) -> ProgramReport:
        applied.revert()
        if applied.untouched:
            message += f"; not restored, changed by someone else meanwhile: {', '.join(applied.untouched)}"
        say.tell(
            "reverted", f"files restored: {outcome.value}", outcome=outcome.value, untouched=applied.untouched
        )
        if s.build:
            code, out = build("restored")
            if code != 0:
                message += f"; rebuilding the restored files failed too (status {code}): {out.strip()[-300:]}"
        return replace(
            report,
            outcome=outcome,
            message=message,
            after=after,
            applied=True,
            reverted=True,
            differences=tuple(str(d) for d in diffs),
        )

    try:
        if s.build:
            code, out = build("patched", cancel)  # restoring builds are never cancelled
            if code != 0:
                return undo(
                    Outcome.BUILD_FAILED, f"`{s.build}` failed with status {code}: {out.strip()[-500:]}"
                )
        after = _run_times(machine, s, cancel, say, "after")
        if after.returncode != 0:
            return undo(
                Outcome.RUN_FAILED, f"the patched program exited with status {after.returncode}", after.runs
            )
        diffs = list(
            dict.fromkeys(
                d
                for got in after.produced
                for d in compare(base.produced[0], got, _kinds(s), s.tolerance, _ignored(s))
            )
        )
        say.compared(diffs, base.runs.wall, after.runs.wall)
        if diffs:
            return undo(
                Outcome.OUTPUTS_DIFFER,
                "the patched program's outputs differ: patch reverted",
                after.runs,
                diffs,
            )
    except BaseException:
        applied.revert()
        if s.build:  # best effort: the binaries were built from the patched files
            try:
                machine.build(s.build, s.cwd, s.timeout_s)
            except Exception as exc:  # the first error is the one to report
                log.warning("rebuilding the restored files failed: %s", exc)
        raise
    done = replace(report, after=after.runs, applied=True)
    if not s.keep:
        done = undo_checked(done)
    assert done.before is not None
    low = min(done.before.wall_s) / max(after.runs.wall_s)  # the outputs compared equal: measured
    kept = "" if s.keep else " (files restored: the patch is proposed, not applied)"
    if low > 1.0:
        return replace(done, outcome=Outcome.FASTER, message="outputs equal, faster end to end" + kept)
    stays = " (the patch stays applied)" if s.keep else kept
    return replace(
        done,
        outcome=Outcome.NOT_FASTER,
        message="outputs equal, but not measurably faster end to end" + stays,
    )
