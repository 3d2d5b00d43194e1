"""The kernel view: what a kernel does, lifted once from its tree-sitter tree, read by every pass.

A :class:`KernelView` is built once per :class:`~engine.Subject` (``subject.view``) and
never changes.  It holds:

- ``loops``: every ``for`` loop (:class:`Loop`): its variable, start, condition (operator and
  bound), constant step, body, enclosing loop, and its *carried* variables — locals declared
  outside the loop and assigned inside it — each with the :class:`Reduction` it performs (``+=``,
  ``-=``, ``*=``, ``v = v + e``, ``fmaxf``/``fminf``/``fmax``/``fmin``/``max``/``min``, or a
  compare-and-keep ``if (e > v) v = e;``) or the reason it is not one;
- ``locals``: every local variable (:class:`Local`) with its type, initial value and whether it is
  assigned again; pointer locals initialised as ``param + offset`` are *aliases*
  (``const float* in = x + (size_t)r * cols;``) resolved to their base array;
- ``accesses``: every subscript (:class:`Access`) with the array it reaches (aliases resolved), its
  index in canonical form (:data:`Poly`: a polynomial over atoms — ``threadIdx.x``, parameters,
  loop variables, uniform quotients — so casts, parentheses and operand order do not matter; the
  alias's offset added), whether it is written, and its innermost loop;
- ``thread_dependent`` / ``block_dependent``: the locals whose values depend on ``threadIdx``
  (differ between the threads of a block) or on ``blockIdx``; everything else is uniform;
- ``barriers``, ``atomics``, ``shuffles``, ``returns``, ``shared``: the nodes of each kind;
- ``identifiers``: every name in use (the emitter's fresh names avoid them).

Passes (see :mod:`engine.passes`) match on the view; they never re-parse text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Generic, Protocol, TypeVar

import tree_sitter

from cudasrc.dtypes import canonical_dtype
from cudasrc.source import Document
from cudasrc.specs import evaluate
from cudasrc.syntax import Kernel
from engine.frontend import Context
from engine.maps import AccessMaps

Node = tree_sitter.Node

# A polynomial: monomial (sorted tuple of atom keys) -> integer coefficient.
Poly = dict[tuple[str, ...], int]
POSITION = ("threadIdx", "blockIdx", "blockDim", "gridDim")
DEPENDENT = "thread:"  # key prefix of atoms that differ between threads (quotients of thread indices)
_THREAD = ("threadIdx.", "blockIdx.x", "blockIdx.y", "blockDim.", "gridDim.", DEPENDENT)
_WIDE = {"size_t", "long", "long long", "int64_t", "ptrdiff_t", "unsigned long", "unsigned long long"}


def walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def statements(node: Node) -> list[Node]:
    """The statements of a compound statement (or the single statement itself), comments skipped."""
    if node.type == "compound_statement":
        return [c for c in node.named_children if c.type != "comment"]
    return [node]


def unparenthesized(node: Node | None) -> Node | None:
    """``node`` without the parentheses around it: ``y[k]`` for ``((y[k]))``."""
    while node is not None and node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def poly_add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
        if out[m] == 0:
            del out[m]
    return out


def poly_mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
            if out[m] == 0:
                del out[m]
    return out


def poly_uniform(p: Poly) -> bool:
    """Whether ``p`` is the same for every thread of a block along x and y (no thread index terms)."""
    return not any(a.startswith(_THREAD) for m in p for a in m)


def poly_render(p: Poly, atoms: dict[str, str], wide: bool) -> str:
    """C text of ``p`` (atoms by their text; ``wide``: each term computed in ``size_t``)."""
    if not p:
        return "0"
    out = ""
    for m, c in sorted(p.items(), key=lambda mc: (-len(mc[0]), mc[0])):
        factors = [atoms.get(a, a) for a in m]
        if wide and factors:
            factors[0] = f"(size_t){factors[0]}"
        if abs(c) != 1 or not factors:
            factors.insert(0, str(abs(c)))
        term = " * ".join(factors)
        out += (f" {'-' if c < 0 else '+'} " if out else "-" if c < 0 else "") + term
    return out


def poly_split(p: Poly, var: str) -> tuple[Poly, Poly]:
    """p = coeff * var + rest, with var at most linear; (coeff, rest) (coeff empty: absent)."""
    coeff: Poly = {}
    rest: Poly = {}
    for m, c in p.items():
        if m.count(var) == 1:
            mm = list(m)
            mm.remove(var)
            coeff[tuple(mm)] = c
        elif var in m:
            return {(): 0}, {}
        else:
            rest[m] = c
    return coeff, rest


def global_index(axis: str) -> Poly:
    """``blockIdx.axis * blockDim.axis + threadIdx.axis``."""
    return {tuple(sorted((f"blockIdx.{axis}", f"blockDim.{axis}"))): 1, (f"threadIdx.{axis}",): 1}


class Analysed(Protocol):
    """What the view reads of a kernel under rewrite (:class:`engine.Subject` is one; a
    protocol, so that this module does not import the one that builds on it)."""

    @property
    def doc(self) -> Document: ...
    @property
    def kernel(self) -> Kernel: ...
    @property
    def body(self) -> Node | None: ...
    @property
    def front(self) -> Context: ...
    @property
    def block(self) -> tuple[str, ...]: ...


S = TypeVar("S", bound=Analysed)


@dataclass
class Expander:
    """Expands expressions through single-assignment locals into polynomials over atoms."""

    subject: Analysed
    defs: dict[str, Node]
    params: set[str]
    atoms: dict[str, str] = field(default_factory=dict)  # atom key -> C text
    wide: bool = False
    stack: set[str] = field(default_factory=set)
    free: frozenset[str] = frozenset()  # names that are atoms of their own (loop variables)
    constants: dict[str, int] = field(default_factory=dict)  # macros, constexprs (the front end)
    scoped: Callable[[Node], Node | None] | None = None  # a use -> the value of its declaration
    block: dict[str, int] = field(default_factory=dict)  # axis -> the block's constant size in force

    def text(self, n: Node) -> str:
        return self.subject.doc.node_text(n)

    def fold(self, p: Poly) -> Poly:
        """``blockIdx.x * 16`` is ``blockIdx.x * blockDim.x`` when the block in force is 16 wide
        (``TILE_DIM`` macros in index arithmetic): the block's constant size folds into blockDim."""
        out: Poly = {}
        for m, c in p.items():
            for axis, size in self.block.items():
                b, d = f"blockIdx.{axis}", f"blockDim.{axis}"
                if b in m and d not in m and size and c % size == 0:
                    m, c = tuple(sorted((*m, d))), c // size
            out[m] = out.get(m, 0) + c
        return {m: c for m, c in out.items() if c}

    def atom(self, key: str, text: str) -> Poly:
        self.atoms[key] = text
        return {(key,): 1}

    def poly(self, n: Node) -> Poly | None:
        t = n.type
        if t == "parenthesized_expression" and n.named_child_count == 1:
            return self.poly(n.named_children[0])
        if t == "cast_expression":
            ty, value = n.child_by_field_name("type"), n.child_by_field_name("value")
            if ty is None or value is None:
                return None
            self.wide |= " ".join(self.text(ty).split()) in _WIDE
            return self.poly(value)
        if t == "number_literal":
            s = self.text(n).rstrip("uUlL")
            if not (s.isdigit() or s.lower().startswith("0x")):
                return None
            return {(): int(s, 0)} if int(s, 0) else {}
        if t == "field_expression":
            s = self.text(n).replace(" ", "")
            return self.atom(s, s) if s.split(".")[0] in POSITION else None
        if t == "identifier":
            name = self.text(n)
            if name in self.free:
                return self.atom(name, name)
            value = self.scoped(n) if self.scoped is not None else self.defs.get(name)
            if value is not None and name not in self.stack:
                self.stack.add(name)
                try:
                    return self.poly(value)
                finally:
                    self.stack.discard(name)
            if name in self.constants:
                return {(): self.constants[name]} if self.constants[name] else {}
            if name in self.params:
                return self.atom(name, name)
            return None
        if t == "unary_expression":
            op, arg = n.child_by_field_name("operator"), n.child_by_field_name("argument")
            p = self.poly(arg) if arg is not None and op is not None else None
            if p is None or op is None:
                return None
            op_text = self.text(op)
            return p if op_text == "+" else ({m: -c for m, c in p.items()} if op_text == "-" else None)
        if t == "binary_expression":
            op, left, right = (n.child_by_field_name(f) for f in ("operator", "left", "right"))
            if op is None or left is None or right is None:
                return None
            o = self.text(op)
            if o in ("+", "-", "*"):
                a, b = self.poly(left), self.poly(right)
                if a is None or b is None:
                    return None
                return self.fold(poly_mul(a, b)) if o == "*" else poly_add(a, b, 1 if o == "+" else -1)
            if o in ("/", "%"):  # quotients are opaque atoms (C / NH; i / W, marked as thread-dependent)
                a, b = self.poly(left), self.poly(right)
                if a is None or b is None:
                    return None
                text = f"(({poly_render(a, self.atoms, False)}) {o} ({poly_render(b, self.atoms, False)}))"
                uniform = poly_uniform(a) and poly_uniform(b)
                return self.atom(text if uniform else DEPENDENT + text, text)
        return None


# --------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Local:
    name: str
    type: str  # the declared type, e.g. "float", "const float*"
    pointer: bool
    decl: Node  # the declaration statement
    value: Node | None  # the initialiser
    reassigned: bool  # assigned again after its declaration


@dataclass(frozen=True)
class Reduction:
    """``var`` combined over a loop's iterations by ``kind`` (``sum``/``prod``/``max``/``min``),
    spelled ``combine`` (``+``, ``*``, a function name such as ``fmaxf``, or ``>``/``<`` for a
    compare-and-keep)."""

    var: str
    kind: str
    combine: str


@dataclass(frozen=True)
class Carried:
    """A local declared outside a loop and assigned inside it."""

    name: str
    reduction: Reduction | None
    reason: str = ""  # why it is not a reduction


@dataclass(frozen=True)
class Loop:
    node: Node
    var: str  # "" when the loop declares no single variable
    start: Node | None
    op: str  # the condition's operator with the variable on the left ("<", "<=", ...)
    bound: Node | None
    step: int | None  # the constant increment, None when it is not one
    body: Node
    parent: Loop | None
    carried: tuple[Carried, ...]


@dataclass(frozen=True)
class Access:
    node: Node  # the subscript_expression
    array: str  # the parameter it reaches (aliases resolved), or the name as written
    via: str  # the name as written
    index: Poly | None  # canonical index into ``array`` (the alias's offset added)
    written: bool  # assigned or incremented
    address: bool  # its address is taken (``&a[i]``)
    loop: Loop | None  # innermost enclosing loop


_MAX = {"fmaxf": "max", "fmax": "max", "max": "max", "fminf": "min", "fmin": "min", "min": "min"}
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}


def written(node: Node) -> bool:
    """Whether ``node`` (an lvalue expression) is assigned, incremented or has its address taken."""
    p = node.parent
    if p is None:
        return False
    if p.type == "assignment_expression" and p.child_by_field_name("left") == node:
        return True
    if p.type == "update_expression":
        return True
    return p.type == "pointer_expression" and p.children[0].type == "&"


class KernelView(Generic[S]):
    """The read-only analysis of one kernel definition (see the module docstring); ``subject`` is
    what it was built from."""

    def __init__(self, subject: S) -> None:
        self.subject: S = subject
        self.kernel = subject.kernel
        body = subject.body
        if body is None:
            raise ValueError("the kernel has no body")
        self.body: Node = body
        self.params = {p.name: p for p in self.kernel.params}
        self.front = subject.front
        self.declarations: dict[str, tuple[Local, ...]] = {}
        self.nodes: tuple[Node, ...] = tuple(walk(body))
        self.identifiers: frozenset[str] = frozenset(
            self.text(n)
            for n in walk(subject.doc.tree.root_node)
            if n.type in ("identifier", "field_identifier", "type_identifier")
        )
        self.locals = self._locals()
        self.barriers = self._barriers()
        self.atomics = self._calls(("atomic",))
        self.shuffles = self._calls(("__shfl",))
        self.returns = tuple(n for n in self.nodes if n.type == "return_statement")
        self.shared = tuple(
            n
            for n in self.nodes
            if n.type == "declaration" and ("__shared__" in self.tokens(n) or self._wraps_shared(n))
        )
        self.loops = self._loops()
        self.thread_dependent = self._tainted(("threadIdx",))
        self.block_dependent = self._tainted(("blockIdx",))

    @property
    def cooperation(self) -> str:
        """How the kernel's threads already cooperate (shared memory, barriers, atomics, warp
        shuffles), the first found, or "" when they do not: passes that give a thread's work to
        a group of threads refuse such kernels."""
        return self.cooperation_besides()

    def cooperation_besides(self, *allowed: str) -> str:
        """:attr:`cooperation` other than the kinds ``allowed`` (e.g. "atomics", for a pass that
        checks the kernel's atomics itself)."""
        for what, nodes in (
            ("shared memory", self.shared),
            ("barriers", self.barriers),
            ("atomics", self.atomics),
            ("warp shuffles", self.shuffles),
        ):
            if nodes and what not in allowed:
                return what
        return ""

    # ----------------------------------------------------------------------- basics

    def text(self, node: Node) -> str:
        return self.subject.doc.node_text(node)

    def tokens(self, node: Node) -> tuple[str, ...]:
        """``node``'s leaf tokens: equal for expressions that differ only in spacing or comments."""
        return tuple(self.text(n) for n in walk(node) if n.child_count == 0 and n.type != "comment")

    def names(self, node: Node) -> set[str]:
        return {self.text(n) for n in walk(node) if n.type == "identifier"}

    def positions(self, node: Node) -> set[str]:
        """The built-in position fields (``threadIdx.x``, ``blockDim.x`` ...) ``node`` reads."""
        out = set()
        for n in walk(node):
            if n.type == "field_expression":
                arg = n.child_by_field_name("argument")
                if arg is not None and self.text(arg) in POSITION:
                    out.add(self.text(n).replace(" ", ""))
        return out

    def _barriers(self) -> tuple[Node, ...]:
        """Barrier calls in every spelling: ``__syncthreads()``, ``__syncwarp()``,
        ``__threadfence()``, ``cg::sync(g)``, ``g.sync()``, ``this_thread_block().sync()``."""
        out = []
        for n in self.nodes:
            fn = n.child_by_field_name("function") if n.type == "call_expression" else None
            if fn is None:
                continue
            name = self.text(fn)
            if fn.type == "field_expression":
                field_node = fn.child_by_field_name("field")
                name = self.text(field_node) if field_node is not None else ""
            elif fn.type == "qualified_identifier":
                name = self.text(fn).split("::")[-1].strip()
            if name.startswith(("__syncthreads", "__syncwarp", "__threadfence")) or name == "sync":
                out.append(n)
        return tuple(out)

    def block_barrier(self, node: Node) -> bool:
        """Whether ``node`` (a statement or a call) is a barrier of the whole block:
        ``__syncthreads()``, or ``sync`` of a cooperative-groups thread block (``cta.sync()``,
        ``cg::sync(cta)``, ``this_thread_block().sync()``; not a tile's)."""
        if node.type == "expression_statement" and node.named_child_count == 1:
            node = node.named_children[0]
        if node not in self.barriers:
            return False
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        if fn is None:
            return False
        if fn.type == "identifier":
            return self.text(fn) == "__syncthreads"
        group = fn.child_by_field_name("argument") if fn.type == "field_expression" else None
        if fn.type == "qualified_identifier" and args is not None and args.named_child_count == 1:
            group = args.named_children[0]
        if group is None:
            return False
        if group.type == "call_expression":
            return self.tokens(group.child_by_field_name("function") or group)[-1:] == ("this_thread_block",)
        loc = self.locals.get(self.text(group)) if group.type == "identifier" else None
        words = loc.type.replace("::", " ").split() if loc is not None else []
        return "thread_block" in words or (
            loc is not None and loc.value is not None and "this_thread_block" in self.tokens(loc.value)
        )

    def _wraps_shared(self, decl: Node) -> bool:
        """``T* s = SharedMemory<T>();``: a pointer into dynamic shared memory through a wrapper
        of ``extern __shared__`` the unit defines (the front end knows them by name)."""
        for d in decl.children_by_field_name("declarator"):
            v = unparenthesized(d.child_by_field_name("value")) if d.type == "init_declarator" else None
            while v is not None and v.type == "cast_expression":
                v = unparenthesized(v.child_by_field_name("value"))
            fn = v.child_by_field_name("function") if v is not None and v.type == "call_expression" else None
            if fn is not None and fn.type == "template_function":
                fn = fn.child_by_field_name("name")
            if fn is not None and self.text(fn) in self.front.shared_wrappers:
                return True
        return False

    def atomic_target(self, address: Node, bare: bool = False) -> Node | None:
        """The array's name node in an atomic's address: ``&H[k]``, ``&(H[k])``, ``H + k``, ``k + H``
        (and a bare ``H`` when ``bare``)."""
        a = unparenthesized(address)
        if bare and a is not None and a.type == "identifier":
            return a
        if a is not None and a.type == "pointer_expression" and a.children[0].type == "&":
            sub = unparenthesized(a.child_by_field_name("argument"))
            base = (
                sub.child_by_field_name("argument")
                if sub is not None and sub.type == "subscript_expression"
                else None
            )
            return base if base is not None and base.type == "identifier" else None
        if a is not None and a.type == "binary_expression" and self.text(a.children[1]) == "+":
            sides = [unparenthesized(a.child_by_field_name(f)) for f in ("left", "right")]
            arrays = [
                x for x in sides if x is not None and x.type == "identifier" and self.params.get(self.text(x))
            ]
            pointers = [x for x in arrays if self.params[self.text(x)].pointer == 1]
            return pointers[0] if len(pointers) == 1 else None
        return None

    def element_type(self, name: str) -> str:
        """The canonical element type of the array (or the type of the scalar) ``name`` — a
        parameter or a local — with aliases and template parameters resolved and qualifiers
        dropped: ``const floatX* __restrict__ x`` -> ``__nv_bfloat16``; "" when unknown."""
        p = self.params.get(name)
        if p is not None:
            return self.front.canonical(p.base_type)
        loc = self.locals.get(name)
        return self.front.canonical(loc.type) if loc is not None else ""

    def dtype(self, name: str) -> str | None:
        """The canonical dtype (``float32``, ``bfloat16`` ...) of :meth:`element_type`."""
        return canonical_dtype(self.element_type(name))

    def _calls(self, prefixes: tuple[str, ...]) -> tuple[Node, ...]:
        out = []
        for n in self.nodes:
            fn = n.child_by_field_name("function") if n.type == "call_expression" else None
            if fn is not None and self.text(fn).startswith(prefixes):
                out.append(n)
        return tuple(out)

    # ----------------------------------------------------------------------- locals

    def _locals(self) -> dict[str, Local]:
        """Every declaration (``self.declarations``, by name, in order; each scope's variable is
        its own: ``int i = ...;`` in two sibling loops are two single-assignment variables) and,
        by name, the one local of a name declared once (a name declared more than once counts
        as reassigned there: read such names through :meth:`declaration_of`)."""
        found: dict[str, list[Local]] = {}
        for n in self.nodes:
            if n.type != "declaration":
                continue
            ty = n.child_by_field_name("type")
            qual = " ".join(self.text(c) for c in n.children if c.type == "type_qualifier")
            for d in n.children_by_field_name("declarator"):
                value = d.child_by_field_name("value") if d.type == "init_declarator" else None
                name_node = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
                pointer = name_node is not None and name_node.type == "pointer_declarator"
                while name_node is not None and name_node.type == "pointer_declarator":
                    name_node = name_node.child_by_field_name("declarator")
                if name_node is None or name_node.type != "identifier" or ty is None:
                    continue
                name = self.text(name_node)
                type_text = f"{qual} {self.text(ty)}".strip() + ("*" if pointer else "")
                found.setdefault(name, []).append(Local(name, type_text, pointer, n, value, False))
        self.declarations = {k: tuple(v) for k, v in found.items()}
        assigned: set[int] = set()  # ids of the declarations assigned again
        for n in self.nodes:
            if n.type in ("assignment_expression", "update_expression"):
                target = unparenthesized(n.child_by_field_name("left") or n.child_by_field_name("argument"))
                if target is not None and target.type == "identifier":
                    declared = self.declaration_of(target)
                    if declared is not None:
                        assigned.add(declared.decl.id)
        self.declarations = {
            k: tuple(replace(loc, reassigned=loc.decl.id in assigned) for loc in v) for k, v in found.items()
        }
        return {
            k: v[0] if len(v) == 1 else replace(v[0], reassigned=True) for k, v in self.declarations.items()
        }

    @cached_property
    def launch_bounds(self) -> Node | None:
        """The kernel's ``__launch_bounds__(...)`` node, if it has one."""
        span = self.kernel.span
        for n in walk(self.subject.doc.tree.root_node):
            if n.type == "launch_bounds" and span.start_byte <= n.start_byte < self.body.start_byte:
                return n
        return None

    @cached_property
    def block(self) -> dict[str, int]:
        """The block's constant sizes in force, by axis (``{"x": 16, "y": 16}``)."""
        out = {}
        for axis, d in zip("xyz", self.subject.block, strict=False):
            try:
                v = evaluate(d, {})
            except ValueError:
                continue
            if isinstance(v, int) and v > 0:
                out[axis] = v
        return out

    def declaration_of(self, use: Node) -> Local | None:
        """The local an identifier ``use`` names: the innermost declaration in scope before it."""
        best: Local | None = None
        for loc in self.declarations.get(self.text(use), ()):
            scope = loc.decl.parent
            if (
                scope is None
                or loc.decl.start_byte > use.start_byte
                or not (scope.start_byte <= use.start_byte and use.end_byte <= scope.end_byte)
            ):
                continue
            if best is None or (
                best.decl.parent is not None and scope.start_byte >= best.decl.parent.start_byte
            ):
                best = loc
        return best

    def _value_of(self, use: Node) -> Node | None:
        d = self.declaration_of(use)
        return d.value if d is not None and not d.reassigned and not d.pointer else None

    def expander(self, free: frozenset[str] = frozenset()) -> Expander:
        """An expander of index expressions: single-assignment locals are substituted (each use
        by its own declaration's value), scalar parameters and the names in ``free`` (e.g. loop
        variables) are atoms, the unit's integer constants are numbers."""
        defs = {
            n: loc.value
            for n, loc in self.locals.items()
            if loc.value is not None and not loc.reassigned and not loc.pointer
        }
        scalars = {p.name for p in self.kernel.params if p.pointer == 0}
        constants = {
            k: v
            for k, v in self.front.constants.items()
            if k not in self.declarations and k not in self.params
        }
        return Expander(
            self.subject,
            defs,
            scalars,
            free=free,
            constants=constants,
            scoped=self._value_of,
            block=self.block,
        )

    def poly(self, node: Node, free: frozenset[str] = frozenset()) -> Poly | None:
        return self.expander(free).poly(node)

    @cached_property
    def aliases(self) -> dict[str, tuple[str, Poly | None]]:
        """Pointer locals that are ``param + offset`` (or ``&param[offset]``): name -> (param, offset)."""
        out: dict[str, tuple[str, Poly | None]] = {}
        loop_vars = frozenset(lp.var for lp in self.loops if lp.var)
        for name, loc in self.locals.items():
            v = unparenthesized(loc.value)
            if not loc.pointer or loc.reassigned or v is None:
                continue
            base: Node | None = None
            offsets: list[Node | None] = []
            if v.type == "binary_expression" and self.text(v.children[1]) == "+":
                terms = self._sum_terms(v)
                arrays = [t for t in terms if t.type == "identifier" and self._is_array(self.text(t))]
                if len(arrays) == 1:
                    base = arrays[0]
                    offsets = [t for t in terms if t != base]
            elif v.type == "pointer_expression" and v.children[0].type == "&":
                sub = unparenthesized(v.child_by_field_name("argument"))
                if sub is not None and sub.type == "subscript_expression":
                    base = sub.child_by_field_name("argument")
                    offsets = [self._index_node(sub)]
            else:
                base = v
            if base is None or base.type != "identifier" or not self._is_array(self.text(base)):
                continue
            root, prior = self.text(base), self._offset(offsets, loop_vars)
            if root in out:  # an alias of an alias
                root, first = out[root]
                prior = poly_add(first, prior) if first is not None and prior is not None else None
            out[name] = (root, prior)
        return out

    def _sum_terms(self, n: Node) -> list[Node]:
        """The operands of a chain of ``+`` (``a + b + c`` -> [a, b, c])."""
        n = unparenthesized(n) or n
        if n.type == "binary_expression" and self.text(n.children[1]) == "+":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if left is not None and right is not None:
                return self._sum_terms(left) + self._sum_terms(right)
        return [n]

    def _offset(self, terms: list[Node | None], free: frozenset[str]) -> Poly | None:
        total: Poly = {}
        for t in terms:
            p = self.poly(t, free) if t is not None else None
            if p is None:
                return None
            total = poly_add(total, p)
        return total

    def _is_array(self, name: str) -> bool:
        p = self.params.get(name)
        return (p is not None and p.pointer >= 1) or name in self.aliases_seen

    @cached_property
    def aliases_seen(self) -> frozenset[str]:
        return frozenset(n for n, loc in self.locals.items() if loc.pointer)

    @staticmethod
    def _index_node(sub: Node) -> Node | None:
        idx = sub.child_by_field_name("indices")
        if idx is None or idx.named_child_count != 1:
            return None
        return idx.named_children[0]

    # ----------------------------------------------------------------------- loops

    def _loops(self) -> tuple[Loop, ...]:
        out: list[Loop] = []
        by_node: dict[int, Loop] = {}
        for n in self.nodes:  # pre-order: parents first
            if n.type != "for_statement":
                continue
            parent = None
            up = n.parent
            while up is not None and parent is None:
                parent = by_node.get(up.id)
                up = up.parent
            loop = self._loop(n, parent)
            by_node[n.id] = loop
            out.append(loop)
        return tuple(out)

    def _loop(self, n: Node, parent: Loop | None) -> Loop:
        init, cond, update = (n.child_by_field_name(f) for f in ("initializer", "condition", "update"))
        body = n.child_by_field_name("body")
        assert body is not None
        var, start = "", None
        if init is not None and init.type == "declaration":
            decls = init.children_by_field_name("declarator")
            if len(decls) == 1 and decls[0].type == "init_declarator":
                name = decls[0].child_by_field_name("declarator")
                if name is not None and name.type == "identifier":
                    var, start = self.text(name), decls[0].child_by_field_name("value")
        elif init is not None and init.type == "assignment_expression":  # `int i; for (i = 0; ...)`
            lhs, eq = init.child_by_field_name("left"), init.child_by_field_name("operator")
            if lhs is not None and lhs.type == "identifier" and eq is not None and self.text(eq) == "=":
                var, start = self.text(lhs), init.child_by_field_name("right")
        op, bound = "", None
        c = unparenthesized(cond)
        if var and c is not None and c.type == "binary_expression":
            left, right = c.child_by_field_name("left"), c.child_by_field_name("right")
            o = self.text(c.children[1])
            if left is not None and self.text(left) == var and right is not None:
                op, bound = o, right
            elif right is not None and self.text(right) == var and left is not None and o in _FLIP:
                op, bound = _FLIP[o], left
        step: int | None = None
        if var and update is not None:
            target = update.child_by_field_name("left") or update.child_by_field_name("argument")
            if target is not None and self.text(target) == var:
                if update.type == "update_expression":
                    step = 1 if "++" in self.text(update) else -1
                elif update.type == "assignment_expression":
                    right = update.child_by_field_name("right")
                    o = self.text(update.children[1])
                    if right is not None and right.type == "number_literal" and o in ("+=", "-="):
                        try:
                            step = int(self.text(right), 0) * (1 if o == "+=" else -1)
                        except ValueError:
                            step = None
                    elif right is not None and o == "=" and right.type == "binary_expression":
                        a, b = right.child_by_field_name("left"), right.child_by_field_name("right")
                        if (
                            a is not None
                            and b is not None
                            and self.text(a) == var
                            and self.text(right.children[1]) == "+"
                            and self.text(b).isdigit()
                        ):
                            step = int(self.text(b))
        carried = self._carried(n, body, var)
        return Loop(n, var, start, op, bound, step, body, parent, carried)

    def _carried(self, loop: Node, body: Node, var: str) -> tuple[Carried, ...]:
        inside = set()
        for n in walk(body):
            if n.type == "declaration":
                for d in n.children_by_field_name("declarator"):
                    nm = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
                    if nm is not None and nm.type == "identifier":
                        inside.add(self.text(nm))
            if n.type == "for_statement":
                init = n.child_by_field_name("initializer")
                if init is not None and init.type == "declaration":
                    for d in init.children_by_field_name("declarator"):
                        nm = d.child_by_field_name("declarator")
                        if nm is not None:
                            inside.add(self.text(nm))
        targets: dict[str, list[Node]] = {}
        for n in walk(body):
            if n.type in ("assignment_expression", "update_expression"):
                t = n.child_by_field_name("left") or n.child_by_field_name("argument")
                t = unparenthesized(t)
                if (
                    t is not None
                    and t.type == "identifier"
                    and self.text(t) != var
                    and self.text(t) not in inside
                ):
                    targets.setdefault(self.text(t), []).append(n)
        return tuple(self._reduction(name, body, nodes) for name, nodes in targets.items())

    def _reduction(self, name: str, body: Node, updates: list[Node]) -> Carried:
        """Whether every assignment of ``name`` in the loop ``body`` is one reduction step of one
        kind, and ``name`` is read nowhere else in the loop."""
        kinds: set[tuple[str, str]] = set()
        own: set[int] = set()  # the ids of the identifier nodes that belong to the steps
        for u in updates:
            step = self._step(name, u)
            if step is None:
                return Carried(name, None, f"`{self.text(u)}` is not a reduction step")
            kind, combine, nodes = step
            kinds.add((kind, combine))
            own |= {x.id for x in nodes}
        if len(kinds) != 1:
            return Carried(name, None, f"`{name}` is combined in more than one way")
        reads = [n for n in walk(body) if n.type == "identifier" and self.text(n) == name and n.id not in own]
        if reads:
            return Carried(name, None, f"`{name}` is read inside the loop")
        kind, combine = kinds.pop()
        return Carried(name, Reduction(name, kind, combine))

    def _step(self, name: str, u: Node) -> tuple[str, str, list[Node]] | None:
        """(kind, combine, the identifier nodes of ``name`` it uses) for a reduction step ``u``."""
        if u.type != "assignment_expression":
            return None
        left = unparenthesized(u.child_by_field_name("left"))
        right = unparenthesized(u.child_by_field_name("right"))
        o = self.text(u.children[1])
        if left is None or right is None:
            return None
        mine = [left]
        if name in self.names(right) and o != "=":
            return None
        if o in ("+=", "-="):
            kind, combine = "sum", "+"
        elif o == "*=":
            kind, combine = "prod", "*"
        elif o == "=" and right.type == "binary_expression":
            a, b = right.child_by_field_name("left"), right.child_by_field_name("right")
            op = self.text(right.children[1])
            a, b = unparenthesized(a), unparenthesized(b)
            if a is None or b is None or op not in ("+", "*", "-"):
                return None
            if a.type == "identifier" and self.text(a) == name and name not in self.names(b):
                mine.append(a)
            elif b.type == "identifier" and self.text(b) == name and op != "-" and name not in self.names(a):
                mine.append(b)
            else:
                return None
            kind, combine = ("prod", "*") if op == "*" else ("sum", "+")
        elif o == "=" and right.type == "call_expression":
            fn, args = right.child_by_field_name("function"), right.child_by_field_name("arguments")
            if fn is None or args is None or self.text(fn) not in _MAX or args.named_child_count != 2:
                return None
            a, b = (unparenthesized(x) for x in args.named_children)
            if (
                a is not None
                and a.type == "identifier"
                and self.text(a) == name
                and b is not None
                and name not in self.names(b)
            ):
                mine.append(a)
            elif (
                b is not None
                and b.type == "identifier"
                and self.text(b) == name
                and a is not None
                and name not in self.names(a)
            ):
                mine.append(b)
            else:
                return None
            kind, combine = _MAX[self.text(fn)], self.text(fn)
        elif o == "=":
            return self._keep(name, u, left, right)
        else:
            return None
        return kind, combine, mine

    def _keep(self, name: str, u: Node, left: Node, right: Node) -> tuple[str, str, list[Node]] | None:
        """``if (e > v) v = e;`` (or ``v < e``, ``>=``/``<=``; and the min forms)."""
        stmt = u.parent
        if stmt is None or stmt.type != "expression_statement":
            return None
        holder = stmt.parent
        if holder is not None and holder.type == "compound_statement" and len(statements(holder)) == 1:
            holder = holder.parent
        if (
            holder is None
            or holder.type != "if_statement"
            or holder.child_by_field_name("alternative") is not None
        ):
            return None
        clause = holder.child_by_field_name("condition")
        cond = unparenthesized(clause.child_by_field_name("value") if clause is not None else None)
        if cond is None or cond.type != "binary_expression":
            return None
        a, b = (
            unparenthesized(cond.child_by_field_name("left")),
            unparenthesized(cond.child_by_field_name("right")),
        )
        op = self.text(cond.children[1])
        if a is None or b is None or op not in ("<", ">", "<=", ">="):
            return None
        if b.type == "identifier" and self.text(b) == name:
            e, v, rel = a, b, op  # e REL v
        elif a.type == "identifier" and self.text(a) == name:
            e, v, rel = b, a, _FLIP[op]
        else:
            return None
        if self.tokens(e) != self.tokens(right) or name in self.names(e):
            return None
        kind = "max" if rel in (">", ">=") else "min"
        return kind, ">" if kind == "max" else "<", [left, v]

    # ----------------------------------------------------------------------- accesses

    @cached_property
    def accesses(self) -> tuple[Access, ...]:
        loop_vars = frozenset(lp.var for lp in self.loops if lp.var)
        by_node = {lp.node.id: lp for lp in self.loops}
        out = []
        for n in self.nodes:
            if n.type != "subscript_expression":
                continue
            arg = unparenthesized(n.child_by_field_name("argument"))
            if arg is None or arg.type != "identifier":
                continue
            via = self.text(arg)
            idx_node = self._index_node(n)
            index = self.poly(idx_node, loop_vars) if idx_node is not None else None
            array = via
            if via in self.aliases:
                array, offset = self.aliases[via]
                index = poly_add(offset, index) if offset is not None and index is not None else None
            loop = None
            up = n.parent
            while up is not None and loop is None:
                loop = by_node.get(up.id)
                up = up.parent
            address = n.parent is not None and n.parent.type == "pointer_expression"
            out.append(Access(n, array, via, index, written(n) and not address, address, loop))
        return tuple(out)

    # ----------------------------------------------------------------------- uniformity

    def _tainted(self, sources: tuple[str, ...]) -> frozenset[str]:
        """Locals whose value depends on any of the built-ins ``sources`` (directly or through
        other locals, also through assignments after the declaration)."""
        flows: dict[str, list[Node]] = {}
        for n in self.nodes:
            if n.type == "init_declarator":
                nm, v = n.child_by_field_name("declarator"), n.child_by_field_name("value")
                while nm is not None and nm.type == "pointer_declarator":
                    nm = nm.child_by_field_name("declarator")
                if nm is not None and v is not None:
                    flows.setdefault(self.text(nm), []).append(v)
            elif n.type in ("assignment_expression", "update_expression"):
                t = unparenthesized(n.child_by_field_name("left") or n.child_by_field_name("argument"))
                if t is not None and t.type == "identifier":
                    flows.setdefault(self.text(t), []).append(n)
        tainted: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, values in flows.items():
                if name in tainted:
                    continue
                for v in values:
                    if self.names(v) & tainted or any(p.split(".")[0] in sources for p in self.positions(v)):
                        tainted.add(name)
                        changed = True
                        break
        return frozenset(tainted)

    def uniform(self, node: Node) -> bool:
        """Whether ``node`` has the same value in every thread of a block."""
        return not (self.names(node) & self.thread_dependent) and not any(
            p.startswith("threadIdx") for p in self.positions(node)
        )

    @cached_property
    def maps(self) -> AccessMaps:
        """Every access as an integer map at the spec's concrete sizes, and the facts read from
        them (:mod:`engine.maps`)."""
        return AccessMaps(self)

    def loop_of(self, node: Node) -> Loop | None:
        for lp in self.loops:
            if lp.node == node:
                return lp
        return None
