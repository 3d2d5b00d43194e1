#!/usr/bin/env bash
# One device-tool call: install the carried wheels, then run the named parts in order, each under
# its own `timeout`, every log and JSON-lines file written under $OUT as it goes.
#   usage (on the GPU machine): OUT=DIR [T=SECONDS] bench/device_call.sh PART[:SECONDS] ...
#   PART: gpu-tests:FILES (comma-separated test files, -m gpu), verify-cost, capture, reward, reward-torch,
#         suite:GLOB[,GLOB]@BUDGET, results-view:FILE@BUDGET, grpo:STEPS, profile:STEMS, compile-cost, optimize:FILE@BUDGET, main, profile, or any bench/gpu_session.sh part
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL=${OUT:?set OUT}
# The device tool brings back at most 8 files: everything is written under a scratch folder and
# packed into $FINAL/results.tgz after every part (so a part killed at its limit loses nothing).
OUT=$(mktemp -d)/raw; export OUT
mkdir -p "$OUT"
# A second invocation in the same call adds to what the first packed.
[ -f "$FINAL/results.tgz" ] && tar xzf "$FINAL/results.tgz" -C "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || echo "wheel install failed" >> "$OUT/session.txt"
else
  export PYTHONPATH=$PWD
fi
{
  echo "date: $(date -u +%FT%TZ) commit: ${COMMIT:-unknown} parts: $*"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
} >> "$OUT/session.txt"
for spec in "$@"; do
  part=${spec%%:*}; rest=${spec#*:}; [ "$rest" = "$spec" ] && rest=""
  t0=$(date +%s)
  case "$part" in
    gpu-tests) limit=${T:-200}
      timeout -k 5 "$limit" python3 -m pytest -m gpu -q -rs -p no:cacheprovider -o addopts="" --timeout 120 \
        ${rest//,/ } > "$OUT/gpu_tests_$(echo "$rest" | md5sum | cut -c1-6).log" 2>&1 ;;
    verify-cost) timeout -k 5 "${T:-200}" python3 bench/verify_cost.py --out "$OUT" --deadline "${rest:-170}" > "$OUT/verify_cost.log" 2>&1 ;;
    capture) timeout -k 5 "${T:-200}" python3 bench/capture_check.py --out "$OUT" --deadline-s "${rest:-170}" --budget 15s > "$OUT/capture.log" 2>&1 ;;
    reward) timeout -k 5 "${T:-200}" python3 bench/reward_bench.py --out "$OUT" --deadline "${rest:-170}" > "$OUT/reward.log" 2>&1 ;;
    grpo) # TRL's GRPO over the reward service; TRL, datasets and pyarrow carried in .whl/grpo/
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/grpo/*.whl \
        > "$OUT/grpo_install.log" 2>&1
      timeout -k 5 "${T:-200}" python3 bench/grpo_smoke.py --out "$OUT/grpo" --steps "${rest:-4}" --deadline $(( ${T:-200} - 15 )) > "$OUT/grpo.log" 2>&1 ;;
    reward-torch) # reward-torch:relu,gelu (task stems; default all, as far as 170 s go)
      CUDA_AGENT_UNSAFE_TORCH=1 timeout -k 5 "${T:-200}" python3 bench/reward_bench.py --torch-only --torch-tasks "$rest" --out "$OUT" \
        --deadline 170 >> "$OUT/reward_torch.log" 2>&1 ;;
    profile) # profile:saxpy,sgemm (bench kernel stems): `cuda-agent profile --json` of each
      for k in ${rest//,/ }; do
        timeout -k 5 "${T:-120}" python3 -m server profile "bench/kernels/$k.cu" --json > "$OUT/profile_$k.json" 2> "$OUT/profile_$k.log"
        echo "profile $k rc=$?" >> "$OUT/session.txt"
      done ;;
    compile-cost) timeout -k 5 "${T:-120}" python3 bench/compile_cost.py --out "$OUT" --n 12 --max-s "${rest:-15}" > "$OUT/compile_cost.log" 2>&1 ;;
    suite) # suite:GLOB[,GLOB...]@BUDGET (e.g. suite:variants/dot/*@5s): the suite over bench/kernels/GLOB, each GLOB
      # in turn, every kernel's row appended to suite_<first glob>.jsonl as it finishes; D: seconds per kernel (18)
      globs=${rest%@*}; budget=${rest##*@}; [ "$budget" = "$rest" ] && budget=5s
      name=$(echo "${globs%%,*}" | tr -c 'A-Za-z0-9_\n' '_')
      set -f  # the globs are the suite's, not the shell's
      for glob in ${globs//,/ }; do
        timeout -k 5 "${T:-170}" python3 -m server suite bench/kernels --match "$glob" --budget "$budget" --deadline "${D:-18}" \
          --max-memory-gb 16 --jsonl "$OUT/suite_$name.jsonl" --json >> "$OUT/suite_$name.json" 2>> "$OUT/suite_$name.log"
      done
      set +f ;;
    results-view) # results-view:FILE@BUDGET: bench/results_view_capture.py on FILE (the results view's payload)
      file=${rest%@*}; budget=${rest##*@}; name=$(basename "$file" .cu)
      timeout -k 5 "${T:-180}" python3 bench/results_view_capture.py --out "$OUT/results_view_$name" --budget "$budget" \
        --deadline-s $(( ${T:-180} - 10 )) "$file" > "$OUT/results_view_$name.log" 2>&1 ;;
    optimize) # optimize:FILE@BUDGET (e.g. optimize:bench/kernels/softmax.cu@20s): the CLI's JSON result
      file=${rest%@*}; budget=${rest##*@}; name=$(basename "$file" .cu)_$budget
      timeout -k 5 "${T:-200}" python3 -m server optimize "$file" --budget "$budget" --json --trajectory off \
        > "$OUT/optimize_$name.json" 2> "$OUT/optimize_$name.log" ;;
    *) timeout -k 5 "${T:-300}" bench/gpu_session.sh "$part" "$rest" > "$OUT/$part.log" 2>&1 ;;
  esac
  echo "part $spec rc=$? s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/session.txt"
  tar czf "$FINAL/results.tgz" -C "$OUT" . && cp "$OUT/session.txt" "$FINAL/"
done
