"""Tiled dot product: a thread-per-output kernel whose one loop accumulates ``acc += A[f(i, k)] *
B[g(k, j)]`` becomes shared-memory K tiles with register blocking (an expert's SGEMM).

Match (on the tree-sitter AST of the kernel):

* the kernel's one ``for`` loop runs ``k`` from 0 to a uniform bound by 1 and its body is one
  ``acc += X[...] * Y[...]`` (or ``acc = acc + ...``) over two read-only pointer parameters;
* index expressions are expanded through the kernel's locals into polynomials over atoms
  (parameters, ``threadIdx``/``blockIdx``/``blockDim`` fields, opaque sub-expressions) and must be
  affine in the loop variable and in one of the global indices ``gx = blockIdx.x * blockDim.x +
  threadIdx.x`` / ``gy``: X depends on one (its rows ``i``), Y on the other (its columns ``j``);
  whatever else they hold is uniform (parameters, ``blockIdx.z`` batch offsets);
* guards before the loop (``if (i < M && j < N) {...}`` or early ``return``) bound ``i`` and ``j``.

Rewrite: blocks of ``(BM / TM) * (BN / TN)`` threads, each block a ``BM`` x ``BN`` tile of outputs
(``blockIdx.y``: tiles of ``i``, ``blockIdx.x``: tiles of ``j``, ``blockIdx.z`` kept), each thread
``TM`` x ``TN`` of them in registers.  Per K tile of ``BK``, X's tile is stored transposed
(``Xs[k][i]``) and Y's as ``Ys[k][j]`` (both padded by 4 floats against bank conflicts), loaded
with 16-byte vectors along the contiguous axis where the address is aligned and the 4 elements
are in bounds (a run-time check), element by element with bounds checks otherwise; the inner
loop is a fully unrolled outer product from float4 shared loads.  Each thread's rows and columns
come in groups of 4 strided over the tile (conflict-free shared reads).  Then the original body
runs once per output, with the global indices replaced by the output's coordinates, the loop by
``acc += <tile sum>``, and ``return`` by ``continue``: initial values (bias), epilogues
(``alpha * acc + beta * C[...]``), masks and their ``-INFINITY`` writes are kept as written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import tree_sitter

from agent.loop import LaunchChange
from agent.spec import ScalarSpec
from agent.transforms import NotApplicable, Outcome, Rewrite, Subject, Transform, _splice, _text
from agent.transforms.view import Expander as _Expander
from agent.transforms.view import Poly
from agent.transforms.view import global_index as _global
from agent.transforms.view import poly_add as _add
from agent.transforms.view import poly_mul as _mul
from agent.transforms.view import poly_render as _render
from agent.transforms.view import poly_split as _split
from agent.transforms.view import poly_uniform as _uniform
from agent.transforms.view import walk as _walk

Node = tree_sitter.Node
log = logging.getLogger(__name__)
_BAD_CALLS = ("__syncthreads", "atomic", "__shfl", "__syncwarp")


def _axis_of(p: Poly) -> tuple[str, Poly, Poly] | None:
    """p = coeff * g_axis + rest (coeff nonzero and uniform, rest uniform) for one axis, or None."""
    for axis in ("x", "y"):
        coeff, _ = _split(p, f"threadIdx.{axis}")
        if coeff and _uniform(coeff):
            rest = _add(p, _mul(coeff, _global(axis)), -1)
            if _uniform(rest):
                return axis, coeff, rest
    return None


@dataclass(frozen=True)
class _Operand:
    array: str
    axis: str  # the global index it walks ("x" or "y")
    coeff: Poly  # of the global index
    k_coeff: Poly
    rest: Poly
    wide: bool

    def index(self, outer: str, k: str, atoms: dict[str, str]) -> str:
        p = _add(_add(_mul(self.coeff, {("@o",): 1}), _mul(self.k_coeff, {("@k",): 1})), self.rest)
        return _render(p, {**atoms, "@o": outer, "@k": k}, self.wide)

    @property
    def contiguous(self) -> str | None:
        return "k" if self.k_coeff == {(): 1} else "outer" if self.coeff == {(): 1} else None


@dataclass(frozen=True)
class TiledDot(Transform):
    """``BM`` x ``BN`` output tiles per block, ``BK`` deep K tiles, ``TM`` x ``TN`` outputs per thread."""

    bm: int = 128
    bn: int = 128
    bk: int = 8
    tm: int = 8
    tn: int = 8

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def apply(self, subject: Subject) -> Outcome:
        try:
            return self._apply(subject)
        except Exception as e:  # a bug on a form this pass misreads: refuse it, the search goes on
            log.exception("TiledDot failed on %s", subject.spec.kernel)
            return NotApplicable(f"internal error: {type(e).__name__}: {e}")

    def _apply(self, subject: Subject) -> Outcome:
        bm, bn, bk, tm, tn, nt = self.bm, self.bn, self.bk, self.tm, self.tn, self.threads
        if bm % tm or bn % tn or (bm * bk) % nt or (bn * bk) % nt or nt > 1024 or nt % 32:
            return NotApplicable(f"tile {bm}x{bn}x{bk} with {tm}x{tn} per thread does not divide into warps")
        body = subject.body
        if body is None:
            return NotApplicable("the kernel has no body")
        k = subject.kernel
        if k.launch_bounds is not None:
            return NotApplicable("__launch_bounds__ fixes the block size")
        if len(subject.block) == 3 and subject.block[2].strip() != "1":
            return NotApplicable("the block has a z dimension")
        nodes = list(_walk(body))
        loops = [n for n in nodes if n.type in ("for_statement", "while_statement", "do_statement")]
        if len(loops) != 1 or loops[0].type != "for_statement":
            return NotApplicable("the kernel is not one loop over k")
        if any(n.type in ("switch_statement", "goto_statement") for n in nodes):
            return NotApplicable("switch or goto in the kernel")
        for n in nodes:
            fn = n.child_by_field_name("function") if n.type == "call_expression" else None
            if fn is not None and _text(subject, fn).startswith(_BAD_CALLS):
                return NotApplicable(f"{_text(subject, fn)} in the kernel")
            if n.type == "declaration" and "__shared__" in _text(subject, n).split("(")[0]:
                return NotApplicable("the kernel already uses shared memory")
        loop = loops[0]
        # single-assignment locals
        defs: dict[str, Node] = {}
        assigned: set[str] = set()
        types: dict[str, str] = {}
        for n in nodes:
            if n.type == "init_declarator":
                name, value = n.child_by_field_name("declarator"), n.child_by_field_name("value")
                if name is not None and value is not None and name.type == "identifier":
                    nm = _text(subject, name)
                    (assigned.add(nm) if nm in defs else None)
                    defs[nm] = value
                    decl = n.parent
                    ty = decl.child_by_field_name("type") if decl is not None else None
                    types[nm] = _text(subject, ty) if ty is not None else ""
            elif n.type in ("assignment_expression", "update_expression"):
                target = n.child_by_field_name("left") or n.child_by_field_name("argument")
                if target is not None and target.type == "identifier":
                    assigned.add(_text(subject, target))
        params = {p.name for p in k.params if p.pointer == 0}
        pointers = {p.name: p for p in k.params if p.pointer == 1}
        stable = {n: v for n, v in defs.items() if n not in assigned}
        ex = _Expander(subject, stable, params)
        # the loop: for (int k = 0; k < K; ++k) acc += X[..] * Y[..];
        init, cond, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
        if init is None or cond is None or update is None:
            return NotApplicable("the loop lacks an initializer, condition or update")
        init_decl = next((c for c in _walk(init) if c.type == "init_declarator"), None)
        kname_node = init_decl.child_by_field_name("declarator") if init_decl is not None else None
        kinit = init_decl.child_by_field_name("value") if init_decl is not None else None
        if kname_node is None or kinit is None or _text(subject, kinit) != "0":
            return NotApplicable("the loop does not declare its variable from 0")
        kv = _text(subject, kname_node)
        cl, cop, cr = (cond.child_by_field_name(f) for f in ("left", "operator", "right"))
        if cl is None or cop is None or cr is None or _text(subject, cl) != kv or _text(subject, cop) != "<":
            return NotApplicable("the loop condition is not `k < K`")
        kbound = ex.poly(cr)
        if kbound is None or not _uniform(kbound):
            return NotApplicable("the loop bound is not uniform")
        up = _text(subject, update).replace(" ", "")
        if up not in (f"++{kv}", f"{kv}++", f"{kv}+=1"):
            return NotApplicable("the loop does not step by 1")
        stmt = loop.child_by_field_name("body")
        while stmt is not None and stmt.type == "compound_statement" and stmt.named_child_count == 1:
            stmt = stmt.named_children[0]
        expr = stmt.named_children[0] if stmt is not None and stmt.type == "expression_statement" else None
        if expr is None or expr.type != "assignment_expression":
            return NotApplicable("the loop body is not one `acc += A[..] * B[..];`")
        left, op, right = (expr.child_by_field_name(f) for f in ("left", "operator", "right"))
        assert left is not None and op is not None and right is not None
        acc = _text(subject, left)
        if left.type != "identifier":
            return NotApplicable("the accumulator is not a local variable")
        if _text(subject, op) == "=" and right.type == "binary_expression":
            rl, rr = right.child_by_field_name("left"), right.child_by_field_name("right")
            if rl is not None and _text(subject, rl) == acc and rr is not None:
                right = rr
            else:
                return NotApplicable("the loop body is not an accumulation into one variable")
        elif _text(subject, op) != "+=":
            return NotApplicable("the loop body is not an accumulation into one variable")
        if right.type == "parenthesized_expression" and right.named_child_count == 1:
            right = right.named_children[0]
        prod_op = right.child_by_field_name("operator")
        if right.type != "binary_expression" or prod_op is None or _text(subject, prod_op) != "*":
            return NotApplicable("the accumulated term is not a product of two loads")
        operands: list[_Operand] = []
        for side in (right.child_by_field_name("left"), right.child_by_field_name("right")):
            if side is None or side.type != "subscript_expression":
                return NotApplicable("the accumulated term is not a product of two array loads")
            arr, idx = side.child_by_field_name("argument"), side.child_by_field_name("indices")
            if (
                arr is None
                or idx is None
                or idx.named_child_count != 1
                or _text(subject, arr) not in pointers
            ):
                return NotApplicable("a load is not from a pointer parameter")
            ex.wide = False
            ex.params.add(kv)
            p = ex.poly(idx.named_children[0])
            if p is None:
                return NotApplicable(f"the index of {_text(subject, arr)} is not affine")
            k_coeff, rest = _split(p, kv)
            if not k_coeff or not _uniform(k_coeff):
                return NotApplicable(f"{_text(subject, arr)} is not indexed by the loop variable")
            found = _axis_of(rest)
            if found is None:
                return NotApplicable(f"{_text(subject, arr)} does not walk one global thread index")
            axis, coeff, uni = found
            if any(a.startswith("blockDim") or a == kv for m in uni for a in m):
                return NotApplicable(f"the index of {_text(subject, arr)} uses blockDim")
            operands.append(_Operand(_text(subject, arr), axis, coeff, k_coeff, uni, ex.wide))
        a_op, b_op = operands
        if a_op.axis == b_op.axis:
            return NotApplicable(
                "both loads walk the same global index (not a dot product of rows and columns)"
            )
        if _store_axis(subject, ex, nodes, pointers) == a_op.axis:
            a_op, b_op = b_op, a_op  # the threads' columns (b) follow the outputs' contiguous axis
        # the arrays the loop reads are never written; the accumulator changes only by its update
        for n in nodes:
            lhs = n.child_by_field_name("left") if n.type == "assignment_expression" else None
            lhs = n.child_by_field_name("argument") if n.type == "update_expression" else lhs
            base = (
                lhs.child_by_field_name("argument")
                if lhs is not None and lhs.type == "subscript_expression"
                else lhs
            )
            written = _text(subject, base) if base is not None else ""
            if written in (a_op.array, b_op.array) or (lhs is not None and lhs.type == "pointer_expression"):
                return NotApplicable("the kernel writes an array the loop reads (or through a pointer)")
            if written == acc and _inside(n, loop) and n != expr:
                return NotApplicable("the accumulator changes elsewhere in the loop")
        elem = pointers[a_op.array].base_type
        if pointers[b_op.array].base_type != elem or elem not in ("float", "double"):
            return NotApplicable("the loads are not both float or both double")
        acc_type = types.get(acc, "").replace("const ", "").strip()
        if acc_type not in ("float", "double"):
            return NotApplicable("the accumulator is not a float or double local")
        # bounds of the two global indices
        bounds = _bounds(subject, ex, body, loop)
        if "x" not in bounds or "y" not in bounds:
            return NotApplicable("no guard bounds both global indices (`if (i < M && j < N)`)")
        launch = self._launch(subject, bounds, ex.atoms, a_op.axis, b_op.axis)
        if isinstance(launch, NotApplicable):
            return launch
        per_output = self._per_output(subject, body, loop, acc)
        if isinstance(per_output, NotApplicable):
            return per_output
        code_body = self._emit(subject, ex.atoms, a_op, b_op, bounds, kbound, elem, acc_type, per_output)
        code = _splice(
            subject.code,
            [
                (k.name_span.start_byte, k.name_span.start_byte, f"__launch_bounds__({nt}) "),
                (body.start_byte, body.end_byte, code_body),
            ],
            subject.doc.data,
        )
        return Rewrite(
            code, f"shared-memory tiled dot product ({bm}x{bn}x{bk}, {tm}x{tn} per thread)", launch
        )

    # ------------------------------------------------------------------ pieces

    def _launch(
        self, subject: Subject, bounds: dict[str, Poly], atoms: dict[str, str], a_axis: str, b_axis: str
    ) -> LaunchChange | NotApplicable:
        values = {a.name: a.value for a in subject.spec.args if isinstance(a, ScalarSpec)}
        spec_atoms: dict[str, str] = {}
        for axis in ("x", "y"):
            for m in bounds[axis]:
                for a in m:
                    text = atoms.get(a, a)
                    if a not in values:
                        return NotApplicable(f"the bound {text} is not a scalar parameter of the spec")
                    spec_atoms[a] = f"({values[a]})"
        n_spec = _render(bounds[b_axis], spec_atoms, False)
        m_spec = _render(bounds[a_axis], spec_atoms, False)
        grid = [f"cdiv({n_spec}, {self.bn})", f"cdiv({m_spec}, {self.bm})"]
        if len(subject.grid) == 3:
            z = subject.grid[2]
            if "block" in z:
                return NotApplicable("the grid's z dimension depends on the block")
            grid.append(z)
        return LaunchChange(grid=f"({', '.join(grid)})", block=str(self.threads))

    def _coord(self, base: str, thread: str, reg: str, t: int, threads: int) -> str:
        if t % 4 == 0:
            return f"{base} + ({reg} / 4) * {4 * threads} + {thread} * 4 + {reg} % 4"
        return f"{base} + {thread} * {t} + {reg}"

    def _per_output(self, subject: Subject, body: Node, loop: Node, acc: str) -> str | NotApplicable:
        """The original body's statements with the global indices replaced by this output's
        coordinates (``ca_gx``/``ca_gy``), the loop by the tile sum and ``return`` by ``continue``."""
        sub = _Expander(subject, {}, {p.name for p in subject.kernel.params})

        def visit(n: Node) -> Iterator[tuple[int, int, str]]:
            if n == loop:
                yield n.start_byte, n.end_byte, f"{acc} += ca_acc[ca_i][ca_j];"
                return
            if n.type == "return_statement":
                yield n.start_byte, n.end_byte, "continue;"
                return
            if n.type == "binary_expression":
                p = sub.poly(n)
                for axis in ("x", "y"):
                    if p == _global(axis):
                        yield n.start_byte, n.end_byte, f"ca_g{axis}"
                        return
            for c in n.children:
                yield from visit(c)

        data, pos, parts = subject.doc.data, body.start_byte + 1, []
        for s, e, t in visit(body):
            parts += [data[pos:s].decode(), t]
            pos = e
        text = "".join(parts) + data[pos : body.end_byte - 1].decode()
        for word in ("threadIdx", "blockDim", "gridDim", "blockIdx.x", "blockIdx.y", "__syncthreads"):
            if word in text.replace(" ", ""):
                return NotApplicable(f"{word} is used other than in the global index")
        return text

    def _emit(
        self,
        subject: Subject,
        atoms: dict[str, str],
        a: _Operand,
        b: _Operand,
        bounds: dict[str, Poly],
        kbound: Poly,
        elem: str,
        acc_type: str,
        per_output: str,
    ) -> str:
        bm, bn, bk, tm, tn = self.bm, self.bn, self.bk, self.tm, self.tn
        tx_n = bn // tn
        m_bound = _render(bounds[a.axis], atoms, False)
        n_bound = _render(bounds[b.axis], atoms, False)
        k_bound = _render(kbound, atoms, False)
        lines = [
            "{",
            f"    // cuda-agent: {bm}x{bn} outputs per block through {bk}-deep shared tiles, {tm}x{tn} per thread",
            f"    __shared__ __align__(16) {elem} ca_As[{bk}][{bm + 4}];  // {a.array} tile, transposed",
            f"    __shared__ __align__(16) {elem} ca_Bs[{bk}][{bn + 4}];  // {b.array} tile",
            f"    const int ca_tx = threadIdx.x % {tx_n}, ca_ty = threadIdx.x / {tx_n};",
            f"    const int ca_m0 = blockIdx.y * {bm}, ca_n0 = blockIdx.x * {bn};",
            f"    {acc_type} ca_acc[{tm}][{tn}];",
            "    #pragma unroll",
            f"    for (int ca_i = 0; ca_i < {tm}; ++ca_i)",
            "        #pragma unroll",
            f"        for (int ca_j = 0; ca_j < {tn}; ++ca_j) ca_acc[ca_i][ca_j] = 0;",
            f"    for (int ca_k0 = 0; ca_k0 < {k_bound}; ca_k0 += {bk}) {{",
            *self._load(a, "ca_As", "ca_m0", bm, m_bound, k_bound, elem, atoms),
            *self._load(b, "ca_Bs", "ca_n0", bn, n_bound, k_bound, elem, atoms),
            "        __syncthreads();",
            "        #pragma unroll",
            f"        for (int ca_kk = 0; ca_kk < {bk}; ++ca_kk) {{",
            f"            {elem} ca_a[{tm}], ca_b[{tn}];",
            *self._fragment("ca_a", "ca_As", "ca_ty", tm, bm // tm, elem),
            *self._fragment("ca_b", "ca_Bs", "ca_tx", tn, tx_n, elem),
            "            #pragma unroll",
            f"            for (int ca_i = 0; ca_i < {tm}; ++ca_i)",
            "                #pragma unroll",
            f"                for (int ca_j = 0; ca_j < {tn}; ++ca_j) ca_acc[ca_i][ca_j] += ca_a[ca_i] * ca_b[ca_j];",
            "        }",
            "        __syncthreads();",
            "    }",
            "    // each output as the original computed it, from its tile sum",
            "    #pragma unroll",
            f"    for (int ca_i = 0; ca_i < {tm}; ++ca_i) {{",
            "        #pragma unroll",
            f"        for (int ca_j = 0; ca_j < {tn}; ++ca_j) {{",
            f"            const int ca_g{a.axis} = {self._coord('ca_m0', 'ca_ty', 'ca_i', tm, bm // tm)};",
            f"            const int ca_g{b.axis} = {self._coord('ca_n0', 'ca_tx', 'ca_j', tn, tx_n)};",
        ]
        lines += ["        " + line if line.strip() else "" for line in per_output.strip("\n").splitlines()]
        lines += ["        }", "    }", "}"]
        return "\n".join(lines)

    def _fragment(self, reg: str, tile: str, thread: str, t: int, threads: int, elem: str) -> list[str]:
        if t % 4 or elem != "float":
            return [
                "            #pragma unroll",
                f"            for (int ca_r = 0; ca_r < {t}; ++ca_r) {reg}[ca_r] = {tile}[ca_kk][{thread} * {t} + ca_r];",
            ]
        out = []
        for g in range(t // 4):
            v = f"{reg}{g}"
            out.append(
                f"            const float4 {v} = *reinterpret_cast<const float4*>(&{tile}[ca_kk][{g * 4 * threads} + {thread} * 4]);"
            )
            out.append(
                f"            {reg}[{4 * g}] = {v}.x; {reg}[{4 * g + 1}] = {v}.y; {reg}[{4 * g + 2}] = {v}.z; {reg}[{4 * g + 3}] = {v}.w;"
            )
        return out

    def _load(
        self,
        op: _Operand,
        tile: str,
        base: str,
        extent: int,
        bound: str,
        k_bound: str,
        elem: str,
        atoms: dict[str, str],
    ) -> list[str]:
        """Global -> shared for one operand's tile (``extent`` x ``bk``)."""
        bk, nt = self.bk, self.threads
        per_thread = extent * bk // nt
        along = op.contiguous
        span = bk if along == "k" else extent
        v = next(
            (w for w in (4, 2) if elem == "float" and along and per_thread % w == 0 and span % w == 0), 1
        )
        vec = {4: "float4", 2: "float2"}.get(v, "")
        count = extent * bk // v
        out = [
            "        #pragma unroll",
            f"        for (int ca_s = 0; ca_s < {count // nt}; ++ca_s) {{",
            f"            const int ca_l = threadIdx.x + ca_s * {nt};",
        ]
        if along == "outer":
            out.append(
                f"            const int ca_kk = ca_l / {extent // v}, ca_x = (ca_l % {extent // v}) * {v};"
            )
        else:
            out.append(f"            const int ca_x = ca_l / {bk // v}, ca_kk = (ca_l % {bk // v}) * {v};")
        out.append(f"            const int ca_r = {base} + ca_x, ca_c = ca_k0 + ca_kk;")
        idx = op.index("ca_r", "ca_c", atoms)
        if v == 1:
            out.append(
                f"            {tile}[ca_kk][ca_x] = ca_r < {bound} && ca_c < {k_bound} ? {op.array}[{idx}] : {elem}(0);"
            )
            out.append("        }")
            return out
        comps = "xyzw"[:v]
        if along == "outer":
            fits = f"ca_r + {v} <= {bound} && ca_c < {k_bound}"
            vector_store = f"*reinterpret_cast<{vec}*>(&{tile}[ca_kk][ca_x]) = ca_v;"
            scalar = f"{tile}[ca_kk][ca_x + ca_q] = ca_r + ca_q < {bound} && ca_c < {k_bound} ? {op.array}[{op.index('(ca_r + ca_q)', 'ca_c', atoms)}] : 0.0f;"
        else:
            fits = f"ca_r < {bound} && ca_c + {v} <= {k_bound}"
            vector_store = " ".join(f"{tile}[ca_kk + {q}][ca_x] = ca_v.{c};" for q, c in enumerate(comps))
            scalar = f"{tile}[ca_kk + ca_q][ca_x] = ca_r < {bound} && ca_c + ca_q < {k_bound} ? {op.array}[{op.index('ca_r', '(ca_c + ca_q)', atoms)}] : 0.0f;"
        out += [
            f"            const {elem}* ca_p = {op.array} + ({idx});",
            f"            if ({fits} && reinterpret_cast<size_t>(ca_p) % {4 * v} == 0) {{",
            f"                const {vec} ca_v = *reinterpret_cast<const {vec}*>(ca_p);",
            f"                {vector_store}",
            "            } else {",
            "                #pragma unroll",
            f"                for (int ca_q = 0; ca_q < {v}; ++ca_q)",
            f"                    {scalar}",
            "            }",
            "        }",
        ]
        return out


def _store_axis(subject: Subject, ex: _Expander, nodes: list[Node], pointers: Mapping[str, object]) -> str:
    """The global index along which the kernel's stores are contiguous ("x" unless a store says y)."""
    for n in nodes:
        lhs = n.child_by_field_name("left") if n.type == "assignment_expression" else None
        if lhs is None or lhs.type != "subscript_expression":
            continue
        base, idx = lhs.child_by_field_name("argument"), lhs.child_by_field_name("indices")
        if base is None or idx is None or _text(subject, base) not in pointers or idx.named_child_count != 1:
            continue
        p = ex.poly(idx.named_children[0])
        for axis in ("y", "x"):
            if p is not None and _split(p, f"threadIdx.{axis}")[0] == {(): 1}:
                return axis
    return "x"


def _inside(n: Node, outer: Node) -> bool:
    return outer.start_byte <= n.start_byte and n.end_byte <= outer.end_byte


def _bounds(subject: Subject, ex: _Expander, body: Node, loop: Node) -> dict[str, Poly]:
    """Uniform upper bounds of the global indices from the guards the loop runs under: the
    conditions of enclosing ``if``s (``&&`` of ``g < B``) and early ``if (g >= B || ...) return;``."""
    out: dict[str, Poly] = {}

    def compare(n: Node, negated: bool) -> None:
        while n.type == "parenthesized_expression" and n.named_child_count == 1:
            n = n.named_children[0]
        op = n.child_by_field_name("operator") if n.type == "binary_expression" else None
        if op is None:
            return
        o = _text(subject, op)
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        assert left is not None and right is not None
        if o == ("||" if negated else "&&"):
            compare(left, negated)
            compare(right, negated)
            return
        flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
        if o not in flip:
            return
        lp, rp = ex.poly(left), ex.poly(right)
        if lp is None or rp is None:
            return
        if negated:  # g >= B is the exit: g < B holds after it
            o = {"<": ">=", ">": "<=", "<=": ">", ">=": "<"}[o]
        for g, b, rel in ((lp, rp, o), (rp, lp, flip[o])):
            for axis in ("x", "y"):
                if g == _global(axis) and _uniform(b) and rel == "<":
                    out[axis] = b

    for n in _walk(body):
        if n.type != "if_statement":
            continue
        cond = n.child_by_field_name("condition")
        conseq = n.child_by_field_name("consequence")
        value = cond.child_by_field_name("value") if cond is not None else None
        if value is None or conseq is None:
            continue
        if _inside(loop, conseq) and n.child_by_field_name("alternative") is None:
            compare(value, False)
        elif conseq.end_byte <= loop.start_byte and n.parent == body:
            inner = (
                conseq.named_children[0]
                if conseq.type == "compound_statement" and conseq.named_child_count == 1
                else conseq
            )
            if inner.type == "return_statement":
                compare(value, True)
    return out


__all__ = ["TiledDot"]
