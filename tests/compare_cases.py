"""Random comparison cases for the device/host differential test (tests/test_sandbox_gpu.py) and
its CPU check (tests/test_sandbox_verify.py): every element type of the spec grammar, NaN/Inf,
denormals, -0.0, don't-care masks, tolerance overrides, lower allowed precisions, tiny outputs,
reordered sums, constant outputs; each case a (ref, got, dtype, calibration, cared) of raw bytes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sandbox.contract import Tolerance
from sandbox.draws import bf16_from_f32, elem_type, f32_from_bf16
from sandbox.verify import PERTURBATION, Calibration

DTYPES = (
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "float2",
    "float4",
    "half2",
    "double2",
    "int2",
    "uint4",
    "char4",
    "ulonglong2",
)
MODES = ("same", "noise", "bump", "nan", "inf", "zero_sign", "constant", "reordered", "scaled", "spread")


@dataclass(frozen=True)
class Case:
    ref: np.ndarray  # raw bytes
    got: np.ndarray
    dtype: str
    calib: Calibration
    cared: np.ndarray | None
    mode: str


def _store(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values -> storage of ``dtype`` (raw bytes)."""
    et = elem_type(dtype)
    if et.scalar == "bfloat16":
        data = bf16_from_f32(values.astype(np.float32))
    elif et.is_float:
        with np.errstate(over="ignore", invalid="ignore"):
            data = values.astype(et.storage)
    elif et.scalar == "bool":
        data = values != 0
    else:
        info = np.iinfo(et.storage)
        data = np.clip(np.nan_to_num(values), max(float(info.min), -1e6), min(float(info.max), 1e6)).astype(
            et.storage
        )
    return np.ascontiguousarray(data).view(np.uint8).copy()


def _load(raw: np.ndarray, dtype: str) -> np.ndarray:
    et = elem_type(dtype)
    typed = raw.view(et.storage)
    return f32_from_bf16(typed).astype(np.float64) if et.scalar == "bfloat16" else typed.astype(np.float64)


def case(rng: np.random.Generator) -> Case:
    dtype = DTYPES[rng.integers(len(DTYPES))]
    et = elem_type(dtype)
    count = int(rng.choice([1, 2, 3, 7, 64, 257, 1000]))
    n = count * et.lanes
    mode = MODES[rng.integers(len(MODES))]
    if et.is_float:
        scale = float(rng.choice([1.0, 1e-7, 1e3, 1e-40 if et.scalar in ("float32", "float64") else 1e-6]))
        values = rng.standard_normal(n) * scale
        if mode == "reordered" and count >= 2:  # row sums of 64 terms: sequential vs pairwise
            terms = rng.uniform(-1, 1, (n, 64)).astype(np.float32)
            values = np.cumsum(terms, axis=1, dtype=np.float32)[:, -1].astype(np.float64)
        zeros = rng.random(n) < 0.05
        values[zeros] = np.where(rng.random(int(zeros.sum())) < 0.5, 0.0, -0.0)
        if rng.random() < 0.2:  # NaN / Inf in the baseline's output too
            k = rng.integers(n, size=int(rng.integers(1, 4)))
            values[k] = rng.choice([np.nan, np.inf, -np.inf], size=k.size)
    else:
        info = np.iinfo(np.int16) if et.scalar != "bool" else None
        hi = 2 if info is None else min(100, int(np.iinfo(et.storage).max))
        lo = 0 if info is None or et.scalar.startswith("uint") else -hi
        values = rng.integers(lo, hi, n).astype(np.float64)
    ref = _store(values, dtype)
    base = _load(ref, dtype)  # as stored
    got_values = base.copy()
    finite = np.isfinite(base)
    if mode == "noise":
        k = rng.choice([0.5, 2.0, 8.0, 64.0, 1e3])
        got_values = base * (1 + k * rng.standard_normal(n) * 2.0**-24)
    elif mode == "bump":
        i = rng.integers(n, size=int(rng.integers(1, 3)))
        got_values[i] = base[i] * rng.choice([1.001, 1.1, 2.0, -1.0]) + rng.choice([0.0, 1e-3, 1.0])
    elif mode == "nan":
        got_values[rng.integers(n)] = np.nan
        got_values[~finite & (rng.random(n) < 0.5)] = 0.0  # a NaN of the baseline lost
    elif mode == "inf":
        got_values[rng.integers(n)] = rng.choice([np.inf, -np.inf])
        got_values[np.isinf(base)] = -base[np.isinf(base)]
    elif mode == "zero_sign":
        got_values = np.where(base == 0, -base, base)
    elif mode == "constant":
        got_values = np.full(n, float(np.nanmean(np.where(finite, base, np.nan))) if finite.any() else 0.0)
    elif mode == "reordered" and et.is_float and count >= 2:
        terms = rng.uniform(-1, 1, (n, 64)).astype(np.float32)
        seq = np.cumsum(terms, axis=1, dtype=np.float32)[:, -1]
        pair = terms.reshape(n, 2, 32).sum(axis=2, dtype=np.float32).sum(axis=1, dtype=np.float32)
        ref = _store(seq.astype(np.float64), dtype)
        base = _load(ref, dtype)
        got_values = pair.astype(np.float64)
    elif mode == "scaled":
        got_values = base * (1 + rng.choice([2.0**-20, 2.0**-12, 2.0**-8]))
    elif mode == "spread":  # every element off by a little: the norm bound decides
        got_values = base + rng.standard_normal(n) * rng.choice([1e-9, 1e-6, 1e-4]) * np.sqrt(
            np.mean(np.square(np.where(np.isfinite(base), base, 0.0)))
        )
    got = _store(got_values, dtype) if mode != "same" else ref.copy()
    perturbed = None
    if et.is_float and rng.random() < 0.7:
        rho = PERTURBATION
        sign = np.where(rng.random(n) < 0.5, 1 + rho, 1 - rho)
        moved = base * sign * rng.choice([1.0, 1.0, 3.0], size=n)  # some elements more sensitive
        perturbed = _store(moved, dtype)
    override = None
    r = rng.random()
    if r < 0.15:
        override = Tolerance(
            atol=float(rng.choice([0.0, 1e-6, 1e-3])), rtol=float(rng.choice([0.0, 1e-5, 1e-2]))
        )
    elif r < 0.25:
        override = Tolerance(norm=float(rng.choice([1e-7, 1e-4, 1e-2])))
    elif r < 0.3:
        override = Tolerance(atol=1e-4, rtol=1e-4, norm=1e-5)
    calib = Calibration(
        perturbed,
        PERTURBATION,
        int(rng.choice([1, 16, 1000])),
        override,
        float(rng.choice([0.0, 0.0, 2.0**-11])),
    )
    cared = rng.random(count) < 0.7 if rng.random() < 0.3 else None
    return Case(ref, got, dtype, calib, cared, mode)
