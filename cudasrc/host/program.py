"""The program: functions, macros and globals of a file and its quoted headers, ``#if`` branches."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import tree_sitter

from cudasrc.host.values import Value
from cudasrc.project import display_path, resolve_include
from cudasrc.source import Document


class _Return(Exception):
    def __init__(self, value: Value) -> None:
        self.value = value


class _Budget(Exception):
    pass


@dataclass
class _Func:
    doc: Document
    node: tree_sitter.Node
    params: tuple[str, ...]
    defaults: tuple[tree_sitter.Node | None, ...] = ()  # C++ default arguments, by parameter
    template_params: tuple[str, ...] = ()
    tensors: tuple[bool, ...] = ()  # which parameters are torch/ATen tensors


class _Program:
    """The functions, macros and globals of a file and its quoted headers."""

    def __init__(self, doc: Document, defines: Mapping[str, str], aliases: Mapping[str, str]) -> None:
        self.funcs: dict[str, _Func] = {}
        # __global__ functions (which a variable may point to) -> whether each parameter is a
        # pointer to const (`const float *in`): the kernel only reads through it
        self.kernels: dict[str, tuple[bool, ...]] = {}
        self.macros: dict[str, tuple[tuple[str, ...] | None, str, str]] = {}  # name -> (params, body, where)
        self.globals: list[tuple[Document, tree_sitter.Node]] = []
        self.constants: dict[str, tuple[str, str]] = {}
        # struct name -> where it is defined, and its fields (name, default member initialiser)
        self.structs: dict[str, tuple[Document, tuple[tuple[str, tree_sitter.Node | None], ...]]] = {}
        self.defines = dict(defines)
        self.aliases = aliases
        self._seen: set[str] = set()
        self._load(doc)

    def link(self, doc: Document) -> None:
        """Add another translation unit's functions, macros and globals (and its headers')."""
        self._load(doc)

    def _load(self, doc: Document) -> None:
        key = str(Path(doc.path).resolve()) if doc.path else id(doc).__str__()
        if key in self._seen or len(self._seen) > 32:
            return
        self._seen.add(key)
        for node in _active(doc, doc.tree.root_node.children, self):
            self._top(doc, node)

    def _top(self, doc: Document, node: tree_sitter.Node, tparams: tuple[str, ...] = ()) -> None:
        t = node.type
        if t in ("namespace_definition", "linkage_specification", "declaration_list", "template_declaration"):
            body = node.child_by_field_name("body")
            kids = body.children if body is not None and t != "template_declaration" else node.children
            if t == "linkage_specification" and body is not None and body.type != "declaration_list":
                kids = [body]  # extern "C" void f(...) {...}: one definition, not a block of them
            if t == "template_declaration":
                plist = node.child_by_field_name("parameters")
                tparams = tuple(
                    _decl_name(doc, p) for p in (plist.named_children if plist is not None else ())
                )
            for c in _active(doc, kids, self):
                self._top(doc, c, tparams)
        elif t == "function_definition":
            decl = _function_declarator(node)
            if decl is None:
                return
            name_node = decl.child_by_field_name("declarator")
            name = doc.node_text(name_node).split("::")[-1] if name_node is not None else ""
            plist = decl.child_by_field_name("parameters")
            decls = [
                p
                for p in (plist.named_children if plist is not None else ())
                if p.type in ("parameter_declaration", "optional_parameter_declaration")
            ]
            if any(c.type == "__global__" for c in node.children):
                self.kernels.setdefault(name, tuple(_reads_only(doc, p) for p in decls))
                return
            self.funcs.setdefault(
                name,
                _Func(
                    doc,
                    node,
                    tuple(_decl_name(doc, p.child_by_field_name("declarator")) for p in decls),
                    tuple(p.child_by_field_name("default_value") for p in decls),
                    tparams,
                    tuple(_is_tensor(doc, p) for p in decls),
                ),
            )
        elif t in ("preproc_def", "preproc_function_def"):
            name_node, value = node.child_by_field_name("name"), node.child_by_field_name("value")
            if name_node is None:
                return
            name = doc.node_text(name_node)
            formals: tuple[str, ...] | None = None
            if t == "preproc_function_def":
                plist = node.child_by_field_name("parameters")
                formals = tuple(doc.node_text(f) for f in plist.named_children) if plist is not None else ()
            text = doc.node_text(value).strip() if value is not None else ""
            self.macros.setdefault(name, (formals, text, _where(doc, node)))
            self.defines.setdefault(name, text)
        elif t == "preproc_include":
            path = node.child_by_field_name("path")
            written = doc.node_text(path).strip() if path is not None else ""
            if written.startswith('"') and doc.path:
                header = resolve_include(doc.path, written.strip('"'))
                if header is not None:
                    try:
                        self._load(Document.from_file(header))
                    except OSError:
                        return
        elif t in ("struct_specifier", "class_specifier", "type_definition"):
            spec = node if t != "type_definition" else node.child_by_field_name("type")
            named = node.child_by_field_name("declarator") if t == "type_definition" else node
            name_node = (
                named.child_by_field_name("name") if named is not None and t != "type_definition" else named
            )
            body = spec.child_by_field_name("body") if spec is not None else None
            if name_node is not None and body is not None:
                self.structs.setdefault(doc.node_text(name_node), (doc, _fields(doc, body)))
        elif t == "declaration":
            text = doc.node_text(node)
            if "__constant__" in text or "__device__" in text:
                type_node = node.child_by_field_name("type")
                for d in node.children_by_field_name("declarator"):
                    if d.type == "array_declarator":
                        size = d.child_by_field_name("size")
                        self.constants[_decl_name(doc, d)] = (
                            doc.node_text(type_node) if type_node is not None else "",
                            doc.node_text(size) if size is not None else "",
                        )
            else:
                self.globals.append((doc, node))


def _fields(doc: Document, body: tree_sitter.Node) -> tuple[tuple[str, tree_sitter.Node | None], ...]:
    """A struct's data members in order, each with its default member initialiser (``int n = 1024;``)."""
    out: list[tuple[str, tree_sitter.Node | None]] = []
    for f in body.named_children:
        if f.type != "field_declaration" or f.child_by_field_name("type") is None:
            continue
        default = f.child_by_field_name("default_value")
        for d in f.children_by_field_name("declarator"):
            if d.type == "field_identifier":
                out.append((doc.node_text(d), default))
    return tuple(out)


def _reads_only(doc: Document, param: tree_sitter.Node) -> bool:
    """A parameter ``const T *p`` (``T const *p``, ``const T *__restrict__ p``): a pointer to const."""
    declarator = param.child_by_field_name("declarator")
    if declarator is None or declarator.type != "pointer_declarator":
        return False
    return any(c.type == "type_qualifier" and doc.node_text(c) == "const" for c in param.children)


def _is_tensor(doc: Document, param: tree_sitter.Node) -> bool:
    type_node = param.child_by_field_name("type")
    return type_node is not None and doc.node_text(type_node).split("::")[-1].strip() == "Tensor"


def _where(doc: Document, node: tree_sitter.Node) -> str:
    """``path:line`` of ``node``: the path as the file was named, or, for a file found in the
    project (an absolute path), relative to the working folder when it lies under it."""
    return f"{display_path(doc.path) if doc.path else 'file'}:{node.start_point.row + 1}"


def _function_declarator(node: tree_sitter.Node) -> tree_sitter.Node | None:
    d = node.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    return d


def _decl_name(doc: Document, node: tree_sitter.Node | None) -> str:
    while node is not None and node.type not in ("identifier", "field_identifier"):
        node = node.child_by_field_name("declarator") or (
            node.named_children[0] if node.named_children else None
        )
    return doc.node_text(node) if node is not None else ""


def _active(doc: Document, nodes: list[tree_sitter.Node], prog: _Program) -> Iterator[tree_sitter.Node]:
    """``nodes`` with ``#if``/``#ifdef`` blocks replaced by the children of the branch taken."""
    for node in nodes:
        branch = _branch(doc, node, prog)
        if branch is None:
            yield node
        else:
            yield from _active(doc, branch, prog)


def _branch(doc: Document, node: tree_sitter.Node, prog: _Program) -> list[tree_sitter.Node] | None:
    t = node.type
    if t not in ("preproc_if", "preproc_ifdef", "preproc_elif", "preproc_else"):
        return None
    if t == "preproc_else":
        return [c for c in node.children if c.is_named]
    alternative = node.child_by_field_name("alternative")
    if t == "preproc_ifdef":
        name = node.child_by_field_name("name")
        negate = node.children[0].type == "#ifndef"
        taken = (doc.node_text(name) in prog.defines) != negate if name is not None else True
    else:
        cond = node.child_by_field_name("condition")
        taken = _pp_condition(doc.node_text(cond) if cond is not None else "1", prog.defines)
    skip = {
        n.id
        for n in (alternative, node.child_by_field_name("condition"), node.child_by_field_name("name"))
        if n
    }
    body = [c for c in node.children if c.is_named and c.id not in skip]
    if taken:
        return body
    return (_branch(doc, alternative, prog) or []) if alternative is not None else []


def _pp_condition(text: str, defines: Mapping[str, str]) -> bool:
    """A ``#if`` condition with ``defined(X)`` and macros; unknown names are 0, like cpp."""
    t = re.sub(
        r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)",
        lambda m: "1" if (m[1] or m[2]) in defines else "0",
        text,
    )
    for _ in range(4):
        t = re.sub(r"[A-Za-z_]\w*", lambda m: defines.get(m[0], "0") or "1", t)
    t = t.replace("&&", " and ").replace("||", " or ").replace("!", " not ").replace(" not =", "!=")
    try:
        return bool(_pp_node(ast.parse(re.sub(r"(\d+)[uUlL]+\b", r"\1", t), mode="eval").body))
    except (ValueError, SyntaxError, KeyError, RecursionError):
        return True


def _pp_node(n: ast.AST) -> int:
    if isinstance(n, ast.Constant) and isinstance(n.value, int):
        return n.value
    if isinstance(n, ast.BoolOp):
        vals = [_pp_node(v) for v in n.values]
        return int(all(vals) if isinstance(n.op, ast.And) else any(vals))
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        return int(not _pp_node(n.operand))
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        return -_pp_node(n.operand)
    if isinstance(n, ast.Compare) and len(n.ops) == 1:
        a, b = _pp_node(n.left), _pp_node(n.comparators[0])
        ops = {
            ast.Eq: a == b,
            ast.NotEq: a != b,
            ast.Lt: a < b,
            ast.LtE: a <= b,
            ast.Gt: a > b,
            ast.GtE: a >= b,
        }
        return int(ops[type(n.ops[0])])
    if isinstance(n, ast.BinOp):
        a, b = _pp_node(n.left), _pp_node(n.right)
        if isinstance(n.op, ast.Add):
            return a + b
        if isinstance(n.op, ast.Sub):
            return a - b
        if isinstance(n.op, ast.Mult):
            return a * b
    raise ValueError("not a preprocessor expression")
