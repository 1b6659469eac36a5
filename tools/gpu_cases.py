"""The notebooks, emulated runs and suites of ``make gpu-check`` as pytest cases, one case an entry.

``tools/gpu_check.py`` writes the cases to run to a JSON file (``gpu_check.case_of``: ``{"deadline": UNIX seconds,
"root": the tree, "cases": [{part, name, cmd, env, cold, start_s, log}]}``), names it in ``$GPU_CHECK_CASES`` and
runs ``python -m pytest -p gpu_check tools/gpu_cases.py`` (``-n N``: N at once, through pytest-xdist). pytest then
does what a pool of jobs would: the order, the workers, a report for each case as it ends.

A case (``run_case``) starts only with its ``start_s`` left before the deadline; it runs its command (nbval on one
notebook, or ``python -m gpulab.bench``) with what is left, in fresh caches, and records the entry the stamp keeps as
the property ``entry``. It fails where the entry does not pass, and is skipped where it never started or was stopped
at the deadline before its verdict was known (unreached: it stays for the next run).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import gpu_check as gc
import pytest


def _spec() -> dict:
    path = os.environ.get("GPU_CHECK_CASES")
    return json.loads(Path(path).read_text()) if path else {"deadline": 0.0, "root": str(gc.ROOT), "cases": []}


SPEC = _spec()


def _failures(ran: gc.Ran, cells: dict | None) -> list[str]:
    """A notebook run's failing cells ("Cell 12"), and why the run ended where no cell says."""
    fails = [c.rsplit("::", 1)[-1] for c in cells["failures"]] if cells else []
    if ran.stopped:
        fails.append(f"stopped after {ran.seconds:.0f} s")
    elif ran.rc not in (0, None) and not fails:
        fails.append(f"pytest exit {ran.rc}" + ("" if cells else " (no reports)"))
    return fails


def run_case(case: dict, deadline: float, tmp: Path, run=gc.run_child, clock=time.time, root: Path = gc.ROOT) -> dict:
    """One entry's run, as ``{"name", "unreached": why}`` where it did not start or was stopped before its verdict
    was known, else ``{"name", ok, seconds, failures, stopped}`` and, for a notebook, ``over_limit`` (past
    ``NOTEBOOK_LIMIT_S``: it fails) and ``slowest_cells``; for an emulated run, ``every_cell_failed`` (its kernel
    never ran a cell); for a suite, ``steps``. ``run``: ``gc.run_child``'s signature; ``clock``: UNIX seconds."""
    name, part, log = case["name"], case["part"], Path(case["log"])
    left = deadline - clock()
    if left < case["start_s"]:
        return {"name": name, "unreached": f"{max(left, 0):.0f} s of the budget left, {case['start_s']:.0f} needed"}
    env = gc.cold_env(tmp) if case["cold"] == "all" else gc.base_env(GPULAB_CACHE_DIR=str(tmp))
    env.update(case["env"])
    reports = log.with_suffix(".reports.jsonl")
    reports.unlink(missing_ok=True)
    env["GPU_CHECK_REPORTS"] = str(reports)  # nbval's own reports: a cell each
    ran = run(case["cmd"], env, left, log, cwd=root)
    out = {"name": name, "seconds": round(ran.seconds, 1), "stopped": ran.stopped}
    if part == "suites":
        if ran.stopped:
            return {"name": name, "unreached": f"stopped at the budget after {ran.seconds:.0f} s"}
        last = ([ln for ln in ran.output.splitlines() if ln.strip()] or [""])[-1]
        out.update(
            ok=ran.rc == 0, failures=[] if ran.rc == 0 else [f"exit {ran.rc}: {last[:200]}"], steps=case["steps"]
        )
    else:
        cells = gc.summarize(gc.read_reports(reports)) if reports.exists() else None
        fails = _failures(ran, cells)
        over = part == "notebooks" and ran.seconds > gc.NOTEBOOK_LIMIT_S
        if ran.stopped and not over and not (part == "emulated" and cells and cells["failures"]):
            return {"name": name, "unreached": f"stopped at the budget after {ran.seconds:.0f} s"}
        if over:
            fails.append(f"over {gc.NOTEBOOK_LIMIT_S:.0f} s")
        out.update(ok=ran.rc == 0 and not ran.stopped and not fails, failures=fails)
        if part == "notebooks":
            out.update(over_limit=over, slowest_cells=cells["slowest"] if cells else [])
        else:
            every = bool(cells and cells["failed"] + cells["errors"] > 1 and cells["passed"] == cells["skipped"] == 0)
            out["every_cell_failed"] = every
    if not out["ok"]:
        log.with_suffix(".tail.txt").write_text(gc.tail(ran.output))
    return out


@pytest.mark.parametrize("case", SPEC["cases"], ids=[c["name"] for c in SPEC["cases"]])
def test_entry(case, tmp_path, record_property):
    entry = run_case(case, SPEC["deadline"], tmp_path, root=Path(SPEC["root"]))
    record_property("entry", json.dumps(entry))
    if "unreached" in entry:
        pytest.skip(f"unreached: {entry['unreached']}")
    assert entry["ok"], "; ".join(entry["failures"])
