#!/usr/bin/env bash
# The GPU results the repo cites, rerunnable on any GPU machine (e.g. the device tool's H200),
# in parts that each fit a 10-minute call. Logs and JSON go under $OUT (default
# bench/results/gpu-session) for copying into bench/results/.
#   usage: OUT=DIR [COMMIT=SHA] bench/gpu_session.sh PART [BUDGET]   (COMMIT: where the copy has no .git)
#   PART: tests    the gpu-marked tests (sandbox adversarial kernels, transforms, builtin, LSP)
#         suite-am the built-in engine's suite over bench/kernels/[a-m]*, BUDGET per kernel
#         suite-nz the same over bench/kernels/[n-z]*
#         main     the README's main job (optimize vadd_poor_block.cu --diff)
#         trust    issue 14's must-shows: tests/test_trust_gpu.py, then bench/timing_stability.py (~5 min)
#         compile  issue 12: per-candidate compile cost inside the boundary vs the unchecked compile (~1 min)
set -uo pipefail
cd "$(dirname "$0")/.."
PART=${1:?usage: bench/gpu_session.sh tests|suite-am|suite-nz|main|trust|compile [BUDGET]}
BUDGET=${2:-40s}
OUT=${OUT:-bench/results/gpu-session}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "part: $PART budget: $BUDGET"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
} >> "$OUT/session.txt"

case "$PART" in
  tests) python3 -m pytest -m gpu -v -rs -p no:cacheprovider tests 2>&1 | tee "$OUT/gpu_tests.log" | tail -25 ;;
  suite-am | suite-nz)
    glob=$([ "$PART" = suite-am ] && echo '[a-m]*' || echo '[n-z]*')
    python3 -m server suite bench/kernels --budget "$BUDGET" --match "$glob" --json > "$OUT/$PART.json" \
      2> "$OUT/$PART.log"
    tail -5 "$OUT/$PART.log" ;;
  main) python3 -m server optimize bench/kernels/vadd_poor_block.cu --budget "$BUDGET" --diff --trajectory off \
      2>&1 | tee "$OUT/main_job.txt" | tail -30 ;;
  trust)
    python3 -m pytest -m gpu -v -rs -p no:cacheprovider tests/test_trust_gpu.py 2>&1 | tee "$OUT/trust_gpu_tests.log" | tail -20
    python3 bench/timing_stability.py --out "$OUT" 2>&1 | tee "$OUT/timing_stability.log" | tail -30 ;;
  compile)
    echo "bwrap: $(command -v bwrap || echo 'not installed: compile workers run unsandboxed')" | tee -a "$OUT/session.txt"
    python3 bench/compile_cost.py --out "$OUT" --n 40 2>&1 | tee "$OUT/compile_cost.log" | tail -6 ;;
  *) echo "unknown part $PART" >&2; exit 2 ;;
esac
