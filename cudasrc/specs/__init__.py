"""Kernel specs: how to verify and benchmark a kernel, written as a comment block above it.

Grammar (one directive per ``// @cuda-agent`` line, directly above the kernel; the guide:
docs/guide/specs.md)::

    sizes     NAME=EXPR ...  [verify NAME=EXPR[,EXPR...] ...]
    verify    NAME=EXPR[,EXPR...] ...           one problem per comma position (repeatable)
    launch    [grid=DIM] [block=DIM] [smem=EXPR]  DIM: EXPR or (EXPR, EXPR[, EXPR])
    arg       NAME in|out|inout DTYPE[EXPR] [DIST] [offset=EXPR]   offset: elements into the array
    arg       NAME = EXPR                       a scalar parameter's value (NULL for a pointer)
    const     NAME DTYPE[EXPR] [DIST]           initial contents of a __constant__/__device__ array
                                                (NAME as C++ names it: ``ns::c``, ``mask<float>``)
    compare   NAME[IDX < EXPR, ...] where COND  the output's compared elements (``NAME where COND``
                                                over the flat index ``i``; ``NAME written``: what
                                                the original writes); the rest are don't-care
    define    NAME=EXPR ...                     -D macros per problem (compile-time sizes)
    template  ARG, ARG...                       the instantiation to compile and launch
    tolerance [arg=NAME] [atol=NUM] [rtol=NUM] [norm=NUM]   override of the calibrated bounds
    precision allow=KIND[,KIND...]              tf32, fp16, bf16, mma, fast-math
    require   CONDITION                         a constraint on sizes, block and ``bytes``
    work      [bytes=EXPR] [flops=EXPR] [floor=off]   for GB/s, GFLOP/s and the roofline;
                                                ``floor=off``: the counts overstate the traffic,
                                                so no time is refused as implausible
    DIST:     uniform(lo, hi) | normal | randint(lo, hi) | const(v) | arange | copy(ARG) | values(EXPR)

Expressions are arithmetic over the size variables (and, in ``launch``/``work``/counts,
``block``, ``block_x``, ``block_y``, ``block_z``) in the one grammar of :mod:`sandbox.expr`:
``+ - * / // % << >>``, parentheses, comparisons, ``and``/``or``/``not``, ``a if c else b``,
``min``, ``max``, ``cdiv``...  ``/`` divides like C (integer division on integers).  They are
evaluated by walking a Python AST against that whitelist; nothing is ever ``eval``'d.  Element
expressions (``compare ... where``, ``values``) are resolved with the sizes substituted and evaluated
by the worker over index arrays, in the same grammar.

Positions (``line``) are 0-based lines of the file, like :mod:`cudasrc.source`.

Modules (this package's ``__init__`` re-exports their public names: import from ``cudasrc.specs``):

- ``model``: the values a spec holds (``KernelSpec``, its args, compares, ``Inference``), ``InvalidSpec``
- ``expressions``: spec expressions evaluated to numbers (over :mod:`sandbox.expr`'s grammar)
- ``grammar``: the directive lines parsed into a ``KernelSpec``; directive text helpers
- ``resolve``: sizes, verify/benchmark problems, a spec resolved into contract ``Problem`` values
- ``rendering``: a spec (or an inference with its guesses) written back as directive lines
- ``inference``: ``infer``/``spec_for``: a spec proposed from the run of the host program, else from text
- ``from_run``: inference from a launch recorded by the host program's run (:mod:`cudasrc.host`)
- ``sites``: the text-only path's reading of a launch site and host definitions
- ``pointers``: pointer roles (in/out/inout) and the index ranges a kernel touches
"""

from cudasrc.specs.expressions import evaluate
from cudasrc.specs.grammar import (
    REWRITE_LINES,
    default_dist,
    directive_text,
    launch_pairs,
    misplaced,
    parse,
    parse_dims,
    precision_kinds,
    split_args,
    template_names,
)
from cudasrc.specs.inference import infer, spec_for
from cudasrc.specs.model import (
    MARKER,
    ArrayRole,
    ArraySpec,
    CompareSpec,
    Confidence,
    ConstantSpec,
    DistSpec,
    Evidence,
    Inference,
    InvalidSpec,
    KernelSpec,
    ScalarSpec,
    SpecError,
    SpecResult,
)
from cudasrc.specs.pointers import roles
from cudasrc.specs.rendering import render, render_dims, render_inference
from cudasrc.specs.resolve import bench_sizes, problem, problems, verify_sizes

__all__ = [
    "MARKER",
    "REWRITE_LINES",
    "ArrayRole",
    "ArraySpec",
    "CompareSpec",
    "Confidence",
    "ConstantSpec",
    "DistSpec",
    "Evidence",
    "Inference",
    "InvalidSpec",
    "KernelSpec",
    "ScalarSpec",
    "SpecError",
    "SpecResult",
    "bench_sizes",
    "default_dist",
    "directive_text",
    "evaluate",
    "infer",
    "launch_pairs",
    "misplaced",
    "parse",
    "parse_dims",
    "precision_kinds",
    "problem",
    "problems",
    "render",
    "render_dims",
    "render_inference",
    "roles",
    "spec_for",
    "split_args",
    "template_names",
    "verify_sizes",
]
