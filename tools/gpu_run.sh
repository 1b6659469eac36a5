#!/usr/bin/env bash
# One batched run on a GPU machine without network: install the carried wheels (../shared/tools/gpu-wheels.sh
# fills .whl/) and set PYTHONPATH, then run the steps, writing logs and results under $OUT. Usage from the project
# root:  bash tools/gpu_run.sh [steps]. JUPYTER_PATH points at the wheels' data (nbconvert's templates for the site tests).
# steps: check-<part> (make gpu-check's parts: check-tests, check-notebooks, check-emulated, check-suites,
# check-status; GPU_CHECK_ARGS="--only 08 --rest" passes options), bench (the suite, printed and saved to $OUT),
# record (the suite, and it rewrites gpulab/data/reference-<gpu>.json), autotune-report (python -m gpulab.bench
# --autotune-report lesson08), interp (the tests in forced interpreter mode), executed (every notebook run once,
# its executed copy with outputs saved under $OUT/executed).
# A whole check in three calls kept warm (copy $OUT/stamp.json to gpulab/data/ between them): check-tests-then-notebooks,
# check-emulated-and-suites, then GPU_CHECK_FIRST=04,08,10 check-notebooks-first for the notebooks left.
# check-together: the tests, emulated and suites parts at once (16 cores; the suites in three groups), each within
# GPU_CHECK_BUDGET seconds (default 480), then the status; check-notebooks-first: the notebooks part with the
# lessons of GPU_CHECK_FIRST (default 07,08,10) first, then the rest, then the emulated runs and suites that are not
# yet on this tree, all within GPU_CHECK_BUDGET (default 540) together. Both end by
# packing every log into $OUT/logs-together.tgz or
# $OUT/logs-notebooks.tgz (a call brings back at most 8 files) and copying the stamp to $OUT/stamp.json ($OUT/cache is left out:
# a call brings back files from at most two folders down).
# Default: bench. GPULAB_BENCH_ONLY=lesson07 limits bench and record to some suites, and
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
rc=0
for step in $steps; do
  case $step in
    bench) GPULAB_AUTOTUNE=full python3 -m gpulab.bench $only --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" || rc=1 ;;
    record) GPULAB_AUTOTUNE=full python3 -m gpulab.bench $only --record --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" || rc=1
           cp gpulab/data/reference-*.json "$OUT/" 2>/dev/null ;;
    autotune-report) GPULAB_AUTOTUNE=full python3 -m gpulab.bench --autotune-report lesson08 \
             --json "$OUT/autotune_report.json" 2>&1 | tee "$OUT/autotune_report.log" || rc=1 ;;
    check-together)
           budget=${GPU_CHECK_BUDGET:-480}; mkdir -p "$OUT/logs"
           python3 tools/gpu_check.py tests --workers 7 --budget "$budget" --out "$OUT/logs/t" > "$OUT/logs/tests.log" 2>&1 &
           python3 tools/gpu_check.py emulated --rest --jobs 6 --budget "$budget" --out "$OUT/logs/e" > "$OUT/logs/emulated.log" 2>&1 &
           python3 tools/gpu_check.py suites --rest --only 04,05,06 --budget "$budget" --out "$OUT/logs/s1" \
             > "$OUT/logs/suites1.log" 2>&1 &
           python3 tools/gpu_check.py suites --rest --only 09,00,02,03 --budget "$budget" --out "$OUT/logs/s2" \
             > "$OUT/logs/suites2.log" 2>&1 &
           python3 tools/gpu_check.py suites --rest --only 08,07,10 --budget "$budget" --out "$OUT/logs/s3" \
             > "$OUT/logs/suites3.log" 2>&1 &
           wait || rc=1
           python3 tools/gpu_check.py status | tee "$OUT/status.txt"
           tar czf "$OUT/logs-together.tgz" -C "$OUT" logs && rm -rf "$OUT/logs" "$OUT/cache"; cp gpulab/data/gpu-check-*.json "$OUT/stamp.json" ;;
    check-notebooks-first)
           t0=$SECONDS; mkdir -p "$OUT/logs"
           python3 tools/gpu_check.py notebooks --rest --only "${GPU_CHECK_FIRST:-07,08,10}" --budget "${GPU_CHECK_BUDGET:-540}" \
             --out "$OUT/logs/n1" 2>&1 | tee "$OUT/logs/notebooks1.log" || rc=1
           left=$(( ${GPU_CHECK_BUDGET:-540} - (SECONDS - t0) ))
           if [ "$left" -ge 90 ]; then
             python3 tools/gpu_check.py notebooks --rest --budget "$left" --out "$OUT/logs/n2" 2>&1 \
               | tee "$OUT/logs/notebooks2.log" || rc=1
           fi
           for part in emulated suites; do  # what check-together did not reach, with the time left
             left=$(( ${GPU_CHECK_BUDGET:-540} - (SECONDS - t0) ))
             if [ "$left" -ge 60 ]; then
               python3 tools/gpu_check.py $part --rest --jobs 6 --budget "$left" --out "$OUT/logs/$part" 2>&1 \
                 | tail -3 | tee "$OUT/logs/$part-rest.log"
             fi
           done
           python3 tools/gpu_check.py status | tee "$OUT/status.txt"
           tar czf "$OUT/logs-notebooks.tgz" -C "$OUT" logs && rm -rf "$OUT/logs" "$OUT/cache"; cp gpulab/data/gpu-check-*.json "$OUT/stamp.json" ;;
    check-tests-then-notebooks) # call 1 of 3: the tests alone, then the short notebooks with what is left
           t0=$SECONDS; budget=${GPU_CHECK_BUDGET:-560}; mkdir -p "$OUT/logs"
           python3 tools/gpu_check.py tests --workers 12 --budget $(( budget - 150 )) --out "$OUT/logs/t" 2>&1 | tail -4 || rc=1
           left=$(( budget - (SECONDS - t0) ))
           [ "$left" -ge 90 ] && python3 tools/gpu_check.py notebooks --rest --only "${GPU_CHECK_FIRST:-00,01,07,09}" \
             --budget "$left" --out "$OUT/logs/n" 2>&1 | tail -9
           python3 tools/gpu_check.py status | tee "$OUT/status.txt"
           tar czf "$OUT/logs-tests.tgz" -C "$OUT" logs && rm -rf "$OUT/logs" "$OUT/cache"; cp gpulab/data/gpu-check-*.json "$OUT/stamp.json" ;;
    check-emulated-and-suites) # call 2 of 3: the emulated runs (7 at once) beside the suites in three groups
           budget=${GPU_CHECK_BUDGET:-455}; mkdir -p "$OUT/logs"
           python3 tools/gpu_check.py emulated --rest --jobs 7 --budget "$budget" --out "$OUT/logs/e" > "$OUT/logs/emulated.log" 2>&1 &
           for g in 04,05,06 09,00,02,03 08,07,10; do
             python3 tools/gpu_check.py suites --rest --only $g --budget "$budget" --out "$OUT/logs/s$g" > "$OUT/logs/suites$g.log" 2>&1 &
           done
           wait || rc=1
           python3 tools/gpu_check.py status | tee "$OUT/status.txt"
           tar czf "$OUT/logs-together.tgz" -C "$OUT" logs && rm -rf "$OUT/logs" "$OUT/cache"; cp gpulab/data/gpu-check-*.json "$OUT/stamp.json" ;;
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
