"""Entry points: run a document's program (cached), find a kernel's launch in the project."""

from __future__ import annotations

import os
import shlex
import weakref
from collections.abc import Mapping
from pathlib import Path

from cudasrc import pyhost
from cudasrc.dtypes import canonical_dtype, dtype_bytes
from cudasrc.host.interp import _Break, _Interp
from cudasrc.host.program import _Budget, _Func, _Program, _Return
from cudasrc.host.values import Buffer, CommandLine, Dims, HostRun, LaunchEvent, Num, Root, Tensor, Value
from cudasrc.project import display_path, project_of
from cudasrc.source import Document
from sandbox.expr import operand

# ---------------------------------------------------------------------------------------- entry points

_RUNS: weakref.WeakKeyDictionary[Document, dict[tuple[str, ...], HostRun]] = weakref.WeakKeyDictionary()
_MAX_HOSTS = 256  # files of the project read when looking for a kernel's launch
_MAX_LINKED = 24  # other translation units linked with a file that has main()
_UNITS = frozenset({".cu", ".cpp", ".cc", ".cxx", ".c"})  # translation units (headers come with them)


def run(
    doc: Document,
    defines: Mapping[str, str] | None = None,
    link: tuple[Document, ...] = (),
    command: tuple[tuple[str, ...], str] = ((), ""),
) -> HostRun:
    """Run ``doc``'s program from ``main()`` and from each function that launches a kernel not
    reached from it.  ``command``: the arguments ``main`` is entered with and the command line
    they were read from, as shown (:func:`command_lines`); without any, ``argc`` is 1, so
    ``argc > 1 ? atoi(argv[1]) : 4096`` is its default and a flag parser
    (``checkCmdLineFlag(argc, argv, "n")``, ``getopt``) finds no flag.  ``link``: the program's other translation units, whose functions ``doc``
    calls (a ``main.cpp`` calling launchers a ``.cu`` defines).  Cached per document and
    command line (unlinked)."""
    argv, shown = command
    cached = _RUNS.get(doc, {}).get(argv) if not link else None
    if cached is not None and not defines:
        return cached
    result = HostRun(command=shown)
    try:
        aliases: dict[str, str] = {}
        for unit in (*reversed(link), doc):
            aliases.update(unit.type_aliases)
        prog = _Program(doc, defines or {}, aliases)
        for unit in link:
            prog.link(unit)
        interp = _Interp(prog, result)
        result.constants = dict(prog.constants)
        entries = ["main"] + [s.caller for s in doc.launches if s.caller and s.caller != "main"]
        for name in dict.fromkeys(entries):
            func = prog.funcs.get(name)
            launched = {s.kernel.split("::")[-1] for s in doc.launches if s.caller == name}
            if func is None or (name != "main" and launched <= set(result.launches)):
                continue
            interp.depth = 0
            interp.notes = []
            interp.steps = 0
            before = set(result.launches)
            try:
                interp.call(func, _entry_args(doc, name, func, interp, argv))
            except (_Budget, _Return, _Break, RecursionError):
                continue
            finally:
                for kernel in set(result.launches) - before:
                    result.entries[kernel] = name
    except RecursionError:
        pass
    if not defines and not link:
        _RUNS.setdefault(doc, {})[argv] = result
    return result


def command_lines(path: str | None) -> list[tuple[tuple[str, ...], str]]:
    """How the program's own build file runs it: the arguments of each command of the ``run``
    target of the nearest ``Makefile`` (in its folder or one of the two above: ``run: main``,
    then a recipe line ``$(LAUNCHER) ./main 65536 2048 0 100``), each with the command as shown
    (```./main 65536 2048 0 100` at Makefile:12``).  Make variables, an ``@``/``-`` prefix and what follows a shell
    operator (``> log``, ``| tee``) are left out."""
    if not path:
        return []
    here = Path(path).resolve().parent
    for folder in (here, *here.parents[:2]):
        makefile = folder / "Makefile"
        try:
            lines = makefile.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        return _run_target(lines, display_path(str(makefile)))
    return []


def _run_target(lines: list[str], name: str) -> list[tuple[tuple[str, ...], str]]:
    out: list[tuple[tuple[str, ...], str]] = []
    in_run = False
    for i, line in enumerate(lines):
        if not line.startswith("\t"):
            target, colon, rest = line.partition(":")
            in_run = bool(colon) and not rest.startswith("=") and "run" in target.split()
            continue
        if not in_run:
            continue
        try:
            words = shlex.split(line.strip().lstrip("@-"), comments=True)
        except ValueError:
            continue
        words = [w for w in words if not (w.startswith("$(") or w.startswith("${"))]
        if not words or "/" not in words[0]:  # `./main ...`: a program of the folder, not a tool
            continue
        args: list[str] = []
        for w in words[1:]:
            if w in (";", "&&", "||", "|", "&") or w.startswith((">", "<", "2>", "1>")):
                break
            args.append(w)
        out.append((tuple(args), f"`{shlex.join([words[0], *args])}` at {name}:{i + 1}"))
    return out


def _entry_args(
    doc: Document, name: str, func: _Func, interp: _Interp, argv: tuple[str, ...] = ()
) -> list[Value]:
    """The arguments a function is entered with: ``main``'s ``argc`` and ``argv`` (``argv``: the
    command line's arguments, none by default); for a PyTorch extension's function, tensors of
    the shapes the Python code that calls it passes (through its ``m.def`` binding)."""
    if name == "main" and func.params:
        return [Num(str(len(argv) + 1)), CommandLine(argv)]
    if not any(func.tensors) or not doc.path:
        return []
    bound = _python_names(doc, name) or [name]
    scripts = [p for p in project_of(doc.path).sources if p.suffix == ".py"]
    shapes: list[pyhost.Shape | None] = []
    for py_name in bound:
        shapes = pyhost.call_shapes(scripts, py_name) or []
        if shapes:
            break
    args: list[Value] = []
    for i, (param, is_tensor) in enumerate(zip(func.params, func.tensors, strict=False)):
        shape = shapes[i] if i < len(shapes) else None
        if not is_tensor:
            args.append(None)
            continue
        args.append(
            Tensor(
                tuple(
                    interp.root(d.name or f"{param}_{axis}", Num(str(d.value)), d.where)
                    if d is not None
                    else None
                    for axis, d in enumerate(shape or ())
                )
            )
        )
    return args


def _python_names(doc: Document, function: str) -> list[str]:
    """The Python names ``m.def("name", &function, ...)`` binds ``function`` to."""
    out: list[str] = []
    stack = [doc.tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.named_children)
        if node.type != "call_expression":
            continue
        fn = node.child_by_field_name("function")
        field_node = (
            fn.child_by_field_name("field") if fn is not None and fn.type == "field_expression" else None
        )
        args = node.child_by_field_name("arguments")
        if field_node is None or doc.node_text(field_node) != "def" or args is None:
            continue
        parts = args.named_children
        if len(parts) >= 2 and parts[0].type == "string_literal":
            target = doc.node_text(parts[1]).lstrip("&").strip().split("::")[-1]
            if target == function:
                out.append(doc.node_text(parts[0]).strip('"'))
    return out


def launch_of(doc: Document, kernel: str) -> tuple[LaunchEvent, HostRun, Document] | None:
    """The first launch of ``kernel`` found by running ``doc``'s program or, for a kernel in a
    header, the programs next to it that include it.  A program is run with each command line
    of its build file's ``run`` target (:func:`command_lines`) until one reaches the kernel (an
    argument may pick the implementation that launches it), then without arguments."""
    if reached := _reaching(doc, kernel):
        return reached.launches[kernel], reached, doc
    found = run(doc)
    if not doc.path:
        return None
    here = Path(doc.path).resolve()
    # the files nearest the kernel's first (its folder, then its parent's...): in a big tree the
    # program that launches it is usually beside it
    nearby = sorted(
        (p for p in project_of(here).sources if p.suffix != ".py" and p != here and _may_launch(p, kernel)),
        key=lambda p: (-len(os.path.commonpath((p, here)).split(os.sep)), str(p)),
    )
    hosts = nearby[:_MAX_HOSTS]
    if from_main := _from_a_main(doc, kernel, hosts):
        return from_main
    if kernel in found.launches:
        return found.launches[kernel], found, doc
    for path in hosts:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if kernel not in text:
            continue
        host = Document(text, str(path))
        found = run(host)
        if kernel in found.launches:
            return found.launches[kernel], found, host
    scripts = [p for p in project_of(here).sources if p.suffix == ".py"][:_MAX_HOSTS]
    call = pyhost.tuner_call(scripts, kernel)
    return _tuner_launch(doc, kernel, call) if call is not None else None


def _may_launch(path: Path, kernel: str) -> bool:
    """Whether a host file of the project may launch our ``kernel``: not when it defines a kernel
    of that name itself (another program's, in a folder beside ours): its launches are of that one."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return kernel not in text or Document(text).kernel(kernel) is None  # no path: its own text only


def _from_a_main(
    doc: Document, kernel: str, hosts: list[Path]
) -> tuple[LaunchEvent, HostRun, Document] | None:
    """The launch of ``kernel`` as a program of the project reaches it from its ``main()``: a file
    with ``main`` that names the kernel or one of its launchers, run linked with the translation
    units that launch it (``main.cpp`` calling ``launch_smooth`` of ``launch.cu``, which launches
    a kernel of ``kernels.cuh``) and those beside it without a ``main`` of their own (the CPU
    code it calls: ``generateRandomData`` of ``reference.cpp``)."""
    texts: dict[Path, str] = {}
    for path in hosts:
        try:
            texts[path] = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    # a file that defines a kernel of that name itself launches that one, not doc's
    others = (Document(t, str(p)) for p, t in texts.items() if kernel in t)
    launching = [doc, *(u for u in others if u.kernel(kernel) is None)][:_MAX_LINKED]
    launchers = {
        s.caller for u in launching for s in u.launches if s.kernel.split("::")[-1] == kernel and s.caller
    }
    launchers.discard("main")
    units = tuple(u for u in launching if u.path and Path(u.path).suffix in _UNITS)
    for path, text in texts.items():
        if "main" not in text or not (kernel in text or any(name in text for name in launchers)):
            continue
        host = Document(text, str(path))
        if host.kernel(kernel) is not None:
            continue
        beside = [
            Document(t, str(p))
            for p, t in texts.items()
            if p.parent == path.parent and p != path and p.suffix in _UNITS
        ]
        linked = tuple(u for u in units if u.path != str(path))
        linked += tuple(u for u in beside if not _defines_main(u) and u.path not in {v.path for v in linked})
        if reached := _reaching(host, kernel, linked[:_MAX_LINKED]):
            return reached.launches[kernel], reached, host
    return None


def _defines_main(doc: Document) -> bool:
    """Whether ``doc`` defines ``main()`` (another program's entry)."""
    for node in doc.tree.root_node.children:
        decl = node.child_by_field_name("declarator") if node.type == "function_definition" else None
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        name = decl.child_by_field_name("declarator") if decl is not None else None
        if name is not None and doc.node_text(name) == "main":
            return True
    return False


def _reaching(host: Document, kernel: str, link: tuple[Document, ...] = ()) -> HostRun | None:
    """The first run of ``host``'s ``main`` that launches ``kernel``: with each of its build
    file's command lines; then with each of them but one argument unknown (``?``), the
    argument that picks an implementation none of them runs (``if (impl == 1)``: both ways
    taken); then with no arguments."""
    commands = command_lines(host.path)
    loose = [
        (tuple("?" if j == i else a for j, a in enumerate(args)), f"{shown}, argument {i + 1} unknown")
        for args, shown in commands
        for i in range(len(args))
    ]
    for command in (*commands, *loose, ((), "")):
        found = run(host, link=link, command=command)
        if kernel in found.launches and found.entries.get(kernel) == "main":
            return found
    return None


def _tuner_launch(
    doc: Document, kernel: str, call: pyhost.TunerCall
) -> tuple[LaunchEvent, HostRun, Document]:
    """Kernel Tuner's first launch of ``kernel``: block from ``block_size_x/y/z`` (256, 1, 1 when
    not tuned), grid the problem size divided by ``grid_div_x/y/z`` (by default the block), every
    tunable parameter a ``#define`` at its first value."""
    found = HostRun()

    def num(d: pyhost.Dim | None) -> Num | None:
        if d is None:
            return None
        if not d.name:
            return Num(str(d.value))
        found.roots.setdefault(d.name, Root(d.name, str(d.value), d.where))
        return Num(d.name)

    params = {d.name: num(d) for d in call.params}
    tuned = [a for a in "xyz" if f"block_size_{a}" in params] or ["x"]
    axes = "xyz"[: "xyz".index(tuned[-1]) + 1]  # (x), (x, y) or (x, y, z), as far as tuned
    block = tuple(params.get(f"block_size_{a}") or Num("256" if a == "x" else "1") for a in axes)
    grid: list[Num | None] = []
    for axis, size in zip("xyz", call.problem, strict=False):
        names = call.grid_div["xyz".index(axis)]
        if names is None:
            names = (f"block_size_{axis}",) if f"block_size_{axis}" in params else ()
        divisors = [params.get(n) for n in names]
        n = num(size)
        if n is None or any(d is None for d in divisors):
            grid.append(None)
            continue
        grid.append(
            Num(f"cdiv({n.expr}, {'*'.join(operand(d.expr) for d in divisors if d)})") if divisors else n
        )
    k = doc.kernel(kernel)
    elems = [
        dtype_bytes(canonical_dtype(p.base_type, doc.type_aliases) or "float32")
        for p in (k.params if k else ())
    ]
    args: list[Value] = []
    for i, a in enumerate(call.args):
        if isinstance(a, pyhost.Array):
            dims = [num(d) for d in a.dims]
            count = "*".join(operand(d.expr) for d in dims if d is not None) if all(dims) and dims else ""
            elem = a.itemsize or (elems[i] if i < len(elems) else 4)
            args.append(Buffer(count, elem, call.where, fill="0" if a.zero else "") if count else None)
        elif isinstance(a, pyhost.Scalar):
            args.append(
                num(a.dim)
                if a.dim is not None
                else Num(repr(a.value), is_float=True)
                if a.value is not None
                else None
            )
        else:
            args.append(None)
    event = LaunchEvent(
        kernel,
        (),
        Dims(tuple(grid)) if grid else None,
        Dims(block),
        Num("0"),
        tuple(args),
        call.where,
        defines=tuple((name, value) for name, value in params.items() if value is not None),
    )
    found.launches[kernel] = event
    return event, found, doc
