"""Spec grammar for real kernels, on the CPU: don't-care output regions (``compare``), pointers
into a larger allocation (``offset=``), structured inputs (``values(EXPR)``), ``__constant__``
data copied from an argument, parsed, resolved, validated as a request, and verified by the real
:class:`~sandbox.verify.Verifier` on a host-memory runtime whose "kernels" are numpy functions.
The same additions run on the GPU in tests/test_spec_gpu.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cudasrc.source import Document
from cudasrc.specs import parse, problems, render
from sandbox import expr
from sandbox.contract import (
    ArgSpec,
    DeviceInfo,
    Distribution,
    EvalRequest,
    KernelSource,
    Launch,
    Problem,
    Region,
    RequestError,
    Status,
    from_json,
    to_json,
    validate_request,
)
from sandbox.draws import Stream, constants_for, generate, inputs_for
from sandbox.runtime import KernelArg, Runtime
from sandbox.verify import POISON_A, POISON_B, Calibration, Verifier, compare, unwritten


def spec_of(text: str, signature: str) -> tuple[Any, tuple[str, ...]]:
    lines = "".join(f"// @cuda-agent {line.strip()}\n" for line in text.strip().splitlines())
    doc = Document(f"{lines}__global__ void k({signature}) {{}}\n", "k.cu")
    spec, errors = parse(doc.kernels[0], doc.type_aliases)
    return spec, tuple(e.message for e in errors)


TRIANGLE = """
sizes T=64 C=8 verify T=13
launch grid=(cdiv(T, 16), cdiv(T, 16)) block=(16, 16)
arg out out float[T*T]
arg q in float[T*C]
arg k in float[T*C]
compare out[i < T, j < T] where j <= i
"""
TRIANGLE_SIG = "float* out, const float* q, const float* k, int T, int C"


# ------------------------------------------------------------------------------------- parsing


def test_compare_region_parses_resolves_and_renders() -> None:
    spec, errors = spec_of(TRIANGLE, TRIANGLE_SIG)
    assert errors == ()
    (c,) = spec.compares
    assert (c.name, c.index, c.extents, c.where, c.written) == (
        "out",
        ("i", "j"),
        ("T", "T"),
        "j <= i",
        False,
    )
    verify, bench = problems(spec)
    out = next(a for a in verify.args if a.name == "out")
    assert out.compare == Region((13, 13), ("i", "j"), "j <= i")
    assert next(a for a in bench.args if a.name == "out").compare == Region((64, 64), ("i", "j"), "j <= i")
    again, errors = spec_of(render(spec).replace("// @cuda-agent ", ""), TRIANGLE_SIG)
    assert errors == ()
    assert [x.text() for x in again.compares] == ["out[i < T, j < T] where j <= i"]


def test_flat_and_written_compare_forms() -> None:
    spec, errors = spec_of(
        "sizes n=100\narg out out float[n]\narg y out float[n]\ncompare out where i % 2 == 0 && i < n - 1\n"
        "compare y written",
        "float* out, float* y, int n",
    )
    assert errors == ()
    (p, *_) = problems(spec)
    out, y = (a for a in p.args if a.role == "out")
    # sizes are substituted: the worker evaluates an expression over the index alone
    assert out.compare == Region((p.sizes["n"],), ("i",), f"i % 2 == 0 and i < {p.sizes['n']} - 1")
    assert y.compare == Region((p.sizes["n"],), ("i",), "", True)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("compare out where", "expected `compare NAME where COND`"),
        ("compare out[i < n, j] where i < 1", "each dimension is `INDEX < EXTENT`"),
        ("compare out[i < n, i < 2] where i < 1", "different index names"),
        ("compare n where n > 1", "`n` is a scalar parameter"),
        ("compare x where i < 1", "has no parameter `x`"),
        ("compare out[i < n, j < 2] where j <= i", "shape (100, 2) does not hold its 100 elements"),
        ("compare out[n < n] where n < 3", "`n` is a size; name the index otherwise"),
        ("compare out where __import__('os')", "is not a call of min"),
        ("compare out where i.real", "is not allowed"),
        ("compare out where q < 1", "unknown name `q`"),
        ("compare inp where i < 1", "an input is not compared"),
        ("compare out where i < 2\ncompare out written", "a second `compare` for `out`"),
    ],
)
def test_compare_errors_are_one_line_messages(lines: str, message: str) -> None:
    _, errors = spec_of(
        f"sizes n=100\narg out out float[n]\narg inp in float[n]\n{lines}",
        "float* out, const float* inp, int n",
    )
    assert any(message in e for e in errors), errors


def test_values_offset_and_constant_copy_parse_and_resolve() -> None:
    spec, errors = spec_of(
        "sizes n=64 R=2\nlaunch grid=cdiv(n, block)\narg keys in int[n] values(i % 7)\n"
        "arg px in float[n] values(cos(2 * M_PI * i / n))\n"
        "arg u in float[n + 2*R] offset=R\narg out out float[n]\nconst taps float[2*R+1] copy(w)\n"
        "arg w in float[2*R+1]",
        "const int* keys, const float* px, const float* u, float* out, const float* w, int n, int R",
    )
    assert errors == ()
    bench = problems(spec)[-1]
    args = {a.name: a for a in bench.args}
    assert args["keys"].dist == Distribution("values", expr="i % 7")
    assert args["px"].dist.expr == "cos(2 * M_PI * i / 64)"
    assert (args["u"].count, args["u"].offset) == (68, 2)
    assert bench.constants[0].dist == Distribution("copy", source="w")
    assert "offset=R" in render(spec) and "values(i % 7)" in render(spec) and "copy(w)" in render(spec)
    data = inputs_for(bench, 3)
    assert data["keys"].tolist() == [i % 7 for i in range(64)]
    assert np.allclose(data["px"], np.cos(2 * np.pi * np.arange(64) / 64), atol=1e-6)
    assert np.array_equal(constants_for(bench, 3, data)["taps"], data["w"])


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("arg u in float[n] offset=n+1", "offset=n+1 = 65 is outside the array (0..64)"),
        ("arg u in float[n] values(i % 0)", ""),  # resolves; the worker reports the division
        ("arg u in float[n] values(open('x'))", "is not a call of min"),
        ("arg u in float[n] values(j)", "unknown name `j`"),
        ("arg u in float[n] offset=", "`offset=` has no value"),
        ("arg u in float[n]\nconst c float[n] copy(n)", "a constant copies a pointer argument's data"),
        ("arg u in float[n]\nconst c float[3] copy(u)", "copy(u): float32[64] is not float32[3]"),
    ],
)
def test_values_offset_and_copy_errors(lines: str, message: str) -> None:
    spec, errors = spec_of(f"sizes n=64\n{lines}", "const float* u, int n")
    if message:
        assert any(message in e for e in errors), errors
    else:
        assert errors == ()
        with pytest.raises(ValueError, match="divide by zero"):
            inputs_for(problems(spec)[-1], 1)


# ------------------------------------------------------------------------------------- contract


def _request(*args: ArgSpec, constants: tuple[Any, ...] = ()) -> EvalRequest:
    problem = Problem("n=16", {"n": 16}, args, Launch((1, 1, 1), (16, 1, 1)), constants)
    return EvalRequest("r", KernelSource("__global__ void k() {}", "k"), (), (), problem)


def test_the_request_carries_the_additions_through_json() -> None:
    request = _request(
        ArgSpec("x", "in", "int32", 16, Distribution("values", expr="i % 3")),
        ArgSpec("y", "out", "float32", 16, offset=4, compare=Region((4, 4), ("r", "c"), "c <= r")),
    )
    validate_request(request)
    assert from_json(EvalRequest, to_json(request)) == request


@pytest.mark.parametrize(
    ("arg", "field", "message"),
    [
        (ArgSpec("y", "out", "float32", 16, offset=17), "bench_problem.args[0].offset", "outside the array"),
        (
            ArgSpec("y", "in", "float32", 16, compare=Region((16,), ("i",), "i < 2")),
            "args[0].compare",
            "only an output",
        ),
        (
            ArgSpec("y", "out", "float32", 16, compare=Region((4, 3), ("i", "j"), "i < 2")),
            "compare.shape",
            "not a shape of 16",
        ),
        (
            ArgSpec("y", "out", "float32", 16, compare=Region((16,), ("M_PI",), "M_PI < 2")),
            "compare.index",
            "not an index name",
        ),
        (
            ArgSpec("y", "out", "float32", 16, compare=Region((16,), ("i",), "")),
            "compare.where",
            "either a condition or written",
        ),
        (
            ArgSpec("y", "out", "float32", 16, compare=Region((16,), ("i",), "().__class__")),
            "compare.where",
            "not allowed",
        ),
        (
            ArgSpec("y", "in", "float32", 16, Distribution("values", expr="i ** 2")),
            "dist.expr",
            "not allowed",
        ),
        (
            ArgSpec("y", "in", "float32", 16, Distribution("values", expr="x")),
            "dist.expr",
            "unknown name `x`",
        ),
        (
            ArgSpec("y", "in", "float32", 16, Distribution("values", expr="9" * 40)),
            "dist.expr",
            "out of range",
        ),
    ],
)
def test_validate_request_names_the_field_of_a_bad_addition(arg: ArgSpec, field: str, message: str) -> None:
    with pytest.raises(RequestError, match=message) as err:
        validate_request(_request(arg))
    assert field in err.value.field


def test_a_constant_is_named_as_cpp_names_it_and_lowered_where_its_symbol_is_mangled() -> None:
    """``const ns::c`` and a variable template's ``const mask<float>``: the request names them so,
    the sandbox compiles each such name as an NVRTC name expression and looks up the symbol it
    lowers to (a plain name is its own symbol); anything else is no variable name."""
    from sandbox.contract import ConstantInit, lowered_constants

    spec, errors = spec_of(
        "sizes n=64\narg u in float[n]\nconst mask<float> float[10]\nconst ns::taps float[3]\nconst c int[2]",
        "const float* u, int n",
    )
    assert errors == ()
    bench = problems(spec)[-1]
    assert [c.name for c in bench.constants] == ["mask<float>", "ns::taps", "c"]
    assert lowered_constants((bench,)) == {"mask<float>": "&mask<float>", "ns::taps": "&ns::taps"}
    validate_request(_request(ArgSpec("x", "in", "float32", 16), constants=bench.constants))
    _, errors = spec_of("sizes n=64\nconst c; f() float[3]", "int n")
    assert any("NAME: `c`, `ns::c` or `c<float>`" in e for e in errors), errors
    with pytest.raises(RequestError, match="is not a C\\+\\+ variable name"):
        validate_request(
            _request(ArgSpec("x", "in", "float32", 16), constants=(ConstantInit("c;f()", "float32", 2),))
        )


def test_a_constant_copy_needs_an_input_of_its_type_and_count() -> None:
    from sandbox.contract import ConstantInit

    x = ArgSpec("x", "in", "float32", 16)
    validate_request(
        _request(x, constants=(ConstantInit("c", "float32", 16, Distribution("copy", source="x")),))
    )
    for const in (
        ConstantInit("c", "float32", 8, Distribution("copy", source="x")),
        ConstantInit("c", "float32", 16, Distribution("copy", source="nope")),
    ):
        with pytest.raises(RequestError) as err:
            validate_request(_request(x, constants=(const,)))
        assert err.value.field == "bench_problem.constants[0].dist.source"


# ------------------------------------------------------------------------------------- expressions


def test_element_expressions_never_run_python(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for text in (
        f"__import__('os').system('touch {marker}')",
        f"open('{marker}', 'w')",
        "(lambda: 1)()",
        "[i for i in ()]",
        "i.__class__",
        "globals()",
    ):
        with pytest.raises(ValueError):
            expr.values(text, 4)
    assert not marker.exists()


def test_element_expressions_follow_c_and_spec_semantics() -> None:
    assert expr.values("-7 / 2 + i * 0", 2).tolist() == [-3, -3]  # C's truncating division
    assert expr.values("i // 2 * 2 + (1 if i % 2 else 0)", 5).tolist() == [0, 1, 2, 3, 4]
    assert expr.values("min(i, 2) + max(i, 3) + cdiv(i, 2)", 4).tolist() == [3, 5, 6, 7]
    grid = expr.mask("0 < x < 3 and 0 < y < 2", ("y", "x"), (3, 4)).reshape(3, 4)
    assert grid.astype(int).tolist() == [[0, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 0]]
    with pytest.raises(ValueError, match="divide by zero"):
        expr.values("i % 0", 3)
    with pytest.raises(ValueError, match="shift"):
        expr.values("1 << 64", 3)


# ------------------------------------------------------------------------------------- masked compare


def test_masked_compare_ignores_dont_care_elements_and_reports_whole_array_indices() -> None:
    ref = np.arange(16, dtype=np.float32)
    got = ref.copy()
    got[[1, 2, 3]] = np.nan  # the upper triangle of a 4x4 lower-triangular output
    cared = expr.mask("j <= i", ("i", "j"), (4, 4))
    raw = lambda a: a.view(np.uint8)  # noqa: E731
    assert not compare(raw(ref), raw(got), "float32", Calibration()).ok
    assert compare(raw(ref), raw(got), "float32", Calibration(), cared).ok
    got[9] = 100.0  # (2, 1): cared for
    cmp = compare(raw(ref), raw(got), "float32", Calibration(), cared)
    assert not cmp.ok and cmp.first_bad_index == 9
    got[9] = np.nan  # NaN where the baseline has a number: still refused in the cared part
    assert not compare(raw(ref), raw(got), "float32", Calibration(), cared).ok


def test_unwritten_looks_only_at_cared_elements() -> None:
    a = np.full(8 * 4, POISON_A, np.uint8)
    b = np.full(8 * 4, POISON_B, np.uint8)
    a[:16] = b[:16] = 0  # elements 0..3 written
    cared = np.arange(8) < 4
    assert unwritten(a, b, 4) == 4
    assert unwritten(a, b, 4, cared) == -1
    assert unwritten(a, b, 4, np.arange(8) < 6) == 4


# ------------------------------------------------------------------------------------- the verifier


class HostRuntime(Runtime):
    """Device memory as one host arena; a "kernel" is a numpy function of (runtime, args)."""

    def __init__(self) -> None:
        self.mem = np.zeros(1 << 22, np.uint8)
        self.top = 256
        self.symbols: dict[tuple[int, str], int] = {}

    def device_info(self) -> DeviceInfo:
        return DeviceInfo("host", "9.0", 1, 1 << 20, len(self.mem))

    def max_shared_optin(self) -> int:
        return 0

    def load(self, cubin: bytes, name: str, symbols: Mapping[str, str] | None = None) -> Any:
        raise NotImplementedError

    def global_symbol(self, kernel: Any, name: str) -> int:
        return self.symbols.setdefault((id(kernel), name), self.alloc(4096))

    def alloc(self, nbytes: int) -> int:
        ptr, self.top = self.top, self.top + (nbytes + 255) // 256 * 256
        assert self.top <= len(self.mem)
        return ptr

    def free(self, ptr: int) -> None:
        pass

    def htod(self, ptr: int, host: np.ndarray) -> None:
        data = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        self.mem[ptr : ptr + data.size] = data

    def dtoh(self, ptr: int, nbytes: int) -> np.ndarray:
        return self.mem[ptr : ptr + nbytes].copy()

    def pinned(self, nbytes: int) -> np.ndarray:
        return np.zeros(nbytes, np.uint8)

    def memset_async(self, ptr: int, byte: int, nbytes: int) -> None:
        self.mem[ptr : ptr + nbytes] = byte

    def copy_async(self, dst: int, src: int, nbytes: int) -> None:
        self.mem[dst : dst + nbytes] = self.mem[src : src + nbytes].copy()

    def launch(self, kernel: Any, launch: Launch, args: Sequence[KernelArg]) -> None:
        kernel(self, args)

    def event(self) -> Any:
        return None

    def record(self, event: Any) -> None:
        pass

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return 0.0

    def synchronize(self) -> None:
        pass

    def view(self, ptr: Any, count: int, dtype: Any = np.float32, at: int = 0) -> np.ndarray:
        """``count`` elements at element ``at`` from pointer ``ptr`` (``at`` may be negative)."""
        size = np.dtype(dtype).itemsize
        start = int(ptr) + at * size
        return self.mem[start : start + count * size].view(dtype)


Kernel = Callable[[HostRuntime, Sequence[Any]], None]


def verdict(spec_text: str, signature: str, baseline: Kernel, candidate: Kernel) -> tuple[Status | None, str]:
    spec, errors = spec_of(spec_text, signature)
    assert errors == ()
    probs = problems(spec)
    for p in probs:
        validate_request(replace(_request(), bench_problem=p))
    rt = HostRuntime()
    verifier = Verifier(rt, [(p, (1, 2)) for p in probs], baseline, (), lambda pattern: None)
    assert verifier.verify(baseline, None).status is None  # the baseline verified against itself
    v = verifier.verify(candidate, None)
    return v.status, v.message


def triangle(upper: float | None = None, bad: tuple[int, int] | None = None) -> Kernel:
    """out[i, j] = q_i . k_j for j <= i; ``upper``: also write this above the diagonal."""

    def run(rt: HostRuntime, args: Sequence[Any]) -> None:
        out_p, q_p, k_p, t, c = args
        t, c = int(t), int(c)
        q, k = rt.view(q_p, t * c).reshape(t, c), rt.view(k_p, t * c).reshape(t, c)
        out = rt.view(out_p, t * t).reshape(t, t)
        full = (q.astype(np.float64) @ k.T.astype(np.float64)).astype(np.float32)
        lower = np.tril(np.ones((t, t), bool))
        out[lower] = full[lower]
        if upper is not None:
            out[~lower] = upper
        if bad is not None:
            out[bad] += 1.0

    return run


def test_a_triangular_output_verifies_only_its_cared_for_part() -> None:
    ok, _ = verdict(TRIANGLE, TRIANGLE_SIG, triangle(), triangle(upper=0.0))
    assert ok is None  # writing zeros above the diagonal is allowed: don't-care
    status, message = verdict(TRIANGLE, TRIANGLE_SIG, triangle(), triangle(bad=(5, 2)))
    assert status == Status.MISMATCH and "at index 67" in message  # 5 * 13 + 2 in the 13x13 problem
    # without the compare line, the baseline's own unwritten upper triangle is refused
    whole = TRIANGLE.replace("compare out[i < T, j < T] where j <= i", "")
    status, message = verdict(whole, TRIANGLE_SIG, triangle(upper=0.0), triangle())
    assert status == Status.REJECTED and "not written" in message


def test_a_cared_for_element_left_unwritten_is_still_refused() -> None:
    def skips_one(rt: HostRuntime, args: Sequence[Any]) -> None:
        out_p, t = args[0], int(args[3])
        before = rt.view(out_p, t * t).reshape(t, t)[3, 3].copy()
        triangle()(rt, args)
        rt.view(out_p, t * t).reshape(t, t)[3, 3] = before  # (3, 3) keeps whatever poison it had

    status, message = verdict(TRIANGLE, TRIANGLE_SIG, triangle(), skips_one)
    assert status == Status.REJECTED and "not written at index 42" in message  # 3 * 13 + 3


def stencil(write_boundary: bool) -> Kernel:
    """1-D 3-point stencil on interior points of ``u`` (offset 1 into its allocation)."""

    def run(rt: HostRuntime, args: Sequence[Any]) -> None:
        out_p, u_p, n = args[0], args[1], int(args[2])
        u = rt.view(u_p, n + 2, at=-1)  # the pointer is one element into the allocation
        out = rt.view(out_p, n)
        out[1 : n - 1] = u[1 : n - 1] + u[2:n] + u[3 : n + 1]
        if write_boundary:
            out[0] = out[n - 1] = 7.0

    return run


STENCIL = """
sizes n=64
arg out out float[n]
arg u in float[n + 2] offset=1
compare out written
"""


def test_written_region_and_an_offset_pointer_verify_a_stencil() -> None:
    sig = "float* out, const float* u, int n"
    assert verdict(STENCIL, sig, stencil(False), stencil(True))[0] is None
    status, message = verdict(STENCIL, sig, stencil(True), stencil(False))
    assert status == Status.REJECTED and "not written at index 0" in message  # the baseline writes it here
    explicit = STENCIL.replace("compare out written", "compare out where 0 < i < n - 1")
    assert verdict(explicit, sig, stencil(False), stencil(True))[0] is None


def test_a_constant_holds_a_copy_of_its_argument() -> None:
    spec_text = "sizes n=32\narg out out float[n]\narg w in float[n]\nconst taps float[n] copy(w)"
    sig = "float* out, const float* w, int n"
    taps: dict[str, int] = {}

    def from_pointer(rt: HostRuntime, args: Sequence[Any]) -> None:
        n = int(args[2])
        rt.view(args[0], n)[:] = rt.view(args[1], n) * 2

    def from_constant(rt: HostRuntime, args: Sequence[Any]) -> None:
        n = int(args[2])
        ptr = rt.symbols[(id(from_constant), "taps")]
        taps["seen"] = ptr
        rt.view(args[0], n)[:] = rt.view(ptr, n) * 2

    spec, _ = spec_of(spec_text, sig)
    probs = problems(spec)
    rt = HostRuntime()
    verifier = Verifier(rt, [(p, (1, 2)) for p in probs], from_pointer, (), lambda pattern: None)
    rt.global_symbol(from_constant, "taps")
    assert verifier.verify(from_pointer, None).status is None
    assert verifier.verify(from_constant, None).status is None  # equal only when taps == w
    assert "seen" in taps


def test_generate_values_for_integers_clips_to_the_type() -> None:
    got = generate(ArgSpec("x", "in", "int8", 4, Distribution("values", expr="i * 100")), Stream(0, 0))
    assert got.tolist() == [0, 100, 127, 127]


# ------------------------------------------------------------------------------------- defines


FIXED = """
sizes n=4096 verify n=97,1021
define N=n
arg out out float[n]
arg inp in float[n]
"""


def test_define_resolves_per_problem_and_splits_the_request() -> None:
    from sandbox.contract import Candidate
    from sandbox.local import split_by_defines

    spec, errors = spec_of(FIXED, "float* out, const float* inp")
    assert errors == () and "define N=n" in render(spec)
    verify = tuple(problems(spec)[:-1])
    bench = problems(spec)[-1]
    assert [p.defines for p in (*verify, bench)] == [{"N": 97}, {"N": 1021}, {"N": 4096}]
    kernel = KernelSource("__global__ void k(float* out, const float* inp) {}", "k", ("-DX=1",))
    launches = tuple(Launch((i + 1, 1, 1), (32, 1, 1)) for i in range(3))
    request = EvalRequest(
        "run",
        kernel,
        (Candidate("c", kernel, launches),),
        verify,
        bench,
        options=replace(EvalRequest("x", kernel, (), (), bench).options, sanitize=True),
    )
    validate_request(request)
    parts = split_by_defines(request)
    assert [p.baseline.options for p in parts] == [
        ("-DX=1", "-DN=97"),
        ("-DX=1", "-DN=1021"),
        ("-DX=1", "-DN=4096"),
    ]
    assert [p.candidates[0].kernel.options[-1] for p in parts] == ["-DN=97", "-DN=1021", "-DN=4096"]
    assert [p.bench_problem.defines["N"] for p in parts] == [97, 1021, 4096]
    assert [p.candidates[0].launches for p in parts] == [(launches[0],), (launches[1],), (launches[2],)]
    assert [(p.options.time, p.options.sanitize) for p in parts] == [
        (False, False),
        (False, False),
        (True, True),
    ]
    assert len({p.id for p in parts}) == 3
    for part in parts:
        validate_request(part)
    plain = replace(request, verify_problems=(), bench_problem=replace(bench, defines={}))
    assert split_by_defines(plain) == (plain,)


def test_merged_parts_report_the_first_failure_with_the_checks_so_far() -> None:
    from sandbox.contract import Candidate, CandidateResult, Check, EvalResult
    from sandbox.local import merge_parts

    def part(n: int, status: Status) -> EvalResult:
        check = Check(f"n={n}", 1, status == Status.OK)
        ok = CandidateResult("base", Status.OK, checks=(check,))
        return EvalResult(f"r#{n}", ok, (CandidateResult("c", status, f"at {n}", checks=(check,)),))

    kernel = KernelSource("", "k")
    request = EvalRequest("r", kernel, (Candidate("c", kernel),), (), _request().bench_problem)
    merged = merge_parts(request, [part(97, Status.OK), part(1021, Status.MISMATCH), part(4096, Status.OK)])
    assert merged.request_id == "r"
    assert [c.label for c in merged.baseline.checks] == ["n=97", "n=1021", "n=4096"]
    (c,) = merged.candidates
    assert (c.status, c.message, [k.label for k in c.checks]) == (
        Status.MISMATCH,
        "at 1021",
        ["n=97", "n=1021"],
    )


def test_a_default_the_build_may_override_stays_guarded_in_the_unit() -> None:
    """``#ifndef N / #define N 4096 / #endif`` is a default, not an include guard: the standalone
    unit keeps the guard, so each problem's ``-DN=...`` wins (without it n=97 writes 4096)."""
    from agent.target import target_for

    doc = Document.from_file(Path(__file__).parent / "data" / "spec_grammar" / "fixed_size.cu")
    unit = target_for(doc, "scale_fixed").baseline.source
    lines = [line.strip() for line in unit.splitlines()]
    assert lines[:3] == ["#ifndef N", "#define N 4096", "#endif"]
    header = "#ifndef H\n#define H\n#define W 3\n__global__ void k(int* o) { o[0] = W; }\n#endif\n"
    guarded = Document(header)  # a header's include guard: its items stand on their own
    cut = guarded.standalone(guarded.kernels[0]).source
    assert "#ifndef" not in cut and "#define W 3" in cut


def test_a_bad_define_is_named() -> None:
    _, errors = spec_of("sizes n=64\ndefine N=n/0\narg out out float[n]", "float* out")
    assert any("define: macro N" in e and "divides by zero" in e for e in errors), errors
    bad = replace(_request().bench_problem, defines={"1N": 3})
    with pytest.raises(RequestError) as err:
        validate_request(replace(_request(), bench_problem=bad))
    assert err.value.field == "bench_problem.defines"


# ------------------------------------------------------------------------------------- memory cap


@pytest.mark.parametrize("command", ["bench", "optimize", "suite"])
def test_max_memory_gb_reaches_every_request(
    command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sandbox.testing import FakeExecutor
    from server.cli.main import main

    seen: list[EvalRequest] = []

    class Recording(FakeExecutor):
        def evaluate(self, request: EvalRequest, **kw: Any) -> Any:
            seen.append(request)
            return super().evaluate(request, **kw)

    monkeypatch.setattr("server.cli.common.open_executor", lambda *a, **k: Recording())
    source = Path(__file__).resolve().parents[1] / "bench" / "kernels" / "vadd_poor_block.cu"
    (tmp_path / "vadd.cu").write_text(source.read_text())
    target = str(tmp_path if command == "suite" else tmp_path / "vadd.cu")
    extra = ["--budget", "2c"] if command != "bench" else []
    assert main([command, target, "--max-memory-gb", "0.5", *extra]) in (0, 1), capsys.readouterr().err
    assert seen and {r.budget.gpu_memory_bytes for r in seen} == {1 << 29}
    seen.clear()
    main([command, target, *extra])
    assert seen and {r.budget.gpu_memory_bytes for r in seen} == {4 << 30}  # the default
    rc = main([command, target, "--max-memory-gb", "0"])
    assert rc == 2 and "--max-memory-gb" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- inference


@pytest.mark.parametrize(
    ("file", "kernel", "expected"),
    [
        ("trimul.cu", "trimul_global", "`j <= i`"),  # a causal triangle
        ("stencil3d.cu", "laplacian7", "`i < 1`"),  # a stencil's boundary, by an early return
        ("saxpy.cu", "saxpy", ""),  # `if (i < n)`: an upper bound, every element written
        ("reduction.cu", "reduce4", ""),
    ],
)
def test_inference_marks_outputs_stored_under_a_partial_guard(file: str, kernel: str, expected: str) -> None:
    from cudasrc.specs import infer, render_inference

    doc = Document.from_file(Path(__file__).parent / "data" / "realcode" / file)
    k = doc.kernel(kernel)
    assert k is not None
    inference = infer(doc, k)
    texts = [c.text() for c in inference.spec.compares]
    if not expected:
        assert texts == []
        return
    assert texts == ["out written"]
    assert expected in inference.guesses()["compare out"]
    rendered = render_inference(inference)
    assert (
        "// @cuda-agent compare out written\n" in rendered
        and f"// guess: stored only where {expected}" in rendered
    )
