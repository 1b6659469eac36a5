"""``python -m gpulab.bench``: measure this GPU's ceilings and run the benchmark suite.

    python -m gpulab.bench              # print ceilings, roofline points and ratios against torch
    python -m gpulab.bench --record     # ... and write gpulab/data/reference-<gpu>.json with provenance
    python -m gpulab.bench --json F     # ... and write every record to F
    python -m gpulab.bench --only lesson02,lesson03 --record   # run some suites; merge them into the file
    python -m gpulab.bench --only lesson07 --steps headline,awkward --record   # part of one suite, merged
    python -m gpulab.bench --autotune-report lesson08 [--json F]   # what the autotuner picks, per candidate

Each lesson's suite is a module in ``LESSON_SUITES`` with ``KEY``, ``run(progress) -> dict`` (GPU only,
JSON-able) and ``report(data) -> str``. Its record is stored under ``KEY`` with its own provenance. A suite
with ``STEPS`` runs a subset with ``--steps``; recorded, the new steps replace theirs in the file and every
other entry is kept, its provenance listed under ``step_provenance`` (``merge_record``). Its ``HEADLINE_STEPS``
(else its "headline" step, else the whole suite) are what ``tools/gpu_check.py`` runs to prove it on a GPU. A suite
with ``autotune_report()`` and ``autotune_report_text(rows)`` answers ``--autotune-report``.

The autotuner takes the choices stored for this GPU (``gpulab.kernels._autotune``: this machine's, then those
recorded in ``gpulab/data/autotune-<gpu>.json``) except under ``--record`` and ``--autotune-report``, which time
every candidate; ``--record`` also adds what it timed to ``gpulab/data/autotune-<gpu>.json``.

Without a GPU it prints the recorded reference data, labelled as recorded, and measures nothing. ``--record``,
``--autotune-report`` and ``--json`` then exit 2 with a message and write nothing: each of them writes what was
measured, and nothing was (the recorded data is already a file in ``gpulab/data``). A suite whose recorded entry
lacks a key its report reads, or holds a value of the wrong type there, is named with the file, the others are still
shown, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from pathlib import Path

import gpulab
from gpulab.core import hardware, reference
from gpulab.core.timing import is_fake, is_fake_record, live, stamp
from gpulab.measure.device import write_json_atomic


def _print_profile(p: dict, label: str) -> None:
    print(f"\nCeilings of {p['gpu']} ({label}):")
    print(f"  copy bandwidth (read + write): {p['copy_tbps']:.3f} TB/s")
    for d, r in p["matmul_tflops"].items():
        print(f"  matmul {d:>5}: " + (f"{r:8.1f} TFLOP/s" if r else "   (not supported)"))


def _print_points(points: list[dict]) -> None:
    print("\nRoofline points (FLOPs and bytes counted by hand):")
    print(f"  {'kernel':28} {'FLOP/B':>8} {'time ms':>10} {'TFLOP/s':>9} {'TB/s':>7}")
    for q in points:
        s = q["time_ms"] * 1e-3
        print(
            f"  {q['name']:28} {q['flops'] / q['bytes_moved']:8.3g} {q['time_ms']:10.4g} "
            f"{q['flops'] / s / 1e12:9.3g} {q['bytes_moved'] / s / 1e12:7.3f}"
        )


def _print_ratios(rows: list[dict]) -> None:
    print("\nAgainst the vendor baseline (ratio = torch time / gpulab time; >= 1 is as fast or faster):")
    for r in rows:
        print(
            f"  {r['name']:18} n={r['n']}: gpulab {r['gpulab_ms']:.4f} ms ({r['gpulab_tbps']:.2f} TB/s), "
            f"torch {r['torch_ms']:.4f} ms ({r['torch_tbps']:.2f} TB/s), ratio {r['ratio']:.3f}"
        )


def _print_recorded_core(data: dict) -> None:
    _print_profile(data["profile"], "recorded")
    _print_points(data.get("roofline_points", []))
    _print_ratios(data.get("vendor_ratios", []))


def _print_recorded_suite(data: dict, m) -> None:
    print(f"\n[{m.KEY}] {reference.label(data, m.KEY)}\n" + m.report(data[m.KEY]))


def _show_recorded(path: Path, suite: str, show, *args) -> bool:
    """Run ``show(*args)``, which prints suite ``suite``'s part of the recorded file ``path``. A key missing there, or
    a value of the wrong type or form (a string where a number goes, a list too short: a file older than the suite,
    or edited by hand), is reported naming the file, the suite and the key or the error, instead of a traceback.
    Returns False then, True when it printed."""
    again = f"record it again on a GPU (python -m gpulab.bench --only {suite} --record)"
    try:
        show(*args)
    except KeyError as e:
        print(
            f"\nerror: [{suite}] {path} lacks the key {e} that the {suite} report reads: the file is older than the "
            f"suite or was edited; {again}",
            file=sys.stderr,
        )
        return False
    except (TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError) as e:
        print(
            f"\nerror: [{suite}] {path} holds a value the {suite} report cannot read ({type(e).__name__}: {e}): the "
            f"file is older than the suite or was edited; {again}",
            file=sys.stderr,
        )
        return False
    return True


LESSON_SUITES = [
    "gpulab.bench.lesson00",
    "gpulab.bench.lesson02",
    "gpulab.bench.lesson03",
    "gpulab.bench.lesson04",
    "gpulab.bench.lesson05",
    "gpulab.bench.lesson06",
    "gpulab.bench.lesson07",
    "gpulab.bench.lesson08",
    "gpulab.bench.lesson09",
    "gpulab.bench.lesson10",
]  # module names, e.g. "gpulab.bench.lesson02"; see the module docstring
CORE = "ceilings"  # the device profile, roofline points and vendor ratios


UNION_KEYS = ("tuned_configs",)  # dict entries a partial run adds to rather than replaces


def merge_record(old: dict, new: dict) -> dict:
    """A suite's record after a partial run: ``new`` (with its ``provenance``) over ``old``; each entry kept from
    ``old`` gets the provenance it was measured under in ``step_provenance`` (its own entry there, else
    ``old["provenance"]``). The dicts of ``UNION_KEYS`` (the autotuner's choices) are merged entry by entry."""
    kept_prov = dict(old.get("step_provenance", {}))
    merged = {k: v for k, v in old.items() if k not in ("provenance", "step_provenance")}
    merged.update(new)
    for k in UNION_KEYS:
        if isinstance(old.get(k), dict) and isinstance(new.get(k), dict):
            merged[k] = {**old[k], **new[k]}
    prov = {k: kept_prov.get(k, old.get("provenance", {})) for k in merged if k not in new and k != "provenance"}
    if prov:
        merged["step_provenance"] = prov
    merged["provenance"] = new.get("provenance", old.get("provenance"))
    return merged


def _suites(only):
    import importlib

    mods = [importlib.import_module(m) for m in LESSON_SUITES]
    keys = [CORE] + [m.KEY for m in mods]
    if only:
        unknown = sorted(set(only) - set(keys))
        if unknown:
            raise SystemExit(f"--only: unknown suite(s) {unknown}; known: {keys}")
    return [m for m in mods if not only or m.KEY in only], (not only or CORE in only)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m gpulab.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--record", action="store_true", help="write reference data into gpulab/data/")
    ap.add_argument("--json", type=Path, help="also write all records to this JSON file")
    ap.add_argument("--gpu-name", default=None, help="short name for the reference file (default from the GPU)")
    ap.add_argument("--only", default="", help="comma-separated suites to run (default: all)")
    ap.add_argument("--steps", default="", help="comma-separated steps of the one suite named by --only (its STEPS)")
    ap.add_argument(
        "--autotune-report",
        metavar="SUITE",
        default="",
        help="print what the autotuner picks against every candidate (GPU only), e.g. lesson08",
    )
    args = ap.parse_args(argv)
    only = [k.strip() for k in args.only.split(",") if k.strip()]
    steps = [k.strip() for k in args.steps.split(",") if k.strip()]
    lesson_mods, run_core = _suites(only or ([args.autotune_report] if args.autotune_report else []))
    if steps and (len(only) != 1 or run_core or not hasattr(lesson_mods[0], "STEPS")):
        raise SystemExit("--steps needs --only naming one lesson suite that has STEPS")
    if steps and set(steps) - set(lesson_mods[0].STEPS):
        raise SystemExit(
            f"--steps: unknown step(s) {sorted(set(steps) - set(lesson_mods[0].STEPS))}; "
            f"{lesson_mods[0].KEY} has {list(lesson_mods[0].STEPS)}"
        )
    if args.autotune_report and (run_core or not hasattr(lesson_mods[0], "autotune_report")):
        raise SystemExit(f"--autotune-report: {args.autotune_report!r} has no autotune report")

    gpulab.describe()
    if not live():
        if args.record or args.autotune_report or args.json:
            what = "--record" if args.record else "--autotune-report" if args.autotune_report else "--json"
            written = f" to {args.json}" if what == "--json" else ""
            print(
                f"error: {what} needs a CUDA GPU; nothing was measured, so nothing was written{written} "
                f"(the recorded reference data is in {reference.DATA_DIR}; run without {what} to see it)",
                file=sys.stderr,
            )
            return 2
        if not reference.available():
            print("\nNo GPU here and no reference data recorded yet: nothing to show.")
        incomplete = 0
        for gpu in reference.available():
            data = reference.load(gpu)
            path = reference.path_for(gpu)
            print(f"\nNo GPU here: showing reference data {reference.label(data)}, not a measurement.")
            if run_core:
                incomplete += not _show_recorded(path, CORE, _print_recorded_core, data)
            for m in lesson_mods:
                if m.KEY in data:
                    incomplete += not _show_recorded(path, m.KEY, _print_recorded_suite, data, m)
                else:
                    print(f"\n[{m.KEY}] no recorded data yet")
        return 1 if incomplete else 0

    if gpulab.AUTOTUNE != "full" and not is_fake():
        print(
            f"error: GPULAB_AUTOTUNE={gpulab.AUTOTUNE} takes untimed first configs; the benchmark suite measures "
            "autotuned kernels only. Unset GPULAB_AUTOTUNE and run again.",
            file=sys.stderr,
        )
        return 2
    from gpulab.kernels import _autotune

    with _autotune.fresh() if args.record or args.autotune_report else contextlib.nullcontext():
        return _measure(args, lesson_mods, run_core, steps)


def _measure(args, lesson_mods, run_core: bool, steps: list[str]) -> int:
    """``main``'s GPU part: the autotune report, or the suites measured, printed, written and recorded."""
    from gpulab.bench import suite
    from gpulab.kernels import _autotune
    from gpulab.measure.device import measure_profile, provenance, save_profile

    if args.autotune_report:
        m = lesson_mods[0]
        rows = m.autotune_report()
        print(m.autotune_report_text(rows))
        if args.json:
            print(f"wrote {write_json_atomic(args.json, {'autotune_report': rows, 'provenance': provenance()})}")
        return 0

    record = {}
    if run_core:
        profile = measure_profile()
        print(f"saved device profile to {save_profile(profile)}")
        _print_profile(profile.to_json(), "measured now")
        points = [dataclasses.asdict(p) for p in suite.roofline_points()]
        _print_points(points)
        ratios = suite.vendor_ratios()
        _print_ratios(ratios)
        record = {
            "provenance": provenance(),
            "profile": profile.to_json(),
            "roofline_points": points,
            "vendor_ratios": ratios,
        }
    for m in lesson_mods:
        data = m.run(progress=True, steps=steps) if steps else m.run(progress=True)
        data = stamp(data)
        data["provenance"] = provenance()
        record[m.KEY] = data
        print(f"\n[{m.KEY}] " + m.report(data))
    if args.json:
        print(f"\nwrote {write_json_atomic(args.json, record)}")
    if args.record:
        import torch

        if is_fake() or is_fake_record(record):
            raise SystemExit("--record: these numbers come from the test clock, not a GPU; nothing was written")
        gpu = torch.cuda.get_device_name(0)
        spec = hardware.find(gpu)
        short = args.gpu_name or (spec.name.split()[0].lower() if spec else gpu.lower().replace(" ", "-"))
        tuned = _autotune.record(reference.DATA_DIR / f"autotune-{short}.json", provenance())
        if tuned:  # the choices are this GPU's, whether or not its reference file takes the suites below
            print(f"recorded the autotuner's choices to {tuned}")
        path = reference.path_for(short)
        if not run_core:  # merge the suites that ran into the existing file, keeping the rest
            if not path.exists():
                raise SystemExit(f"--only without {CORE!r} merges into {path}, which does not exist yet")
            old = reference.load(short)
            if steps and lesson_mods[0].KEY in old:  # part of one suite: the steps not run are kept
                key = lesson_mods[0].KEY
                record[key] = merge_record(old[key], record[key])
            record = {**old, **record}
        print(f"recorded reference data to {write_json_atomic(path, record)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
