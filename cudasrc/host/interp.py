"""The interpreter: statements and expressions of the host program, run to each kernel launch."""

from __future__ import annotations

import ast
import math
import re
from dataclasses import replace

import tree_sitter

from cudasrc.dtypes import canonical_dtype, dtype_bytes
from cudasrc.host.library import (
    _CDIV,
    _DEVICE,
    _FUNC_ATTRIBUTES,
    _MALLOCS,
    _MATH,
    _PARSERS,
    _RAND_MAX,
    _TENSOR_LIKE,
    _TENSOR_NEW,
    _address_of,
    _buffer,
    _declarator_types,
    _exits,
    _interval,
    _pointer_name,
    _Range,
    number_literal,
)
from cudasrc.host.program import _active, _Budget, _decl_name, _Func, _Program, _Return, _where
from cudasrc.host.values import (
    Buffer,
    CommandLine,
    Dims,
    Draws,
    FuncRef,
    HostRun,
    Items,
    LaunchEvent,
    Num,
    Record,
    Ref,
    Root,
    SymbolCopy,
    Tensor,
    Value,
)
from cudasrc.source import Document
from sandbox.expr import FUNCTIONS, number, operand

_INT_TYPES = re.compile(r"\b(int|long|short|char|unsigned|signed|size_t|ssize_t|u?int\d+_t|uint|auto|dim3)\b")
_FLOAT_TYPES = re.compile(r"\b(float|double|half|__half)\b")
_MAX_DEPTH = 12  # nested calls
_MAX_STEPS = 20000  # statements per run: a hostile program cannot hang the server
_MAX_ITERATIONS = 256  # a loop of a helper run to its end...
_MAX_ITERATION_STEPS = 2000  # ...within this many statements

# ---------------------------------------------------------------------------------------- interpreter


class _Break(Exception):
    pass


def names(expr: str) -> set[str]:
    """The roots a spec expression mentions."""
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return {"?"}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(FUNCTIONS)


class _Interp:
    def __init__(self, prog: _Program, run: HostRun) -> None:
        self.prog = prog
        self.run = run
        self.steps = 0
        self.depth = 0
        self.notes: list[str] = []
        self.exact: bool | str = False  # loops run to the end (True), or those that launch ("launches")
        self.at = ""  # the use of the macro being expanded
        self.globals: dict[str, Value] = {}
        self.draws: dict[str, _Range] = {}  # allocation (Buffer.where) -> what its elements were drawn from
        self._macro_docs: dict[str, tuple[Document, tree_sitter.Node | None]] = {}
        self._macro_roots: dict[str, Value] = {}
        for doc, node in prog.globals:
            try:
                self.stmt(doc, node, [self.globals])
            except (_Return, _Break, _Budget, RecursionError):
                continue

    # ------------------------------------------------------------------ values

    def where(self, doc: Document, node: tree_sitter.Node) -> str:
        """file:line of ``node``; inside a macro's expansion, of the macro's use."""
        return self.at or _where(doc, node)

    def value_of(self, expr: str) -> int | float | None:
        try:
            return number(expr, self.run.env(), finite=False)
        except ValueError:
            return None

    def literal(self, num: Num) -> Num:
        v = self.value_of(num.expr)
        if v is None:
            return num
        return Num(repr(float(v)) if num.is_float or isinstance(v, float) else str(v), is_float=num.is_float)

    def root(self, name: str, num: Num, where: str, symbol: str = "") -> Num:
        unique, k = name, 1
        while unique in self.run.roots and self.run.roots[unique].where != where:
            k += 1
            unique = f"{name}_{k}"
        self.run.roots.setdefault(unique, Root(unique, num.expr, where, symbol))
        return Num(unique)

    def require(self, condition: str, where: str) -> None:
        """A condition the program checks on its sizes (an ``assert``, an ``if`` that exits)."""
        if names(condition) and self.value_of(condition):
            self.run.requires.setdefault(condition, where)

    def bytes_of(self, type_text: str) -> int | None:
        t = type_text.strip()
        if t.endswith("*"):
            return 8
        dtype = canonical_dtype(t, self.prog.aliases)
        return dtype_bytes(dtype) if dtype is not None else None

    # ------------------------------------------------------------------ statements

    def block(self, doc: Document, nodes: list[tree_sitter.Node], scopes: list[dict[str, Value]]) -> None:
        for node in _active(doc, nodes, self.prog):
            self.stmt(doc, node, scopes)

    def stmt(self, doc: Document, node: tree_sitter.Node, scopes: list[dict[str, Value]]) -> None:
        self.steps += 1
        if self.steps > _MAX_STEPS:
            raise _Budget
        t = node.type
        if t == "compound_statement":
            self.block(doc, node.named_children, [*scopes, {}])
        elif t == "declaration":
            self.declare(doc, node, scopes)
        elif t == "expression_statement":
            if node.named_children:
                self.expr(doc, node.named_children[0], scopes)
        elif t == "return_statement":
            raise _Return(self.expr(doc, node.named_children[0], scopes) if node.named_children else None)
        elif t == "break_statement":
            raise _Break
        elif t == "if_statement":
            cond = node.child_by_field_name("condition")
            value = cond.child_by_field_name("value") if cond is not None else None
            then, other = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
            cond_value = self.expr(doc, value, scopes) if value is not None else Num("1")
            known = self.value_of(cond_value.expr) if isinstance(cond_value, Num) else None
            truth = None if known is None else bool(known)
            if isinstance(cond_value, Num) and then is not None and _exits(doc, then):
                self.require(f"not {operand(cond_value.expr)}", self.where(doc, node))
            branches = [then] if truth is True else [other] if truth is False else [then, other]
            if truth is None:
                self.notes.append(f"both branches of the `if` at {self.where(doc, node)} (condition unknown)")
            for b in branches:
                if b is not None:
                    try:
                        self.stmt(doc, b.named_children[-1] if b.type == "else_clause" else b, scopes)
                    except _Return:
                        if truth is not None:
                            raise
            if truth is None:
                self.notes.pop()
        elif t in ("for_statement", "while_statement", "do_statement", "for_range_loop"):
            inner = [*scopes, {}]
            init = node.child_by_field_name("initializer")
            if init is not None:
                self.stmt(doc, init, inner) if init.type == "declaration" else self.expr(doc, init, inner)
            cond = node.child_by_field_name("condition")
            if t == "while_statement" and cond is not None:
                cond = cond.child_by_field_name("value")
            if t != "do_statement" and self.truth(doc, cond, inner) is False:
                return
            self.notes.append(f"the first iteration of the loop at {self.where(doc, node)}")
            try:
                if (
                    self.exact
                    and t in ("for_statement", "while_statement")
                    and (self.exact is True or "<<<" in doc.node_text(node))
                    and self.iterate(doc, node, cond, inner)
                ):
                    return
                body = node.child_by_field_name("body")
                if body is not None:
                    self.stmt(doc, body, inner)
            except _Break:
                pass
            finally:
                self.notes.pop()
        elif t == "switch_statement":
            self.switch(doc, node, scopes)
        elif t in ("preproc_if", "preproc_ifdef"):
            self.block(doc, [node], scopes)
        elif t == "labeled_statement" or t == "case_statement":
            self.block(
                doc,
                [c for c in node.named_children if c.type.endswith("statement") or c.type == "declaration"],
                scopes,
            )

    def iterate(
        self,
        doc: Document,
        loop: tree_sitter.Node,
        cond: tree_sitter.Node | None,
        scopes: list[dict[str, Value]],
    ) -> bool:
        """Run a loop whose condition stays known to its end (at most :data:`_MAX_ITERATIONS`
        times), each value folded to a number; False (nothing changed) when it cannot."""
        body = loop.child_by_field_name("body")
        update = loop.child_by_field_name("update")
        snapshot = [dict(s) for s in scopes]
        start = self.steps
        for _ in range(_MAX_ITERATIONS):
            if self.truth(doc, cond, scopes) is not True:
                break
            if self.steps - start > _MAX_ITERATION_STEPS:  # too long to follow: back to one iteration
                break
            try:
                if body is not None:
                    self.stmt(doc, body, scopes)
            except _Break:
                return True
            if update is not None:
                self.expr(doc, update, scopes)
            for scope in scopes:
                for k, v in scope.items():
                    if isinstance(v, Num) and not v.is_float and self.value_of(v.expr) is not None:
                        scope[k] = self.literal(v)
        if self.truth(doc, cond, scopes) is False:
            return True
        for scope, saved in zip(scopes, snapshot, strict=True):
            scope.clear()
            scope.update(saved)
        return False

    def truth(
        self, doc: Document, node: tree_sitter.Node | None, scopes: list[dict[str, Value]]
    ) -> bool | None:
        if node is None:
            return True
        v = self.expr(doc, node, scopes)
        if isinstance(v, Num):
            value = self.value_of(v.expr)
            return None if value is None else bool(value)
        return None

    def switch(self, doc: Document, node: tree_sitter.Node, scopes: list[dict[str, Value]]) -> None:
        cond = node.child_by_field_name("condition")
        value = self.expr(doc, cond.child_by_field_name("value"), scopes) if cond is not None else None
        target = self.value_of(value.expr) if isinstance(value, Num) else None
        body = node.child_by_field_name("body")
        cases = [c for c in (body.named_children if body is not None else ()) if c.type == "case_statement"]
        start = None
        for i, c in enumerate(cases):
            v = c.child_by_field_name("value")
            if v is None:
                start = i if start is None else start
                continue
            got = self.expr(doc, v, scopes)
            if target is None or (isinstance(got, Num) and self.value_of(got.expr) == target):
                start = i
                break
        if start is None:
            return
        try:
            for c in cases[start:]:
                stmts = [s for s in c.named_children if s != c.child_by_field_name("value")]
                self.block(doc, stmts, scopes)
        except _Break:
            pass

    def declare(self, doc: Document, node: tree_sitter.Node, scopes: list[dict[str, Value]]) -> None:
        type_node = node.child_by_field_name("type")
        type_text = doc.node_text(type_node) if type_node is not None else ""
        is_int = bool(_INT_TYPES.search(type_text)) and not _FLOAT_TYPES.search(type_text)
        is_float = bool(_FLOAT_TYPES.search(type_text))
        for d in node.children_by_field_name("declarator"):
            pointer = "pointer_declarator" in _declarator_types(d)
            name = _decl_name(doc, d)
            value: Value = None
            where = self.where(doc, d)
            if d.type == "init_declarator":
                v = d.child_by_field_name("value")
                inner = d.child_by_field_name("declarator")
                if v is None:
                    pass
                elif v.type == "argument_list" or (v.type == "initializer_list" and "dim3" in type_text):
                    value = self.construct(
                        type_text, [self.expr(doc, a, scopes) for a in v.named_children], where
                    )
                elif v.type == "initializer_list":
                    value = Items(tuple(self.expr(doc, a, scopes) for a in v.named_children))
                else:
                    value = self.expr(doc, v, scopes)
                if inner is not None and inner.type == "array_declarator" and not isinstance(value, Items):
                    value = None
            elif (
                d.type == "function_declarator"
                and node.parent is not None
                and node.parent.type != "translation_unit"
            ):
                # `dim3 t(X, Y);` / `std::vector<char> v(n);` in a body parse as function declarations
                plist = d.child_by_field_name("parameters")
                texts = [doc.node_text(p) for p in (plist.named_children if plist is not None else ())]
                value = self.construct(type_text, [self.macro_text(x, scopes) for x in texts], where)
            elif d.type == "identifier" and "dim3" in type_text:  # `dim3 grid;`: (1, 1, 1)
                value = Dims((Num("1"), Num("1"), Num("1")))
            elif d.type == "array_declarator":
                size = d.child_by_field_name("size")
                count = self.expr(doc, size, scopes) if size is not None else None
                if isinstance(count, Num):
                    value = Buffer(
                        count.expr, self.bytes_of(type_text.replace("__constant__", "")) or 4, where
                    )
            if isinstance(value, Num) and not pointer:
                if is_float or (not is_int and value.is_float):
                    value = self.literal(Num(value.expr, is_float=True))
                elif is_int and not names(value.expr) and value.expr:
                    value = self.root(name, value, where, symbol=name if scopes[-1] is self.globals else "")
            elif isinstance(value, Dims):
                value = Dims(
                    tuple(
                        self.root(f"{name}__{axis}", n, where) if n is not None and not names(n.expr) else n
                        for axis, n in zip("xyz", value.dims, strict=False)
                    )
                )
            struct = self.prog.structs.get(type_text.replace("struct ", "").replace("const ", "").strip())
            if struct is not None and not pointer and (d.type == "identifier" or isinstance(value, Items)):
                init = d.child_by_field_name("value") if d.type == "init_declarator" else None
                value = self.record(struct, doc, init, scopes, where)
            if name:
                scopes[-1][name] = value

    def record(
        self,
        struct: tuple[Document, tuple[tuple[str, tree_sitter.Node | None], ...]],
        doc: Document,
        init: tree_sitter.Node | None,
        scopes: list[dict[str, Value]],
        where: str,
    ) -> Record:
        """A struct variable (``Config cfg = {1 << 20, 256};``, ``Config cfg{.n = 4096};``,
        ``Config cfg;`` of default member initialisers): its number fields, each integer
        constant a root named after its field."""
        sdoc, fields = struct
        values = {f: self.expr(sdoc, default, [{}]) for f, default in fields}
        items = init.named_children if init is not None and init.type == "initializer_list" else []
        for (f, _), item in zip(fields, [c for c in items if c.type != "initializer_pair"], strict=False):
            values[f] = self.expr(doc, item, scopes)
        for pair in (c for c in items if c.type == "initializer_pair"):
            designator = pair.child_by_field_name("designator")
            f = doc.node_text(designator).lstrip(".").strip() if designator is not None else ""
            if f in values:
                values[f] = self.expr(doc, pair.child_by_field_name("value"), scopes)
        return Record(
            tuple(
                (f, self.root(f, v, where) if not v.is_float and v.expr and not names(v.expr) else v)
                for f, v in values.items()
                if isinstance(v, Num)
            )
        )

    def construct(self, type_text: str, args: list[Value], where: str) -> Value:
        """``T name(args)``: a dim3, a std::vector (a buffer), a ``<random>`` distribution, or a
        copy of the one argument."""
        if "uniform_real_distribution" in type_text or "uniform_int_distribution" in type_text:
            bounds = [self.value_of(a.expr) if isinstance(a, Num) else None for a in args]
            if len(bounds) != 2 or bounds[0] is None or bounds[1] is None:
                return None
            return Draws(float(bounds[0]), float(bounds[1]), "uniform_int" in type_text)
        if "dim3" in type_text:
            return Dims(tuple(a if isinstance(a, Num) else None for a in args[:3]))
        if "vector" in type_text:
            targ = re.search(r"<\s*([^>]+?)\s*>", type_text)
            elem = self.bytes_of(targ[1]) if targ else None
            return Buffer(args[0].expr, elem, where) if args and isinstance(args[0], Num) and elem else None
        return args[0] if len(args) == 1 else None

    # ------------------------------------------------------------------ expressions

    def lookup(self, name: str, scopes: list[dict[str, Value]]) -> tuple[bool, Value]:
        for scope in reversed(scopes):
            if name in scope:
                return True, scope[name]
        if name in self.globals:
            return True, self.globals[name]
        return False, None

    def assign(self, name: str, value: Value, scopes: list[dict[str, Value]]) -> None:
        for scope in (*reversed(scopes), self.globals):
            if name in scope:
                scope[name] = value
                return

    def expr(self, doc: Document, node: tree_sitter.Node | None, scopes: list[dict[str, Value]]) -> Value:
        if node is None:
            return None
        t = node.type
        if t == "number_literal":
            return number_literal(doc.node_text(node))
        if t in ("true", "false"):
            return Num("1" if t == "true" else "0")
        if t in ("null", "nullptr"):
            return None
        if t in ("identifier", "qualified_identifier"):
            name = doc.node_text(node).split("::")[-1]
            found, value = self.lookup(name, scopes)
            if found:
                return value
            if name in self.prog.kernels and name not in self.prog.macros:
                return FuncRef(name)
            return self.macro(name, (), scopes, self.where(doc, node))
        if t == "template_function":  # `kernel<float, 128>` as a value
            name_node = node.child_by_field_name("name")
            name = doc.node_text(name_node if name_node is not None else node).split("::")[-1]
            if name not in self.prog.kernels:
                return None
            return FuncRef(name, self.template_args(doc, node.child_by_field_name("arguments"), scopes))
        if t == "pointer_expression" and doc.node_text(node).lstrip().startswith("&"):
            var = node.child_by_field_name("argument")
            pointee = self.expr(doc, var, scopes)
            if isinstance(pointee, FuncRef):
                return pointee
            scope = self.scope_of(doc.node_text(var), scopes) if var is not None else None
            return Ref(scope, doc.node_text(var)) if scope is not None and var is not None else None
        if t == "pointer_expression":  # `*p` of `&x`: x
            ref = self.expr(doc, node.child_by_field_name("argument"), scopes)
            return ref.scope.get(ref.name) if isinstance(ref, Ref) else None
        if t == "parenthesized_expression":
            inner = self.expr(doc, node.named_children[0] if node.named_children else None, scopes)
            return Num(operand(inner.expr), inner.sized, inner.is_float) if isinstance(inner, Num) else inner
        if t == "binary_expression":
            return self.binary(doc, node, scopes)
        if t == "sizeof_expression":
            type_node = node.child_by_field_name("type") or node.child_by_field_name("value")
            if type_node is None:
                return None
            k = self.bytes_of(doc.node_text(type_node).strip("() "))
            return Num(str(k), ("1", k)) if k else None
        if t == "cast_expression":
            value = self.expr(doc, node.child_by_field_name("value"), scopes)
            type_node = node.child_by_field_name("type")
            target = doc.node_text(type_node) if type_node is not None else ""
            if isinstance(value, Num) and "*" not in target:
                if _FLOAT_TYPES.search(target):
                    return Num(value.expr, value.sized, True)
                known = self.value_of(value.expr) if value.is_float else None
                if isinstance(known, float) and math.isfinite(known):  # `(int)floor(x)`: truncated
                    return Num(str(int(known)))
                return Num(value.expr, value.sized, False)
            return value
        if t == "conditional_expression":
            truth = self.truth(doc, node.child_by_field_name("condition"), scopes)
            pick = "alternative" if truth is False else "consequence"
            return self.expr(doc, node.child_by_field_name(pick), scopes)
        if t == "unary_expression":
            arg = self.expr(doc, node.child_by_field_name("argument"), scopes)
            op = doc.node_text(node.child_by_field_name("operator") or node)
            if isinstance(arg, Num) and op in ("-", "+"):
                return Num(f"{op}{operand(arg.expr)}", None, arg.is_float)
            if isinstance(arg, Num) and op == "!":
                return Num(f"not {operand(arg.expr)}") if self.value_of(arg.expr) is not None else None
            return None
        if t == "field_expression":
            base = self.expr(doc, node.child_by_field_name("argument"), scopes)
            fld = doc.node_text(node.child_by_field_name("field") or node)
            if isinstance(base, Dims) and fld in ("x", "y", "z"):
                i = "xyz".index(fld)
                return base.dims[i] if i < len(base.dims) else Num("1")
            if isinstance(base, Record):
                return dict(base.fields).get(fld)
            return None
        if t == "subscript_expression":
            base = self.expr(doc, node.child_by_field_name("argument"), scopes)
            indices = node.child_by_field_name("indices")
            index = self.expr(
                doc,
                indices.named_children[0] if indices is not None and indices.named_children else None,
                scopes,
            )
            if isinstance(base, CommandLine) and isinstance(index, Num):  # argv[i]
                position = self.value_of(index.expr)
                if isinstance(position, int) and 1 <= position <= len(base.args):
                    return number_literal(base.args[position - 1].removeprefix("+"))
                return None
            if isinstance(base, Items) and isinstance(index, Num):
                position = self.value_of(index.expr)
                if isinstance(position, int) and 0 <= position < len(base.items):
                    return base.items[position]
            return None
        if t == "assignment_expression":
            return self.assignment(doc, node, scopes)
        if t == "new_expression":
            type_node = node.child_by_field_name("type")
            decl = node.child_by_field_name("declarator")
            length = decl.child_by_field_name("length") if decl is not None else None
            count = self.expr(doc, length, scopes)
            k = self.bytes_of(doc.node_text(type_node)) if type_node is not None else None
            return Buffer(count.expr, k, self.where(doc, node)) if isinstance(count, Num) and k else None
        if t == "initializer_list":
            return Items(tuple(self.expr(doc, a, scopes) for a in node.named_children))
        if t == "comma_expression":
            self.expr(doc, node.child_by_field_name("left"), scopes)
            return self.expr(doc, node.child_by_field_name("right"), scopes)
        if t == "call_expression":
            return self.call_expr(doc, node, scopes)
        return None

    def assignment(self, doc: Document, node: tree_sitter.Node, scopes: list[dict[str, Value]]) -> Value:
        left = node.child_by_field_name("left")
        op = doc.node_text(node.child_by_field_name("operator") or node)
        value = self.expr(doc, node.child_by_field_name("right"), scopes)
        if left is not None and left.type in ("subscript_expression", "pointer_expression") and op == "=":
            self.element_store(doc, left, node.child_by_field_name("right"), scopes)
        if left is not None and left.type == "field_expression" and op == "=":  # `block.x = 32`
            self.field_store(doc, left, value, scopes)
        if left is not None and left.type == "pointer_expression" and op == "=":  # `*result = v`
            ref = self.expr(doc, left.child_by_field_name("argument"), scopes)
            if isinstance(ref, Ref):
                ref.scope[ref.name] = value
        if left is None or left.type != "identifier":
            return value
        name = doc.node_text(left)
        if op != "=":
            _, old = self.lookup(name, scopes)
            value = self.arith(old, op[:-1], value)
        self.assign(name, value, scopes)
        return value

    def field_store(
        self, doc: Document, left: tree_sitter.Node, value: Value, scopes: list[dict[str, Value]]
    ) -> None:
        """``d.x = v`` of a ``dim3`` variable ``d``, ``cfg.n = v`` of a struct ``cfg``."""
        base = left.child_by_field_name("argument")
        fld = doc.node_text(left.child_by_field_name("field") or left)
        name = doc.node_text(base) if base is not None and base.type == "identifier" else ""
        found, dims = self.lookup(name, scopes) if name else (False, None)
        if found and isinstance(dims, Record):
            kept = tuple((f, v) for f, v in dims.fields if f != fld)
            self.assign(name, Record((*kept, (fld, value)) if isinstance(value, Num) else kept), scopes)
            return
        if not found or not isinstance(dims, Dims) or fld not in ("x", "y", "z"):
            return
        i = "xyz".index(fld)
        padded = (*dims.dims, *(Num("1"),) * (3 - len(dims.dims)))
        new = Dims((*padded[:i], value if isinstance(value, Num) else None, *padded[i + 1 :]))
        self.assign(name, new, scopes)

    def scope_of(self, name: str, scopes: list[dict[str, Value]]) -> dict[str, Value] | None:
        """The scope that holds variable ``name``."""
        return next((s for s in (*reversed(scopes), self.globals) if name in s), None)

    def element_store(
        self,
        doc: Document,
        left: tree_sitter.Node,
        right: tree_sitter.Node | None,
        scopes: list[dict[str, Value]],
    ) -> None:
        """``a[i] = v`` or ``*p = v`` into a buffer: its elements are drawn from the range of ``v``
        (widened over every such store the run executes); ``a[k] = k``, each element its own
        index (``h[j*nx + i] = j*nx + i``), is an ``arange``."""
        base = left.child_by_field_name("argument")
        buf = self.expr(doc, base, scopes) if base is not None else None
        if not isinstance(buf, Buffer):
            return
        drawn = self.drawn(doc, right, scopes)
        indices = left.child_by_field_name("indices") if left.type == "subscript_expression" else None
        if indices is not None and indices.named_children and buf.offset == "0":
            index, stored = self.expr(doc, indices.named_children[0], scopes), self.expr(doc, right, scopes)
            if isinstance(index, Num) and isinstance(stored, Num) and index.expr == stored.expr:
                drawn = _Range(0.0, 0.0, True, True, False, arange=True)
        old = self.draws.get(buf.where)
        if drawn is None or (old is not None and old.arange != drawn.arange):
            self.draws.pop(buf.where, None)
        elif old is None or old == drawn:
            self.draws[buf.where] = drawn
        else:  # another store: the union
            self.draws[buf.where] = _Range(
                min(old.low, drawn.low),
                max(old.high, drawn.high),
                False,
                old.integral and drawn.integral,
                True,
            )

    def dist_of(self, value: Value) -> tuple[str, float, float] | None:
        """What a buffer's elements were drawn from: ``(kind, low, high)`` (``randint``'s high exclusive)."""
        r = self.draws.get(value.where) if isinstance(value, Buffer) else None
        if r is not None and r.arange:
            return ("arange", 0.0, 0.0)
        if r is None or not r.random:  # constant inputs hide indexing bugs: a spec draws them instead
            return None
        return ("randint", r.low, r.high + 1) if r.integral else ("uniform", r.low, r.high)

    def drawn(
        self, doc: Document, node: tree_sitter.Node | None, scopes: list[dict[str, Value]]
    ) -> _Range | None:
        """The range of a host expression that draws a value: ``rand()``, ``rand() % K``,
        ``rand() / RAND_MAX``, a ``*rand*(low, high)`` helper (``RandFloat(5.0f, 30.0f)``),
        numbers and arithmetic on them; None when unknown."""
        if node is None:
            return None
        t = node.type
        if t == "parenthesized_expression" and node.named_children:
            return self.drawn(doc, node.named_children[0], scopes)
        if t == "cast_expression":
            inner = self.drawn(doc, node.child_by_field_name("value"), scopes)
            type_node = node.child_by_field_name("type")
            to_float = type_node is not None and bool(_FLOAT_TYPES.search(doc.node_text(type_node)))
            return replace(inner, int_type=inner.int_type and not to_float) if inner else None
        if t == "call_expression":
            fn = node.child_by_field_name("function")
            name = doc.node_text(fn).split("::")[-1] if fn is not None else ""
            args_node = node.child_by_field_name("arguments")
            args = [
                a for a in (args_node.named_children if args_node is not None else ()) if a.type != "comment"
            ]
            if name == "rand" and not args:
                return _Range(0.0, float(_RAND_MAX), True, True, True)
            found, draws = (
                self.lookup(name, scopes) if fn is not None and fn.type == "identifier" else (False, None)
            )
            if found and isinstance(draws, Draws):  # `dist(gen)` of a <random> distribution
                return _Range(draws.low, draws.high, draws.integral, draws.integral, True)
            if "rand" in name.lower() and len(args) == 2:
                bounds = [self.drawn(doc, a, scopes) for a in args]
                if all(b is not None and not b.random and b.low == b.high for b in bounds):
                    low, high = bounds[0].low, bounds[1].low  # type: ignore[union-attr]
                    return _Range(min(low, high), max(low, high), False, False, True)
            return None
        if t == "binary_expression":
            op = doc.node_text(node.child_by_field_name("operator") or node)
            a = self.drawn(doc, node.child_by_field_name("left"), scopes)
            b = self.drawn(doc, node.child_by_field_name("right"), scopes)
            return _interval(op, a, b) if a is not None and b is not None else None
        if t == "identifier" and doc.node_text(node) == "RAND_MAX":
            return _Range(float(_RAND_MAX), float(_RAND_MAX), True, True, False)
        value = self.expr(doc, node, scopes)
        number = self.value_of(value.expr) if isinstance(value, Num) else None
        if isinstance(value, Num) and isinstance(number, int | float) and not isinstance(number, bool):
            integral = isinstance(number, int) and not value.is_float
            return _Range(float(number), float(number), integral, integral, False)
        return None

    def binary(self, doc: Document, node: tree_sitter.Node, scopes: list[dict[str, Value]]) -> Value:
        op = doc.node_text(node.child_by_field_name("operator") or node)
        left = self.expr(doc, node.child_by_field_name("left"), scopes)
        right = self.expr(doc, node.child_by_field_name("right"), scopes)
        if op in ("<", ">", "<=", ">=", "==", "!=", "&&", "||"):
            if not isinstance(left, Num) or not isinstance(right, Num):
                return None
            if self.value_of(left.expr) is None or self.value_of(right.expr) is None:
                return None
            word = {"&&": "and", "||": "or"}.get(op, op)  # kept symbolic: a condition may become a `require`
            return Num(f"{operand(left.expr)} {word} {operand(right.expr)}")
        return self.arith(left, op, right)

    def arith(self, left: Value, op: str, right: Value) -> Value:
        if isinstance(left, Buffer) and isinstance(right, Num) and op in ("+", "-"):
            off = right.expr if op == "+" else f"-{operand(right.expr)}"
            return Buffer(
                left.count,
                left.elem,
                left.where,
                off if left.offset == "0" else f"{left.offset} + {operand(off)}",
            )
        if (
            not isinstance(left, Num)
            or not isinstance(right, Num)
            or op not in ("+", "-", "*", "/", "%", "<<", ">>")
        ):
            return None
        is_float = left.is_float or right.is_float
        if is_float and op == "/":  # `(float)n / 32`: a float division, even of integer expressions
            a, b = self.value_of(left.expr), self.value_of(right.expr)
            if a is not None and b:
                return Num(repr(float(a) / float(b)), None, True)
        expr = (
            f"{operand(left.expr)} {op} {operand(right.expr)}"
            if op != "*"
            else f"{operand(left.expr)}*{operand(right.expr)}"
        )
        sized = None
        if op == "*" and left.sized and not right.sized:
            sized = (
                right.expr if left.sized[0] == "1" else f"{operand(left.sized[0])}*{operand(right.expr)}",
                left.sized[1],
            )
        elif op == "*" and right.sized and not left.sized:
            sized = (
                left.expr if right.sized[0] == "1" else f"{operand(left.expr)}*{operand(right.sized[0])}",
                right.sized[1],
            )
        num = Num(expr, sized, is_float)
        return self.literal(num) if is_float else num

    def macro(self, name: str, args: tuple[str, ...], scopes: list[dict[str, Value]], at: str) -> Value:
        if name not in self.prog.macros or self.depth > _MAX_DEPTH:
            return None
        params, body, where = self.prog.macros[name]
        if params is None and name in self._macro_roots:
            return self._macro_roots[name]
        text = body
        if params is not None:
            for p, a in zip(params, args, strict=False):
                text = re.sub(rf"#\s*{re.escape(p)}(?!\w)", '""', text)  # `#val`: a string
                text = re.sub(rf"(?<![\w.]){re.escape(p)}(?!\w)", f"({a})", text)
        outer, self.at = self.at, self.at or at
        try:
            value = self.macro_text(text, scopes)
        finally:
            self.at = outer
        if params is None and isinstance(value, Num) and not names(value.expr) and not value.is_float:
            value = self.root(name, value, where, symbol=name)
            self._macro_roots[name] = value
        return value

    def macro_text(self, text: str, scopes: list[dict[str, Value]]) -> Value:
        """Evaluate an expression given as text (a macro's expansion) in the current scope."""
        if text not in self._macro_docs:
            wrapper = Document(f"int __cuda_agent_macro = ({text});")
            decls = [d for d in wrapper.tree.root_node.children if d.type == "declaration"]
            init = decls[0].child_by_field_name("declarator") if decls else None
            self._macro_docs[text] = (
                wrapper,
                init.child_by_field_name("value") if init is not None else None,
            )
        wrapper, node = self._macro_docs[text]
        if node is None:
            return None
        self.depth += 1
        try:
            value = self.expr(wrapper, node, scopes)
        finally:
            self.depth -= 1
        return value

    def call_expr(self, doc: Document, node: tree_sitter.Node, scopes: list[dict[str, Value]]) -> Value:
        fn = node.child_by_field_name("function")
        args_node = node.child_by_field_name("arguments")
        arg_nodes = [
            a for a in (args_node.named_children if args_node is not None else ()) if a.type != "comment"
        ]
        config = next((c for c in node.children if c.type == "kernel_call_syntax"), None)
        if fn is None:
            return None
        if config is not None:
            self.launch(doc, fn, config, arg_nodes, node, scopes)
            return None
        if fn.type == "field_expression":  # v.size(), v.data(), x.data_ptr<float>(), x.size(0)
            base = self.expr(doc, fn.child_by_field_name("argument"), scopes)
            field_node = fn.child_by_field_name("field")
            if isinstance(base, Tensor):
                return self.tensor_method(doc, base, field_node, arg_nodes, scopes)
            method = doc.node_text(field_node or fn)
            if isinstance(base, Buffer) and method == "size":
                return Num(base.count)
            return base if isinstance(base, Buffer) and method == "data" else None
        name_node = fn.child_by_field_name("name") if fn.type == "template_function" else fn
        name = doc.node_text(name_node if name_node is not None else fn).split("::")[-1]
        if name in ("reinterpret_cast", "static_cast", "const_cast") and arg_nodes:
            return self.expr(doc, arg_nodes[0], scopes)
        if name in _TENSOR_LIKE and arg_nodes:  # torch::empty_like(x)
            like = self.expr(doc, arg_nodes[0], scopes)
            return like if isinstance(like, Tensor) else None
        if name in _TENSOR_NEW and arg_nodes:  # torch::empty({n, m}, options)
            shape = self.expr(doc, arg_nodes[0], scopes)
            dims = shape.items if isinstance(shape, Items) else (shape,)
            return Tensor(tuple(d if isinstance(d, Num) else None for d in dims))
        if name in self.prog.macros and self.prog.macros[name][0] is not None and name not in _CDIV:
            return self.macro(name, tuple(doc.node_text(a) for a in arg_nodes), scopes, self.where(doc, node))
        args = [self.expr(doc, a, scopes) for a in arg_nodes]
        nums = [a for a in args if isinstance(a, Num)]
        if name in _CDIV and len(args) == 2 and len(nums) == 2:
            return Num(f"cdiv({nums[0].expr}, {nums[1].expr})")
        if name in _PARSERS and nums:  # `atoi(argv[1])`
            return Num(nums[0].expr, None, _PARSERS[name])
        if name in ("floor", "floorf", "ceil", "ceilf") and len(nums) == len(args) == 1:
            known = self.value_of(nums[0].expr)  # folded: C's floor/ceil are no spec functions
            if known is None or not math.isfinite(known):
                return None
            return Num(
                repr(float(math.floor(known) if name.startswith("floor") else math.ceil(known))), None, True
            )
        if name in ("cudaGetDeviceProperties", "cudaFuncGetAttributes") and arg_nodes:
            target = _address_of(doc, arg_nodes[0])
            fields = _DEVICE if name == "cudaGetDeviceProperties" else _FUNC_ATTRIBUTES
            if target:
                self.assign(target, Record(tuple((k, Num(v)) for k, v in fields)), scopes)
            return Num("0")
        if name in _MATH and len(nums) == len(args) and args:
            num = Num(
                f"{_MATH[name]}({', '.join(n.expr for n in nums)})",
                None,
                any(n.is_float for n in nums) or name not in ("min", "max"),
            )
            return self.literal(num) if num.is_float else num
        if name in _MALLOCS and len(args) >= 2:
            target = _address_of(doc, arg_nodes[0])
            if target and isinstance(args[1], Num):
                self.assign(target, _buffer(args[1], self.where(doc, node)), scopes)
            return None
        if name in ("malloc", "calloc", "aligned_alloc") and nums:
            total = (
                args[0]
                if name == "malloc"
                else args[1]
                if name == "aligned_alloc" and len(args) > 1
                else self.arith(args[0], "*", args[1] if len(args) > 1 else None)
            )
            return _buffer(total, self.where(doc, node)) if isinstance(total, Num) else None
        if name == "assert" and nums:
            self.require(nums[0].expr, self.where(doc, node))
            return None
        if name in ("cudaMemset", "cudaMemsetAsync") and len(args) >= 2 and isinstance(args[1], Num):
            target = doc.node_text(arg_nodes[0]).strip()
            found, buf = self.lookup(target, scopes)
            if found and isinstance(buf, Buffer) and self.value_of(args[1].expr) == 0:
                self.assign(target, replace(buf, fill="0"), scopes)
            return None
        if name in ("cudaMemcpyToSymbol", "cudaMemcpyToSymbolAsync") and arg_nodes:
            symbol = doc.node_text(arg_nodes[0]).split("::")[-1].strip()
            size = args[2] if len(args) > 2 and isinstance(args[2], Num) else None
            drawn = self.dist_of(args[1]) if len(args) > 1 else None
            self.run.copies.setdefault(symbol, SymbolCopy(symbol, size, self.where(doc, node), drawn))
            return None
        if name in ("cudaMemcpy", "cudaMemcpyAsync") and len(args) >= 2 and isinstance(args[0], Buffer):
            # the destination now holds the source's draws
            source = self.draws.get(args[1].where) if isinstance(args[1], Buffer) else None
            if source is not None:
                self.draws[args[0].where] = source
            else:
                self.draws.pop(args[0].where, None)
            target = _pointer_name(doc, arg_nodes[0])
            found, buf = self.lookup(target, scopes) if target else (False, None)
            if found and isinstance(buf, Buffer) and buf.fill:  # no longer all zeros
                self.assign(target, replace(buf, fill=""), scopes)
            return None
        func = self.prog.funcs.get(name)
        command = next((a for a in args if isinstance(a, CommandLine)), None)
        if func is None and command is not None and not command.args:
            # a command-line parser of a library (`checkCmdLineFlag(argc, argv, "n")`, `getopt`)
            # given no arguments finds no flag: its defaults stand
            return Num("-1" if name.startswith("getopt") else "0")
        if func is None or self.depth >= _MAX_DEPTH:
            return None
        tlist = fn.child_by_field_name("arguments") if fn.type == "template_function" else None
        targs = tuple(
            self.expr(doc, a, scopes)
            if a.type != "type_descriptor"
            else self.macro_text(doc.node_text(a), scopes)
            for a in (tlist.named_children if tlist is not None else ())
        )
        return self.call(func, args, targs)

    def tensor_method(
        self,
        doc: Document,
        tensor: Tensor,
        field_node: tree_sitter.Node | None,
        arg_nodes: list[tree_sitter.Node],
        scopes: list[dict[str, Value]],
    ) -> Value:
        """``x.size(i)``, ``x.numel()``, ``x.data_ptr<T>()`` of a tensor."""
        if field_node is None:
            return None
        if field_node.type == "template_method":
            method_node = field_node.child_by_field_name("name")
            targs = field_node.child_by_field_name("arguments")
            method = doc.node_text(method_node) if method_node is not None else ""
            elem = self.bytes_of(doc.node_text(targs).strip("<> ")) if targs is not None else None
        else:
            method, elem = doc.node_text(field_node), None
        numel = tensor.numel()
        if method in ("data_ptr", "data") and elem is not None:
            return Buffer(numel.expr, elem, self.where(doc, field_node)) if numel is not None else None
        if method in ("numel", "nelement"):
            return numel
        if method == "size" and arg_nodes:
            index = self.expr(doc, arg_nodes[0], scopes)
            axis = self.value_of(index.expr) if isinstance(index, Num) else None
            if isinstance(axis, int) and -len(tensor.dims) <= axis < len(tensor.dims):
                return tensor.dims[axis]
        if method in ("contiguous", "cuda", "detach", "clone"):
            return tensor
        return None

    def call(self, func: _Func, args: list[Value], targs: tuple[Value, ...] = ()) -> Value:
        body = func.node.child_by_field_name("body")
        if body is None:
            return None
        frame: dict[str, Value] = {p: a for p, a in zip(func.params, args, strict=False) if p}
        frame.update({t: a for t, a in zip(func.template_params, targs, strict=False) if t})
        for p, default in zip(func.params[len(args) :], func.defaults[len(args) :], strict=False):
            if p and default is not None:  # C++ default arguments, evaluated in the callee's scope
                frame[p] = self.expr(func.doc, default, [frame])
        # a helper of known numbers (`largestPow2(n)`) runs its loops to the end; so does a
        # launcher given buffers and known numbers (`fwtBatchGPU(d_Data, 1, 23)`), its loops that
        # launch kernels only (a CPU reference's loops over the data would run to the budget)
        known = [
            isinstance(a, Num) and self.value_of(a.expr) is not None
            for a in args
            if not isinstance(a, Buffer)
        ]
        exact: bool | str = self.depth > 0 and bool(args) and len(known) == len(args) and all(known)
        if not exact and self.depth > 0 and known and all(known):  # an entry (main) is no helper
            exact = "launches"
        outer, self.exact = self.exact, exact
        self.depth += 1
        try:
            self.stmt(func.doc, body, [frame])
        except _Return as ret:
            return ret.value
        except _Break:
            return None
        finally:
            self.depth -= 1
            self.exact = outer
        return None

    def launch(
        self,
        doc: Document,
        fn: tree_sitter.Node,
        config: tree_sitter.Node,
        arg_nodes: list[tree_sitter.Node],
        call: tree_sitter.Node,
        scopes: list[dict[str, Value]],
    ) -> None:
        name_node = fn.child_by_field_name("name") if fn.type == "template_function" else fn
        kernel = doc.node_text(name_node if name_node is not None else fn).split("::")[-1]
        tlist = fn.child_by_field_name("arguments") if fn.type == "template_function" else None
        targs = self.template_args(doc, tlist, scopes)
        if kernel not in self.prog.kernels:  # a function pointer: `kernel_t k = axpy; k<<<...>>>`
            pointee = self.expr(doc, fn, scopes)
            if isinstance(pointee, FuncRef):
                kernel, targs = pointee.name, targs or pointee.template_args
        values = [self.expr(doc, a, scopes) for a in arg_nodes]
        if kernel not in self.run.launches:  # the first launch of each kernel is recorded
            parts = [self.expr(doc, c, scopes) for c in config.named_children if c.type != "comment"]
            parts += [None, None, Num("0")][len(parts) :]  # no smem written: 0 (None: not readable)
            self.run.launches[kernel] = LaunchEvent(
                kernel,
                targs,
                parts[0],
                parts[1],
                parts[2],
                tuple(replace(v, dist=self.dist_of(v)) if isinstance(v, Buffer) else v for v in values),
                self.where(doc, call),
                tuple(self.notes),
            )
        # the kernel may write through each pointer but a `const T *` one: what the host put
        # there (its draws, a cudaMemset to zero) is gone
        reads_only = self.prog.kernels.get(kernel, ())
        for i, (v, node) in enumerate(zip(values, arg_nodes, strict=True)):
            if not isinstance(v, Buffer) or (i < len(reads_only) and reads_only[i]):
                continue
            self.draws.pop(v.where, None)
            target = _pointer_name(doc, node)
            found, buf = self.lookup(target, scopes) if target and v.fill else (False, None)
            if found and isinstance(buf, Buffer):
                self.assign(target, replace(buf, fill=""), scopes)

    def template_args(
        self, doc: Document, tlist: tree_sitter.Node | None, scopes: list[dict[str, Value]]
    ) -> tuple[str, ...]:
        """Template arguments as written, each value-like one evaluated to a literal when known."""
        targs: list[str] = []
        for a in tlist.named_children if tlist is not None else ():
            text = doc.node_text(a).strip()
            value = (
                self.expr(doc, a, scopes) if a.type != "type_descriptor" else self.macro_text(text, scopes)
            )
            literal = self.literal(value) if isinstance(value, Num) else None
            targs.append(literal.expr if literal is not None and not names(literal.expr) else text)
        return tuple(targs)
