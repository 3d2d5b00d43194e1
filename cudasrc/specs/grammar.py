"""Parsing: the ``// @cuda-agent`` lines above a kernel into a :class:`KernelSpec` (expressions kept as text)."""

from __future__ import annotations

import ast
import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import cast

from cudasrc.dtypes import canonical_dtype, is_float
from cudasrc.source import Document
from cudasrc.specs.expressions import _NULLS, _rename
from cudasrc.specs.model import (
    MARKER,
    ArrayRole,
    ArraySpec,
    CompareSpec,
    ConstantSpec,
    DistSpec,
    InvalidSpec,
    KernelSpec,
    ScalarSpec,
    SpecError,
)
from cudasrc.specs.resolve import _names_in, _sizes, problem
from cudasrc.syntax import Kernel, Param
from sandbox.contract import (
    PRECISIONS,
    DistKind,
    Tolerance,
)

# ---------------------------------------------------------------------------------------- parsing

ONCE = ("launch", "template", "precision", "work")  # directives a kernel's spec gives at most once
# what a rewrite's own lines may say (``cuda-agent compare`` takes them; the rest is the original's)
REWRITE_LINES = ("launch", "template", "precision")
_PAIR_KEY = re.compile(r"(?<![<>!=\w])([A-Za-z_]\w*)\s*=(?!=)")
_ARRAY = re.compile(
    r"^(?P<name>\w+)\s+(?P<role>in|out|inout)\s+(?P<dtype>[\w:\s]+?)\s*\[(?P<count>.*)\]\s*(?P<dist>.*)$"
)
_SCALAR = re.compile(r"^(?P<name>\w+)\s*=\s*(?P<value>.+)$")
# NAME: as C++ names the variable, ``ns::filter`` or a variable template's ``mask<float>``
_CONST = re.compile(
    r"^(?P<name>[A-Za-z_][\w:]*(?:<[\w:, ]*>)?)\s+(?P<dtype>[\w:\s]+?)\s*\[(?P<count>.*)\]\s*(?P<dist>.*)$"
)
_DIST = re.compile(r"^(?P<kind>uniform|normal|randint|const|arange|copy|values)\s*(?:\((?P<args>.*)\))?$")
_DIST_ARITY = {
    "uniform": (2,),
    "normal": (0,),
    "randint": (2,),
    "const": (1,),
    "arange": (0,),
    "copy": (1,),
    "values": (1,),
}
_OFFSET = re.compile(r"(?:^|\s)offset\s*=(?!=)")


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        depth += (ch in "([") - (ch in ")]")
        if ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return parts


def _pairs(text: str) -> list[tuple[str, str]]:
    """``a=1<<24 b = cdiv(n, 2)`` -> [("a", "1<<24"), ("b", "cdiv(n, 2)")], keys at depth 0 only."""
    keys: list[re.Match[str]] = []
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif (
            depth == 0
            and (ch.isalpha() or ch == "_")
            and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))
        ):
            m = _PAIR_KEY.match(text, i)
            if m:
                keys.append(m)
    if not keys or text[: keys[0].start()].strip():
        raise ValueError(f"expected NAME=VALUE pairs, got `{text.strip()}`")
    out = []
    for k, m in enumerate(keys):
        end = keys[k + 1].start() if k + 1 < len(keys) else len(text)
        value = text[m.end() : end].strip()
        if not value:
            raise ValueError(f"`{m.group(1)}=` has no value")
        out.append((m.group(1), value))
    return out


def _split_offset(text: str) -> tuple[str, str]:
    """``"uniform(-1, 1) offset=pad"`` -> ("uniform(-1, 1)", "pad"); no ``offset=``: (text, "0")."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch in "([") - (ch in ")]")
        if depth == 0 and (m := _OFFSET.match(text, i)) and (i == 0 or ch.isspace()):
            value = text[m.end() :].strip()
            if not value:
                raise ValueError("`offset=` has no value")
            return text[:i], value
    return text, "0"


def parse_dims(text: str) -> tuple[str, ...]:
    """``"cdiv(n, block)"`` -> one dimension; ``"(a, b)"`` -> two; at most three (else ValueError)."""
    t = text.strip()
    if t.startswith("(") and t.endswith(")") and _split_top(t[1:-1]) and len(_split_top(t[1:-1])) > 1:
        dims = tuple(_split_top(t[1:-1]))
    else:
        dims = (t,)
    if not 1 <= len(dims) <= 3 or not all(dims):
        raise ValueError(f"`{t}` must be EXPR or (EXPR, EXPR[, EXPR])")
    return dims


def _dist(text: str) -> DistSpec:
    m = _DIST.match(text.strip())
    if not m:
        raise ValueError(
            f"unknown distribution `{text.strip()}` (uniform(lo,hi), normal, randint(lo,hi), const(v), "
            "arange, copy(ARG), values(EXPR))"
        )
    kind: DistKind = m["kind"]  # type: ignore[assignment]
    args = tuple(_split_top(m["args"])) if m["args"] and m["args"].strip() else ()
    if kind == "values" and m["args"] and m["args"].strip():
        args = (m["args"].strip(),)  # one expression, commas and all (`values(min(i, 7))`)
    if len(args) not in _DIST_ARITY[kind]:
        raise ValueError(f"{kind} takes {_DIST_ARITY[kind][0]} argument(s)")
    return DistSpec(kind, args)


class _Builder:
    """Accumulates directives of one comment block into a KernelSpec, collecting errors."""

    def __init__(self, kernel: Kernel, aliases: Mapping[str, str], names: Mapping[str, int]) -> None:
        self.kernel = kernel
        self.aliases = aliases
        self.names = names  # the file's integer macros and constexprs
        self.errors: list[SpecError] = []
        self.fields: dict[str, object] = {}
        self.sizes: dict[str, str] = {}
        self.verify: list[dict[str, str]] = []
        self.args: dict[str, ArraySpec | ScalarSpec] = {}
        self.constants: list[ConstantSpec] = []
        self.lines: dict[str, int] = {}
        self.mentioned: set[str] = set()  # parameters with an `arg` line, valid or not
        self.requires: list[tuple[str, int]] = []
        self.compares: list[CompareSpec] = []
        self.defines: dict[str, str] = {}
        self.first: dict[str, int] = {}  # a directive of ONCE -> the line it was first given at

    def directive(self, line: int, text: str) -> None:
        keyword, _, rest = text.strip().partition(" ")
        if keyword in ONCE:
            if keyword in self.first:  # never let a later line silently replace an earlier one
                self.errors.append(
                    SpecError(
                        line,
                        f"{keyword}: a second `{keyword}` line (the first is line {self.first[keyword] + 1}); "
                        f"give one `{keyword}` line per kernel",
                    )
                )
                return
            self.first[keyword] = line
        handler = getattr(self, f"_d_{keyword}", None)
        if handler is None:
            self.errors.append(
                SpecError(
                    line,
                    f"unknown directive `{keyword}` (sizes, verify, launch, arg, const, template, tolerance, "
                    "precision, require, compare, define, work)",
                )
            )
            return
        try:
            handler(line, rest.strip())
        except ValueError as exc:
            self.errors.append(SpecError(line, f"{keyword}: {exc}"))

    def _d_sizes(self, line: int, rest: str) -> None:
        head, _, verify = rest.partition(" verify ")
        for name, value in _pairs(head):
            if name in self.sizes:
                raise ValueError(f"size `{name}` given twice")
            self.sizes[name] = value
        self.lines["sizes"] = line
        if verify:
            self._d_verify(line, verify)

    def _d_verify(self, line: int, rest: str) -> None:
        columns = [(name, _split_top(values)) for name, values in _pairs(rest)]
        count = max(len(v) for _, v in columns)
        for name, values in columns:
            if len(values) not in (1, count):
                raise ValueError(f"`{name}` has {len(values)} values, expected 1 or {count}")
        for i in range(count):
            self.verify.append(
                {name: values[i] if len(values) > 1 else values[0] for name, values in columns}
            )
        self.lines.setdefault("verify", line)

    def _d_launch(self, line: int, rest: str) -> None:
        for key, value in _pairs(rest):
            if key in ("grid", "block"):
                self.fields[key] = parse_dims(value)
            elif key == "smem":
                self.fields["smem"] = value
            else:
                raise ValueError(f"unknown key `{key}` (grid, block, smem)")
        self.lines["launch"] = line

    def _d_arg(self, line: int, rest: str) -> None:
        self.mentioned.add(rest.split("=")[0].split()[0] if rest.split() else "")
        if m := _SCALAR.match(rest):
            param = self._param(m["name"])
            value = m["value"].strip()
            if param.pointer and value not in _NULLS:
                raise ValueError(
                    f"`{m['name']}` is a pointer; write `arg {m['name']} in|out|inout DTYPE[COUNT]` "
                    f"(or `arg {m['name']} = NULL`)"
                )
            # a NULL pointer is passed as a 64-bit zero
            dtype = "uint64" if param.pointer else self._dtype(param.base_type)
            spec: ArraySpec | ScalarSpec = ScalarSpec(
                m["name"], dtype, "NULL" if param.pointer else value, line
            )
        elif m := _ARRAY.match(rest):
            param = self._param(m["name"])
            if not param.pointer:
                raise ValueError(f"`{m['name']}` is a scalar parameter; write `arg {m['name']} = EXPR`")
            tail, offset = _split_offset(m["dist"])
            dist = _dist(tail) if tail.strip() else None
            dtype = self._dtype(m["dtype"])
            role = cast(ArrayRole, m["role"])
            spec = ArraySpec(
                m["name"], role, dtype, m["count"].strip(), dist or default_dist(dtype), line, offset
            )
        else:
            raise ValueError(
                "expected `arg NAME in|out|inout DTYPE[COUNT] [DIST] [offset=EXPR]` or `arg NAME = EXPR`"
            )
        if spec.name in self.args:
            raise ValueError(f"`{spec.name}` described twice")
        self.args[spec.name] = spec

    def _d_const(self, line: int, rest: str) -> None:
        m = _CONST.match(rest)
        if not m:
            raise ValueError("expected `const NAME DTYPE[COUNT] [DIST]` (NAME: `c`, `ns::c` or `c<float>`)")
        dtype = self._dtype(m["dtype"])
        dist = _dist(m["dist"]) if m["dist"].strip() else default_dist(dtype)
        if dist.kind == "copy" and not self._param(dist.args[0]).pointer:
            raise ValueError(f"copy({dist.args[0]}): a constant copies a pointer argument's data")
        self.constants.append(ConstantSpec(m["name"], dtype, m["count"].strip(), dist, line))

    def _d_compare(self, line: int, rest: str) -> None:
        usage = "expected `compare NAME where COND`, `compare NAME[i < EXTENT, ...] where COND` or `compare NAME written`"
        head, sep, where = rest.partition(" where ")
        written = not sep and rest.split()[-1:] == ["written"]
        if written:
            head = rest.rsplit(None, 1)[0] if len(rest.split()) > 1 else ""
        elif not sep or not where.strip():
            raise ValueError(usage)
        try:
            tree = ast.parse(head.strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise ValueError(usage) from None
        index: tuple[str, ...] = ("i",)
        extents: tuple[str, ...] = ()
        if isinstance(tree, ast.Subscript):
            dims = tree.slice.elts if isinstance(tree.slice, ast.Tuple) else [tree.slice]
            if not all(
                isinstance(d, ast.Compare)
                and isinstance(d.left, ast.Name)
                and len(d.ops) == 1
                and isinstance(d.ops[0], ast.Lt)
                for d in dims
            ):
                raise ValueError("each dimension is `INDEX < EXTENT`, outermost first: `out[i < T, j < T]`")
            index = tuple(cast(ast.Name, cast(ast.Compare, d).left).id for d in dims)
            extents = tuple(ast.unparse(cast(ast.Compare, d).comparators[0]) for d in dims)
            if len(set(index)) != len(index) or not 1 <= len(index) <= 4:
                raise ValueError("give 1 to 4 dimensions with different index names")
            tree = tree.value
        if not isinstance(tree, ast.Name):
            raise ValueError(usage)
        param = self._param(tree.id)
        if not param.pointer:
            raise ValueError(f"`{tree.id}` is a scalar parameter, not an output")
        if any(c.name == tree.id for c in self.compares):
            raise ValueError(f"a second `compare` for `{tree.id}`")
        condition = " ".join(where.replace("&&", " and ").replace("||", " or ").split())
        self.compares.append(CompareSpec(tree.id, index, extents, condition, written, line))

    def _d_define(self, line: int, rest: str) -> None:
        for name, value in _pairs(rest):
            if name in self.defines:
                raise ValueError(f"macro `{name}` given twice")
            self.defines[name] = value
        self.lines["define"] = line

    def _d_template(self, line: int, rest: str) -> None:
        args = tuple(a for a in _split_top(rest.strip().removeprefix("<").removesuffix(">")) if a)
        if len(args) != len(self.kernel.template_params):
            raise ValueError(
                f"{self.kernel.name} has {len(self.kernel.template_params)} template parameter(s), got {len(args)}"
            )
        self.fields["template_args"] = args
        self.lines["template"] = line

    def _d_tolerance(self, line: int, rest: str) -> None:
        values: dict[str, float | None] = {"atol": None, "rtol": None, "norm": None}
        arg = ""
        for key, value in _pairs(rest):
            if key == "arg":
                param = self._param(value)
                if not param.pointer:
                    raise ValueError(f"`{value}` is a scalar parameter, not an output")
                arg = value
                continue
            if key not in values:
                raise ValueError(f"unknown key `{key}` (arg, atol, rtol, norm)")
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"{key}={value} is not a number") from None
            if not math.isfinite(number) or number < 0:
                raise ValueError(f"{key}={value} must be a finite number >= 0")
            values[key] = number
        if all(v is None for v in values.values()):
            raise ValueError("give atol=, rtol= and/or norm=")
        tol = Tolerance(values["atol"], values["rtol"], values["norm"], arg)
        key = f"tolerance {arg}" if arg else "tolerance"
        if key in self.fields:
            raise ValueError(f"a second tolerance for {f'`{arg}`' if arg else 'every output'}")
        self.fields[key] = tol
        self.lines.setdefault("tolerance", line)

    def _d_precision(self, line: int, rest: str) -> None:
        self.fields["allow_precision"] = precision_kinds(rest)
        self.lines["precision"] = line

    def _d_require(self, line: int, rest: str) -> None:
        condition = " ".join(rest.replace("&&", " and ").replace("||", " or ").split())
        if not condition:
            raise ValueError(
                "expected `require CONDITION` (e.g. `n % 32 == 0`, `pow2(block)`, `bytes <= 1<<32`)"
            )
        self.requires.append((condition, line))  # checked for every problem by `problem`

    def _d_work(self, line: int, rest: str) -> None:
        for key, value in _pairs(rest):
            if key not in ("bytes", "flops", "floor"):
                raise ValueError(f"unknown key `{key}` (bytes, flops, floor)")
            if key == "floor" and value.strip() not in ("on", "off"):
                raise ValueError("expected `floor=off` (the work counts overstate the traffic) or `floor=on`")
            self.fields[key] = value.strip() if key == "floor" else value
        self.lines["work"] = line

    def _param(self, name: str) -> Param:
        param = self.kernel.param(name)
        if param is None:
            names = [p.name for p in self.kernel.params]
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise ValueError(
                f"{self.kernel.name} has no parameter `{name}` (parameters: {', '.join(names)}){hint}"
            )
        return param

    def _misspelt(self, name: str) -> bool:
        """Whether an `arg` line names a parameter that does not exist, ``name`` being the closest
        parameter to it (that line's error then says so, at that line)."""
        names = [p.name for p in self.kernel.params]
        return any(
            difflib.get_close_matches(m, names, n=1) == [name] for m in self.mentioned if m not in names
        )

    def _dtype(self, text: str) -> str:
        text = " ".join(text.split())
        targs = self.fields.get("template_args", ())
        for tp, value in zip(self.kernel.template_params, targs, strict=False):  # type: ignore[call-overload]
            if tp.name == text:
                text = value
        dtype = canonical_dtype(text, self.aliases)
        if dtype is None:
            raise ValueError(f"unknown element type `{text}`")
        return dtype

    def build(self) -> KernelSpec:
        kernel = self.kernel
        first = kernel.comment[0][0] if kernel.comment else kernel.span.start_line
        if not self.sizes:
            self.errors.append(SpecError(first, "no `sizes` line"))
        for key in ("sizes", "verify", "launch", "work"):  # defaults are reported at the block's first line
            self.lines.setdefault(key, first)
        args: list[ArraySpec | ScalarSpec] = []
        for p in kernel.params:
            if p.name in self.args:
                args.append(self.args[p.name])
            elif not p.pointer and p.name in self.sizes:  # `int n` with a size `n`: implied
                dtype = canonical_dtype(p.base_type, self.aliases) or "int32"
                args.append(ScalarSpec(p.name, dtype, p.name, self.lines["sizes"]))
            elif p.name not in self.mentioned and not self._misspelt(p.name):
                self.errors.append(SpecError(first, f"parameter `{p.name}` has no `arg` line"))
        if kernel.template_params and "template_args" not in self.fields:
            self.errors.append(SpecError(first, f"{kernel.name} is a template: add `template ARG, ...`"))
        grid = self.fields.get("grid")
        if grid is None and len(self.sizes) != 1:
            self.errors.append(SpecError(first, "no `launch grid=...` (needed with more than one size)"))
        spec = KernelSpec(
            kernel=kernel.qualified_name,
            sizes=dict(self.sizes),
            verify=tuple(self.verify),
            grid=grid or (f"cdiv({next(iter(self.sizes), 'n')}, block)",),  # type: ignore[arg-type]
            block=self.fields.get("block", ("256",)),  # type: ignore[arg-type]
            smem=str(self.fields.get("smem", "0")),
            args=tuple(args),
            constants=tuple(self.constants),
            template_args=self.fields.get("template_args", ()),  # type: ignore[arg-type]
            tolerance=self.fields.get("tolerance"),  # type: ignore[arg-type]
            output_tolerances=tuple(
                v for k, v in self.fields.items() if k.startswith("tolerance ") and isinstance(v, Tolerance)
            ),
            allow_precision=self.fields.get("allow_precision", ()),  # type: ignore[arg-type]
            bytes=str(self.fields.get("bytes", "")),
            flops=str(self.fields.get("flops", "")),
            floor=self.fields.get("floor", "on") != "off",
            requires=tuple(self.requires),
            compares=tuple(self.compares),
            defines=dict(self.defines),
            lines=dict(self.lines),
        )
        spec = _with_names(spec, self.names)
        if self.sizes:  # evaluate every expression once per problem size, to report what fails
            for overrides in (None, *spec.verify):
                try:
                    problem(spec, _sizes(spec, overrides))
                except InvalidSpec as exc:
                    self.errors.extend(exc.errors)
                    break
        return spec


def _with_names(spec: KernelSpec, names: Mapping[str, int]) -> KernelSpec:
    """``spec`` with the file's integer macros and ``constexpr``\\ s its expressions name (``block=
    ROW_BLOCK``) replaced by their values; a size of the same name wins."""
    known = {k: str(v) for k, v in names.items() if k not in spec.sizes and k not in ("block", "block_x")}
    if not known:
        return spec

    def sub(text: str) -> str:
        used = _names_in(text) & set(known)
        return _rename(text, {n: known[n] for n in used}) if used else text

    args = tuple(
        replace(a, count=sub(a.count), offset=sub(a.offset))
        if isinstance(a, ArraySpec)
        else replace(a, value=sub(a.value))
        for a in spec.args
    )
    return replace(
        spec,
        sizes={k: sub(v) for k, v in spec.sizes.items()},
        verify=tuple({k: sub(v) for k, v in problem_sizes.items()} for problem_sizes in spec.verify),
        grid=tuple(sub(d) for d in spec.grid),
        block=tuple(sub(d) for d in spec.block),
        smem=sub(spec.smem),
        args=args,
        constants=tuple(replace(c, count=sub(c.count)) for c in spec.constants),
        bytes=sub(spec.bytes) if spec.bytes else "",
        flops=sub(spec.flops) if spec.flops else "",
        requires=tuple((sub(c), line) for c, line in spec.requires),
        defines={k: sub(v) for k, v in spec.defines.items()},
    )


def default_dist(dtype: str) -> DistSpec:
    if is_float(dtype):
        return DistSpec("uniform", ("-1", "1"))
    if dtype == "bool":
        return DistSpec("randint", ("0", "2"))
    return DistSpec("randint", ("0", "100"))


def directive_text(comment: str) -> str | None:
    """The directive of a ``//`` comment's text (after ``//``) that starts with ``@cuda-agent``;
    None for other comments, also those that mention ``@cuda-agent`` in prose."""
    text = comment.lstrip("/! \t")
    return text[len(MARKER) :] if text.startswith(MARKER) else None


@dataclass(frozen=True)
class Misplaced:
    """Spec lines that are not directly above a kernel, so no kernel reads them: ``first``..``last``
    (0-based lines), the kernel they were probably meant for (the next one below) and why."""

    first: int
    last: int
    kernel: Kernel | None
    reason: str


def misplaced(doc: Document) -> tuple[Misplaced, ...]:
    """Every block of ``// @cuda-agent`` lines that is not a kernel's spec (separated from the
    kernel by a blank line, a ``#define``, a block comment, ...): silently ignored otherwise."""
    owned = {line for k in doc.kernels for line, _ in k.comment}
    out: list[Misplaced] = []
    line, count = 0, doc.line_count
    while line < count:
        raw = doc.line_bytes(line).decode("utf-8", errors="replace").strip()
        if line in owned or not raw.startswith("//") or directive_text(raw[2:]) is None:
            line += 1
            continue
        first = line
        while line + 1 < count and (line + 1) not in owned:
            nxt = doc.line_bytes(line + 1).decode("utf-8", errors="replace").strip()
            if not nxt.startswith("//"):
                break
            line += 1
        below = [k for k in doc.kernels if k.span.start_line > line]
        target = min(below, key=lambda k: k.span.start_line) if below else None
        if target is None:
            reason = "no kernel follows it"
        else:
            gap = doc.line_bytes(line + 1).decode("utf-8", errors="replace").strip()
            what = "a blank line" if not gap else f"`{gap[:40]}`"
            reason = f"separated from {target.qualified_name} by {what}"
        out.append(Misplaced(first, line, target, reason))
        line += 1
    return tuple(out)


def parse(
    kernel: Kernel, aliases: Mapping[str, str] | None = None, names: Mapping[str, int] | None = None
) -> tuple[KernelSpec | None, tuple[SpecError, ...]]:
    """The spec written above ``kernel`` (None when there is no ``@cuda-agent`` line, or when its
    lines are only :data:`REWRITE_LINES`: a rewrite's own launch, which ``cuda-agent compare``
    reads, is no spec to benchmark; their mistakes are still reported).  ``aliases``: the file's
    :attr:`Document.type_aliases`, so parameters typed ``u32`` or ``real`` resolve; ``names``: its
    :attr:`Document.integer_constants`, so expressions may name the file's integer macros and
    ``constexpr``\\ s (``block=ROW_BLOCK``).  Errors come by line, in the order found (the same on
    every run)."""
    lines = [(line, d) for line, text in kernel.comment if (d := directive_text(text)) is not None]
    if not lines:
        return None, ()
    b = _Builder(kernel, aliases or {}, names or {})
    # template first: element types may name template parameters (`arg x in T[n]`)
    for line, text in sorted(lines, key=lambda lt: not lt[1].strip().startswith("template")):
        b.directive(line, text)
    rewrite_only = all(text.strip().partition(" ")[0] in REWRITE_LINES for _, text in lines)
    spec = None if rewrite_only else b.build()
    return spec, tuple(sorted(dict.fromkeys(b.errors), key=lambda e: e.line))


# ---------------------------------------------------------------------------------------- resolution


def launch_pairs(text: str) -> dict[str, str]:
    """The keys of a ``launch`` directive's text (``grid=... block=... smem=...``, any subset), each
    dimension list checked; raises ValueError with the reason.  For launch changes written
    outside a full spec (a candidate's own ``launch`` line, ``cuda-agent compare --launch``)."""
    out: dict[str, str] = {}
    for key, value in _pairs(text):
        if key not in ("grid", "block", "smem"):
            raise ValueError(f"unknown key `{key}` (grid, block, smem)")
        if key in out:
            raise ValueError(f"`{key}` given twice")
        if key != "smem":
            parse_dims(value)
        out[key] = value
    return out


def precision_kinds(text: str) -> tuple[str, ...]:
    """The kinds of a ``precision`` directive's text (``allow=fp16,bf16``), each one of
    :data:`~sandbox.contract.PRECISIONS`; raises ValueError with the reason.  Also a candidate's
    own ``precision`` line (``cuda-agent compare``): the lower precision it claims to use."""
    kinds: list[str] = []
    for key, value in _pairs(text):
        if key != "allow":
            raise ValueError(f"unknown key `{key}` (allow)")
        for kind in (k.strip() for k in value.split(",")):
            if kind not in PRECISIONS:
                raise ValueError(f"unknown precision `{kind}` ({', '.join(PRECISIONS)})")
            kinds.append(kind)
    if not kinds:
        raise ValueError("expected `precision allow=KIND[,KIND...]`")
    return tuple(dict.fromkeys(kinds))


def template_names(args: tuple[str, ...]) -> frozenset[str]:
    """The names template arguments mention (``matmul_tri_naive`` in ``k<matmul_tri_naive>``):
    what a standalone unit must define besides the kernel's own references."""
    return frozenset(re.findall(r"[A-Za-z_]\w*", " ".join(args)))


def split_args(text: str) -> list[str]:
    """Template arguments ``float, 256`` (or ``<float, 256>``) split at top-level commas."""
    return _split_top(text.strip().removeprefix("<").removesuffix(">"))


# ---------------------------------------------------------------------------------------- inference from a run
