"""Lesson 05 (recomputation) benchmark suite: ``python -m gpulab.bench --only lesson05``.

GPU only. For y = s(s(s(x))) computed three ways (eager autograd, torch.utils.checkpoint, the fused Triton
Function of ``gpulab.kernels.sigmoid3``), with x requiring grad so that gradients really flow, at each size of
``SIZES`` (fp32):

- forward + backward time (``time_ms`` of ``torch.autograd.grad(f(x), x, dy)``), ms;
- extra memory above the inputs: held between forward and backward, and the peak over forward + backward
  (``timing.reset_peak_memory`` / ``timing.max_memory_allocated``), beside ``gpulab.models.recompute``'s model, in
  both of its settings: "loss" (training: loss = y.sum(), y not kept; the row's ``held_bytes``/``peak_bytes``)
  and "held" (the caller keeps y and passes a dense dy; the row's ``held_setting`` dict);
- the bytes, FLOPs and launches counted by hand.

At the largest size it checks the three gradients against each other and reports the ratios set as
targets: eager ms / fused ms (> 1) and fused extra peak memory / eager's (<= 1/3, in the "loss" setting; the
"held" setting's ratio is reported beside it: there y and dx must coexist, so no way can go below 2/5 of eager).
Step ``teaching``: the teaching pair (``kernels.sigmoid3_teaching``, written as the exercise asks: its solution
shows them) against the production pair (``kernels.sigmoid3``), forward and backward alone at ``TEACHING_N``
(fp32): ms and GB/s of the bytes each must move (8 B/element forward, 12 backward). The production pieces change
no bytes.

About a minute. ``measure_memory`` is the memory measurement, for one way at one size.
"""

from __future__ import annotations

import gc

import torch
from tqdm.auto import tqdm

from ..core import dtypes, plan, timing
from ..kernels import sigmoid3, sigmoid3_teaching
from ..kernels.sigmoid3 import WAYS
from ..models import recompute
from . import planned

KEY = "lesson05"
SIZES = tuple(2**e for e in range(16, 29, 2))  # 2^16 .. 2^28 (2^28 fp32: 1 GiB a tensor)
DTYPE = "fp32"
TEACHING_N = 2**28
STEPS = ("ways", "teaching")
#: What ``make gpu-check`` runs: the three ways at every size (the speed-up and the peak ratio at the largest).
HEADLINE_STEPS = ("ways",)
#: What notebook 05 runs live (``run(**LIVE)``): both steps, the ways at every other size (2^16, 2^20, 2^24, 2^28:
#: the launch-bound end, the crossover and the copy-bound end); the recording holds all seven.
LIVE: dict = dict(progress=False, sizes=SIZES[::2])


def point_bytes(n: int, itemsize: int = 4) -> int:
    """Bytes one size of ``ways`` allocates: x, dy, and the largest peak of any way (``recompute.memory_model``,
    "held" setting: y kept)."""
    peak = max(recompute.memory_model(w, n, itemsize, "held")["peak_bytes"] for w in recompute.WAYS)
    return 2 * n * itemsize + peak


def choices(p, sizes=SIZES, dtype: str = DTYPE, teaching_n: int = TEACHING_N) -> dict:
    """What the suite runs on ``p`` (a ``gpulab.core.plan.Plan``): ``sizes_kept`` and ``sizes_skipped`` (records
    ``{"n", "skipped"}``) of ``ways`` by ``point_bytes``, and ``teaching_n``: ``teaching_n``, or the largest kept
    size where its four fp32 buffers do not fit."""
    itemsize = dtypes.torch_dtype(dtype, allowed=dtypes.ELEMENTWISE).itemsize
    kept, skipped = planned.split(p, sizes, lambda n: point_bytes(n, itemsize))
    tn = teaching_n if p.fits(4 * 4 * teaching_n) else max(kept, default=min(sizes))
    return dict(sizes_kept=kept, sizes_skipped=skipped, teaching_n=tn)


def measure_memory(fn, x, dy=None) -> dict:
    """Measure on the GPU, in bytes above what is allocated before the call (x, dy and anything else alive):
    ``held_bytes`` after forward (what autograd saved, and y in the "held" setting), ``peak_bytes`` over
    forward + backward (``timing.reset_peak_memory`` then ``timing.max_memory_allocated``). x: requires
    grad. ``dy`` None: the "loss" setting (loss = y.sum(), only the loss kept); a tensor: the "held" setting
    (y kept, dx = d(y . dy)/dx). Checks that a gradient came back. Runs ``fn`` forward and backward once before
    measuring. Raises NoGPUTimingError in interpreter mode, ValueError if x does not require grad."""
    timing.require_gpu("a GPU memory measurement")
    if not x.requires_grad:
        raise ValueError("x must require grad (x.requires_grad_()): without it nothing is differentiated")
    x.grad = None
    recompute.forward_backward(fn, x, dy)()  # once first: compile and load kernels outside the measurement
    # nothing alive before the window may be freed inside it: a reference cycle that Python's garbage collector
    # frees mid-window lowers the peak above `base` by that tensor. So the collector is off inside; before it, the
    # young generations are collected (the cycles of the run just made; a full collection of a notebook kernel's
    # heap takes a good fraction of a second, twice a row)
    gc.collect(1)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        timing.synchronize()
        base = timing.memory_allocated()
        timing.reset_peak_memory()
        if dy is None:
            out = fn(x).sum()  # y is a temporary: freed here unless autograd saved it
        else:
            out = fn(x)  # y is kept by the caller
        timing.synchronize()
        held = timing.memory_allocated() - base
        (dx,) = torch.autograd.grad(out, x, dy)
        timing.synchronize()
        peak = timing.max_memory_allocated() - base
    finally:
        if was_enabled:
            gc.enable()
    if dx is None or dx.shape != x.shape:
        raise RuntimeError("no gradient came back: the measurement would prove nothing")
    del out, dx
    return dict(held_bytes=int(held), peak_bytes=int(peak))


def teaching(n: int = TEACHING_N, progress: bool = True) -> list[dict]:
    """The teaching forward and backward kernels (exercise 05's solution) against the production ones at n
    elements (fp32), each timed alone by CUDA-graph replay: rows ``{"n", "pass", "kernel", "ms", "gbps",
    "bytes"}``. GPU only."""
    timing.require_gpu("the lesson05 teaching step")
    x = torch.randn(n, device=timing.device())
    dy, out = torch.randn_like(x), torch.empty_like(x)
    moved = sigmoid3_teaching.sigmoid3_counts(n)  # bytes a pass moves; the production pair moves the same
    jobs = (
        ("forward", "teaching", lambda: sigmoid3_teaching.sigmoid3_fwd(x, out), moved["forward"]),
        ("forward", "production", lambda: sigmoid3.sigmoid3_forward(x), moved["forward"]),
        ("backward", "teaching", lambda: sigmoid3_teaching.sigmoid3_bwd(x, dy, out), moved["backward"]),
        ("backward", "production", lambda: sigmoid3.sigmoid3_backward(x, dy), moved["backward"]),
    )
    rows = []
    for pass_, kernel, fn, nbytes in tqdm(jobs, desc="lesson05 teaching", disable=not progress):
        ms = timing.time_ms(fn, warmup_ms=25, rep_ms=150, graph=True).median_ms
        rows.append({"n": n, "pass": pass_, "kernel": kernel, "ms": ms, "bytes": nbytes, "gbps": nbytes / ms / 1e6})
    return rows


def teaching_report(rows: list[dict] | None) -> str:
    """One line per pass: the exercise's kernel and the production kernel, ms and GB/s."""
    if not rows:
        return "no recording yet of the teaching-against-production step (run the lesson05 suite on a GPU)"
    by = {(r["pass"], r["kernel"]): r for r in rows}
    lines = [
        f"the exercise's solution (128 a program) against gpulab's, fp32, n = {rows[0]['n']:,} (CUDA-graph replay):"
    ]
    for pass_ in ("forward", "backward"):
        t, p = by[(pass_, "teaching")], by[(pass_, "production")]
        lines.append(
            f"  {pass_:8} teaching {t['ms']:.3f} ms ({t['gbps']:.0f} GB/s), production {p['ms']:.3f} ms "
            f"({p['gbps']:.0f} GB/s): x{t['ms'] / p['ms']:.2f}"
        )
    return "\n".join(lines)


def run(progress: bool = True, sizes=SIZES, dtype: str = DTYPE, steps=None, teaching_n: int = TEACHING_N) -> dict:
    """Measure everything listed in the module docstring; returns a JSON-able dict. GPU only. ``steps``: a
    subset of ``STEPS`` (default both); ``teaching_n``: the teaching step's size where it fits (``choices``).
    Raises ValueError naming an unknown step."""
    unknown = set(steps or ()) - set(STEPS)
    if unknown:
        raise ValueError(f"steps must be drawn from {STEPS}, got unknown {sorted(unknown)}")
    ch = choices(plan.current(), sizes, dtype, teaching_n)
    out = {}
    if steps is None or "ways" in steps:
        out.update(ways(progress, ch["sizes_kept"], dtype))
        if ch["sizes_skipped"]:
            out["skipped"] = ch["sizes_skipped"]
    if steps is None or "teaching" in steps:
        out["teaching"] = teaching(ch["teaching_n"], progress=progress)
    return out


def ways(progress: bool = True, sizes=SIZES, dtype: str = DTYPE) -> dict:
    """The three ways at every size: rows, gradient check and ratios (the module docstring). GPU only."""
    timing.require_gpu("the lesson05 suite")
    dt = dtypes.torch_dtype(dtype, allowed=dtypes.ELEMENTWISE)
    rows, grad_check = [], None
    jobs = [(n, way) for n in sizes for way in WAYS]
    for n, way in tqdm(jobs, desc="lesson05", disable=not progress):
        x = torch.randn(n, device=timing.device(), dtype=dt).requires_grad_()
        dy = torch.randn(n, device=timing.device(), dtype=dt)
        fn = WAYS[way]
        mem = measure_memory(fn, x)  # "loss": loss = y.sum(), y not kept
        mem_held = measure_memory(fn, x, dy)  # "held": y kept, dense dy
        t = timing.time_ms(recompute.forward_backward(fn, x, dy), warmup_ms=25, rep_ms=150)
        c = recompute.counts(way, n, dt.itemsize)
        model = recompute.memory_model(way, n, dt.itemsize, "loss")
        model_held = recompute.memory_model(way, n, dt.itemsize, "held")
        rows.append(
            dict(
                way=way,
                n=n,
                dtype=dtype,
                ms=t.median_ms,
                p20_ms=t.p20_ms,
                p80_ms=t.p80_ms,
                held_bytes=mem["held_bytes"],
                peak_bytes=mem["peak_bytes"],
                model_held_bytes=model["held_bytes"],
                model_peak_bytes=model["peak_bytes"],
                held_setting=dict(
                    held_bytes=mem_held["held_bytes"],
                    peak_bytes=mem_held["peak_bytes"],
                    model_held_bytes=model_held["held_bytes"],
                    model_peak_bytes=model_held["peak_bytes"],
                ),
                bytes_moved=c.bytes_moved,
                flops=c.flops,
                launches=c.launches,
                gbps=c.bytes_moved / (t.median_ms * 1e-3) / 1e9,
            )
        )
        del x, dy
    n = max(sizes)
    x = torch.randn(n, device=timing.device(), dtype=dt).requires_grad_()
    dy = torch.randn(n, device=timing.device(), dtype=dt)
    grad_check = {}
    for setting, g in (("held", dy), ("loss", None)):  # a dense dy, and the stride-0 dy of loss = y.sum()
        ref = recompute.forward_backward(WAYS["eager"], x, g)()
        for way in ("checkpoint", "fused"):
            err = float((recompute.forward_backward(WAYS[way], x, g)() - ref).abs().max() / ref.abs().max())
            grad_check[way if setting == "held" else f"{way} (loss = y.sum())"] = err
    return {"dtype": dtype, "sizes": list(sizes), "rows": rows, "grad_vs_eager": grad_check, **ratios(rows, n)}


def ratios(rows: list[dict], n: int) -> dict:
    """The target ratios at size n: eager ms / fused ms (speed-up, want > 1), fused / eager extra peak memory
    in the "loss" setting (want <= 1/3), and beside them the "held" setting's peak ratio (floor 2/5) and the
    fused / eager memory held between forward and backward in the "held" setting. A memory ratio is None where
    eager's bytes are 0 (nothing measured)."""
    r = {row["way"]: row for row in rows if row["n"] == n}
    f, e = r["fused"], r["eager"]

    def ratio(a, b):  # None where nothing was measured (the test clock reads 0 bytes)
        return a / b if b else None

    return {
        "n_ratio": n,
        "speedup_eager_over_fused": e["ms"] / f["ms"],
        "speedup_eager_over_checkpoint": e["ms"] / r["checkpoint"]["ms"],
        "peak_ratio_fused_over_eager": ratio(f["peak_bytes"], e["peak_bytes"]),
        "peak_ratio_fused_over_eager_held": ratio(f["held_setting"]["peak_bytes"], e["held_setting"]["peak_bytes"]),
        "held_ratio_fused_over_eager": ratio(f["held_setting"]["held_bytes"], e["held_setting"]["held_bytes"]),
    }


def report(data: dict, teaching: bool = True) -> str:
    """A short table at the largest size, then the ratios against the targets and the gradient check; the
    teaching step's lines where it ran and ``teaching`` (notebook 05 prints them apart: ``teaching_report``)."""
    if "rows" not in data:
        return teaching_report(data.get("teaching"))
    n = data["n_ratio"]
    gib = 2**30
    lines = [
        f"y = s(s(s(x))), {data['dtype']}, n = {n:,}, x requires grad, forward + backward",
        "  extra memory in GiB, measured (model); 'loss': loss = y.sum(), y not kept; 'kept y': dense dy",
        f"  {'way':10} {'ms':>6} {'GB/s':>5} {'B/el':>4} {'launch':>6} {'loss: held':>11} {'peak':>11} "
        f"{'kept y: held':>12} {'peak':>11}",
    ]

    def mem(b, m):
        return f"{b / gib:4.2f} ({m / gib:4.2f})"

    for r in (r for r in data["rows"] if r["n"] == n):
        h = r["held_setting"]
        lines.append(
            f"  {r['way']:10} {r['ms']:6.3f} {r['gbps']:5.0f} {r['bytes_moved'] // n:4d} {r['launches']:6d} "
            f"{mem(r['held_bytes'], r['model_held_bytes']):>11} {mem(r['peak_bytes'], r['model_peak_bytes']):>11} "
            f"{mem(h['held_bytes'], h['model_held_bytes']):>12} {mem(h['peak_bytes'], h['model_peak_bytes']):>11}"
        )
    s, p, h = data["speedup_eager_over_fused"], data["peak_ratio_fused_over_eager"], data["held_ratio_fused_over_eager"]
    ph = data["peak_ratio_fused_over_eager_held"]
    lines.append(
        f"  speed-up eager ms / fused ms = {s:.2f} (target > 1){'' if s > 1 else '  BELOW TARGET'}; "
        f"eager / checkpoint = {data['speedup_eager_over_checkpoint']:.2f}"
    )
    if p is None:  # no memory measured (the test clock)
        lines.append("  extra memory not measured: no ratios")
    else:
        lines.append(
            f"  extra peak memory fused / eager, loss = y.sum() = {p:.3f} (target <= 1/3)"
            f"{'' if p <= 1 / 3 + 1e-9 else '  ABOVE 1/3'}"
        )
        lines.append(f"  caller keeps y, dense dy: extra peak fused / eager = {ph:.3f} (floor 2/5: y and dx coexist);")
        lines.append(f"    held between forward and backward fused / eager = {h:.3f}")
    lines += [f"  n = {r['n']:,} out of memory, not run: {r['skipped']}" for r in data.get("skipped", [])]
    lines.append(
        "  dx against eager's, max |diff| / max |dx|: "
        + ", ".join(f"{w.replace(' (loss = y.sum())', ' [loss]')} {e:.1e}" for w, e in data["grad_vs_eager"].items())
    )
    small = min(data["sizes"])
    r = {row["way"]: row for row in data["rows"] if row["n"] == small}
    lines.append(
        f"  at n = {small:,}: eager {r['eager']['ms']:.4f} ms, checkpoint {r['checkpoint']['ms']:.4f} ms, "
        f"fused {r['fused']['ms']:.4f} ms (launch-bound)"
    )
    if teaching and data.get("teaching"):
        lines.append(teaching_report(data["teaching"]))
    return "\n".join(lines)
