"""The screen of a PyTorch answer: what ``ModelNew``'s module may say, read from its syntax tree
before any of it runs (no torch here: the reward service and the prompt read the same rules).

The screen is the first of the PyTorch evaluation's defences (:mod:`sandbox.torch_eval` draws
the rest): it keeps Python-level code inside the answer's own objects, so that patching torch,
the timer or the reference needs native code (``load_inline``, a Triton or CuTe kernel), which
the runtime checks bound instead.
"""

from __future__ import annotations

import ast

from sandbox.contract import Status

ALLOWED_MODULES = frozenset(
    {
        "torch",
        "math",
        "typing",
        "functools",
        "itertools",
        "collections",
        "dataclasses",
        "numbers",
        "__future__",
    }
)
FORBIDDEN_NAMES = frozenset(
    {
        "exec",
        "eval",
        "compile",
        "open",
        "__import__",
        "globals",
        "locals",
        "vars",
        "getattr",
        "setattr",
        "delattr",
        "breakpoint",
        "memoryview",
        "type",
        "object",
    }
)


# the answer languages: a package is allowed where the worker can import it (else compile_error)
KERNEL_LANGUAGES = frozenset({"triton", "cutlass", "tilelang"})  # Triton, CuTe DSL, TileLang
# attribute names refused on any object: ways out of the answer's own objects into the
# interpreter (``torch.os``, ``torch.sys.modules``...), into the harness's frames and their
# globals (a generator's ``gi_frame.f_back``), global dispatch and hook registries that would
# change the reference, and the harness's stream
REFUSED_ATTRIBUTES = frozenset(
    {
        "os",
        "sys",
        "subprocess",
        "builtins",
        "ctypes",
        "importlib",
        "inspect",
        "gc",
        "threading",
        "multiprocessing",
        "gi_frame",
        "gi_code",
        "gi_yieldfrom",
        "cr_frame",
        "cr_code",
        "cr_await",
        "ag_frame",
        "ag_code",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_code",
        "f_trace",
        "tb_frame",
        "tb_next",
        "library",
        "overrides",
        "set_stream",
        "register_module_forward_hook",
        "register_module_forward_pre_hook",
        "register_module_backward_hook",
        "register_module_full_backward_hook",
        "register_module_full_backward_pre_hook",
        "register_module_buffer_registration_hook",
        "register_module_module_registration_hook",
        "register_module_parameter_registration_hook",
    }
)


def screen(source: str) -> tuple[Status | None, str]:
    """Whether an answer may run: (None, "") or the status and why not (a syntax error is a
    ``compile_error``; a construct that reaches past the answer's own objects is ``rejected``).

    An attribute may be written (assigned, deleted, the target of a loop or a ``with``) only
    through the first parameter of a method of a class the answer defines, in that method's own
    body, where the parameter is never rebound: ``self.NAME = ...`` in ``ModelNew.__init__``,
    never ``self.NAME`` in a helper function, a nested function or after ``self = torch.cuda``,
    and never through another name (an alias of a torch module, say).  A method is never reached
    through its class (``Helper.set(torch.cuda, ...)``), ``super`` takes no arguments, and
    private (``_x``) attributes are the answer's own objects' only."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return Status.COMPILE_ERROR, f"syntax error, line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # NUL bytes
        return Status.COMPILE_ERROR, f"not Python source: {exc}"
    classes = {n.name: _class_constants(n) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    refusal = _Screen(classes).refusal(tree)
    if refusal:
        return Status.REJECTED, f"refused: {refusal}"
    defines = any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
    if not defines:
        return Status.COMPILE_ERROR, "no class ModelNew is defined at the top level"
    return None, ""


Function = ast.FunctionDef | ast.AsyncFunctionDef


class _Screen:
    """One walk over an answer's syntax tree, knowing in each scope which name (if any) is the
    answer's own object (a method's unrebound first parameter)."""

    def __init__(self, classes: dict[str, set[str]]) -> None:
        self.classes = classes  # the answer's classes, with the names their bodies assign

    def refusal(self, tree: ast.AST) -> str:
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, own = stack.pop()
            why = self._check(node, own)
            if why:
                return f"{why} (line {getattr(node, 'lineno', 0)})"
            for child in ast.iter_child_nodes(node):
                stack.append((child, self._scope(node, child, own)))
        return ""

    def _scope(self, parent: ast.AST, child: ast.AST, own: str) -> str:
        """The own name inside ``child`` (a child of ``parent``, where the own name is ``own``)."""
        if isinstance(child, Function):
            return _own_parameter(child) if isinstance(parent, ast.ClassDef) else ""
        if isinstance(child, ast.Lambda | ast.ClassDef):
            return ""
        return own

    def _check(self, node: ast.AST, own: str) -> str:
        if isinstance(node, ast.Import):
            bad = [a.name for a in node.names if not _allowed_module(a.name)]
            return f"import of {bad[0]}" if bad else ""
        if isinstance(node, ast.ImportFrom):
            if node.level or not _allowed_module(node.module or ""):
                return f"import from {'.' * node.level}{node.module or ''}"
            return ""
        if (
            isinstance(node, Function | ast.ClassDef)
            and node.name.startswith("__")
            and node.name != "__init__"
        ):
            return f"definition of {node.name}"
        if isinstance(node, ast.Name) and (node.id in FORBIDDEN_NAMES or node.id.startswith("__")):
            return f"use of {node.id}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super":
            return "" if self._plain_super(node, own) else "super with arguments but (its class, self)"
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            base: ast.expr = node
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Attribute) and not _through(base, own):
                return f"assignment to {ast.unparse(base)[:80]} (attributes only of self, in its methods)"
            return ""
        if not isinstance(node, ast.Attribute):
            return ""
        if node.attr.startswith("__") and node.attr != "__init__":
            return f"attribute {node.attr}"
        if isinstance(node.ctx, ast.Store | ast.Del) and not _through(node, own):
            return f"assignment to {ast.unparse(node)[:80]} (attributes only of self, in its methods)"
        if node.attr in REFUSED_ATTRIBUTES:
            return f"attribute {node.attr}"
        if node.attr.startswith("_") and node.attr != "__init__" and not _through(node, own):
            return f"private attribute {node.attr} of {ast.unparse(node.value)[:60]}"
        owner = node.value.id if isinstance(node.value, ast.Name) else ""
        if owner in self.classes and node.attr not in self.classes[owner]:
            return f"{owner}.{node.attr}: a class's methods are reached through its instances"
        return ""

    def _plain_super(self, call: ast.Call, own: str) -> bool:
        """``super()`` or ``super(OwnClass, self)`` (what KernelBench's models write)."""
        if not call.args and not call.keywords:
            return True
        args = call.args
        return (
            len(args) == 2
            and not call.keywords
            and isinstance(args[0], ast.Name)
            and args[0].id in self.classes
            and isinstance(args[1], ast.Name)
            and bool(own)
            and args[1].id == own
        )


def _class_constants(cls: ast.ClassDef) -> set[str]:
    """The names a class body assigns (constants read through the class: ``Block.expansion``)."""
    names: set[str] = set()
    for node in cls.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _allowed_module(name: str) -> bool:
    root = name.partition(".")[0]
    return root in ALLOWED_MODULES or root in KERNEL_LANGUAGES


def _through(node: ast.Attribute, own: str) -> bool:
    """Whether ``node`` is ``own.NAME`` (an attribute of the answer's own object)."""
    return bool(own) and isinstance(node.value, ast.Name) and node.value.id == own


def _own_parameter(fn: Function) -> str:
    """The name of a method's first parameter when it is the instance (not a ``staticmethod`` or
    ``classmethod``) and is bound nowhere else in the method; else ''."""
    params = [*fn.args.posonlyargs, *fn.args.args]
    decorators = {ast.unparse(d) for d in fn.decorator_list}
    if not params or decorators & {"staticmethod", "classmethod"}:
        return ""
    name = params[0].arg
    for node in ast.walk(fn):
        if node is params[0]:
            continue
        rebinds = (
            (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store | ast.Del))
            or (isinstance(node, ast.arg) and node.arg == name)
            or (isinstance(node, ast.Global | ast.Nonlocal) and name in node.names)
            or (isinstance(node, ast.alias) and (node.asname or node.name) == name)
            or (isinstance(node, ast.ExceptHandler) and node.name == name)
            or (isinstance(node, Function | ast.ClassDef) and node.name == name)
        )
        if rebinds:
            return ""
    return name
