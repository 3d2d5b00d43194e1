"""Scores of spec inference against the spec a developer would write, field by field: what
``bench/spec_inference.py`` reports and ``tests/test_spec_inference.py`` and
``tests/test_spec_projects.py`` assert (the fields are listed in the script's docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from cudasrc.source import Document
from cudasrc.specs import InvalidSpec, KernelSpec, bench_sizes, parse, problem, spec_for
from cudasrc.syntax import Kernel
from sandbox.contract import ArgSpec, Problem

DATA = Path(__file__).parent / "data" / "realcode"
THRESHOLD = 90.0


@dataclass
class KernelScore:
    kernel: str
    file: str
    fields: int = 0
    matched: int = 0
    mismatches: list[str] = field(default_factory=list)
    confidence: str = ""

    def check(self, name: str, expected: object, got: object) -> None:
        self.fields += 1
        if _same(expected, got):
            self.matched += 1
        else:
            self.mismatches.append(f"{name}: expected {expected}, inferred {got}")

    @property
    def usable(self) -> bool:
        """The spec runs the kernel as the program does: the launch, each array's count and role,
        each scalar's value and every size it names right.  A distribution or a type may still
        differ, a size may have another name (the counts and values say it is right), and an
        ``out`` array may be ``inout`` (initialised and compared: verification only gets stricter)."""

        def breaks(m: str) -> bool:
            field, _, rest = m.partition(":")
            if field.startswith("size "):
                return not rest.endswith("inferred None")
            if field.endswith(" role"):
                return rest.strip() != "expected out, inferred inout"
            return field in ("grid", "block", "smem") or field.endswith((" count", " value"))

        return not any(breaks(m) for m in self.mismatches)

    @property
    def percent(self) -> float:
        return 100.0 * self.matched / self.fields if self.fields else 0.0


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-12)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def expected_spec(doc: Document, kernel: Kernel, path: Path) -> KernelSpec:
    """The spec in ``path``, parsed as if it were written above ``kernel``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    comment = tuple((i, line.strip().removeprefix("//")) for i, line in enumerate(lines) if line.strip())
    spec, errors = parse(replace(kernel, comment=comment), doc.type_aliases)
    if spec is None or errors:
        raise SystemExit(f"{path}: not a valid spec: {'; '.join(e.message for e in errors)}")
    return spec


def _dist(a: ArgSpec) -> tuple[object, ...]:
    d = a.dist
    return (d.kind, d.low, d.high, d.value) if d is not None else ()


def score(name: str, file: str, expected: KernelSpec, inferred: KernelSpec | None) -> KernelScore:
    s = KernelScore(name, file)
    want = problem(expected, bench_sizes(expected))
    got: Problem | None = None
    if inferred is not None:
        try:
            got = problem(inferred, bench_sizes(inferred))
        except InvalidSpec as exc:
            s.mismatches.append(f"inferred spec does not resolve: {exc}")
    for k, v in want.sizes.items():
        s.check(f"size {k}", v, got.sizes.get(k) if got else None)
    s.check("grid", want.launch.grid, got.launch.grid if got else None)
    s.check("block", want.launch.block, got.launch.block if got else None)
    s.check("smem", want.launch.shared_bytes, got.launch.shared_bytes if got else None)
    if expected.template_args:
        norm = tuple(" ".join(a.split()) for a in expected.template_args)
        s.check(
            "template", norm, tuple(" ".join(a.split()) for a in inferred.template_args) if inferred else None
        )
    have = {a.name: a for a in got.args} if got else {}
    for a in want.args:
        b = have.get(a.name)
        if a.role == "scalar":
            s.check(f"{a.name} type", a.dtype, b.dtype if b else None)
            s.check(f"{a.name} value", a.value, b.value if b else None)
            continue
        s.check(f"{a.name} role", a.role, b.role if b else None)
        s.check(f"{a.name} type", a.dtype, b.dtype if b else None)
        s.check(f"{a.name} count", a.count, b.count if b else None)
        if a.role != "out":  # an output's initial contents are not compared by anyone
            s.check(f"{a.name} dist", _dist(a), _dist(b) if b else None)
    consts = {c.name: c for c in got.constants} if got else {}
    for c in want.constants:
        d = consts.get(c.name)
        s.check(f"const {c.name} type", c.dtype, d.dtype if d else None)
        s.check(f"const {c.name} count", c.count, d.count if d else None)
        s.check(
            f"const {c.name} dist",
            (c.dist.kind, c.dist.low, c.dist.high),
            (d.dist.kind, d.dist.low, d.dist.high) if d else None,
        )
    return s


def _sources(data: Path) -> list[tuple[Path, Path]]:
    """(file, its expected/ folder): the files of ``data``, or, for a folder of projects
    (``tests/data/projects/NAME/`` with ``expected/`` each), every file of every project."""
    suffixes = (".cu", ".cuh", ".h", ".hpp", ".cpp")
    if (data / "expected").is_dir():
        return [(p, data / "expected") for p in sorted(data.iterdir()) if p.suffix in suffixes]
    return [
        (p, project / "expected")
        for project in sorted(d for d in data.iterdir() if (d / "expected").is_dir())
        for p in sorted(project.rglob("*"))
        if p.suffix in suffixes
    ]


def measure(data: Path = DATA) -> tuple[list[KernelScore], list[str]]:
    """Every kernel of ``data``'s programs and headers scored; also the kernels without an
    expected spec (a data error the caller reports)."""
    scores: list[KernelScore] = []
    missing: list[str] = []
    for path, expected in _sources(data):
        doc = Document.from_file(path)
        for k in doc.kernels:
            spec_file = expected / f"{k.name}.spec"
            if not spec_file.is_file():
                missing.append(f"{path.name}: {k.name}")
                continue
            result = spec_for(doc, k)
            s = score(k.qualified_name, path.name, expected_spec(doc, k, spec_file), result.spec)
            s.confidence = result.inference.confidence if result.inference else "written"
            scores.append(s)
    return scores, missing
