"""Lesson 02's benchmark suite (warp divergence): path A alone, path B alone, and each branch variant of
``gpulab.kernels.divergence``, with the time the model predicts from the paths' own times beside each.

    python -m gpulab.bench --only lesson02          # once registered in LESSON_SUITES

GPU only (``time_ms`` raises in interpreter mode). The paths are chains of sin/cos steps, meant to make
every kernel's time arithmetic rather than memory traffic (8 bytes per element); the model assumes so.
"""

from __future__ import annotations

import torch
from tqdm.auto import tqdm

from .. import timing
from ..kernels import divergence as dv
from ..simt import group_by_cost, loop

KEY = "lesson02"
FRACTIONS_A = (0.0, 0.25, 0.5, 0.75, 1.0)  # fraction of elements (a) or blocks (b) taking path A
FRACS_EXPENSIVE = (1 / 256, 1 / 64, 1 / 16, 1 / 4)  # (c): fraction of elements with the expensive trip count
# What notebook 02 measures live: every variant at n = 2^24, at three fractions taking A and two expensive ones.
LIVE = dict(progress=False, fractions_a=(0.0, 0.5, 1.0), fracs_expensive=(1 / 256, 1 / 16))


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
) -> dict:
    """Measure on the GPU; returns a JSON-able dict (times in ms, medians and 20th/80th percentiles).

    n: elements (float32); k_a, k_b: chain lengths of paths A and B (default divergence.K_A, K_B); block:
    elements per program; cheap/expensive: trip counts of (c). Predictions: (a) t_A + t_B; (b) f t_A +
    (1 - f) t_B; (c) linear in the steps blocks pay (``divergence.predict_loop_ms``), calibrated by a run
    with every trip count 0 and one with every trip count ``expensive``. The sort for (c) is timed too
    (``sort_ms``), since grouping work by cost is not free when the data does not arrive grouped.
    """
    timing.require_gpu("lesson02's suite")
    data = _run(
        timing.time_ms, timing.device(), progress, n, k_a, k_b, block, cheap, expensive, fractions_a, fracs_expensive
    )
    return timing.stamp(data)


def _run(time_ms, device, progress, n, k_a, k_b, block, cheap, expensive, fractions_a, fracs_expensive) -> dict:
    """``run`` with the timer and the device passed in, so the tests can drive it in the interpreter with a
    fake timer (no timing in interpreter mode is ever a GPU time)."""
    k_a, k_b = k_a if k_a is not None else dv.K_A, k_b if k_b is not None else dv.K_B
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(n, device=device, generator=gen) * 3
    n_blocks = -(-n // block)
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
            trips = torch.from_numpy(dv.mixed_trips(n, fracs_expensive[-1], cheap, expensive)).to(device)
            out["loop"]["sort_ms"] = time_ms(lambda: torch.sort(trips, descending=True, stable=True)).median_ms
        else:
            _, p, layout = job
            trips_np = dv.mixed_trips(n, p, cheap, expensive)
            if layout == "sorted":
                trips_np = trips_np[group_by_cost(trips_np)]
            trips = torch.from_numpy(trips_np).to(device)
            t = time_ms(lambda: dv.loop_cost(x, trips, block=block))
            cost = loop(trips_np, block)
            pred = dv.predict_loop_ms(out["loop"]["t_zero_ms"], out["loop"]["t_full_ms"], expensive, trips_np, block)
            out["loop"]["rows"].append(
                _row(t, pred, frac_expensive=p, layout=layout, block_steps=cost.steps, efficiency=cost.efficiency)
            )
    return out


def report(data: dict) -> str:
    """A short table: measured median against the model's prediction for each variant."""
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
    return "\n".join(lines)
