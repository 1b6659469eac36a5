"""Lesson 05 (recomputation) benchmark suite: ``python -m gpulab.bench --only lesson05``.

GPU only. For y = s(s(s(x))) computed three ways (eager autograd, torch.utils.checkpoint, the fused Triton
Function of ``gpulab.kernels.sigmoid3``), with x requiring grad so that gradients really flow, at each size of
``SIZES`` (fp32):

- forward + backward time (``time_ms`` of ``torch.autograd.grad(f(x), x, dy)``), ms;
- memory above the inputs x and dy: held between forward and backward, and the peak over forward + backward
  (``torch.cuda.reset_peak_memory_stats`` / ``max_memory_allocated``), beside ``gpulab.recompute``'s model;
- the bytes, FLOPs and launches counted by hand.

At the largest size it checks the three gradients against each other and reports the ratios the issue sets as
targets: eager ms / fused ms (> 1) and fused extra peak memory / eager's (<= 1/3). Well under a minute on an H200.
"""
from __future__ import annotations

from tqdm.auto import tqdm

KEY = "lesson05"
SIZES = tuple(2**e for e in range(16, 29, 2))  # 2^16 .. 2^28 (2^28 fp32: 1 GiB a tensor)
DTYPE = "fp32"


def run(progress: bool = True, sizes=SIZES, dtype: str = DTYPE) -> dict:
    """Measure everything listed in the module docstring; returns a JSON-able dict. GPU only."""
    import torch

    from .. import recompute
    from ..kernels.sigmoid3 import WAYS
    from . import require_gpu, time_ms

    require_gpu("the lesson05 suite")
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    rows, grad_check = [], None
    jobs = [(n, way) for n in sizes for way in WAYS]
    for n, way in tqdm(jobs, desc="lesson05", disable=not progress):
        x = torch.randn(n, device="cuda", dtype=dt).requires_grad_()
        dy = torch.randn(n, device="cuda", dtype=dt)
        fn = WAYS[way]
        mem = recompute.measure_memory(fn, x, dy)
        t = time_ms(recompute.forward_backward(fn, x, dy), warmup_ms=25, rep_ms=150)
        c = recompute.counts(way, n, dt.itemsize)
        model = recompute.memory_model(way, n, dt.itemsize)
        rows.append(dict(way=way, n=n, dtype=dtype, ms=t.median_ms, p20_ms=t.p20_ms, p80_ms=t.p80_ms,
                         held_bytes=mem["held_bytes"], peak_bytes=mem["peak_bytes"],
                         model_held_bytes=model["held_bytes"], model_peak_bytes=model["peak_bytes"],
                         bytes_moved=c.bytes_moved, flops=c.flops, launches=c.launches,
                         gbps=c.bytes_moved / (t.median_ms * 1e-3) / 1e9))
        del x, dy
    n = max(sizes)
    x = torch.randn(n, device="cuda", dtype=dt).requires_grad_()
    dy = torch.randn(n, device="cuda", dtype=dt)
    ref = recompute.forward_backward(WAYS["eager"], x, dy)()
    grad_check = {way: float((recompute.forward_backward(WAYS[way], x, dy)() - ref).abs().max()
                             / ref.abs().max()) for way in ("checkpoint", "fused")}
    return {"dtype": dtype, "sizes": list(sizes), "rows": rows, "grad_vs_eager": grad_check,
            **ratios(rows, n)}


def ratios(rows: list[dict], n: int) -> dict:
    """The target ratios at size n: eager ms / fused ms (speed-up, want > 1), fused / eager extra peak memory
    (want <= 1/3) and fused / eager memory held between forward and backward."""
    r = {row["way"]: row for row in rows if row["n"] == n}
    return {"n_ratio": n, "speedup_eager_over_fused": r["eager"]["ms"] / r["fused"]["ms"],
            "speedup_eager_over_checkpoint": r["eager"]["ms"] / r["checkpoint"]["ms"],
            "peak_ratio_fused_over_eager": r["fused"]["peak_bytes"] / r["eager"]["peak_bytes"],
            "held_ratio_fused_over_eager": r["fused"]["held_bytes"] / r["eager"]["held_bytes"]}


def report(data: dict) -> str:
    """A short table at the largest size, then the ratios against the targets and the gradient check."""
    n = data["n_ratio"]
    gib = 2**30
    lines = [f"y = s(s(s(x))), {data['dtype']}, n = {n:,} (x requires grad; forward + backward; memory above x, dy):",
             f"  {'way':10} {'ms':>8} {'GB/s':>6} {'bytes/n':>7} {'launch':>6} {'held GiB':>9} {'(model)':>7} "
             f"{'peak GiB':>9} {'(model)':>7}"]
    for r in (r for r in data["rows"] if r["n"] == n):
        lines.append(f"  {r['way']:10} {r['ms']:8.3f} {r['gbps']:6.0f} {r['bytes_moved'] // n:7d} {r['launches']:6d} "
                     f"{r['held_bytes'] / gib:9.3f} {r['model_held_bytes'] / gib:7.3f} "
                     f"{r['peak_bytes'] / gib:9.3f} {r['model_peak_bytes'] / gib:7.3f}")
    s, p, h = data["speedup_eager_over_fused"], data["peak_ratio_fused_over_eager"], data["held_ratio_fused_over_eager"]
    lines.append(f"  speed-up eager ms / fused ms = {s:.2f} (target > 1){'' if s > 1 else '  BELOW TARGET'}; "
                 f"eager / checkpoint = {data['speedup_eager_over_checkpoint']:.2f}")
    lines.append(f"  extra peak memory fused / eager = {p:.3f} (target <= 1/3){'' if p <= 1 / 3 + 1e-9 else '  ABOVE 1/3'}; "
                 f"held between forward and backward fused / eager = {h:.3f}")
    lines.append("  max |dx - dx_eager| / max |dx_eager|: " +
                 ", ".join(f"{w} {e:.1e}" for w, e in data["grad_vs_eager"].items()))
    small = min(data["sizes"])
    r = {row["way"]: row for row in data["rows"] if row["n"] == small}
    lines.append(f"  at n = {small:,}: eager {r['eager']['ms']:.4f} ms, checkpoint {r['checkpoint']['ms']:.4f} ms, "
                 f"fused {r['fused']['ms']:.4f} ms (launch-bound)")
    return "\n".join(lines)
