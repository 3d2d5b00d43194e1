"""Scanning a document's top level: its items and the names they define, kernels (with their
parameters, template parameters, bounds and spec comment), macro-related issues, and cutting a
kernel out with its transitive dependencies into a standalone unit."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import tree_sitter

from cudasrc.project import resolve_include
from cudasrc.syntax import (
    IDENT,
    LANGUAGE,
    NAME_QUERY,
    Issue,
    Kernel,
    LaunchBoundsAttribute,
    Param,
    Parsed,
    Standalone,
    TemplateParam,
    printable,
)

_CONTAINERS = frozenset(
    {
        "translation_unit",
        "declaration_list",
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
        "linkage_specification",
        "namespace_definition",
        "template_declaration",
        "ERROR",
    }
)
_MAX_INCLUDE_DIRS = 32  # -I folders of the project a standalone unit is compiled with
_MAX_NESTING = 100  # namespaces / #if blocks / extern "C" inside each other (the walk recurses)
_TYPE_SPECIFIERS = frozenset({"struct_specifier", "class_specifier", "union_specifier", "enum_specifier"})
_NAME_NODES = frozenset({"identifier", "type_identifier", "field_identifier", "qualified_identifier"})
# Host-only headers NVRTC cannot (and a kernel need not) include: dropped from standalone units.
# (<cstdint>, <cmath>, <cstdio>... stay: sandbox.compiler ships NVRTC stand-ins for them.)
_SYSTEM_HEADERS = frozenset(
    {
        "algorithm", "array", "cassert", "chrono", "cstring", "ctime", "fstream", "functional",
        "iomanip", "iostream", "map", "memory", "numeric", "random", "set", "sstream", "stdexcept",
        "string", "thread", "tuple", "unordered_map", "utility", "vector", "assert.h", "stdlib.h",
        "cstdlib", "string.h", "time.h", "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h",
        "device_launch_parameters.h", "helper_cuda.h", "helper_functions.h", "helper_timer.h",
        "helper_string.h", "helper_image.h", "cuda_profiler_api.h", "sys/time.h",
    }
)  # fmt: skip
# Libraries and bindings a project's header pulls in for its host code (they bring <cstdint> along).
_LIBRARY_HEADERS = frozenset(
    {
        "cublas_v2.h", "cublas.h", "cublasLt.h", "cudnn.h", "curand.h", "cufft.h", "cusparse.h",
        "cusolverDn.h", "nccl.h", "nvToolsExt.h", "nvtx3/nvToolsExt.h", "mpi.h", "omp.h",
        "torch/extension.h", "torch/torch.h", "torch/python.h", "ATen/ATen.h",
        "ATen/cuda/CUDAContext.h", "c10/cuda/CUDAGuard.h", "c10/cuda/CUDAStream.h",
        "pybind11/pybind11.h", "Python.h",
    }
)  # fmt: skip
HOST_HEADERS = _SYSTEM_HEADERS | _LIBRARY_HEADERS
# Device libraries NVRTC cannot compile (CUB: "#error ... not supported when compiling with
# NVRTC"): a unit keeps their headers only when its code names the library's namespace, so a
# kernel beside one that uses them (HeCBench attention's kernels.h) compiles on its own.
_NVRTC_UNSUPPORTED = frozenset({"cub", "thrust"})


# glibc's <sys/types.h> names, which every nvcc unit gets through the host headers it includes
_GLIBC_TYPES = {"uint": "unsigned int", "ushort": "unsigned short", "ulong": "unsigned long"}
_GLIBC_INTS = frozenset({"int8_t", "int16_t", "int32_t", "int64_t"})  # <sys/types.h> has them too
_MATH_MACROS = frozenset(
    {"INFINITY", "NAN", "HUGE_VAL", "HUGE_VALF", "M_PI", "M_E", "M_SQRT2", "M_LN2", "M_PI_2"}
)


@dataclass
class _Item:
    """A top-level node of the file and the names it defines (for dependency closure)."""

    node: tree_sitter.Node
    names: set[str]
    include: str = ""  # for #include: the header as written, e.g. "common.cuh" or <cuda_fp16.h>
    always: bool = False  # in every unit (`using namespace X;`)


class Scan:
    """One pass over (part of) the top level of a document: items, kernels, macro-related issues."""

    def __init__(self, doc: Parsed, top_level: Iterable[tree_sitter.Node]) -> None:
        self.doc = doc
        self.items: list[_Item] = []
        self.kernels_found: list[Kernel] = []
        self.macros: dict[str, str] = {}
        self.issue_list: list[Issue] = []
        self.kernel_items: dict[int, _Item] = {}
        self.recovering = False
        self.error_depth = 0
        self.depth = 0
        self.subtrees: list[tree_sitter.Tree] = []  # keeps the nodes of recovered kernels alive
        for child in top_level:
            self._visit(child, None, (), False)
        self.kernels = tuple(self.kernels_found)
        self.issues = tuple(self.issue_list)

    # ------------------------------------------------------------------ the walk

    def _visit(self, node: tree_sitter.Node, item: _Item | None, ns: tuple[str, ...], extern_c: bool) -> None:
        t = node.type
        if item is None and _include_guard(self.doc, node):  # `#ifndef H / #define H ... #endif`: its
            for c in node.named_children[1:]:  # items stand on their own, as if at file scope
                self._visit(c, None, ns, extern_c)
            return
        if item is None and t != "ERROR" and node.is_named and t != "comment":
            item = _Item(node, set())
            self.items.append(item)
        if t in _CONTAINERS:
            if self.depth >= _MAX_NESTING:
                self.issue_list.append(
                    Issue(node.start_point.row, "nested too deeply; not analysed", "error")
                )
                return
            if t == "namespace_definition":
                name = node.child_by_field_name("name")
                ns = (*ns, self.doc.node_text(name)) if name is not None else ns
                if item is not None and name is not None:
                    item.names.add(self.doc.node_text(name))
            kernels_before = len(self.kernels_found)
            self.error_depth += t == "ERROR"
            self.depth += 1
            for c in node.children:
                if t == "template_declaration" and c.type == "template_parameter_list":
                    continue
                self._visit(c, None if t == "ERROR" else item, ns, extern_c or t == "linkage_specification")
            self.depth -= 1
            self.error_depth -= t == "ERROR"
            if t == "ERROR" and not self.error_depth:
                self._recover(node, self.kernels_found[kernels_before:])
            return
        if item is None:
            return
        names = item.names
        if t == "function_definition":
            fname = function_name(self.doc, node)
            names.add(fname)
            if any(c.type == "__global__" for c in node.children):
                kernel = self._kernel(node, fname, ns, extern_c)
                self.kernels_found.append(kernel)
                self.kernel_items[kernel.span.start_byte] = item
        elif t in ("preproc_def", "preproc_function_def"):
            name_node = node.child_by_field_name("name")
            if name_node is not None:
                macro = self.doc.node_text(name_node)
                names.add(macro)
                value = node.child_by_field_name("value")
                self.macros[macro] = self.doc.node_text(value) if value is not None else ""
        elif t == "preproc_include":
            path = node.child_by_field_name("path")
            item.include = self.doc.node_text(path).strip() if path is not None else ""
        elif t in _TYPE_SPECIFIERS:
            self._type_names(node, names)
        elif t in ("declaration", "type_definition", "field_declaration"):
            type_node = node.child_by_field_name("type")
            if type_node is not None and type_node.type in _TYPE_SPECIFIERS:
                self._type_names(type_node, names)
            for d in node.children_by_field_name("declarator"):
                declared = _declarator_name(self.doc, d)
                if declared:
                    names.add(declared)
        elif t in (
            "alias_declaration",
            "namespace_alias_definition",
        ):  # `using T = ...;`, `namespace cg = ...;`
            name_node = node.child_by_field_name("name")
            if name_node is not None:
                names.add(self.doc.node_text(name_node))
        elif t == "using_declaration":  # `using cg::thread_block;` defines `thread_block`
            used = node.named_children[-1] if node.named_children else None
            if used is not None and not any(c.type == "namespace" for c in node.children):
                names.add(_simple_name(self.doc, used))
            else:
                item.always = True  # `using namespace X;`: what it brings is unknown, keep it

    def _type_names(self, node: tree_sitter.Node, names: set[str]) -> None:
        name_node = node.child_by_field_name("name")
        if name_node is not None:
            names.add(self.doc.node_text(name_node))
        body = node.child_by_field_name("body")
        if node.type == "enum_specifier" and body is not None:
            for e in body.named_children:
                enumerator = e.child_by_field_name("name")
                if enumerator is not None:
                    names.add(self.doc.node_text(enumerator))

    def _recover(self, error: tree_sitter.Node, found: list[Kernel]) -> None:
        """Kernels swallowed by a syntax error: reparse each ``__global__`` definition's own lines
        (tree-sitter's included ranges keep file positions) and keep the ones that parse cleanly."""
        doc = self.doc
        text = doc.data[error.start_byte : error.end_byte]
        starts = [
            error.start_byte + m.start()
            for m in re.finditer(rb"\b__global__\b", text)
            if not any(k.span.start_byte <= error.start_byte + m.start() < k.span.end_byte for k in found)
        ]
        lines = [doc._point(o)[0] for o in starts]
        for k, line in enumerate(lines):
            if self.recovering or (k > 0 and line == lines[k - 1]):
                continue
            begin = doc._line_starts[line]
            end = doc._line_starts[lines[k + 1]] if k + 1 < len(lines) else error.end_byte
            before = len(self.kernels_found)
            if end > begin:
                sub = tree_sitter.Parser(
                    LANGUAGE,
                    included_ranges=[
                        tree_sitter.Range(
                            tree_sitter.Point(line, 0), tree_sitter.Point(*doc._point(end)), begin, end
                        )
                    ],
                ).parse(doc.data)
                self.subtrees.append(sub)
                self.recovering = True
                for child in sub.root_node.children:
                    if not child.has_error:
                        self._visit(child, None, (), False)
                self.recovering = False
            if len(self.kernels_found) == before:
                self.issue_list.append(
                    Issue(line, "a __global__ kernel here does not parse; it is skipped", "error")
                )

    # ------------------------------------------------------------------ kernels

    def _kernel(self, node: tree_sitter.Node, name: str, ns: tuple[str, ...], extern_c: bool) -> Kernel:
        doc = self.doc
        outer = (
            node.parent if node.parent is not None and node.parent.type == "template_declaration" else node
        )
        template_params: tuple[TemplateParam, ...] = ()
        if outer is not node:
            tlist = outer.child_by_field_name("parameters")
            if tlist is not None:
                template_params = tuple(
                    tp for c in tlist.named_children if (tp := _template_param(doc, c)) is not None
                )
        declarator = _function_declarator(node)
        name_node = declarator.child_by_field_name("declarator") if declarator is not None else None
        params_node = declarator.child_by_field_name("parameters") if declarator is not None else None
        params = tuple(
            _param(doc, c)
            for c in (params_node.named_children if params_node is not None else ())
            if c.type in ("parameter_declaration", "optional_parameter_declaration")
        )
        bounds = next((c for c in node.children if c.type == "launch_bounds"), None)
        launch_bounds = None
        if bounds is not None:
            exprs = [doc.node_text(c) for c in bounds.named_children if c.type != "comment"]
            if exprs:
                launch_bounds = LaunchBoundsAttribute(exprs[0], exprs[1] if len(exprs) > 1 else "")
        body = node.child_by_field_name("body")
        span = doc.span(outer)
        return Kernel(
            name=name,
            qualified_name="::".join((*ns, name)),
            span=span,
            name_span=doc.span(name_node if name_node is not None else node),
            body_span=doc.span(body) if body is not None else None,
            params=params,
            template_params=template_params,
            launch_bounds=launch_bounds,
            extern_c=extern_c,
            comment=_comment_above(doc, span.start_line),
        )

    # ------------------------------------------------------------------ standalone

    def standalone(self, kernel: Kernel, inline_headers: bool, also: frozenset[str]) -> Standalone:
        doc = self.doc
        entries = self._entries(set())
        by_name: dict[str, list[int]] = {}
        for i, (_, it) in enumerate(entries):
            for n in it.names:
                by_name.setdefault(n, []).append(i)
        start = next(
            (
                i
                for i, (sc, it) in enumerate(entries)
                if sc is self and it is self.kernel_items.get(kernel.span.start_byte)
            ),
            None,
        )
        if start is None:
            return Standalone(kernel.qualified_name, "", ())
        chosen = {start}
        todo = [start]
        wanted = {start: also}
        referenced: set[str] = set()
        while todo:
            i = todo.pop()
            scan, item = entries[i]
            names = wanted.pop(i, frozenset()) | scan._references(item.node)
            referenced |= names
            for name in names:
                for j in by_name.get(name, ()):
                    # a host function is never what device code means (`rows` the launcher vs a
                    # parameter `rows`); NVRTC could not compile it either
                    if j not in chosen and not _is_host_function(entries[j][1].node):
                        chosen.add(j)
                        todo.append(j)
        for i, (_, it) in enumerate(entries):
            written = it.include.strip('<>"')
            library = written.split("/")[0] if "/" in written else ""
            if library in _NVRTC_UNSUPPORTED and library not in referenced:
                continue
            if it.always or (it.include and written not in HOST_HEADERS):
                chosen.add(i)
        local_headers = False
        base = Path(doc.path).resolve().parent if doc.path else None
        found = {
            i: resolve_include(entries[i][0].doc.path, entries[i][1].include.strip('"'))
            for i in chosen
            if entries[i][1].include.startswith('"') and entries[i][0].doc.path
        }
        inlined: set[Path] = set()
        lines: list[str] = []
        line_map: list[int] = []
        for i in sorted(chosen):
            scan, item = entries[i]
            node = item.node
            quoted = node.type == "preproc_include" and item.include.startswith('"')
            path = found.get(i)
            header = (
                _header_lines(path, inlined)
                if quoted and inline_headers and path is not None and scan is self
                else None
            )
            if header is not None:
                lines += header
                line_map += [-1] * len(header)
                continue
            local_headers = local_headers or quoted
            text = " " * node.start_point.column + scan.doc.node_text(node).rstrip("\r\n")
            after = node.next_sibling
            if node.type in _TYPE_SPECIFIERS and after is not None and after.type == ";":
                text += ";"  # `struct S {...};` at file scope: the `;` is the parent's token
            for k, line in enumerate(text.split("\n")):
                lines.append(line)
                line_map.append(node.start_point.row + k if scan is self else -1)
        dropped = any(it.include.strip('<>"') in _LIBRARY_HEADERS for _, it in entries)
        ints = {  # tree-sitter reads `int64_t` as a primitive type, not a name
            scan.doc.node_text(n)
            for i in chosen
            for scan, it in [entries[i]]
            for n in _walk(it.node)
            if n.type == "primitive_type"
        }
        dropped = dropped or bool(_GLIBC_INTS & (referenced | ints) - set(by_name))
        if dropped and not any(it.include.strip("<>") in ("cstdint", "stdint.h") for _, it in entries):
            # the fixed-width integers a dropped host header (torch/extension.h, ...) brought in, or
            # that glibc's <sys/types.h> gives every nvcc unit (`const int64_t n` with no include)
            lines.insert(0, "#include <cstdint>")
            line_map.insert(0, -1)
        glibc = [name for name in _GLIBC_TYPES if name in referenced and name not in by_name]
        if glibc:  # a typedef repeated with the same type is legal C++: a header of the user's may have it
            lines.insert(0, " ".join(f"typedef {_GLIBC_TYPES[name]} {name};" for name in glibc))
            line_map.insert(0, -1)
        if _MATH_MACROS & referenced:
            # nvcc includes cuda_runtime.h (and with it math.h's INFINITY, M_PI...) in every .cu
            lines.insert(0, "#include <math.h>")
            line_map.insert(0, -1)
        options: tuple[str, ...] = ()
        if local_headers and base is not None:  # the file's folder, then the project's folders it needs
            kept = [(entries[i][1].include.strip('"'), p) for i, p in found.items() if p is not None]
            options = tuple(f"-I{f}" for f in dict.fromkeys([base, *_include_folders(kept)]))
        return Standalone(kernel.qualified_name, "\n".join(lines) + "\n", tuple(line_map), options)

    def _entries(self, seen: set[Path]) -> list[tuple[Scan, _Item]]:
        """This file's items in order, with each quoted header that holds host code (which NVRTC
        cannot compile) replaced by its own items, so the unit takes only what the kernel needs."""
        out: list[tuple[Scan, _Item]] = []
        for it in self.items:
            header = (
                resolve_include(self.doc.path, it.include.strip('"'))
                if self.doc.path and it.include.startswith('"')
                else None
            )
            scan = _host_header(header, seen) if header is not None else None
            if scan is None:
                out.append((self, it))
            else:
                out += scan._entries(seen)
        return out

    def _references(self, node: tree_sitter.Node) -> set[str]:
        if node.type in ("preproc_def", "preproc_function_def"):
            return set(IDENT.findall(self.doc.node_text(node))[2:])  # skip "define" and the name
        caps = tree_sitter.QueryCursor(NAME_QUERY).captures(node)
        found = {self.doc.node_text(n) for n in caps.get("name", [])}
        # Identifiers inside #if conditions and other preprocessor text are not always nodes.
        for arg in _descendants_of_type(node, "preproc_arg"):
            found.update(IDENT.findall(self.doc.node_text(arg)))
        return found


# ---------------------------------------------------------------------------------------- helpers


def _include_guard(doc: Parsed, node: tree_sitter.Node) -> bool:
    """``#ifndef NAME`` whose first line is ``#define NAME`` with no value: a header's include
    guard (``#ifndef N / #define N 4096`` is a default the build may override: kept whole)."""
    if node.type != "preproc_ifdef" or node.children[0].type != "#ifndef":
        return False
    name = node.child_by_field_name("name")
    first = node.named_children[1] if len(node.named_children) > 1 else None
    if name is None or first is None or first.type != "preproc_def" or first.child_by_field_name("value"):
        return False
    defined = first.child_by_field_name("name")
    return defined is not None and doc.node_text(defined) == doc.node_text(name)


def _host_header(path: Path, seen: set[Path]) -> Scan | None:
    """The items of a quoted header next to the file when it has host code (a host function, a
    host-only include), each header once; None to keep its ``#include`` line as it is."""
    path = path.resolve()
    if path in seen or len(seen) >= 64 or not path.is_file():
        return None
    try:
        header = Parsed.from_file(path)
    except OSError:
        return None
    scan = Scan(header, header.tree.root_node.children)
    if not any(_is_host_item(header, it) for it in scan.items):
        return None
    seen.add(path)
    return scan


def _is_host_item(doc: Parsed, item: _Item) -> bool:
    node = item.node
    if node.type == "preproc_include":
        return item.include.strip("<>") in HOST_HEADERS
    if node.type in (
        "linkage_specification",
        "declaration",
    ):  # `extern "C" void launch(...);`, `int f(float*);`
        return _host_declarations(node)
    return _is_host_function(node)


def _is_host_function(node: tree_sitter.Node) -> bool:
    """A function only the host can call (``constexpr`` ones serve device code's constants too)."""
    fn = node.named_children[-1] if node.type == "template_declaration" and node.named_children else node
    return fn.type == "function_definition" and not any(
        c.type in ("__device__", "__global__")
        or (c.type == "type_qualifier" and c.text in (b"constexpr", b"consteval"))
        for c in fn.children
    )


def _include_folders(includes: list[tuple[str, Path]]) -> list[Path]:
    """The ``-I`` folders that make each ``(written, found)`` quoted include, and the quoted
    includes of those headers in turn, resolve as they did here (at most :data:`_MAX_INCLUDE_DIRS`)."""
    folders: list[Path] = []
    seen: set[Path] = set()
    todo = list(includes)
    while todo and len(seen) < 64 and len(folders) < _MAX_INCLUDE_DIRS:
        written, path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        folder = path.parents[len(Path(written).parts) - 1] if Path(written).parts else path.parent
        if folder not in folders:
            folders.append(folder)
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            quoted = _QUOTED_INCLUDE.match(line)
            nested = resolve_include(path, quoted["path"]) if quoted else None
            if quoted and nested is not None:
                todo.append((quoted["path"], nested))
    return folders


def _host_declarations(node: tree_sitter.Node) -> bool:
    """An ``extern "C"`` item that declares or defines functions, none of them device code."""
    functions = False
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in ("__global__", "__device__", "__constant__", "__shared__", "__managed__"):
            return False
        functions = functions or n.type == "function_declarator"
        stack.extend(n.children)
    return functions


_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"(?P<path>[^"]+)"')
_ANGLE_INCLUDE = re.compile(r"^\s*#\s*include\s*<(?P<path>[^>]+)>")


def _header_lines(path: Path, inlined: set[Path]) -> list[str] | None:
    """A header's lines with its own quoted includes pasted in (each file once, like
    ``#pragma once``) and host-only includes dropped; None when it cannot be read."""
    path = path.resolve()
    if path in inlined:
        return []
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None
    inlined.add(path)
    out: list[str] = []
    for line in text.splitlines():
        if line.strip() == "#pragma once":
            continue
        angle = _ANGLE_INCLUDE.match(line)
        if angle and angle["path"] in HOST_HEADERS:
            continue
        quoted = _QUOTED_INCLUDE.match(line)
        nested_path = resolve_include(path, quoted["path"]) if quoted else None
        nested = _header_lines(nested_path, inlined) if nested_path is not None else None
        out += [line] if nested is None else nested
    return out


def type_aliases_of(doc: Parsed, seen: set[Path]) -> dict[str, str]:
    found: dict[str, str] = {}
    base = Path(doc.path).resolve().parent if doc.path else None
    stack = list(reversed(doc.tree.root_node.children))
    while stack:
        node = stack.pop()
        t = node.type
        if t in _CONTAINERS or t == "namespace_definition":
            stack.extend(reversed(node.children))
        elif t == "type_definition":
            type_node = node.child_by_field_name("type")
            for d in node.children_by_field_name("declarator"):
                if type_node is not None and d.type == "type_identifier":
                    found.setdefault(doc.node_text(d), _squash(doc.node_text(type_node)))
        elif t == "alias_declaration":
            name_node, type_node = node.child_by_field_name("name"), node.child_by_field_name("type")
            if name_node is not None and type_node is not None:
                found.setdefault(doc.node_text(name_node), _squash(doc.node_text(type_node)))
        elif t == "preproc_include" and base is not None and len(seen) < 64:
            path = node.child_by_field_name("path")
            written = doc.node_text(path).strip() if path is not None else ""
            header = resolve_include(doc.path, written.strip('"')) if written.startswith('"') else None
            if header is not None and header not in seen:
                seen.add(header)
                try:
                    included = Parsed(header.read_bytes().decode("utf-8", errors="replace"), str(header))
                except OSError:
                    continue
                for alias, value in type_aliases_of(included, seen).items():
                    found.setdefault(alias, value)
    return found


def macro_kernel_issues(text: str, macros: dict[str, str]) -> list[Issue]:
    """Uses of macros that expand to ``__global__``: kernels the model cannot see."""
    found: list[Issue] = []
    for name, body in macros.items():
        if "__global__" not in body:
            continue
        for m in re.finditer(rf"^(?!\s*#).*\b{re.escape(name)}\b", text, re.M):
            found.append(
                Issue(
                    text.count("\n", 0, m.start()),
                    f"kernel declared through macro {name} (expands to __global__) is not analysed; "
                    "write __global__ in the declaration",
                )
            )
    return found


def _descendants_of_type(node: tree_sitter.Node, node_type: str) -> Iterator[tree_sitter.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == node_type:
            yield n
        elif n.type.startswith("preproc") or n.type in ("compound_statement", "declaration_list"):
            stack.extend(n.children)


def _function_declarator(node: tree_sitter.Node) -> tree_sitter.Node | None:
    d = node.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    return d


def function_name(doc: Parsed, node: tree_sitter.Node) -> str:
    d = _function_declarator(node)
    name = d.child_by_field_name("declarator") if d is not None else None
    return _simple_name(doc, name) if name is not None else ""


def _declarator_name(doc: Parsed, node: tree_sitter.Node) -> str:
    d: tree_sitter.Node | None = node
    while d is not None:
        if d.type in _NAME_NODES or d.type == "template_function":
            return _simple_name(doc, d)
        if d.type == "parenthesized_declarator":  # `typedef float (*fn)(float);`
            d = d.named_children[0] if d.named_children else None
            continue
        d = d.child_by_field_name("declarator")
    return ""


def _simple_name(doc: Parsed, node: tree_sitter.Node) -> str:
    """``apply`` for ``apply<Mode::Add>`` (a specialisation) or ``ops::apply`` (out of line)."""
    n: tree_sitter.Node | None = node
    while n is not None and n.type in ("template_function", "qualified_identifier"):
        n = n.child_by_field_name("name")
    return doc.node_text(n if n is not None else node)


def _squash(text: str) -> str:
    return " ".join(text.split())


def _param(doc: Parsed, node: tree_sitter.Node) -> Param:
    type_node = node.child_by_field_name("type")
    const = any(c.type == "type_qualifier" and doc.node_text(c) == "const" for c in node.children)
    restrict = False
    pointer = 0
    reference = False
    name_node: tree_sitter.Node | None = None
    d = node.child_by_field_name("declarator")
    while d is not None:
        if d.type in _NAME_NODES:
            name_node = d
            break
        if d.type in ("pointer_declarator", "abstract_pointer_declarator"):
            pointer += 1
            restrict = restrict or any(
                c.type == "type_qualifier" and "restrict" in doc.node_text(c) for c in d.children
            )
        elif d.type in ("array_declarator", "abstract_array_declarator"):
            pointer += 1
        elif d.type in ("reference_declarator", "abstract_reference_declarator"):
            reference = True
            d = next((c for c in d.named_children), None)
            continue
        d = d.child_by_field_name("declarator")
    full = doc.node_text(node)
    if name_node is not None:
        a = name_node.start_byte - node.start_byte
        b = name_node.end_byte - node.start_byte
        raw = doc.data[node.start_byte : node.end_byte]
        type_text = (raw[:a] + raw[b:]).decode("utf-8", errors="replace")
    else:
        type_text = full
    return Param(
        name=doc.node_text(name_node) if name_node is not None else "",
        type_text=_squash(type_text),
        base_type=_squash(doc.node_text(type_node)) if type_node is not None else "",
        pointer=pointer,
        const=const,
        restrict=restrict,
        reference=reference,
        span=doc.span(node),
    )


def _template_param(doc: Parsed, node: tree_sitter.Node) -> TemplateParam | None:
    t = node.type
    if t in ("type_parameter_declaration", "variadic_type_parameter_declaration"):
        name = next((c for c in node.named_children if c.type == "type_identifier"), None)
        return TemplateParam("type", doc.node_text(name) if name is not None else "")
    if t == "optional_type_parameter_declaration":
        name = node.child_by_field_name("name")
        default = node.child_by_field_name("default_type")
        return TemplateParam(
            "type",
            doc.node_text(name) if name is not None else "",
            default=doc.node_text(default) if default is not None else "",
        )
    if t in ("parameter_declaration", "optional_parameter_declaration"):
        d = node.child_by_field_name("declarator")
        type_node = node.child_by_field_name("type")
        default = node.child_by_field_name("default_value")
        return TemplateParam(
            "value",
            _declarator_name(doc, d) if d is not None else "",
            _squash(doc.node_text(type_node)) if type_node is not None else "",
            doc.node_text(default) if default is not None else "",
        )
    return None


def _comment_above(doc: Parsed, line: int) -> tuple[tuple[int, str], ...]:
    found: list[tuple[int, str]] = []
    row = line - 1
    while row >= 0:
        raw = doc.line_bytes(row).decode("utf-8", errors="replace").strip()
        if not raw.startswith("//"):
            break
        found.append((row, raw[2:]))
        row -= 1
    return tuple(reversed(found))


def syntax_issues(doc: Parsed, limit: int = 20) -> list[Issue]:
    """ERROR and MISSING nodes, pruned to subtrees that contain errors, first ``limit`` of them."""
    found: list[Issue] = []
    stack = [doc.tree.root_node]
    while stack and len(found) < limit:
        n = stack.pop()
        if n.is_missing:
            found.append(Issue(n.start_point.row, f"syntax error: missing {n.type}", "error"))
        elif n.is_error:
            snippet = printable(_squash(doc.node_text(n))[:40])
            found.append(Issue(n.start_point.row, f"syntax error near `{snippet}`", "error"))
        elif n.has_error:
            stack.extend(reversed(n.children))
    return found


# ------------------------------------------------------------------------------ integer constants

INTEGER_TYPES = frozenset(
    {"int", "unsigned", "unsigned int", "long", "long long", "size_t", "short", "int64_t", "uint32_t"}
)


def _walk(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def leaves(doc: Parsed, node: tree_sitter.Node) -> list[str]:
    """The text of ``node``'s leaf tokens."""
    return [doc.node_text(n) for n in _walk(node) if n.child_count == 0]


def fold_integer(doc: Parsed, node: tree_sitter.Node | None, constants: dict[str, int]) -> int | None:
    """The value of an integer constant expression (literals, known constants, + - * / % << >>)."""
    if node is None:
        return None
    t = node.type
    if t in ("parenthesized_expression", "preproc_arg") and node.named_child_count == 1:
        return fold_integer(doc, node.named_children[0], constants)
    if t == "number_literal":
        s = doc.node_text(node).rstrip("uUlL")
        try:
            return int(s, 0)
        except ValueError:
            return None
    if t == "identifier":
        return constants.get(doc.node_text(node))
    if t == "cast_expression":
        return fold_integer(doc, node.child_by_field_name("value"), constants)
    if t == "unary_expression":
        op, arg = node.child_by_field_name("operator"), node.child_by_field_name("argument")
        v = fold_integer(doc, arg, constants)
        if v is None or op is None:
            return None
        return {"-": -v, "+": v}.get(doc.node_text(op))
    if t == "binary_expression":
        op = node.child_by_field_name("operator")
        a = fold_integer(doc, node.child_by_field_name("left"), constants)
        b = fold_integer(doc, node.child_by_field_name("right"), constants)
        if op is None or a is None or b is None:
            return None
        o = doc.node_text(op)
        if o in ("/", "%") and b == 0:
            return None
        ops = {
            "+": a + b,
            "-": a - b,
            "*": a * b,
        }
        if o in ops:
            return ops[o]
        if o in ("<<", ">>") and 0 <= b < 64:
            return a << b if o == "<<" else a >> b
        if o == "/":
            return int(a / b)
        if o == "%":
            return a - int(a / b) * b
    return None


def macro_integer(text: str, constants: dict[str, int]) -> int | None:
    """A ``#define``'s value when it is an integer expression of C (parsed as C by tree-sitter)."""
    doc = Parsed(f"static const int ca_macro = {text};")
    for n in _walk(doc.tree.root_node):
        if n.type == "init_declarator":
            return fold_integer(doc, n.child_by_field_name("value"), constants)
    return None


def file_scope(n: tree_sitter.Node) -> bool:
    up = n.parent
    while up is not None:
        if up.type in (
            "function_definition",
            "field_declaration_list",
            "struct_specifier",
            "class_specifier",
        ):
            return False
        up = up.parent
    return True


def _constant_declaration(doc: Parsed, n: tree_sitter.Node, constants: dict[str, int]) -> None:
    """``constexpr int TILE = 32;`` / ``static const int N = 4 * TILE;`` at file scope."""
    ty = n.child_by_field_name("type")
    words = set(leaves(doc, n))
    if ty is None or not ({"const", "constexpr"} & words):
        return
    if " ".join(doc.node_text(ty).split()) not in INTEGER_TYPES:
        return
    for d in n.children_by_field_name("declarator"):
        if d.type != "init_declarator":
            continue
        name = d.child_by_field_name("declarator")
        v = fold_integer(doc, d.child_by_field_name("value"), constants)
        if name is not None and name.type == "identifier" and v is not None:
            constants.setdefault(doc.node_text(name), v)


def integer_constants_of(doc: Parsed) -> dict[str, int]:
    """The file's integer ``#define``\\ s and file-scope ``const``/``constexpr``/``static const``
    integers, folded in order (a later one may use an earlier one): name -> value."""
    constants: dict[str, int] = {}
    for n in _walk(doc.tree.root_node):
        if n.type == "preproc_def":
            name, value = n.child_by_field_name("name"), n.child_by_field_name("value")
            if name is not None and value is not None:
                v = macro_integer(doc.node_text(value), constants)
                if v is not None:
                    constants.setdefault(doc.node_text(name), v)
        elif n.type == "declaration" and file_scope(n):
            _constant_declaration(doc, n, constants)
    return constants
