"""Transformation fuzz: every built-in transformation applied to token-mutated kernels.

The kernels of ``bench/kernels/`` and ``tests/data/transforms/`` are mutated token by token
(a token deleted, duplicated, swapped with its neighbour, replaced by another of the kernel's
tokens or by one of :data:`POOL`, or inserted), each mutant keeping its original spec, and every
transformation the search uses (:func:`transformations`) is applied to it.  Counted:

- ``escaped``: exceptions out of :func:`agent.transforms.safe_apply`, the entry point of the
  search (must be 0);
- ``internal``: exceptions inside a transformation that ``safe_apply`` turned into
  ``NotApplicable("internal error: ...")`` (bugs to fix; listed by transformation and message).

The transformations include every structural pass of :data:`agent.transforms.registry.PASSES`
with every value of its parameter space on a 132-SM device (``registry.candidates(device)``),
and the mechanical arms (:mod:`agent.transforms.mechanical`); after them, each mutant gets one
composition of two passes (:func:`chains`: :class:`agent.transforms.compose.Chain`, each pass at
its first value).

Usage: ``python bench/transform_fuzz.py [--applications 50000] [--seed 0] [--out FILE]``;
writes ``bench/results/transform_fuzz.json`` and prints a summary.  The CPU test
(tests/test_transform_fuzz.py) runs a few thousand applications of the same engine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agent import spec as spec_mod
from agent.builtin import BLOCKS_1D, BLOCKS_2D
from agent.source import Document
from agent.spec import KernelSpec
from agent.transforms import NotApplicable, Subject, Transform, safe_apply
from agent.transforms.compose import Chain
from agent.transforms.mechanical import (
    BlockSize,
    FastMath,
    LaunchBounds,
    ReadOnlyLoads,
    RestrictConst,
    Unroll,
)
from agent.transforms.registry import candidates
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
    """Every composition of two passes (:mod:`agent.transforms.compose`), each at its first value."""
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--applications", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deadline-s", type=float, default=420.0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "transform_fuzz.json")
    args = ap.parse_args()
    logging.getLogger("agent.transforms").setLevel(logging.ERROR)  # each caught error is tallied
    t0 = time.monotonic()
    tally = run(args.applications, args.seed, args.deadline_s)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    record = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit or "unknown",
        "applications": tally.applications,
        "rewrites": tally.rewrites,
        "not_applicable": tally.not_applicable,
        "escaped": len(tally.escaped),
        "escaped_examples": tally.escaped[:20],
        "internal_errors": sum(tally.internal.values()),
        "internal_by_message": dict(tally.internal.most_common(30)),
        "seed": args.seed,
        "seconds": round(time.monotonic() - t0, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(
        f"{tally.applications} applications: {tally.rewrites} rewrites, {tally.not_applicable} not applicable, "
        f"{record['internal_errors']} internal errors caught, {len(tally.escaped)} exceptions escaped "
        f"({record['seconds']} s)"
    )
    for message, count in tally.internal.most_common(10):
        print(f"  {count:6d}  {message}")
    return 1 if tally.escaped else 0


if __name__ == "__main__":
    sys.exit(main())
