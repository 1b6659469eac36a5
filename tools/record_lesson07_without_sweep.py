"""Re-record lesson 07 on a GPU except its dense sweep, which is kept from the existing reference file.

    python tools/record_lesson07_without_sweep.py

The dense sweep (3329 sizes) takes about 12 minutes on an H200, longer than one device call. This runs every
other step of ``gpulab.bench.lesson07``, prints the report, and writes the reference file atomically with the
new steps under a new provenance and the kept sweep under ``sweep_provenance`` (the provenance it was recorded
with). GPU only.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gpulab  # noqa: E402,F401  (before triton)
from gpulab import reference  # noqa: E402
from gpulab.bench import lesson07  # noqa: E402
from gpulab.device import provenance, write_json_atomic  # noqa: E402

old = reference.load("h200")
kept = old["lesson07"]
data = lesson07.run(steps=[s for s in lesson07.STEPS if s != "sweep"])
data["sweep"] = kept["sweep"]
data["sweep_provenance"] = kept.get("sweep_provenance", kept["provenance"])
data["provenance"] = provenance()
print(lesson07.report(data))
old["lesson07"] = data
print("recorded", write_json_atomic(reference.path_for("h200"), old))
