"""The file's own ``#define``\\ s, expanded as the preprocessor does, on tokens.

:func:`definitions` reads a file's object-like and function-like macros from its tree-sitter tree
(``preproc_def``, ``preproc_function_def``); :func:`expansions` finds the macro invocations in a
node (a kernel's body, whose leaves are its tokens) and gives, per invocation, the text it expands
to: arguments fully expanded before substitution, the result rescanned with the macro's own name
hidden (C11 6.10.3), tokens spaced as written.  A macro whose replacement stringizes or pastes
(``#``, ``##``) or that is variadic is not expanded (its invocations stay as written).

``wanted(name)`` decides which invocations written in the node expand; every macro inside an
expansion expands (the rescan), so ``#define UNUSED UNUSED_CUDA`` followed by ``UNUSED(x)`` is one
invocation of ``UNUSED_CUDA``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tree_sitter

from cudasrc.syntax import Parsed

Node = tree_sitter.Node
_WHOLE = ("string_literal", "char_literal", "raw_string_literal", "system_lib_string", "comment")


@dataclass(frozen=True)
class Token:
    text: str
    spaced: bool  # whitespace before it
    hidden: frozenset[str] = frozenset()  # macros that do not expand here (the rescan's hide set)


@dataclass(frozen=True)
class Macro:
    name: str
    params: tuple[str, ...] | None  # None: object-like
    body: tuple[Token, ...]


def tokens(doc: Parsed, node: Node) -> list[tuple[Token, int, int]]:
    """``node``'s tokens (its leaves; a string, character literal or comment is one), each with
    its byte span; zero-width leaves (tree-sitter's inserted ``;``) are none."""
    out: list[tuple[Token, int, int]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.child_count and n.type not in _WHOLE:
            stack.extend(reversed(n.children))
            continue
        if n.end_byte == n.start_byte or n.type == "comment":
            continue
        spaced = bool(out) and out[-1][2] < n.start_byte
        out.append((Token(doc.node_text(n), spaced), n.start_byte, n.end_byte))
    return out


def definitions(doc: Parsed) -> dict[str, Macro]:
    """The macros ``doc`` defines (the first definition of a name), those it can expand."""
    out: dict[str, Macro] = {}
    stack = [doc.tree.root_node]
    while stack:
        n = stack.pop()
        stack.extend(reversed(n.children))
        if n.type not in ("preproc_def", "preproc_function_def"):
            continue
        name, value = n.child_by_field_name("name"), n.child_by_field_name("value")
        if name is None or doc.node_text(name) in out:
            continue
        params: tuple[str, ...] | None = None
        if n.type == "preproc_function_def":
            plist = n.child_by_field_name("parameters")
            params = tuple(doc.node_text(p) for p in plist.named_children) if plist is not None else ()
        text = doc.node_text(value).replace("\\\n", " ") if value is not None else ""  # spliced lines
        body = (
            tuple(t for t, _, _ in tokens(Parsed(text), Parsed(text).tree.root_node)) if text.strip() else ()
        )
        body = tuple(Token(t.text, t.spaced and i > 0) for i, t in enumerate(body))
        if any(t.text in ("#", "##", "__VA_ARGS__") for t in body) or "..." in (params or ()):
            continue
        out[doc.node_text(name)] = Macro(doc.node_text(name), params, body)
    return out


def _arguments(stream: list[Token], at: int) -> tuple[list[list[Token]], int] | None:
    """The arguments of the invocation whose ``(`` is ``stream[at]`` and the index of its ``)``."""
    args: list[list[Token]] = [[]]
    depth = 0
    for i in range(at + 1, len(stream)):
        t = stream[i].text
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            if depth == 0:
                return (args if args != [[]] else []), i
            depth -= 1
        elif t == "," and depth == 0:
            args.append([])
            continue
        args[-1].append(stream[i])
    return None


def expand(stream: list[Token], macros: dict[str, Macro], wanted: Callable[[str], bool]) -> list[Token]:
    """``stream`` with its macro invocations expanded (those written in it only where ``wanted``)."""
    stream = list(stream)
    out: list[Token] = []
    i = 0
    while i < len(stream):
        t = stream[i]
        m = macros.get(t.text)
        if m is None or t.text in t.hidden or (not t.hidden and not wanted(t.text)):  # as written: wanted?
            out.append(t)
            i += 1
            continue
        hide = t.hidden | {m.name}
        if m.params is None:
            stream[i : i + 1] = _placed(m.body, (), {}, t.spaced, hide)
            continue
        found = _arguments(stream, i + 1) if i + 1 < len(stream) and stream[i + 1].text == "(" else None
        if found is None or len(found[0]) != len(m.params):
            out.append(t)
            i += 1
            continue
        args, close = found
        actual = {p: expand(a, macros, lambda _: True) for p, a in zip(m.params, args, strict=True)}
        stream[i : close + 1] = _placed(m.body, m.params, actual, t.spaced, hide)
    return out


def _placed(
    body: tuple[Token, ...],
    params: tuple[str, ...],
    actual: dict[str, list[Token]],
    spaced: bool,
    hide: frozenset[str],
) -> list[Token]:
    out: list[Token] = []
    for t in body:
        if t.text in params:
            arg = actual[t.text]
            out += [
                Token(a.text, (t.spaced if k == 0 else a.spaced), a.hidden | hide) for k, a in enumerate(arg)
            ]
        else:
            out.append(Token(t.text, t.spaced, t.hidden | hide))
    if out:
        out[0] = Token(out[0].text, spaced, out[0].hidden)
    return out


def text(toks: list[Token]) -> str:
    return "".join((" " if t.spaced and k else "") + t.text for k, t in enumerate(toks))


def expansions(
    doc: Parsed, node: Node, macros: dict[str, Macro], wanted: Callable[[str], bool]
) -> list[tuple[int, int, str]]:
    """Per macro invocation written in ``node`` (where ``wanted``): its byte span and the text it
    expands to, on one line."""
    spans = tokens(doc, node)
    out: list[tuple[int, int, str]] = []
    i = 0
    while i < len(spans):
        tok, start, _ = spans[i]
        m = macros.get(tok.text)
        if m is None or not wanted(tok.text):
            i += 1
            continue
        end = i
        if m.params is not None or _calls(m, macros):  # through its `(...)`
            found = (
                _arguments([s[0] for s in spans], i + 1)
                if i + 1 < len(spans) and spans[i + 1][0].text == "("
                else None
            )
            if found is None:
                i += 1
                continue
            end = found[1]
        stream = [Token(s[0].text, s[0].spaced) for s in spans[i : end + 1]]
        expanded = expand(stream, macros, wanted)
        out.append((start, spans[end][2], text([Token(t.text, t.spaced) for t in expanded]).lstrip()))
        i = end + 1
    return out


def _calls(m: Macro, macros: dict[str, Macro]) -> bool:
    """Whether the object-like ``m`` expands to the name of a function-like macro (its invocation
    then takes the written ``(...)`` after ``m``)."""
    seen = set()
    while m.params is None and len(m.body) == 1 and m.body[0].text in macros and m.name not in seen:
        seen.add(m.name)
        m = macros[m.body[0].text]
    return m.params is not None


__all__ = ["Macro", "Token", "definitions", "expand", "expansions", "tokens"]
