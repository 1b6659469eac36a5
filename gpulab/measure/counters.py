"""Hardware counters beside the lessons' models: Nsight Compute (``ncu``) runs gpulab's kernels and reads what
the GPU counted (DRAM bytes, sectors per request, threads per instruction, occupancy, L2 hit rate).

Run every case on a GPU and record the results into ``gpulab/data/reference-<gpu>.json`` (key "counters"):

    python -m gpulab.measure.counters --all --record

    python -m gpulab.measure.counters --case fusion            # one case: model / counters / time
    python -m gpulab.measure.counters --case fusion --json F   # ... and write its rows and comparison to F
    python -m gpulab.measure.counters --list                   # the cases and what they compare

Without a GPU, without ``ncu`` on PATH, or without permission to read the counters, ``ncu.available()`` says
why in one line and ``report(case)`` shows the recording instead, labelled as such; ``--record`` and ``--json`` then
exit 2 and write nothing (nothing was measured).

Three modules, in the order they build on each other: ``gpulab.measure.ncu`` runs ncu and parses its CSV (the metric
names, how a case is measured); ``gpulab.measure.counter_cases`` holds the eight lesson cases (what runs in each NVTX
range, and the model beside each counter); this module compares, reports, records and is the command line.
``compare`` sums each range's kernels and sets each model value beside its counter; ``report`` prints it as a
short table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

from ..core import hardware, reference
from ..core.timing import require_gpu
from . import ncu
from .counter_cases import CASES, CounterCase, get_case
from .device import provenance, write_json_atomic
from .live import Shown
from .ncu import TIME, CountersUnavailable, ncu_short

# ---- compare ---------------------------------------------------------------------------------------------------


def aggregate(rows: list[dict], range_name: str) -> tuple[dict, list[str]]:
    """The counters of one range's kernels: ``.sum`` metrics (and the time) added over the kernels; any other
    metric (rates, percentages, per-launch numbers) averaged with the kernels' times as weights. Returns
    ``(metrics, kernel names)``; empty when no kernel of the rows ran in the range."""
    mine = [r for r in rows if r.get("range") == range_name]
    names = sorted({k for r in mine for k in r["metrics"]})
    out = {}
    for k in names:
        values = [r["metrics"].get(k) for r in mine]
        if any(v is None for v in values):
            out[k] = None
        elif k.endswith(".sum"):
            out[k] = sum(values)
        else:
            weights = [r["metrics"].get(TIME) or 0.0 for r in mine]
            total = sum(weights)
            out[k] = sum(v * w for v, w in zip(values, weights)) / total if total else sum(values) / len(values)
    return out, [r["kernel"] for r in mine]


def compare(case, rows: list[dict]) -> list[dict]:
    """Model beside counter for every range of ``case`` (a name or a ``CounterCase``), from parsed ncu ``rows``
    (``gpulab.measure.ncu.parse_csv``, with their ``"range"`` set). One dict per (range, quantity): ``range``, ``label``,
    ``quantity``, ``unit``, ``model``, ``counter`` (None when not measured), ``ratio`` = counter / model (None
    without both), ``time_ns`` (gpu__time_duration summed over the range's kernels), ``kernels``, ``note``."""
    case = get_case(case)
    per_range = {r.name: aggregate(rows, r.name) for r in case.ranges}
    return case.model(case, per_range)


def row(comparison: list[dict] | dict, label: str, quantity: str) -> dict:
    """The row of ``comparison`` (``compare``'s list, or a record holding it under "comparison") for ``label`` (a
    range's label, e.g. "noreuse") and ``quantity`` (e.g. "DRAM read bytes"). Raises KeyError naming the pair and
    the pairs there are."""
    rows = comparison["comparison"] if isinstance(comparison, dict) else comparison
    for r in rows:
        if r["label"] == label and r["quantity"] == quantity:
            return r
    have = sorted({(r["label"], r["quantity"]) for r in rows})
    raise KeyError(f"no counter row for label {label!r} and quantity {quantity!r}; there are {have}")


# ---- report --------------------------------------------------------------------------------------------------


def byte_text(v: float) -> str:
    """A byte count as a reader reads it: three significant digits in GB, MB or kB (decimal), else whole bytes."""
    for scale, suffix in ((1e9, " GB"), (1e6, " MB"), (1e3, " kB")):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:.0f} B"


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "-"
    if unit == "byte":
        return byte_text(v)
    if unit == "%":
        return f"{v:.1f}%"
    return f"{v:.3g}"


def _ratio(r: float) -> str:
    """counter / model as a short factor: two decimals, or two significant digits below 0.01 (0.00049x)."""
    return f"{r:.2f}x" if r == 0 or abs(r) >= 0.01 else f"{r:.2g}x"


def table(comparison: list[dict]) -> str:
    """The comparison as one line per range: each quantity as model / counter (ratio), then the time."""
    lines, labels = [], list(dict.fromkeys(c["label"] for c in comparison))
    width = max((len(lab) for lab in labels), default=0)
    for lab in labels:
        mine = [c for c in comparison if c["label"] == lab]
        parts = []
        for c in mine:
            ratio = f" ({_ratio(c['ratio'])})" if c["ratio"] is not None else ""
            value = (
                _fmt(c["counter"], c["unit"])
                if c["model"] is None
                else f"{_fmt(c['model'], c['unit'])} / {_fmt(c['counter'], c['unit'])}{ratio}"
            )
            parts.append(f"{c['quantity']} {value}")
        t = mine[0]["time_ns"]
        parts.append("time " + ("-" if t is None else f"{t / 1e3:.4g} us"))
        lines.append(f"  {lab:<{width}}  " + " | ".join(parts))
    return "\n".join(lines)


def _comparison(case: CounterCase, data: dict) -> list[dict]:
    """The record's comparison, with the models recomputed from its counters (``rows``) when it was measured
    with the case's parameters: a recording keeps its counters, the models follow the code."""
    if data.get("rows") and data.get("params") == case.params:
        return compare(case, data["rows"])
    return data["comparison"]


def report(case, data: dict | None = None, live: bool | None = None, print_it: bool = True) -> str:
    """Model / counters / time for ``case``, at most about 15 lines. ``data``: a case record (``measure``'s
    result); without it, measured now when ``live`` (default: where ``available()``), else, or when ncu turns
    out unable to read the counters, the recording from ``gpulab.core.reference`` with a one-line reason and its
    provenance. Returns the text."""
    case = get_case(case)
    lines = [f"[{case.name}, lesson {case.lesson}] each line: model / counter (counter / model), time"]
    if data is None:
        ok, why = ncu.available()
        if live if live is not None else ok:
            try:
                data = measure(case)
            except CountersUnavailable as e:
                why = str(e)
            except (RuntimeError, ValueError, OSError, subprocess.SubprocessError) as e:  # the recording instead
                why = f"ncu could not measure here ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
        if data is None:
            shown = recorded(case.name)
            data = shown.data
            lines += [f"  {why or 'not measured live'}", f"  {shown.where}"]
    if data is not None:
        lines.append(table(data["comparison"]))
    text = "\n".join(lines)
    if print_it:
        print(text)
    return text


def recorded(case_name: str) -> Shown:
    """The recording of ``case_name``'s counters: ``data`` the record (as ``measure`` returns it, its comparison
    recomputed by ``_comparison``) from the first reference file that has one, ``where`` its one-line provenance;
    ``data`` None and ``where`` why there is none."""
    for gpu in reference.available():
        data = reference.load(gpu)
        rec = data.get("counters", {}).get("cases", {}).get(case_name)
        if rec is not None:
            rec = {**rec, "comparison": _comparison(get_case(case_name), rec)}
            p = rec.get("provenance", {})
            where = (
                f"recorded on {p.get('gpu', '?')} ({p.get('date', '?')}; {ncu_short(p.get('ncu', '?'))}, "
                f"torch {p.get('torch', '?')}, Triton {p.get('triton', '?')})"
            )
            return Shown(rec, where, False)
    where = (
        f"no recording of the {case_name!r} counters yet: run `python -m gpulab.measure.counters --case "
        f"{case_name} --record` on a GPU with ncu"
    )
    return Shown(None, where, False)


def _provenance(executable: str | None, metrics) -> dict:
    p = provenance()
    p.update(
        ncu=ncu.ncu_version(executable),
        metrics=list(metrics),
        clock_control="none",
        cache_control="all (ncu default: caches flushed before every replay pass)",
        replay_mode="kernel",
    )
    return p


def measure(case, executable: str | None = None) -> dict:
    """Profile ``case`` (a name in ``CASES`` or a ``CounterCase``) with ncu (``executable``, default the one on
    PATH) and compare: ``{"case", "lesson", "params", "rows", "comparison", "dropped_metrics", "missing_ranges",
    "ranges_by", "command", "provenance"}`` (JSON-able; ``missing_ranges``: ranges in which no kernel was
    profiled). GPU with ncu only; raises as ``gpulab.measure.ncu.profile``."""
    case = get_case(case)
    rows, info = ncu.profile(case, executable)
    seen = {r["range"] for r in rows}
    return {
        "case": case.name,
        "lesson": case.lesson,
        "params": case.params,
        "rows": rows,
        "comparison": compare(case, rows),
        "dropped_metrics": info["dropped"],
        "missing_ranges": [rg.name for rg in case.ranges if rg.name not in seen],
        "ranges_by": info["ranges_by"],
        "command": info["command"],
        "provenance": _provenance(executable, info["metrics"]),
    }


def record(results: dict[str, dict], path: Path) -> Path:
    """Merge case records (``{case name: measure(...)}``) into the reference file at ``path`` under
    "counters" -> "cases", keeping every other key and every case not in ``results``; "counters" ->
    "provenance" becomes the newest record's. Written atomically (``gpulab.measure.device.write_json_atomic``).
    Raises FileNotFoundError when ``path`` does not exist (record the benchmark suite first)."""
    path = Path(path)
    data = json.loads(path.read_text())
    counters = dict(data.get("counters", {}))
    cases = dict(counters.get("cases", {}))
    cases.update(results)
    counters["cases"] = cases
    if results:
        counters["provenance"] = list(results.values())[-1]["provenance"]
    data["counters"] = counters
    return write_json_atomic(path, data)


# ---- the child: runs inside ncu -------------------------------------------------------------------------------


def run_child(case) -> None:
    """Build ``case``'s inputs, compile every kernel once outside any range, then run each kernel of interest
    once inside its NVTX range (GPU only; ``python -m gpulab.measure.counters --child <case>`` under ncu)."""
    case = get_case(case)
    require_gpu("the counters' child run")
    runs = case.setup(case)
    for _, fn in runs:  # compile and load every kernel; ncu profiles none of these (outside the ranges)
        fn()
    torch.cuda.synchronize()
    for rng, fn in runs:
        torch.cuda.nvtx.range_push(rng.name)
        fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


# ---- command line ---------------------------------------------------------------------------------------------


def _reference_path(gpu_name: str | None) -> Path:
    """The reference file of ``gpu_name`` (a short name such as "h200"), by default of this GPU (named as
    ``python -m gpulab.bench --record`` names it)."""
    if gpu_name is None:
        name = torch.cuda.get_device_name(0)
        spec = hardware.find(name)
        gpu_name = spec.name.split()[0].lower() if spec else name.lower().replace(" ", "-")
    return reference.path_for(gpu_name)


USAGE = """Hardware counters (Nsight Compute, ncu) beside the lessons' models.

  python -m gpulab.measure.counters --list                  the cases and what each compares
  python -m gpulab.measure.counters --case fusion           one case: model beside counter, and the time
  python -m gpulab.measure.counters --all                   every case
  python -m gpulab.measure.counters --all --record          ... and store them in gpulab/data/reference-<gpu>.json
  python -m gpulab.measure.counters --case fusion --json F  ... and write the rows and comparison to the file F

Needs a CUDA GPU, ncu on PATH and permission to read the counters; without them it prints the recorded
counters, labelled as such, and --record and --json refuse (nothing was measured)."""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m gpulab.measure.counters",
        description=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--case", choices=sorted(CASES), help="profile one case")
    what.add_argument("--all", action="store_true", help="profile every case")
    what.add_argument("--list", action="store_true", help="list the cases")
    what.add_argument("--child", choices=sorted(CASES), help=argparse.SUPPRESS)
    ap.add_argument("--record", action="store_true", help="merge the results into gpulab/data/reference-<gpu>.json")
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    ap.add_argument("--gpu-name", default=None, help="short name of the reference file (default from the GPU)")
    args = ap.parse_args(argv)

    if args.child:
        run_child(args.child)
        return 0
    if args.list:
        for c in CASES.values():
            print(f"{c.name:11} lesson {c.lesson}: {c.what}")
        return 0
    names = sorted(CASES) if args.all else [args.case]
    ok, why = ncu.available()
    if not ok:
        if args.record or args.json:
            what = "--record" if args.record else f"--json {args.json}"
            print(
                f"error: {what} needs counters measured here, and none can be: {why}. Nothing was written; "
                "run without it to see the recorded counters",
                file=sys.stderr,
            )
            return 2
        for name in names:
            report(name, live=False)
        return 0
    results, failed = {}, []
    for name in names:
        try:
            results[name] = measure(name)
        except CountersUnavailable as e:  # no case can be measured
            print(f"error: {e}", file=sys.stderr)
            return 2
        except Exception as e:  # noqa: BLE001  (one failing case must not lose the others' counters)
            failed.append(name)
            print(f"[{name}] failed: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        report(name, results[name])
        if results[name]["dropped_metrics"]:
            print(f"  metrics this ncu does not know, left out: {results[name]['dropped_metrics']}")
        if results[name]["missing_ranges"]:
            print(
                f"  ranges with no profiled kernel (kernels given to ranges by {results[name]['ranges_by']}): "
                f"{results[name]['missing_ranges']}"
            )
        if args.record:
            print(f"  recorded into {record({name: results[name]}, _reference_path(args.gpu_name))}")
    if args.json:
        print(f"wrote {write_json_atomic(args.json, results)}")
    if failed:
        print(f"failed cases: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
