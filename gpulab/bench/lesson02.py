"""Lesson 02's benchmark suite (warp divergence), in two steps (``STEPS``):

- ``variants``: path A alone, path B alone, and each branch variant of ``gpulab.kernels.divergence`` (Triton),
  with the time the model predicts from the paths' own times beside each;
- ``lane_branch``: the CUDA kernel ``gpulab.kernels.lane_branch`` (``if (lane < b)``) timed for b = 0..32, and its
  active threads per warp instruction read with Nsight Compute (the counter case ``lane_branch``) where ncu can.

    python -m gpulab.bench --only lesson02                            # both steps
    python -m gpulab.bench --only lesson02 --steps lane_branch --record   # one step, merged into the record

Under the test clock the CUDA kernel (which needs nvcc and a GPU) is replaced by its float64 reference, cast to
float32, so the step runs end to end on a CPU with every time marked fake.

GPU only (``time_ms`` raises in interpreter mode). The paths are chains of sin/cos steps, meant to make
every kernel's time arithmetic rather than memory traffic (8 bytes per element); the model assumes so.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from tqdm.auto import tqdm

import gpulab

from ..core import timing
from ..kernels import divergence as dv
from ..kernels import lane_branch as lb
from ..measure import counters, ncu
from ..models import simt
from ..models.simt import loop
from ..models.waves import cdiv

KEY = "lesson02"
FRACTIONS_A = (0.0, 0.25, 0.5, 0.75, 1.0)  # fraction of elements (a) or blocks (b) taking path A
FRACS_EXPENSIVE = (1 / 256, 1 / 64, 1 / 16, 1 / 4)  # (c): fraction of elements with the expensive trip count
STEPS = ("variants", "lane_branch")
#: The steps ``make gpu-check`` runs as this suite's headline: lane_branch builds CUDA code with nvcc and reads
#: counters, so it is recorded on its own (``--steps lane_branch --record``).
HEADLINE_STEPS = ("variants",)
LANE_N, LANE_TRIPS, LANE_BLOCK = 2**24, 256, 256  # the lane_branch step: threads, FMAs per path, threads per block
LANE_CHECK_N = 4099  # elements of the check against float64 before timing (not a multiple of the block)
# What notebook 02 measures live: every variant at n = 2^24, at three fractions taking A and two expensive ones
# (the lane_branch step builds CUDA code with nvcc, tens of seconds: the notebook shows its recording).
LIVE = dict(progress=False, fractions_a=(0.0, 0.5, 1.0), fracs_expensive=(1 / 256, 1 / 16), steps=("variants",))
#: do_bench's budgets for each variant (ms): a variant takes 0.1 to 1.1 ms at n = 2^24 on an H200, so 100 ms is a
#: hundred launches or more, and the recorded 20th and 80th percentiles lie within 5% of the median.
TIMING = dict(warmup_ms=25, rep_ms=100)


def _row(t, predicted_ms: float, **kw) -> dict:
    return dict(**kw, measured_ms=t.median_ms, p20_ms=t.p20_ms, p80_ms=t.p80_ms, predicted_ms=predicted_ms)


def run(
    progress: bool = True,
    n: int = 2**24,
    k_a: int | None = None,
    k_b: int | None = None,
    block: int = 1024,
    cheap: int = 4,
    expensive: int = 64,
    fractions_a=FRACTIONS_A,
    fracs_expensive=FRACS_EXPENSIVE,
    steps=None,
    lane_n: int = LANE_N,
    lane_trips: int = LANE_TRIPS,
) -> dict:
    """Measure on the GPU; returns a JSON-able dict (times in ms, medians and 20th/80th percentiles).
    ``steps``: a subset of ``STEPS`` (default both); the ``lane_branch`` step's entry is ``lane_branch``, measured
    with ``lane_n`` threads of ``lane_trips`` FMAs per path (``lane_branch_step``).

    n: elements (float32); k_a, k_b: chain lengths of paths A and B (default divergence.K_A, K_B); block:
    elements per program; cheap/expensive: trip counts of (c). Predictions: (a) t_A + t_B; (b) f t_A +
    (1 - f) t_B; (c) linear in the steps blocks pay (``divergence.predict_loop_ms``), calibrated by a run
    with every trip count 0 and one with every trip count ``expensive``. The sort for (c) is timed too
    (``sort_ms``), since grouping work by cost is not free when the data does not arrive grouped.
    """
    timing.require_gpu("lesson02's suite")
    unknown = set(steps or ()) - set(STEPS)
    if unknown:
        raise ValueError(f"steps must be drawn from {STEPS}, got unknown {sorted(unknown)}")
    data = {}
    if steps is None or "variants" in steps:
        data = _run(
            functools.partial(timing.time_ms, **TIMING),
            timing.device(),
            progress,
            n,
            k_a,
            k_b,
            block,
            cheap,
            expensive,
            fractions_a,
            fracs_expensive,
        )
    if steps is None or "lane_branch" in steps:
        data["lane_branch"] = lane_branch_step(lane_n, lane_trips, progress=progress)
    return timing.stamp(data)


def _lane_kernel():
    """The kernel the step times: the CUDA build on a GPU; under the test clock its float64 reference in float32."""
    if gpulab.ON_GPU:
        return lb.lane_branch
    return lambda x, b, trips, block: lb.lane_branch_ref(x, b, trips).float()


def _lane_counters() -> tuple[dict | None, str]:
    """``(record, note)``: the counter case ``lane_branch`` measured with ncu (``gpulab.measure.counters.measure``), or None
    and why not (no GPU, no ncu, no permission, or ncu failed)."""
    ok, why = ncu.available()
    if not ok:
        return None, f"counters not read: {why}"
    try:
        return counters.measure("lane_branch"), "read with Nsight Compute"
    except (ncu.CountersUnavailable, RuntimeError, ValueError, OSError) as e:  # the times are kept without counters
        return None, f"counters not read: {type(e).__name__}: {str(e).splitlines()[0][:200]}"


def lane_branch_step(n: int = LANE_N, trips: int = LANE_TRIPS, block: int = LANE_BLOCK, progress: bool = False) -> dict:
    """The ``lane_branch`` step: the kernel checked against float64 at b = 0, 1, 17, 31, 32 on ``LANE_CHECK_N``
    elements, then timed for every b in 0..32 on n elements in [-1, 1]; the counters after. Returns ``n``,
    ``trips``, ``block``, ``max_abs_err``, ``rows`` (one per b: ``b``, ``median_ms``, ``p20_ms``, ``p80_ms``,
    ``time_ratio`` = median / median at b = 0, ``model_time_ratio``, ``model_efficiency``), ``counters`` (the
    counter case's record, or None) and ``counters_note``. Raises RuntimeError if the kernel is wrong."""
    timing.require_gpu("lesson02's lane_branch step")
    run = _lane_kernel()
    device = timing.device()
    gen = torch.Generator(device=device).manual_seed(0)
    small = torch.rand(LANE_CHECK_N, device=device, generator=gen) * 2 - 1
    err = 0.0
    for b in (0, 1, 17, 31, 32):
        e = (run(small, b, trips, block).double() - lb.lane_branch_ref(small, b, trips)).abs().max().item()
        if not e <= 1e-4:
            raise RuntimeError(f"lane_branch differs from its float64 reference at b = {b}: max |error| {e:.3g}")
        err = max(err, e)
    x = torch.rand(n, device=device, generator=gen) * 2 - 1
    model = {r["b"]: r for r in simt.boundary_sweep(max(trips, 1), max(trips, 1))}
    rows = []
    for b in tqdm(range(simt.WARP_SIZE + 1), desc="lesson02 lane_branch", disable=not progress):
        t = timing.time_ms(lambda b=b: run(x, b, trips, block))
        rows.append(
            dict(
                b=b,
                median_ms=t.median_ms,
                p20_ms=t.p20_ms,
                p80_ms=t.p80_ms,
                model_time_ratio=model[b]["time_ratio"],
                model_efficiency=model[b]["efficiency"],
            )
        )
    for r in rows:
        r["time_ratio"] = r["median_ms"] / rows[0]["median_ms"]
    record, note = _lane_counters()
    return dict(n=n, trips=trips, block=block, max_abs_err=err, rows=rows, counters=record, counters_note=note)


def _run(time_ms, device, progress, n, k_a, k_b, block, cheap, expensive, fractions_a, fracs_expensive) -> dict:
    """``run`` with the timer and the device passed in, so the tests can drive it in the interpreter with a
    fake timer (no timing in interpreter mode is ever a GPU time)."""
    k_a, k_b = k_a if k_a is not None else dv.K_A, k_b if k_b is not None else dv.K_B
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(n, device=device, generator=gen) * 3
    n_blocks = cdiv(n, block)
    jobs = (
        ["path A", "path B"]
        + [("where", f) for f in fractions_a]
        + [("uniform", f) for f in fractions_a]
        + ["loop zero", "loop full", "sort"]
        + [("loop", p, lay) for p in fracs_expensive for lay in ("interleaved", "sorted")]
    )
    out = dict(
        n=n, block=block, k_a=k_a, k_b=k_b, where=[], uniform=[], loop=dict(cheap=cheap, expensive=expensive, rows=[])
    )
    draws = {p: dv.mixed_trips(n, p, cheap, expensive) for p in fracs_expensive}  # one draw a fraction, seed 0
    for job in tqdm(jobs, desc="lesson02", disable=not progress):
        if job in ("path A", "path B"):
            w = job[-1]
            t = time_ms(lambda: dv.path(x, w, k_a if w == "A" else k_b, block=block))
            out[f"path_{w.lower()}"] = t.asdict()
        elif job[0] == "where":
            take_a = torch.rand(n, device=device, generator=gen) < job[1]
            t = time_ms(lambda: dv.branch_where(x, take_a, k_a, k_b, block=block))
            out["where"].append(
                _row(t, dv.predict_where_ms(out["path_a"]["median_ms"], out["path_b"]["median_ms"]), fraction_a=job[1])
            )
        elif job[0] == "uniform":
            flags = dv.block_flags(n_blocks, job[1], device=device)
            frac = flags.float().mean().item()  # the fraction actually run, after rounding to whole blocks
            t = time_ms(lambda: dv.branch_uniform(x, flags, k_a, k_b, block=block))
            out["uniform"].append(
                _row(
                    t,
                    dv.predict_uniform_ms(out["path_a"]["median_ms"], out["path_b"]["median_ms"], frac),
                    fraction_a=job[1],
                )
            )
        elif job in ("loop zero", "loop full"):
            trips = torch.full((n,), 0 if job == "loop zero" else expensive, dtype=torch.int32, device=device)
            out["loop"]["t_zero_ms" if job == "loop zero" else "t_full_ms"] = time_ms(
                lambda: dv.loop_cost(x, trips, block=block)
            ).median_ms
        elif job == "sort":
            trips = torch.from_numpy(draws[fracs_expensive[-1]]).to(device)
            out["loop"]["sort_ms"] = time_ms(lambda: torch.sort(trips, descending=True, stable=True)).median_ms
        else:
            _, p, layout = job
            trips_np = draws[p]
            if layout == "sorted":  # the values of trips_np[group_by_cost(trips_np)], by a sort, not an argsort
                trips_np = np.sort(trips_np)[::-1].copy()
            trips = torch.from_numpy(trips_np).to(device)
            t = time_ms(lambda: dv.loop_cost(x, trips, block=block))
            cost = loop(trips_np, block)
            pred = dv.predict_loop_ms(out["loop"]["t_zero_ms"], out["loop"]["t_full_ms"], expensive, trips_np, block)
            out["loop"]["rows"].append(
                _row(t, pred, frac_expensive=p, layout=layout, block_steps=cost.steps, efficiency=cost.efficiency)
            )
    return out


def lane_report(lane: dict) -> str:
    """The lane_branch step in three lines: time against b = 0 and active lanes per instruction, measured (model),
    at a few b."""
    eff = simt.lane_branch_points(lane)["efficiency"]
    rows = [r for r in lane["rows"] if r["b"] in (0, 1, 16, 31, 32)]
    times = ", ".join(f"{r['b']}: {r['time_ratio']:.2f} ({r['model_time_ratio']:.0f})" for r in rows)

    def lanes_at(b):
        return "-" if eff.get(b) is None else f"{32 * eff[b]:.1f}"

    lanes = ", ".join(f"{r['b']}: {lanes_at(r['b'])} ({32 * r['model_efficiency']:.0f})" for r in rows)
    return "\n".join(
        [
            f"  CUDA if (lane < b): n = {lane['n']:,}, {lane['trips']} FMAs per path, block {lane['block']}; "
            f"{lane['counters_note']}",
            f"    time / time at b = 0, measured (model), by b: {times}",
            f"    active lanes per warp instruction (model), by b: {lanes}",
        ]
    )


def report(data: dict) -> str:
    """A short table: measured median against the model's prediction for each variant (and the lane_branch
    step's digest, when the record has it)."""
    if "path_a" not in data:
        return lane_report(data["lane_branch"])
    lines = [
        f"n = {data['n']:,} float32, block {data['block']}, path A = {data['k_a']} sin steps, "
        f"path B = {data['k_b']} cos steps",
        f"  path A alone {data['path_a']['median_ms']:.4f} ms, path B alone {data['path_b']['median_ms']:.4f} ms",
        f"  {'variant':34} {'measured ms':>12} {'model ms':>10} {'meas/model':>11}",
    ]

    def fmt(name, r):
        return f"  {name:34} {r['measured_ms']:12.4f} {r['predicted_ms']:10.4f} {r['measured_ms'] / r['predicted_ms']:11.2f}"

    lines += [fmt(f"(a) tl.where, {r['fraction_a']:.0%} take A", r) for r in data["where"]]
    lines += [fmt(f"(b) uniform if, {r['fraction_a']:.0%} blocks A", r) for r in data["uniform"]]
    lp = data["loop"]
    lines.append(
        f"  (c) loop: trips {lp['cheap']} or {lp['expensive']}; all 0 trips "
        f"{lp['t_zero_ms']:.4f} ms, all {lp['expensive']} trips {lp['t_full_ms']:.4f} ms; "
        f"torch.sort of the trips {lp['sort_ms']:.4f} ms"
    )
    lines += [
        fmt(f"(c) {r['frac_expensive']:.2%} expensive, {r['layout']}", r) + f"   eff {r['efficiency']:.0%}"
        for r in lp["rows"]
    ]
    if "lane_branch" in data:
        lines.append(lane_report(data["lane_branch"]))
    return "\n".join(lines)
