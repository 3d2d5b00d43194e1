"""C/CUDA element types: their canonical names (those of ``sandbox.contract.ArgSpec``) and sizes."""

from __future__ import annotations

from collections.abc import Mapping

# ---------------------------------------------------------------------------------------- dtypes

_C_TYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "__half": "float16",
    "half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
    "bool": "bool",
    "char": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "short": "int16",
    "short int": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "unsigned short int": "uint16",
    "uint16_t": "uint16",
    "int": "int32",
    "signed": "int32",
    "signed int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "uint": "uint32",  # glibc's <sys/types.h> names, common in CUDA samples
    "ushort": "uint16",
    "uchar": "uint8",
    "ulong": "uint64",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long": "int64",
    "long int": "int64",
    "long long": "int64",
    "long long int": "int64",
    "int64_t": "int64",
    "ptrdiff_t": "int64",
    "ssize_t": "int64",
    "unsigned long": "uint64",
    "unsigned long int": "uint64",
    "unsigned long long": "uint64",
    "unsigned long long int": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
    "__half2": "half2",
    "half2": "half2",
    "__nv_bfloat162": "bfloat162",
    "nv_bfloat162": "bfloat162",
}
_SCALAR_BYTES = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "bool": 1,
    **{f"{s}int{b}": b // 8 for s in ("", "u") for b in (8, 16, 32, 64)},
}
# CUDA vector types: float2, int4, uchar4, ... -> (canonical lane type, lanes)
_VECTOR_LANES: dict[str, tuple[str, int]] = {
    "half2": ("float16", 2),
    "bfloat162": ("bfloat16", 2),
    **{
        f"{c}{n}": (lane, n)
        for c, lane in (
            ("float", "float32"),
            ("double", "float64"),
            ("char", "int8"),
            ("uchar", "uint8"),
            ("short", "int16"),
            ("ushort", "uint16"),
            ("int", "int32"),
            ("uint", "uint32"),
            ("long", "int64"),
            ("ulong", "uint64"),
            ("longlong", "int64"),
            ("ulonglong", "uint64"),
        )
        for n in (1, 2, 3, 4)
    },
}


def canonical_dtype(type_text: str, aliases: Mapping[str, str] | None = None) -> str | None:
    """The canonical dtype name (sandbox.contract.ArgSpec) of a C/CUDA type or canonical name,
    seeing through the file's ``typedef``/``using`` aliases."""
    t = " ".join(type_text.replace("const", " ").replace("volatile", " ").split())
    for _ in range(4):
        t = t.removeprefix("std::")
        if t in _SCALAR_BYTES or t in _VECTOR_LANES:
            return t
        if t in _C_TYPES:
            return _C_TYPES[t]
        if not aliases or t not in aliases:
            return None
        t = " ".join(aliases[t].split())
    return None


def dtype_bytes(dtype: str) -> int:
    if dtype in _VECTOR_LANES:
        lane, n = _VECTOR_LANES[dtype]
        return _SCALAR_BYTES[lane] * n
    return _SCALAR_BYTES[dtype]


def is_float(dtype: str) -> bool:
    lane = _VECTOR_LANES[dtype][0] if dtype in _VECTOR_LANES else dtype
    return lane.startswith(("float", "bfloat"))


def spellings() -> dict[str, tuple[str, ...]]:
    """Every element type a spec may name: canonical name -> its C/CUDA spellings (vector types too)."""
    out: dict[str, list[str]] = {name: [] for name in (*_SCALAR_BYTES, *_VECTOR_LANES)}
    for spelling, name in _C_TYPES.items():
        out[name].append(spelling)
    return {name: tuple(names) for name, names in out.items()}
