"""The transformation fuzz's engine: kernels of ``bench/kernels/`` and ``tests/data/transforms/``
mutated token by token, every transformation the search uses applied to each mutant, and the
tally of what came out (``bench/transform_fuzz.py`` runs it at length and describes it;
``tests/test_transform_fuzz.py`` runs a few thousand applications)."""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agent.builtin import BLOCKS_1D, BLOCKS_2D
from cudasrc import specs as spec_mod
from cudasrc.source import Document
from cudasrc.specs import KernelSpec
from engine import NotApplicable, Subject, Transform, safe_apply
from engine.compose import Chain
from engine.mechanical import (
    BlockSize,
    FastMath,
    LaunchBounds,
    ReadOnlyLoads,
    RestrictConst,
    Unroll,
)
from engine.registry import candidates
from sandbox.contract import DeviceInfo

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "bench" / "kernels", ROOT / "tests" / "data" / "transforms")
TOKEN = re.compile(r"[A-Za-z_]\w*(?:\.[xyz])?|\d[\w.]*|<<=|>>=|<<|>>|[-+*/%&|^!=<>]=|&&|\|\||\+\+|--|->|\S")
POOL = (
    "*", "&", "(", ")", "{", "}", "[", "]", ";", ",", "=", "+", "-", "/", "%", "<", ">=", "return",
    "int", "float", "size_t", "(size_t)", "const", "__shared__", "__syncthreads()", "atomicAdd",
    "threadIdx.x", "blockIdx.y", "blockDim.x", "0", "1", "32", "-1", "for", "if", "else", "while",
    "i", "n", "x", "#pragma unroll", "__restrict__", "1.0f", "expf", "s", ">>=", "tid", "//",
)  # fmt: skip


def transformations(sm_count: int = 132) -> tuple[Transform, ...]:
    """Every transformation (with its parameters) that the built-in search may apply."""
    device = DeviceInfo("fuzz", "9.0", sm_count, 0, 0)
    blocks = tuple(BlockSize(b) for b in (*BLOCKS_1D, *BLOCKS_2D))
    mechanical = (RestrictConst(), ReadOnlyLoads(), FastMath(), Unroll(4), LaunchBounds())
    return (*candidates(device), *blocks, *mechanical)


def chains(sm_count: int = 132) -> tuple[Chain, ...]:
    """Every composition of two passes (:mod:`engine.compose`), each at its first value."""
    structural = candidates(DeviceInfo("fuzz", "9.0", sm_count, 0, 0))
    firsts = [a for k, a in enumerate(structural) if all(b.name != a.name for b in structural[:k])]
    return tuple(Chain((a, b)) for a in firsts for b in firsts if a.name != b.name)


def seeds() -> list[tuple[str, str, KernelSpec]]:
    """(name, kernel definition text, spec) of every kernel with a usable spec in :data:`SOURCES`."""
    out = []
    for folder in SOURCES:
        for path in sorted(folder.glob("*.cu")):
            doc = Document.from_file(path)
            for k in doc.kernels:
                spec, errors = spec_mod.parse(k)
                if spec is None or errors:
                    continue
                text = doc.text_in(k.span)
                out.append((f"{path.name}:{k.name}", text, spec))
    return out


def mutate(code: str, rng: random.Random, edits: int) -> str:
    """``code`` with ``edits`` random token edits inside its body (the signature is kept, so the
    mutant usually still parses as a kernel with its spec's parameters)."""
    start = code.find("{")
    head, body = (code[: start + 1], code[start + 1 :]) if start >= 0 else ("", code)
    tokens = TOKEN.findall(body)
    for _ in range(edits):
        if not tokens:
            break
        k = rng.randrange(len(tokens))
        op = rng.randrange(6)
        if op == 0:
            del tokens[k]
        elif op == 1:
            tokens.insert(k, tokens[k])
        elif op == 2 and k + 1 < len(tokens):
            tokens[k], tokens[k + 1] = tokens[k + 1], tokens[k]
        elif op == 3:
            tokens[k] = rng.choice(tokens)
        elif op == 4:
            tokens[k] = rng.choice(POOL)
        else:
            tokens.insert(k, rng.choice(POOL))
    return head + " ".join(tokens)


@dataclass
class Tally:
    applications: int = 0
    rewrites: int = 0
    not_applicable: int = 0
    escaped: list[str] = field(default_factory=list)
    internal: Counter[str] = field(default_factory=Counter)


def run(applications: int, seed: int = 0, deadline_s: float | None = None) -> Tally:
    """Apply transformations to mutants until ``applications`` applications (or the deadline)."""
    rng = random.Random(seed)
    kernels = seeds()
    passes, pairs = transformations(), chains()
    tally = Tally()
    stop = time.monotonic() + deadline_s if deadline_s else None
    for name, code, spec, t in _stream(rng, kernels, passes, pairs):
        if tally.applications >= applications or (stop is not None and time.monotonic() > stop):
            break
        tally.applications += 1
        try:
            out = safe_apply(t, Subject(code, spec))
        except Exception as e:  # what the fuzz looks for: an exception out of the search's entry
            tally.escaped.append(f"{name} {t!r}: {type(e).__name__}: {e}")
            continue
        if isinstance(out, NotApplicable):
            tally.not_applicable += 1
            if out.reason.startswith("internal error"):
                tally.internal[f"{type(t).__name__}: {out.reason[:160]}"] += 1
        else:
            tally.rewrites += 1
    return tally


def _stream(
    rng: random.Random,
    kernels: list[tuple[str, str, KernelSpec]],
    passes: tuple[Transform, ...],
    pairs: tuple[Chain, ...],
) -> Iterator[tuple[str, str, KernelSpec, Transform]]:
    """Per mutant: 8 transformations, then one composition."""
    while True:
        name, code, spec = rng.choice(kernels)
        mutant = mutate(code, rng, rng.choice((1, 1, 2, 3, 6)))
        if not Document(mutant).kernels:
            continue  # no kernel left: the search never gets such code (it has no spec)
        for t in (*rng.sample(passes, k=min(8, len(passes))), rng.choice(pairs)):
            yield name, mutant, spec, t
