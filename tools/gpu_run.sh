#!/usr/bin/env bash
# One batched run on a GPU machine without network: install the carried wheels (`bash ../shared/tools/gpu-wheels.sh
# pytest-xdist pytest-timeout pathspec` fills .whl/; gpu_check needs those three) and set PYTHONPATH, then run the
# steps, writing logs and results under $OUT. Usage from the project root:  bash tools/gpu_run.sh [steps].
# JUPYTER_PATH points at the wheels' data (nbconvert's templates for the site tests).
#
# The proof (docs/gpu-check.md): `bash tools/gpu_run.sh proof`, twice at most. Each call runs
# `python tools/gpu_check.py proof` within one call of GPU_CHECK_END seconds: phase 1, the tests, emulated runs and
# suites at once (16 cores shared by their estimated work), then phase 2, the notebooks alone (they are timed),
# until its budget; entries proven on the tree now never run again, so a second call goes on with what the first
# did not reach.
# proof-1 and proof-2 are the same step under the names of the first and second call. It ends by packing the logs
# into $OUT/logs-proof.tgz and copying the stamp to $OUT/stamp.json (a call brings back at most 8 files, from at most
# two folders down). Between calls on a warm machine the step keeps the stamp in build/gpu-check-stamps/ (ignored,
# kept) and starts from whichever stamp is newer; on a fresh machine copy $OUT/stamp.json to
# gpulab/data/gpu-check-<gpu>.json first. GPU_CHECK_END (default 580): the second of the call by which the proof's
# children are all stopped; GPU_CHECK_ARGS passes options (--only 08, --all-entries). `plan` prints what a proof
# would run and its seconds (python tools/gpu_check.py plan: no GPU needed, run it here first).
#
# Other steps: check-<part> (python tools/gpu_check.py <part>: tests, notebooks, emulated, suites, all, status, plan;
# GPU_CHECK_ARGS passes options), bench (the suite, printed and saved to $OUT), record (the suite, and it rewrites
# gpulab/data/reference-<gpu>.json), autotune-report (python -m gpulab.bench --autotune-report lesson08), interp
# (the tests in forced interpreter mode), executed (every notebook run once, its executed copy with outputs saved
# under $OUT/executed). Default: bench. GPULAB_BENCH_ONLY=lesson07 limits bench and record to some suites, and
# GPULAB_BENCH_STEPS=headline,awkward to some steps of that one suite (recorded, merged into the file).
# GPULAB_NOTEBOOKS="notebooks/05_*.ipynb" limits the executed step. bench, record and autotune-report always
# autotune fully; executed takes each kernel's first candidate unless GPULAB_AUTOTUNE=full is set.
set -uo pipefail
OUT=${OUT:-/tmp/gpulab-out}; mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD JUPYTER_PATH=/tmp/site/share/jupyter || exit 1
fi
export PYTHONUNBUFFERED=1 GPULAB_CACHE_DIR="$OUT/cache"
steps=${*:-bench}
only=${GPULAB_BENCH_ONLY:+--only $GPULAB_BENCH_ONLY}  # e.g. GPULAB_BENCH_ONLY=lesson02,lesson03
only="$only${GPULAB_BENCH_STEPS:+ --steps $GPULAB_BENCH_STEPS}"  # e.g. GPULAB_BENCH_STEPS=headline,awkward
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee "$OUT/versions.txt"
KEEP=build/gpu-check-stamps  # the stamps between two calls on a warm machine (build/ is ignored, kept)

newer_stamps() {  # the kept stamps that are newer (their "updated") than the tree's replace them
  for kept in "$KEEP"/gpu-check-*.json; do
    [ -e "$kept" ] || continue
    python3 - "$kept" "gpulab/data/$(basename "$kept")" <<'PY'
import json, os, shutil, sys
kept, here = sys.argv[1:]
updated = lambda p: json.load(open(p)).get("updated", "") if os.path.exists(p) else ""
if updated(kept) > updated(here):
    shutil.copy2(kept, here)
    print(f"gpu_run: {here} is the previous call's ({updated(kept)})")
PY
  done
}

rc=0
for step in $steps; do
  case $step in
    bench) GPULAB_AUTOTUNE=full python3 -m gpulab.bench $only --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" || rc=1 ;;
    record) GPULAB_AUTOTUNE=full python3 -m gpulab.bench $only --record --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" || rc=1
           cp gpulab/data/reference-*.json "$OUT/" 2>/dev/null ;;
    autotune-report) GPULAB_AUTOTUNE=full python3 -m gpulab.bench --autotune-report lesson08 \
             --json "$OUT/autotune_report.json" 2>&1 | tee "$OUT/autotune_report.log" || rc=1 ;;
    proof|proof-1|proof-2)
           newer_stamps
           # gpu_check's runs end by the budget (a pytest of cases within CASE_GRACE_S, 15 s); the 30 s left are for
           # that, the status and the packing. It copies the stamp to $OUT/stamp.json after each part, so a call cut
           # short keeps what it proved
           budget=$(( ${GPU_CHECK_END:-580} - SECONDS - 30 ))
           if [ "$budget" -lt 60 ]; then echo "gpu_run: $budget s left for the proof: nothing run"; rc=1; continue; fi
           python3 tools/gpu_check.py proof --budget "$budget" --out "$OUT" ${GPU_CHECK_ARGS:-} 2>&1 \
             | tee "$OUT/proof.log" | grep -v '^  ' ; [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
           mkdir -p "$KEEP" && cp gpulab/data/gpu-check-*.json "$KEEP/" 2>/dev/null
           sed -n '/^gpu-check stamp /,$p' "$OUT/proof.log" > "$OUT/status.txt"
           mkdir -p "$OUT/gpu-check-logs" && mv "$OUT/proof.log" "$OUT/gpu-check-logs/"
           tar czf "$OUT/logs-proof.tgz" -C "$OUT" gpu-check-logs && rm -rf "$OUT/gpu-check-logs" "$OUT/cache"
           newest=$(ls -t gpulab/data/gpu-check-*.json 2>/dev/null | head -1)
           [ -e "$OUT/stamp.json" ] || { [ -n "$newest" ] && cp "$newest" "$OUT/stamp.json"; }
           echo "gpu_run: proof took $SECONDS s; logs in \$OUT/logs-proof.tgz, the stamp in \$OUT/stamp.json" ;;
    check-*) python3 tools/gpu_check.py "${step#check-}" --out "$OUT" ${GPU_CHECK_ARGS:-} || rc=1 ;;
    executed) # executed copies, with their printed numbers, for the record
           mkdir -p "$OUT/executed"
           GPULAB_AUTOTUNE=${GPULAB_AUTOTUNE:-first} python3 - "$OUT/executed" ${GPULAB_NOTEBOOKS:-notebooks/*.ipynb} <<'PY' || rc=1
import sys, nbformat
from nbclient import NotebookClient
for path in sys.argv[2:]:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": "notebooks"}}).execute()
    nbformat.write(nb, f"{sys.argv[1]}/{path.split('/')[-1]}")
    print("executed", path)
PY
           ;;
    interp) # the CPU path on this machine's Triton: kernels in the interpreter
           GPULAB_MODE=interpreter python3 -m pytest -q -p no:cacheprovider -m "not browser" tests 2>&1 \
             | tee "$OUT/pytest-interpreter.log" | tail -5 || rc=1 ;;
    *) echo "unknown step $step"; rc=2 ;;
  esac
done
exit $rc
