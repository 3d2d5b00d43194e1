"""What holds where a statement runs, read from the conditions around it: the shared facts of
the passes that rely on bounds checks (the stencil, the scans, the column reduction and the
permute read them here, the elementwise passes and the tiled dot product the launch's extent where
there is none; no pass imports another).

- :func:`guards` / :func:`conjuncts`: the conditions in force at a node (enclosing ``if`` and
  ``?:`` conditions, earlier ``if (...) return;``), each as a term and whether it is negated;
- :func:`at_least_zero` / :func:`different` / :func:`facts_at`: those terms as polynomials
  ``q >= 0`` (and ``d != 0``) over the view's atoms; :func:`upper_bound`: ``pos < B`` read off one;
- :func:`constant_block`, :func:`over_block`, :func:`grid_follows_block`: what the spec's launch
  says about the block; :func:`at_problems` / :func:`value`: the launch and the scalar
  parameters at every problem of the spec, a polynomial over them; :func:`stores_kept`: whether a
  new block (the spec's grid over it) keeps the threads that store to global memory the original's;
  :func:`launch_covers`: the launch's extent along an axis written over the scalar parameters, where
  the spec proves it equal at every problem (the bound of a kernel with no bounds check).
"""

from __future__ import annotations

import ast

import tree_sitter

from cudasrc.specs import InvalidSpec, ScalarSpec, bench_sizes, problem, verify_sizes
from engine import constant_dims
from engine.view import (
    Expander,
    KernelView,
    Poly,
    global_index,
    poly_add,
    statements,
    unparenthesized,
)
from sandbox.contract import Launch

Node = tree_sitter.Node


def constant_block(view: KernelView) -> tuple[int, ...] | None:
    """The spec's block dimensions when all of them are integer constants."""
    return constant_dims(view.subject.block)


def over_block(expr: str) -> bool:
    """Whether the spec expression ``expr`` is written over ``block``/``block_x``/``block_y``."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Name) and n.id.startswith("block") for n in ast.walk(tree))


def grid_follows_block(view: KernelView) -> bool:
    """Whether the spec's grid is written over the block in every dimension that has more than one
    block, so a new block size keeps the grid covering the problem."""
    return all(over_block(d) or d.strip() == "1" for d in view.subject.grid)


def conjuncts(view: KernelView, node: Node, top: Node) -> list[Node]:
    """The terms of every condition that holds where ``node`` runs, up to ``top``: enclosing
    ``if`` conditions (``node`` in the consequence) and ``?:`` conditions (in the true branch),
    split at ``&&``."""
    out: list[Node] = []
    child, up = node, node.parent
    while up is not None and child != top:
        cond = None
        if up.type == "if_statement" and up.child_by_field_name("consequence") == child:
            clause = up.child_by_field_name("condition")
            cond = clause.child_by_field_name("value") if clause is not None else None
        elif up.type == "conditional_expression" and up.child_by_field_name("consequence") == child:
            cond = up.child_by_field_name("condition")
        out += split(view, cond, "&&")
        child, up = up, up.parent
    return out


def split(view: KernelView, cond: Node | None, joiner: str) -> list[Node]:
    """The terms of ``cond`` joined by ``joiner`` (``&&`` or ``||``), parentheses removed."""
    out: list[Node] = []
    stack = [cond]
    while stack:
        t = unparenthesized(stack.pop())
        if t is not None and t.type == "binary_expression" and view.text(t.children[1]) == joiner:
            stack += [t.child_by_field_name("left"), t.child_by_field_name("right")]
        elif t is not None:
            out.append(t)
    return out


def different(expand: Expander, view: KernelView, term: Node, negate: bool) -> Poly | None:
    """``a - b`` when ``term`` (negated when ``negate``) says ``a != b``."""
    if term.type != "binary_expression" or view.text(term.children[1]) != ("==" if negate else "!="):
        return None
    left, right = term.child_by_field_name("left"), term.child_by_field_name("right")
    a = expand.poly(left) if left is not None else None
    b = expand.poly(right) if right is not None else None
    return poly_add(a, b, -1) if a is not None and b is not None else None


_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def at_least_zero(expand: Expander, view: KernelView, term: Node, negate: bool = False) -> Poly | None:
    """``term`` (a comparison, or its negation) as ``q >= 0`` over integers, or None."""
    if term.type != "binary_expression":
        return None
    op = view.text(term.children[1])
    op = _NEGATED.get(op, "") if negate else op
    left, right = term.child_by_field_name("left"), term.child_by_field_name("right")
    if op not in ("<", "<=", ">", ">=") or left is None or right is None:
        return None
    a, b = expand.poly(left), expand.poly(right)
    if a is None or b is None:
        return None
    q = poly_add(b, a, -1) if op in ("<", "<=") else poly_add(a, b, -1)
    return poly_add(q, {(): -1}) if op in ("<", ">") else q


def guards(view: KernelView, node: Node) -> list[tuple[Node, bool]]:
    """The comparisons that hold where ``node`` runs, each with whether it holds negated: the
    enclosing conditions, and the terms of ``if (a || b) return;`` (or ``continue;`` inside a loop)
    before its statement in any enclosing block."""
    out = [(t, False) for t in conjuncts(view, node, view.body)]
    child, up = node, node.parent
    while up is not None and child != view.body:  # in an `else`: each term of the `||` is false
        holder = up.parent
        if up.type == "else_clause" and holder is not None and holder.type == "if_statement":
            clause = holder.child_by_field_name("condition")
            value = clause.child_by_field_name("value") if clause is not None else None
            out += [(t, True) for t in split(view, value, "||")]
        child, up = up, up.parent
    child = node
    while child.parent is not None and child != view.body:  # `if (a || b) return;` (or `continue;`) before it
        block = child.parent
        if block.type == "compound_statement":
            for s in block.named_children:
                if s.start_byte >= child.start_byte:
                    break
                conseq = s.child_by_field_name("consequence") if s.type == "if_statement" else None
                if conseq is None or s.child_by_field_name("alternative") is not None:
                    continue
                leaves = [c.type for c in statements(conseq)]
                if leaves != ["return_statement"] and (
                    leaves != ["continue_statement"] or block == view.body
                ):
                    continue
                clause = s.child_by_field_name("condition")
                value = clause.child_by_field_name("value") if clause else None
                out += [(t, True) for t in split(view, value, "||")]
        child = block
    return out


def facts_at(view: KernelView, expand: Expander, node: Node) -> list[Poly]:
    """What holds where ``node`` runs, as polynomials ``q >= 0``: the thread's global indices,
    the comparisons of :func:`guards`, and ``d - 1 >= 0`` from ``d != 0`` with ``d >= 0`` known
    (``x != 0`` in the ``else`` of ``x == 0 || ...``)."""
    facts = [global_index("x"), global_index("y")]  # thread positions are never negative
    held = guards(view, node)
    facts += [q for t, neg in held if (q := at_least_zero(expand, view, t, neg)) is not None]
    unequal = [d for t, neg in held if (d := different(expand, view, t, neg)) is not None]
    signed = [side for d in unequal for side in (d, poly_add({}, d, -1))]
    return facts + [poly_add(side, {(): -1}) for side in signed if side in facts]


def upper_bound(q: Poly, pos: Poly) -> str:
    """``B`` when the fact ``q >= 0`` gives ``pos < B`` for a single atom ``B`` ("" otherwise)."""
    bound = poly_add(poly_add(q, pos), {(): 1})  # pos < bound
    over = bound.pop((), 0)
    (mono, coeff), *more = list(bound.items()) or [((), 0)]
    return mono[0] if over <= 0 and not more and coeff == 1 and len(mono) == 1 else ""


def at_problems(
    view: KernelView, block: tuple[int, ...] | None = None
) -> list[tuple[Launch, dict[str, float]]]:
    """The launch and the scalar parameters' values at every problem of the spec (its benchmark
    and verify sizes), ``block`` overriding the spec's block (raises InvalidSpec)."""
    spec = view.subject.spec
    out = []
    for sizes in (bench_sizes(spec), *verify_sizes(spec)):
        p = problem(spec, sizes, block)
        out.append((p.launch, {a.name: a.value for a in p.args if a.role == "scalar"}))
    return out


def value(p: Poly, env: dict[str, float]) -> float | None:
    """``p`` at the scalar parameters' values ``env`` (None where it has another atom)."""
    total = 0.0
    for mono, c in p.items():
        term = float(c)
        for atom in mono:
            if atom not in env:
                return None
            term *= env[atom]
        total += term
    return total


def stores_kept(view: KernelView, expand: Expander, block: tuple[int, int]) -> str:
    """Why launching with the 2-D ``block`` (the spec's grid over it) could change which threads
    store to global memory ("" when it cannot).  Along each axis whose block size changes, every
    store must be guarded by ``g < B`` (``g`` the thread's global index along it, ``B`` over scalar
    parameters) with ``B`` at most the threads both launches run along it at every problem of the
    spec: the threads past ``B`` store nothing, so the ones that store are the original's.  An
    unguarded store (``out[y * w + x] = ...``, the grid covering the image exactly) keeps no store
    the same under a block that overhangs the image."""
    try:
        pairs = list(zip(at_problems(view), at_problems(view, block), strict=True))
    except InvalidSpec as e:
        return f"the spec does not resolve with a {block[0]}x{block[1]} block: {e}"
    stores = [
        a.node
        for a in view.accesses
        if (a.written or a.address) and a.array in view.params and view.params[a.array].pointer
    ]
    for k, axis in enumerate("xy"):
        if all(o.block[k] == block[k] for (o, _), _ in pairs):
            continue
        pos = global_index(axis)
        for node in stores:
            limits = [
                poly_add(poly_add(q, pos), {(): 1}) for q in facts_at(view, expand, node)
            ]  # pos < limit
            if not any(
                all(
                    (v := value(limit, env)) is not None
                    and v <= min(o.grid[k] * o.block[k], n.grid[k] * n.block[k])
                    for (o, env), (n, _) in pairs
                )
                for limit in limits
            ):
                return (
                    f"the store `{view.text(node)}` is not bounded along {axis} within the threads both "
                    f"launches run: a {block[0]}x{block[1]} block would store where the original's threads do not"
                )
    return ""


def launch_covers(view: KernelView, axis: str) -> list[str]:
    """The launch's extent along ``axis`` (grid times block) as C expressions over the kernel's
    scalar parameters, each equal to it at the benchmark size and every verify size, so that the
    original's threads along ``axis`` are exactly its range (a kernel with no bounds check): the
    scalar parameters whose value it is (in the spec's order), then the arrays' counts that it is,
    written over the parameters whose spec values name the count's sizes (``w * h`` for ``arg w =
    w`` and ``arg h = h``).  Empty where the spec does not resolve."""
    spec = view.subject.spec
    k = "xyz".index(axis)
    if len(spec.grid) <= k or len(spec.block) <= k:
        return []
    scalars = [
        a.name
        for a in spec.args
        if isinstance(a, ScalarSpec) and a.name in view.params and not view.params[a.name].pointer
    ]
    by_size = {a.value.strip(): a.name for a in spec.args if isinstance(a, ScalarSpec) and a.name in scalars}
    try:
        resolved = [problem(spec, sizes) for sizes in (bench_sizes(spec), *verify_sizes(spec))]
    except InvalidSpec:
        return []
    extents = [p.launch.grid[k] * p.launch.block[k] for p in resolved]
    found = [
        n
        for n in scalars
        if all(
            any(a.name == n and a.value == e for a in p.args) for p, e in zip(resolved, extents, strict=True)
        )
    ]
    for name, array in view.subject.arrays().items():
        try:
            tree = ast.parse(array.count, mode="eval")
        except SyntaxError:
            continue
        names = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
        if not names or any(n.id not in by_size for n in names):
            continue
        counts = [next((a.count for a in p.args if a.name == name), None) for p in resolved]
        if counts != extents:
            continue
        for n in names:
            n.id = by_size[n.id]
        expr = ast.unparse(tree)
        if expr not in found:
            found.append(expr)
    return found
