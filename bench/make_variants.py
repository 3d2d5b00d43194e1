"""The variant corpus at H200 sizes: bench/kernels/variants/<family>/<spelling>.cu.

``tests/data/variants/<family>/*.cu`` holds each family's spellings with small benchmark sizes (a CPU
test corpus).  This script writes a copy of each with its spec's ``sizes`` replaced by the ones below,
chosen so the naive kernel takes 1-20 ms on an H200 (estimates in bench/README.md), and for the dot
products a ``work flops=`` line so the suite reports them against the FP32 GEMM rate.  Everything
else (the kernel, the verify sizes, launch, args, tolerances) is the corpus's, checked by re-parsing
the written spec.  Run it after changing the corpus; ``--check`` fails (exit 1) when a copy is stale::

    python bench/make_variants.py            # write bench/kernels/variants/
    python bench/make_variants.py --check    # compare only (tests/test_bench_variants.py runs it)

    python -m server suite bench/kernels --match 'variants/*/*'    # all of them
    python -m server suite bench/kernels --match 'variants/rows/*' # one family
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "variants"
OUT = ROOT / "bench" / "kernels" / "variants"
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from cudasrc import specs as spec_mod  # noqa: E402
from cudasrc.source import Document  # noqa: E402

# family/spelling -> (benchmark sizes, flops expression or "")
H200: dict[str, tuple[dict[str, str], str]] = {
    "dot/batched_qk_launch_bounds": ({"B": "96", "T": "1024", "D": "64"}, "2*B*T*T*D"),
    "dot/matmul_hoisted": ({"M": "2048", "N": "2048", "K": "2048"}, "2*M*N*K"),
    "dot/matmul_template": ({"M": "2048", "N": "2048", "K": "2048"}, "2*M*N*K"),
    "dot/matmul_typedef": ({"M": "2048", "N": "2048", "K": "2048"}, "2*M*N*K"),
    "dot/matmul_while": ({"M": "2048", "N": "2048", "K": "2048"}, "2*M*N*K"),
    "dot/trimul_guarded_triangle": ({"T": "8192", "C": "128"}, "T*(T+1)*C"),
    "dot/trimul_template_function": ({"T": "8192", "C": "128"}, "T*(T+1)*C"),
    "elementwise/add_no_bounds_check": ({"n": "1<<28"}, ""),
    "elementwise/gelu_device_function": ({"N": "3<<27"}, ""),
    "elementwise/relu_template": ({"n": "3<<27"}, ""),
    "elementwise/residual_bf16_typedef": ({"N": "1<<29"}, ""),
    "elementwise/scale_half_using": ({"n": "1<<29"}, ""),
    "histogram/grid_stride_while": ({"n": "1<<24"}, ""),
    "histogram/macro_bins": ({"n": "1<<24"}, ""),
    "histogram/pointer_offset": ({"n": "1<<24"}, ""),
    "histogram/typedef_counts": ({"n": "1<<24"}, ""),
    "rows/gemv_device_function": ({"m": "32768", "n": "8192"}, ""),
    "rows/layernorm_typedef": ({"B": "65536", "C": "1024"}, ""),
    "rows/row_max_while": ({"rows": "32768", "cols": "8192"}, ""),
    "rows/row_sum_hoisted": ({"rows": "32768", "cols": "8192"}, ""),
    "rows/softmax_redeclared_index": ({"M": "16384", "N": "4096"}, ""),
    "rows/softmax_template": ({"rows": "16384", "cols": "4096"}, ""),
    "same_layout/reduce0_block_sync": ({"n": "1<<28"}, ""),
    "same_layout/reduce0_cg_sync": ({"n": "1<<28"}, ""),
    "same_layout/reduce0_hoisted": ({"n": "1<<28"}, ""),
    "same_layout/reduce0_this_block": ({"n": "1<<28"}, ""),
    "transpose/constexpr_block": ({"n": "16384", "m": "16384"}, ""),
    "transpose/early_return_using": ({"rows": "16384", "cols": "16384"}, ""),
    "transpose/flat_load_index": ({"H": "16384", "W": "16384"}, ""),
    "transpose/macro_tile": ({"width": "16384", "height": "16384"}, ""),
    "tree_reduction/hoisted_stride": ({"n": "1<<28"}, ""),
    "tree_reduction/max_halving_division": ({"n": "1<<28"}, ""),
    "tree_reduction/reduce2_cg": ({"n": "1<<28"}, ""),
    "tree_reduction/while_stride_block_sync": ({"n": "1<<28"}, ""),
}


class StaleCorpus(Exception):
    """The corpus and the size table disagree (a spelling without sizes, or sizes for none)."""


def _directive(line: str) -> str:
    """The directive word of a spec comment line (``sizes``, ``work``...), "" for other lines."""
    text = spec_mod.directive_text(line.lstrip()[2:]) if line.lstrip().startswith("//") else None
    return text.split(maxsplit=1)[0] if text and text.strip() else ""


def generated(source: Path, key: str) -> str:
    """``source`` (a corpus file) with its one kernel spec's sizes (and flops) from :data:`H200`."""
    sizes, flops = H200[key]
    text = source.read_text(encoding="utf-8")
    doc = Document(text, str(source))
    specs = [s for s in (spec_mod.parse(k, doc.type_aliases)[0] for k in doc.kernels) if s is not None]
    if len(specs) != 1:
        raise StaleCorpus(f"{source}: {len(specs)} kernel specs, expected one")
    old = specs[0]
    if old.sizes.keys() != sizes.keys():
        raise StaleCorpus(f"{source}: sizes {sorted(old.sizes)}, the table gives {sorted(sizes)}")
    new = replace(old, sizes=sizes, flops=flops or old.flops)
    # the rendered block's size lines (sizes, verify) replace the written ones; a work line is added
    rendered = spec_mod.render(new).splitlines()
    size_lines = [line for line in rendered if _directive(line) in ("sizes", "verify")]
    work = [line for line in rendered if _directive(line) == "work"]
    if flops and (old.flops or old.bytes):
        raise StaleCorpus(f"{source}: has a work line already; the table's flops would replace it")
    drop = {old.lines["sizes"], old.lines.get("verify", old.lines["sizes"])}
    out = [
        f"// Generated by bench/make_variants.py from tests/data/variants/{key}.cu (edit that, then rerun)."
    ]
    for i, line in enumerate(text.splitlines()):
        if i == old.lines["sizes"]:
            out += size_lines + (work if flops else [])
        elif i not in drop:
            out.append(line)
    result = "\n".join(out) + "\n"
    check = Document(result, str(source))
    again = [s for s in (spec_mod.parse(k, check.type_aliases)[0] for k in check.kernels) if s is not None]
    if len(again) != 1 or spec_mod.render(again[0]) != spec_mod.render(new):
        raise StaleCorpus(f"{source}: the rewritten spec does not read back as written")
    return result


def expected(out: Path = OUT) -> dict[Path, str]:
    """Every generated file's path (under ``out``) and text."""
    found = {f"{p.parent.name}/{p.stem}": p for p in sorted(CORPUS.glob("*/*.cu"))}
    if found.keys() != H200.keys():
        missing, extra = sorted(found.keys() - H200.keys()), sorted(H200.keys() - found.keys())
        raise StaleCorpus(f"size table out of date: no sizes for {missing}; sizes for no file {extra}")
    return {out / f"{key}.cu": generated(path, key) for key, path in found.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 when a copy is stale")
    ap.add_argument(
        "--out", type=Path, default=OUT, help="the folder to write or check (default: %(default)s)"
    )
    args = ap.parse_args()
    try:
        files = expected(args.out)
    except StaleCorpus as exc:
        print(f"make_variants: {exc}", file=sys.stderr)
        return 1
    on_disk = set(args.out.glob("*/*.cu"))
    stale = sorted(str(p) for p, t in files.items() if not p.is_file() or p.read_text(encoding="utf-8") != t)
    extra = sorted(str(p) for p in on_disk - files.keys())
    if args.check:
        for name in stale + extra:
            print(f"stale: {name} (run python bench/make_variants.py)", file=sys.stderr)
        return 1 if stale or extra else 0
    for p in on_disk - files.keys():
        p.unlink()
    for p, t in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(t, encoding="utf-8")
    print(f"wrote {len(files)} files under {args.out} ({len(stale)} changed, {len(extra)} removed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
