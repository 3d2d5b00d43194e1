"""Lower precision in a kernel (fp16, bf16, tf32, mma, fast math) and the roundoff a spec allows for it."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sandbox.contract import (
    KernelSource,
)

# the unit roundoff a candidate's bound is widened to when the spec allows that precision
PRECISION_ROUNDOFF = {
    "tf32": 2.0**-11,
    "fp16": 2.0**-11,
    "bf16": 2.0**-8,
    "mma": 2.0**-8,
    "fast-math": 2.0**-18,
}


# Identifiers of the CUDA headers that compute in a lower precision than fp32 (``half``/``half2``
# alone are left out: they are common variable names).
_PRECISION_NAMES = {
    "fp16": {
        "__half",
        "__half2",
        "__float2half",
        "__float2half_rn",
        "__float2half_rz",
        "__half2float",
        "__floats2half2_rn",
        "__float22half2_rn",
        "__hadd",
        "__hmul",
        "__hfma",
        "__hadd2",
        "__hmul2",
        "__hfma2",
        "__hsub",
        "__hdiv",
        "hexp",
        "h2exp",
    },
    "bf16": {
        "__nv_bfloat16",
        "__nv_bfloat162",
        "nv_bfloat16",
        "__float2bfloat16",
        "__float2bfloat16_rn",
        "__bfloat162float",
        "__floats2bfloat162_rn",
    },
    "tf32": {"tf32", "__float_to_tf32"},
    "mma": {"wmma", "mma_sync", "load_matrix_sync", "store_matrix_sync"},
    "fast-math": {
        "__expf",
        "__exp10f",
        "__logf",
        "__log2f",
        "__log10f",
        "__sinf",
        "__cosf",
        "__tanf",
        "__sincosf",
        "__powf",
        "__tanhf",
        "__fdividef",
    },
}
_FAST_MATH_OPTIONS = (
    "--use_fast_math",
    "-use_fast_math",
    "--prec-div=false",
    "--prec-sqrt=false",
    "-prec-div=false",
    "-prec-sqrt=false",
)
_APPROX_OPS = ("ex2", "lg2", "sin", "cos", "tanh", "rcp", "div", "sqrt")  # PTX ``op.approx``: fast math
_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|[A-Za-z_]\w*', re.S)


def precision_features(kernel: KernelSource) -> dict[str, str]:
    """Lower-precision arithmetic a translation unit uses, kind (``PRECISIONS``) -> the first
    evidence: header identifiers, inline PTX in string literals (``mma``/``wgmma``, ``tf32``,
    conversions to f16/bf16, ``.approx`` math) and fast-math compiler options."""
    found: dict[str, str] = {}
    for opt in kernel.options:
        if opt in _FAST_MATH_OPTIONS:
            found.setdefault("fast-math", opt)
    for m in _TOKEN.finditer(kernel.source):
        tok = m.group()
        if tok.startswith(("//", "/*")):
            continue
        if tok.startswith('"'):
            for op in re.findall(r"[a-z][a-z0-9_.]*", tok):
                parts = op.split(".")
                if parts[0] in ("mma", "wgmma"):
                    found.setdefault("mma", op)
                if "tf32" in parts:
                    found.setdefault("tf32", op)
                if parts[0] == "cvt" and ("f16" in parts or "f16x2" in parts):
                    found.setdefault("fp16", op)
                if parts[0] == "cvt" and ("bf16" in parts or "bf16x2" in parts):
                    found.setdefault("bf16", op)
                if "approx" in parts and parts[0] in _APPROX_OPS:
                    found.setdefault("fast-math", op)
            continue
        for kind, names in _PRECISION_NAMES.items():
            if tok in names:
                found.setdefault(kind, tok)
    return found


def lower_precision(baseline: KernelSource, candidate: KernelSource) -> dict[str, str]:
    """The lower-precision features the candidate uses and the baseline does not."""
    base = precision_features(baseline)
    return {k: v for k, v in precision_features(candidate).items() if k not in base}


def allowed_roundoff(features: dict[str, str], allowed: Sequence[str]) -> float:
    """The unit roundoff a candidate's bounds widen to: that of its coarsest lower precision when
    the spec allows every one it uses, else 0 (the baseline's own bound)."""
    if not features or any(k not in allowed for k in features):
        return 0.0
    return max(PRECISION_ROUNDOFF[k] for k in features)
