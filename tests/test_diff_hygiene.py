"""Diffs a person would accept: a rewrite keeps the user's names, macros, typedefs and helper
functions wherever the pass does not change them (the front end's normalization never reaches the
diff), and its fresh names read like a person's (``tile``, ``lane``), prefixed only on a clash.

The kernels of tests/data/hygiene/ each use a typedef, macros and ``__device__`` helpers; every
pass that rewrites one must keep all of them, and the rewrite compiles with NVRTC.  The counting
is bench/diff_size.py's (its median over the test and corpus kernels is in
bench/results/diff_size.json)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from test_transforms import compiles

from agent.target import target_for
from cudasrc.source import Document
from engine import Subject, safe_apply
from engine.passes import Apply, Emitter, lifted, restored
from engine.registry import PASSES

ENGINE = Path(__file__).parent.parent / "bench" / "diff_size.py"
HYGIENE = sorted((Path(__file__).parent / "data" / "hygiene").glob("*.cu"))


def _engine():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("diff_size", ENGINE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["diff_size"] = module
    spec.loader.exec_module(module)
    return module


diff_size = _engine()


@pytest.mark.parametrize("path", HYGIENE, ids=[p.stem for p in HYGIENE])
def test_every_rewrite_keeps_the_helpers_macros_and_typedefs(path: Path) -> None:
    s = diff_size.subject_of(path)
    assert s is not None
    names = diff_size.user_names(s)
    assert {"real"} < names and any(n.isupper() for n in names), names  # a typedef, a macro, a helper
    rows = diff_size.rewrites(path)
    assert rows, f"no pass rewrites {path.name}"
    t = target_for(Document.from_file(path))
    for row in rows:
        assert not row["lost"], f"{row['pass']} loses {row['lost']}"
    for row in rows:  # the kept names still compile: the unit defines them
        (p,) = [p for p in PASSES if p.name == row["pass"]]
        out = safe_apply(Apply(p, p.guess(p.match(s.normalized.view))), s)
        assert isinstance(out, Subject)
        assert "inlined" not in out.code, f"{row['pass']}: the inlined helper reached the diff"
        try:
            compiles(t, out.code)
        except Exception as exc:
            if type(exc).__name__ == "CompilerUnavailable":
                pytest.skip(f"NVRTC is not available: {exc}")
            raise


ORIGINAL = """__global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = twice(x[i]);
    y[i] = v;
}"""
NORMALIZED = """__global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v;
    {  // cuda-agent: twice inlined
        float a = x[i];
        v = 2.0f * a;
    }
    y[i] = v;
}"""


def test_a_rewrite_away_from_the_normalized_lines_lands_on_the_users_text() -> None:
    rewritten = NORMALIZED.replace(
        "    if (i >= n) return;\n", "    if (i >= n) return;  // bounds\n"
    ).replace("    y[i] = v;", "    y[i] = v + 0.0f;")
    out = lifted(ORIGINAL, NORMALIZED, rewritten)
    assert out == ORIGINAL.replace("return;\n", "return;  // bounds\n").replace(
        "y[i] = v;", "y[i] = v + 0.0f;"
    )


def test_a_rewrite_of_the_normalized_lines_keeps_them_or_puts_the_call_back() -> None:
    inside = NORMALIZED.replace("v = 2.0f * a;", "v = a + a;")
    assert lifted(ORIGINAL, NORMALIZED, inside) is None  # the pass changed the inlined body itself
    wrapped = "\n".join(
        ("    " + line if line.startswith("    ") else line) for line in NORMALIZED.splitlines()
    )
    back = restored(ORIGINAL, NORMALIZED, wrapped)  # re-indented, carried over unchanged
    assert "        float v = twice(x[i]);" in back and "inlined" not in back


def test_fresh_names_are_plain_unless_they_clash() -> None:
    t = target_for(Document.from_file(HYGIENE[0]))
    s = diff_size.subject_of(HYGIENE[0])
    assert s is not None and t is not None
    e = Emitter(s.normalized.view)
    assert e.fresh("tile") == "tile"  # nobody spells it
    assert e.fresh("tile") == "ca_tile"  # the first one now does
    assert e.fresh("acc") == "ca_acc"  # a local of the kernel
    assert e.fresh("RADIUS") == "ca_RADIUS"  # a macro of the unit
    assert e.fresh("for") == "ca_for"  # a keyword
