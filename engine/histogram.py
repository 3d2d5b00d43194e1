"""Histograms: ``atomicAdd`` into a small array, privatised per block in shared memory
(:class:`SharedHistogram`)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import ClassVar

import tree_sitter

from cudasrc.dtypes import dtype_bytes
from cudasrc.launch import LaunchChange
from cudasrc.specs import evaluate
from engine import NotApplicable, Outcome
from engine.elementwise import GridStride, _capped
from engine.passes import PAD, Emitter, Match, Parameterized
from engine.view import KernelView, walk
from sandbox.contract import DeviceInfo

Node = tree_sitter.Node

_SHARED_ATOMIC_TYPES = ("int", "unsigned int", "unsigned", "float", "unsigned long long")
HISTOGRAM_STEM = "hist"  # the per-block copy is named ca_hist (the emitter's fresh name)
SHARED_HISTOGRAM_BYTES = 16 << 10  # leave most of the SM's shared memory to other blocks


@dataclass(frozen=True)
class Histogram(Match):
    name: str  # the array H
    bases: tuple[Node, ...]  # its name's nodes in the atomicAdd calls
    elem: str
    bins: int


def _find(view: KernelView) -> Histogram | NotApplicable:
    subject = view.subject
    body = view.body
    params = {p.name: p for p in subject.kernel.params if p.pointer == 1}
    targets: dict[str, list[Node]] = {}  # array -> its name's nodes in ``atomicAdd(&H[k], v)`` calls
    for call in view.atomics:
        fn, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
        if fn is None or args is None or view.text(fn) != "atomicAdd" or not args.named_children:
            continue
        base = view.atomic_target(args.named_children[0])
        if base is not None and view.text(base) in params:
            if call.parent is None or call.parent.type != "expression_statement":
                return NotApplicable(
                    "the value an atomicAdd returns is used: a per-block copy would change it"
                )
            targets.setdefault(view.text(base), []).append(base)
    if not targets:
        return NotApplicable("no `atomicAdd(&H[k], v)` into an array parameter")
    name, bases = next(iter(targets.items()))
    uses = [n for n in walk(body) if n.type == "identifier" and view.text(n) == name]
    if len(uses) != len(bases):
        return NotApplicable(f"`{name}` is used other than through atomicAdd")
    if view.returns:
        return NotApplicable("the body returns early: not every thread would reach the merge")
    spec = subject.arrays().get(name)
    elem = view.element_type(name)
    try:
        bins = evaluate(spec.count, {}) if spec is not None else None
    except ValueError:
        bins = None
    if spec is None or not isinstance(bins, int) or bins <= 0:
        return NotApplicable(f"`{name}` has no constant size in the spec")
    if elem not in _SHARED_ATOMIC_TYPES or bins * dtype_bytes(spec.dtype) > SHARED_HISTOGRAM_BYTES:
        return NotApplicable(f"`{name}` is not a small array of a type shared-memory atomics support")
    return Histogram(view, name, tuple(bases), elem, bins)


@dataclass(frozen=True)
class SharedHistogram(Parameterized[Histogram]):
    """``atomicAdd(&H[k], v)`` into a small fixed-size array ``H`` -> a per-block copy of ``H`` in
    shared memory, zeroed first and added into ``H`` once per block at the end, so most atomics hit
    shared memory instead of contending in L2.  With ``max_blocks`` the kernel first becomes a
    grid-stride loop over at most that many blocks (see :class:`GridStride`), so the per-block merge
    is paid a few times per SM rather than once per original block."""

    max_blocks: int = 0
    name: ClassVar[str] = "SharedHistogram"
    leads: ClassVar[bool] = False

    def match(self, view: KernelView) -> Histogram | NotApplicable:
        return _find(view)

    def space_for(self, device: DeviceInfo | None) -> tuple[Hashable, ...]:
        capped = (SharedHistogram(8 * device.sm_count),) if device and device.sm_count else ()
        return (*self.space, *capped)

    def rewrite(self, match: Histogram, params: Hashable) -> Outcome:
        assert isinstance(params, SharedHistogram)
        launch: LaunchChange | None = None
        if params.max_blocks:
            subject = match.view.subject
            strided = GridStride(1, params.max_blocks).apply(subject)
            if isinstance(strided, NotApplicable):
                return strided
            found = _find(subject.then(strided).normalized.view)
            if isinstance(found, NotApplicable):
                return found
            match, launch = found, strided.launch
        view, name, bins = match.view, match.name, match.bins
        em = Emitter(view)
        body = view.body
        spans = {(b.start_byte, b.end_byte) for b in match.bases}
        copy = em.fresh(HISTOGRAM_STEM)
        tid, threads, k = em.fresh("tid"), em.fresh("threads"), em.fresh("k")
        renamed = em.substitute(body, lambda n: copy if (n.start_byte, n.end_byte) in spans else None)
        # the body without its braces, one level deeper, its atomics now into the shared copy
        inner = "\n".join((PAD + line) if line.strip() else line for line in renamed[1:-1].split("\n"))
        ind = em.indent(body.named_children[0]) if body.named_children else PAD
        em.replace(
            body,
            "{\n"
            f"{ind}// cuda-agent: a per-block `{name}` in shared memory, added into `{name}` once per block\n"
            f"{ind}__shared__ {match.elem} {copy}[{bins}];\n"
            f"{ind}const int {tid} = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
            f"{ind}const int {threads} = blockDim.x * blockDim.y * blockDim.z;\n"
            f"{ind}for (int {k} = {tid}; {k} < {bins}; {k} += {threads}) {copy}[{k}] = 0;\n"
            f"{ind}__syncthreads();\n"
            f"{ind}{{{inner}{ind}}}\n"
            f"{ind}__syncthreads();\n"
            f"{ind}for (int {k} = {tid}; {k} < {bins}; {k} += {threads})\n"
            f"{ind}    if ({copy}[{k}] != 0) atomicAdd(&{name}[{k}], {copy}[{k}]);\n"
            "}",
        )
        what = f"shared-memory histogram of `{name}` ({bins} bins)"
        if launch is not None:
            what += f" over a grid-stride loop{_capped(params.max_blocks)}"
        return em.rewrite(what, launch)


SharedHistogram.space = (SharedHistogram(),)
