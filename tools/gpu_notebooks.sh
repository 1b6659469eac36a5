#!/usr/bin/env bash
# Every notebook under nbval on a GPU, once per GPU choice, the choices in parallel (one process each, the
# notebooks of a choice one after another), with each notebook's wall time. Usage from the project root, after
# the wheels are installed and PYTHONPATH is set as in tools/gpu_run.sh:
#   bash tools/gpu_notebooks.sh H200 T4 L4 A100
# The GPU's own choice ("H200" on an H200: no GPULAB_AS_GPU) autotunes fully (GPULAB_AUTOTUNE=full), as a
# learner's run does; the emulated choices take each kernel's first candidate (GPULAB_AUTOTUNE=first). Writes
# $OUT/nb-<choice>.log and the summary $OUT/nb-times.txt ("<choice> <notebook> <seconds> <rc>" lines).
set -u
OUT=${OUT:-/tmp/gpulab-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
one_choice() {
  local gpu=$1 as="" tune=first
  if [ "$gpu" = "${NATIVE:-H200}" ]; then tune=full; else as=$gpu; fi
  for nb in notebooks/*.ipynb; do
    local t0=$SECONDS
    GPULAB_AS_GPU=$as GPULAB_AUTOTUNE=$tune GPULAB_CACHE_DIR=/tmp/cache-$gpu timeout 300 \
      python3 -m pytest -q -p no:cacheprovider --nbval-lax "$nb" >> "$OUT/nb-$gpu.log" 2>&1
    local rc=$?  # before any command substitution below resets $?
    echo "$gpu $(basename "$nb") $((SECONDS - t0)) $rc" | tee -a "$OUT/nb-times.txt"
  done
}
for g in "$@"; do one_choice "$g" & done
wait
