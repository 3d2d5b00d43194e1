"""The normalizing front end (engine/frontend.py) and what the view reads through it:
constants, element types, scopes, barrier spellings, dynamic shared memory wrappers, and the text
normalizations (device functions inlined, late-initialised locals, hoisted and while loops), each
keeping the kernel's meaning (the variant corpus, tests/test_variants.py, checks outputs)."""

from __future__ import annotations

from cudasrc.specs import KernelSpec
from engine import Subject, safe_apply
from engine.elementwise import GridStride
from engine.view import global_index


def subject(unit: str, template: tuple[str, ...] = (), block: tuple[str, ...] = ("256",)) -> Subject:
    """The last kernel of ``unit`` with ``unit`` as its context."""
    start = unit.rindex("__global__")
    head = unit.rfind("template", 0, start)
    if head >= 0 and unit[head:start].strip().startswith("template") and "\n\n" not in unit[head:start]:
        start = head
    spec = KernelSpec(kernel="k", sizes={"n": "64"}, template_args=template, block=block)
    return Subject(unit[start:], spec, context=unit)


def first_access(s: Subject, array: str):  # type: ignore[no-untyped-def]
    return next(a for a in s.normalized.view.accesses if a.via == array)


def test_macros_constexprs_and_template_values_fold_into_indices() -> None:
    unit = (
        "#define TILE (4 * 8)\n"
        "constexpr int PAD = TILE + 1;\n"
        "template <int W>\n"
        "__global__ void k(const float* x, float* y) {\n"
        "    y[threadIdx.x * PAD + W] = x[TILE - 1];\n"
        "}\n"
    )
    s = subject(unit, ("3",))
    assert first_access(s, "y").index == {("threadIdx.x",): 33, (): 3}
    assert first_access(s, "x").index == {(): 31}


def test_a_block_sized_constant_is_the_block_dimension() -> None:
    unit = "#define TILE 16\n__global__ void k(float* y) {\n    y[blockIdx.x * TILE + threadIdx.x] = 0;\n}\n"
    assert first_access(subject(unit, block=("16",)), "y").index == global_index("x")
    assert first_access(subject(unit, block=("32",)), "y").index != global_index("x")


def test_aliases_and_type_parameters_resolve_to_one_element_type() -> None:
    unit = (
        "typedef __nv_bfloat16 floatX;\n"
        "using acc_t = float;\n"
        "template <typename T>\n"
        "__global__ void k(const floatX* __restrict__ x, T* y, int n) {\n"
        "    acc_t a = x[0];\n"
        "    y[0] = a;\n"
        "}\n"
    )
    view = subject(unit, ("double",)).view
    assert view.element_type("x") == "__nv_bfloat16" and view.dtype("x") == "bfloat16"
    assert view.element_type("y") == "double"
    assert view.element_type("a") == "float"


def test_alias_cycles_and_odd_shifts_end_without_a_value() -> None:
    unit = (
        "typedef struct Q P;\n"
        "typedef P Q;\n"
        "#define BIG (1 << 70)\n"
        "__global__ void k(P* x) {\n"
        "    x[BIG] = x[0];\n"
        "}\n"
    )
    s = subject(unit)
    assert s.view.element_type("x") in ("P", "Q")
    assert "BIG" not in s.front.constants and first_access(s, "x").index is None


def test_a_local_redeclared_in_sibling_loops_is_a_new_variable_each_time() -> None:
    unit = (
        "__global__ void k(const float* x, float* y, int n) {\n"
        "    int row = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    for (int c = 0; c < n; c++) { int i = row * n + c; y[i] = x[i]; }\n"
        "    for (int c = 0; c < n; c++) { int i = c; y[i] = 0; }\n"
        "}\n"
    )
    view = subject(unit).view
    writes = [a for a in view.accesses if a.via == "y"]
    row = {("blockDim.x", "blockIdx.x", "n"): 1, ("n", "threadIdx.x"): 1, ("c",): 1}
    assert writes[0].index == row and writes[1].index == {("c",): 1}
    assert len(view.declarations["i"]) == 2 and not any(d.reassigned for d in view.declarations["i"])


def test_barriers_in_every_spelling_and_only_block_ones_are_block_barriers() -> None:
    unit = (
        "__global__ void k(float* y) {\n"
        "    cg::thread_block cta = cg::this_thread_block();\n"
        "    auto tile = cg::tiled_partition<32>(cta);\n"
        "    __syncthreads();\n"
        "    cg::sync(cta);\n"
        "    cta.sync();\n"
        "    cooperative_groups::this_thread_block().sync();\n"
        "    tile.sync();\n"
        "    __syncwarp();\n"
        "}\n"
    )
    view = subject(unit).view
    assert len(view.barriers) == 6
    assert [view.block_barrier(b) for b in view.barriers] == [True, True, True, True, False, False]


def test_shared_memory_wrappers_are_shared_arrays() -> None:
    unit = (
        "template <class T> struct SharedMemory {\n"
        "    __device__ inline operator T*() { extern __shared__ int __smem[]; return (T*)__smem; }\n"
        "};\n"
        "__global__ void k(const float* x, float* y) {\n"
        "    float* sdata = SharedMemory<float>();\n"
        "    sdata[threadIdx.x] = x[threadIdx.x];\n"
        "}\n"
    )
    view = subject(unit).view
    assert view.front.shared_wrappers == {"SharedMemory"}
    assert len(view.shared) == 1 and view.cooperation == "shared memory"


def test_device_functions_are_inlined_with_their_parameters_renamed_where_they_would_capture() -> None:
    unit = (
        "__device__ float dot(const float* a, const float* b, int n) {\n"
        "    float s = 0.0f;\n"
        "    for (int k = 0; k < n; ++k) s += a[k] * b[k];\n"
        "    return s;\n"
        "}\n"
        "__global__ void k(const float* a, const float* b, float* y, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    float v = dot(b, a + i * n, n);\n"
        "    y[i] = v;\n"
        "}\n"
    )
    code = subject(unit).normalized.code
    assert "dot(" not in code.split("{", 1)[1]
    assert "const float* a_2 = b;" in code and "const float* b_2 = a + i * n;" in code
    assert "s += a_2[k] * b_2[k];" in code and "v = s;" in code


def test_a_function_with_early_returns_is_inlined_only_where_nothing_follows() -> None:
    unit = (
        "__device__ void body(float* y, int i, int n) {\n"
        "    if (i >= n) return;\n"
        "    y[i] = 1.0f;\n"
        "}\n"
        "__global__ void k(float* y, int n) {\n"
        "    body(y, blockIdx.x * blockDim.x + threadIdx.x, n);\n"
        "    y[0] = 2.0f;\n"
        "}\n"
    )
    s = subject(unit)
    assert s.normalized is s  # a return inside would skip the statement after the call


def test_hoisted_loop_variables_late_initialisation_and_while_loops_become_canonical_loops() -> None:
    unit = (
        "__global__ void k(const float* x, float* y, int n) {\n"
        "    int r, j;\n"
        "    r = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    float acc = 0.0f;\n"
        "    for (j = 0; j < n; j++) acc += x[r * n + j];\n"
        "    int c = 0;\n"
        "    while (c < n) {\n"
        "        acc += x[c];\n"
        "        c += 2;\n"
        "    }\n"
        "    y[r] = acc;\n"
        "}\n"
    )
    s = subject(unit).normalized
    view = s.view
    assert [lp.var for lp in view.loops] == ["j", "c"]
    assert [lp.step for lp in view.loops] == [1, 2]
    assert view.locals["r"].value is not None and not view.locals["r"].reassigned
    assert "while" not in s.code


def test_a_loop_variable_read_after_its_loop_keeps_its_declaration() -> None:
    unit = (
        "__global__ void k(float* y, int n) {\n"
        "    int j;\n"
        "    for (j = 0; j < n; j++) y[j] = 0;\n"
        "    y[0] = j;\n"
        "}\n"
    )
    s = subject(unit)
    assert s.normalized is s
    assert s.view.loops[0].var == "j"  # the view still reads the loop


def test_the_package_holds_no_transformation_and_every_rewrite_is_registered_or_mechanical() -> None:
    import engine as package
    from engine import Transform, mechanical
    from engine.passes import Pass
    from engine.registry import PASSES

    classes = [v for v in vars(package).values() if isinstance(v, type) and v is not Transform]
    assert not [c for c in classes if issubclass(c, Transform | Pass)]
    assert {"GridStride", "Vectorize", "SharedHistogram", "WarpReduction"} <= {p.name for p in PASSES}
    assert {"BlockSize", "LaunchBounds", "RestrictConst", "ReadOnlyLoads", "Unroll", "FastMath"} <= set(
        vars(mechanical)
    )


def test_a_parameter_the_function_changes_gets_its_own_copy() -> None:
    unit = (
        "__device__ float count_down(float* y, int n) {\n"
        "    float s = 0.0f;\n"
        "    while (n > 0) { s += y[n]; n--; }\n"
        "    return s;\n"
        "}\n"
        "__global__ void k(float* y, int n) {\n"
        "    float v = count_down(y, n);\n"
        "    y[0] = v + n;\n"
        "}\n"
    )
    code = subject(unit).normalized.code
    assert "int n_2 = n;" in code and "n_2--;" in code and "y[0] = v + n;" in code


def test_the_units_macros_expand_for_the_passes_and_stay_as_written_in_the_rewrite() -> None:
    """Function-like macros (a declaration without its semicolon, an index, an object-like name for
    a function-like one: the rescan) expand into the normalized text the view reads; an integer
    constant stays the atom the view folds; a rewrite that re-emits the body (the grid-stride loop)
    puts each line it carries over back as written, macros and all."""
    unit = (
        "#define IDX(r, c, w) ((r) * (w) + (c))\n"
        "#define DECL(i) const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "#define N 64\n"
        "#define TWICE SCALE\n"
        "#define SCALE(x) (2.0f * (x))\n"
        "__global__ void k(const float* x, float* y) {\n"
        "    DECL(i)\n"
        "    if (i < N) {\n"
        "        y[IDX(i, 0, 1)] = TWICE(x[IDX(0, i, 1)]);\n"
        "    }\n"
        "}\n"
    )
    s = subject(unit)
    normalized = s.normalized.code
    assert "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n" in normalized
    assert "y[((i) * (1) + (0))] = (2.0f * (x[((0) * (1) + (i))]));" in normalized
    assert "if (i < N)" in normalized  # the constant stays an atom
    assert first_access(s, "y").index == first_access(s, "x").index == global_index("x")
    out = safe_apply(GridStride(1), s)
    assert isinstance(out, Subject), out
    assert "        y[IDX(i, 0, 1)] = TWICE(x[IDX(0, i, 1)]);\n" in out.code
    assert "DECL(i)" not in out.code  # the line the rewrite changed: `i` from the loop
    assert "((i) * (1) + (0))" not in out.code


def test_calls_of_an_empty_template_device_function_inline_to_nothing() -> None:
    """``template <class T> __device__ void unused(T&&) {}`` marks variables used: its calls (with
    arguments free of effects) leave the normalized kernel; a call whose argument has an effect
    stays."""
    unit = (
        "template <class T>\n__device__ void unused(T&&) {}\n"
        "__global__ void k(float* y, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    const int g = gridDim.x;\n"
        "    unused(g); unused(n++);\n"
        "    if (i < n) y[i] = 1.0f;\n"
        "}\n"
    )
    code = subject(unit).normalized.code
    assert "unused(g);" not in code and "unused(n++);" in code
