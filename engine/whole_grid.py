"""Whole-grid packs: an elementwise kernel whose domain is the launch itself (grid x block, no
bounds check) reads and writes 16-byte packs, each thread ``V`` adjacent elements.

Matches (on the :class:`~engine.view.KernelView`) a kernel on a constant 1-D block whose
body is the declaration of the global thread index ``i`` (``blockIdx.x * blockDim.x +
threadIdx.x`` in any form, casts allowed, after declarations such as ``tid = threadIdx.x``)
followed by statements that read no other thread
position, compare ``i`` with nothing (a bounds-checked kernel is the vectorizer's), use no shared
memory, barriers, atomics, shuffles or ``return``, run loops only over the thread's own elements
(every array a loop accesses is a stream), and access at least one array at ``[i]`` — the
*streams*.  Accesses at other indices stay scalar.  A stream stored only where a statement may
skip it (under an ``if``, in a loop) is loaded first, so the elements it does not store stay.

Rewrite (params: bytes per pack, 16 or 8): ``V = bytes / (widest stream element)`` elements per
thread, blocks of ``B / V`` threads on the original grid (its ``block`` held at the original
``B``), so block ``b`` still covers ``[b * B, (b + 1) * B)``.  When every stream is aligned to its
pack (checked at run time), each thread loads its input streams as packs into registers, runs the
original statements once per lane on those registers and stores its output streams as packs;
otherwise it runs the original statements for its ``V`` elements one after another.
"""

from __future__ import annotations

import ast
from collections.abc import Hashable
from dataclasses import dataclass

import tree_sitter

from cudasrc.dtypes import canonical_dtype, dtype_bytes
from cudasrc.launch import LaunchChange
from cudasrc.specs import ArraySpec, evaluate
from engine import _inside
from engine.passes import PAD, Emitter, Match, NotApplicable, Outcome, Pass
from engine.view import KernelView, global_index, statements, unparenthesized, walk

Node = tree_sitter.Node
_COMPARE = ("<", "<=", ">", ">=", "==", "!=")
_LOOPS = ("for_statement", "while_statement", "do_statement")
_PACK = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short"}


@dataclass(frozen=True)
class WholeGridMatch(Match):
    index: str  # the thread's element index ``i``
    head: tuple[Node, ...]  # declarations before it (``tid = threadIdx.x``), kept
    decl: Node  # its declaration
    rest: tuple[Node, ...]  # the statements after it
    streams: tuple[tuple[str, int, bool, bool], ...]  # (array, element bytes, read, written)
    threads: int  # the original block


def _block(view: KernelView) -> int | None:
    if len(view.subject.block) != 1:
        return None
    try:
        v = evaluate(view.subject.block[0], {})
    except ValueError:
        return None
    return v if isinstance(v, int) and v > 0 else None


def _fixed_grid(grid: str, threads: int) -> str:
    """The spec's grid expression with ``block``/``block_x`` held at ``threads``."""
    tree = ast.parse(grid, mode="eval")

    class Hold(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.Constant(threads) if node.id in ("block", "block_x") else node

    return ast.unparse(Hold().visit(tree))


class WholeGridPacks(Pass[WholeGridMatch]):
    name = "WholeGridPacks"
    space = (16, 8)

    def match(self, view: KernelView) -> WholeGridMatch | NotApplicable:
        threads = _block(view)
        if threads is None or len(view.subject.grid) != 1:
            return NotApplicable("the launch is not a constant 1-D block on a 1-D grid")
        if view.cooperation or view.returns:
            return NotApplicable("the body returns, or threads cooperate")
        body = statements(view.body)
        at = next((k for k, st in enumerate(body) if self._index(view, st)), None)
        if at is None:
            return NotApplicable("the body does not start with `i = blockIdx.x * blockDim.x + threadIdx.x`")
        head, decl, rest = tuple(body[:at]), body[at], tuple(body[at + 1 :])
        if any(st.type != "declaration" or view.names(st) & set(view.params) for st in head):
            return NotApplicable("the statements before the index are not declarations of positions")
        i = self._index(view, decl)
        declared = {
            n for st in rest for n in view.names(st) if n in view.locals and view.locals[n].decl == st
        }
        if (view.thread_dependent - {i} - declared) & {n for st in rest for n in view.names(st)}:
            return NotApplicable("the body uses a thread-dependent local besides its index")
        if view.locals.get(i) is None or view.locals[i].reassigned:
            return NotApplicable(f"`{i}` is assigned again")
        for s in rest:
            if view.positions(s):
                return NotApplicable("the body reads the thread's position besides its index")
            for n in walk(s):
                compare = n.type == "binary_expression" and view.text(n.children[1]) in _COMPARE
                if compare and i in view.names(n):
                    return NotApplicable(f"`{i}` is compared (a bounds check: the vectorizer's family)")
        arrays = view.subject.arrays()
        aliases = view.subject.doc.type_aliases
        streams: dict[str, list[bool]] = {}
        for a in view.accesses:
            idx = unparenthesized(view._index_node(a.node))
            if idx is None or idx.type != "identifier" or view.text(idx) != i or a.via != a.array:
                continue
            if a.array not in arrays or a.address:
                continue
            seen = streams.setdefault(a.array, [False, False])
            seen[1 if a.written else 0] = True
        if not streams:
            return NotApplicable(f"no array is accessed at `[{i}]`")
        loops = [n for st in rest for n in walk(st) if n.type in _LOOPS]
        for a in view.accesses:
            if a.array in view.params and a.array not in streams and any(_inside(a.node, lp) for lp in loops):
                return NotApplicable(
                    f"a loop accesses `{view.text(a.node)}`: only loops over the thread's own "
                    "elements (its packs' registers) stay in a lane"
                )
        # a stream whose stores may all be skipped (under an `if`, in a loop) keeps the elements it
        # does not store: its pack is loaded first
        for name_, seen in streams.items():
            if seen[1] and not any(self._stores(view, st, name_) for st in rest):
                seen[0] = True
        found = []
        for name_, (read, wrote) in streams.items():
            spec: ArraySpec = arrays[name_]
            dtype = canonical_dtype(spec.dtype, aliases)
            if dtype is None:
                return NotApplicable(f"the element type of `{name_}` is not known")
            found.append((name_, dtype_bytes(dtype), read, wrote))
        if any(
            a.array in streams
            and (a.via != a.array or view.text(unparenthesized(view._index_node(a.node)) or a.node) != i)
            for a in view.accesses
        ):
            return NotApplicable("a stream is also accessed at another index")
        match = WholeGridMatch(view, i, head, decl, rest, tuple(found), threads)
        if not any(self._lanes_for(match, p) for p in self.space):
            return NotApplicable(f"no pack fits the block of {threads} with 32 threads or more left")
        return match

    @staticmethod
    def _stores(view: KernelView, stmt: Node, array: str) -> bool:
        """Whether ``stmt`` is ``array[...] = ...;`` (an unconditional store, the thread's element)."""
        expr = stmt.named_children[0] if stmt.type == "expression_statement" and stmt.named_children else None
        if expr is None or expr.type != "assignment_expression" or view.text(expr.children[1]) != "=":
            return False
        left = expr.child_by_field_name("left")
        return any(a.node == left and a.written and a.array == array for a in view.accesses)

    @staticmethod
    def _index(view: KernelView, decl: Node) -> str:
        """The name ``decl`` declares when it is ``T i = <global x index>;`` ("" otherwise)."""
        decls = decl.children_by_field_name("declarator") if decl.type == "declaration" else []
        value = decls[0].child_by_field_name("value") if len(decls) == 1 else None
        name = decls[0].child_by_field_name("declarator") if value is not None else None
        if (
            value is None
            or name is None
            or name.type != "identifier"
            or view.poly(value) != global_index("x")
        ):
            return ""
        return view.text(name)

    @staticmethod
    def _lanes_for(match: WholeGridMatch, params: Hashable) -> int:
        """Elements per thread for ``params``-byte packs (0: the packs do not fit the block)."""
        assert isinstance(params, int)
        lanes = params // max(b for _, b, _, _ in match.streams)
        return lanes if lanes >= 2 and match.threads % lanes == 0 and match.threads // lanes >= 32 else 0

    def guess(self, match: WholeGridMatch) -> Hashable:
        return next(p for p in self.space if self._lanes_for(match, p))

    def rewrite(self, match: WholeGridMatch, params: Hashable) -> Outcome:
        assert isinstance(params, int)
        view = match.view
        lanes = self._lanes_for(match, params)
        if not lanes:
            return NotApplicable(f"{params}-byte packs do not fit the block of {match.threads}")
        e = Emitter(view)
        base, k = e.fresh("base"), e.fresh("k")
        regs = {name: e.fresh(f"r_{name}") for name, _, _, _ in match.streams}
        i, ind = match.index, PAD
        decl_type = view.text(match.decl.child_by_field_name("type") or match.decl)
        aligned = " && ".join(
            f"reinterpret_cast<size_t>({name}) % {lanes * b} == 0" for name, b, _, _ in match.streams
        )
        lines = [
            f"// cuda-agent: {lanes} adjacent elements per thread, {params}-byte packs when aligned",
            *(view.text(st) for st in match.head),
            f"const size_t {base} = (size_t)blockIdx.x * {match.threads} + (size_t)threadIdx.x * {lanes};",
            f"if ({aligned}) {{",
        ]
        for name, b, read, _ in match.streams:
            elem = view.params[name].base_type
            lines.append(f"{ind}__align__({lanes * b}) {elem} {regs[name]}[{lanes}];")
            if read:
                pack = _PACK[lanes * b]
                lines.append(
                    f"{ind}*reinterpret_cast<{pack}*>({regs[name]}) = "
                    f"*reinterpret_cast<const {pack}*>({name} + {base});"
                )
        lines.append("#pragma unroll")
        lines.append(f"{ind}for (int {k} = 0; {k} < {lanes}; ++{k}) {{")
        lines.append(f"{ind}{PAD}const {decl_type} {i} = ({decl_type})({base} + {k});")
        lines += [ind + PAD + self._lanes(view, s, regs, k, i) for s in match.rest]
        lines.append(f"{ind}}}")
        for name, b, _, wrote in match.streams:
            if wrote:
                pack = _PACK[lanes * b]
                lines.append(
                    f"{ind}*reinterpret_cast<{pack}*>({name} + {base}) = *reinterpret_cast<const {pack}*>({regs[name]});"
                )
        lines.append("} else {")
        lines.append(f"{ind}for (int {k} = 0; {k} < {lanes}; ++{k}) {{")
        lines.append(f"{ind}{PAD}const {decl_type} {i} = ({decl_type})({base} + {k});")
        lines += [ind + PAD + view.text(s) for s in match.rest]
        lines.append(f"{ind}}}")
        lines.append("}")
        e.replace(view.body, "{\n" + "".join(f"{PAD}{line}\n" for line in lines) + "}")
        grid = _fixed_grid(view.subject.grid[0], match.threads)
        return e.rewrite(
            f"{lanes} elements per thread in {params}-byte packs",
            LaunchChange(grid=grid, block=str(match.threads // lanes)),
        )

    @staticmethod
    def _lanes(view: KernelView, stmt: Node, regs: dict[str, str], k: str, i: str) -> str:
        """``stmt`` with every stream access ``x[i]`` replaced by its register ``r_x[k]``."""
        data, start = view.subject.doc.data, stmt.start_byte
        out, pos = [], start
        for a in sorted(view.accesses, key=lambda a: a.node.start_byte):
            if a.array in regs and stmt.start_byte <= a.node.start_byte < stmt.end_byte:
                out += [data[pos : a.node.start_byte].decode(), f"{regs[a.array]}[{k}]"]
                pos = a.node.end_byte
        out.append(data[pos : stmt.end_byte].decode())
        return "".join(out)
