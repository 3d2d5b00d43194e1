"""The host program, evaluated from ``main()`` to each kernel launch, for spec inference.

A small abstract interpreter over the tree-sitter tree of a ``.cu`` program and the headers it
includes with quotes: it runs ``main()`` (or, for a launch not reached from ``main``, the function
around it) statement by statement and records, for every ``kernel<<<grid, block, smem>>>(args)``
it reaches, what each argument and configuration value is.  Values are spec expressions
(:mod:`cudasrc.specs`) over the program's *roots*: integer variables (and object-like macros)
initialised with a constant, such as ``int B = 8;``.  Everything else is computed from them, so
``const int N = B * T * C;`` in a launcher is ``B * T * C`` at the launch.

What it understands: declarations, assignments, ``dim3``, arithmetic and casts, ``sizeof`` (with
the file's typedefs), ``ceil_div``/``CEIL_DIV``/``cdiv``-like helpers, ``min``/``max``/``pow``/...,
object- and function-like macros, calls into the program's own functions (arguments bound to
parameters, return values, each scope its own), ``#if``/``#ifdef`` branches (with the ``-D``
defines given), ``if``/``?:`` with a known condition (both branches otherwise), ``switch``, loops
(the first iteration: a launch inside a loop says so), array initialisers, and the buffers
behind pointers: ``cudaMalloc``/``cudaMallocManaged``/``malloc``/``new T[n]``/``std::vector``/
local arrays, pointer offsets, and ``cudaMemcpyToSymbol`` into ``__constant__`` arrays.  Also:
``main``'s command line (the build file's ``run`` target, :func:`command_lines`; none: ``argc``
is 1) read by ``atoi``/``strtol``/``std::stoi``..., library flag parsers given no arguments
(``checkCmdLineFlag``, ``getopt``: no flag), config structs (initialisers, designators, default
member initialisers, field stores), ``dim3`` fields, ``&x`` out-parameters (``*result = v``),
``cudaGetDeviceProperties``/``cudaFuncGetAttributes`` (an H100's values), ``floor``/``ceil``,
``MIN``/``MAX`` of unread headers, and what the host fills inputs with: ``rand()`` expressions,
``*rand*(low, high)`` helpers, ``<random>`` distribution objects, each element its own index
(``arange``).  Anything else is *unknown*, never guessed here (:func:`cudasrc.specs.infer`
decides what to do).

Modules (this package's ``__init__`` re-exports their public names: import from ``cudasrc.host``):

- ``values``: the values of the run: ``Num`` (a spec expression over roots), ``Dims``, ``Buffer``, ``LaunchEvent``, ``HostRun``
- ``program``: a file and its quoted headers as functions, macros and globals; ``#if`` branches
- ``interp``: the interpreter of statements and expressions, recording launches
- ``library``: what it models without running: library and CUDA runtime calls, the device, literals, drawn ranges
- ``entry``: ``run`` (cached per document) and ``launch_of`` (a kernel's launch, across the project)
"""

from cudasrc.host.entry import command_lines, launch_of, run
from cudasrc.host.interp import names
from cudasrc.host.library import number_literal
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

__all__ = [
    "Buffer",
    "CommandLine",
    "Dims",
    "Draws",
    "FuncRef",
    "HostRun",
    "Items",
    "LaunchEvent",
    "Num",
    "Record",
    "Ref",
    "Root",
    "SymbolCopy",
    "Tensor",
    "Value",
    "command_lines",
    "launch_of",
    "names",
    "number_literal",
    "run",
]
