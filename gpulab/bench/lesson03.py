"""Lesson 03 (precision) benchmark suite: ``python -m gpulab.bench --only lesson03``.

GPU only. Measures, in one run (under a minute):

- ReLU per dtype (fp32, fp16, bf16) at large n: gpulab's Triton kernel and torch.relu, ms and GB/s
  (bytes = 2n * itemsize, counted by hand), ratio = torch ms / gpulab ms (target: >= 0.95);
- a ReLU size sweep, n = 2^12 .. 2^28, per dtype, both kernels;
- cuBLAS matmul rate per dtype at ``matmul_n`` and relative error vs float64 at ``error_n``
  (same random inputs for every dtype; fp8 via torch._scaled_mm, e4m3, per-tensor scales);
- gpulab's Triton fp32 matmul with input_precision "tf32" and "ieee": rate and error;
- the accumulation experiment: fp16 products summed in fp16 vs fp32, error against K.

Each part is a step (``STEPS``, named by the record's key it fills; ``--steps relu`` runs one), and the headline
that ``make gpu-check`` runs is the ReLU at large n (``HEADLINE_STEPS``). Notebook 03 calls the measuring functions
one by one (``relu_study``, ``rates_study``, ``triton_rates``, ``triton_matmul_errors``, ``accumulation_errors``);
the last two also run in the interpreter.
"""

from __future__ import annotations

import torch
from tqdm.auto import tqdm

import gpulab

from ..core import plan, reference, timing, tolerances
from ..kernels.matmul_precision import matmul_precision
from ..kernels.relu import relu
from ..measure import live
from ..measure.device import matmul_fn
from ..models import precision as P

KEY = "lesson03"
RELU_N = 2**28
RELU_SWEEP = tuple(2**e for e in range(12, 29, 2))  # 2^12 .. 2^28
MATMUL_N = 8192
ERROR_N = 4096
TRITON_N = 4096
ACC_KS = tuple(2**e for e in range(4, 15))  # 16 .. 16384
ACC_M = 128
#: The suite's steps (``run(steps=...)``, ``python -m gpulab.bench --only lesson03 --steps relu``), each named by the
#: record's key it fills. The headline (``make gpu-check``) is the ReLU per dtype at RELU_N: the time halving with the
#: bytes, and gpulab's kernel against torch.relu.
STEPS = ("relu", "relu_sweep", "matmul", "triton_matmul", "accumulation")
HEADLINE_STEPS = ("relu",)
# What notebook 03 measures live: the ReLU at RELU_N and every other size of the sweep; the matmul rates at MATMUL_N.
LIVE_RELU = dict(n=RELU_N, sweep=RELU_SWEEP[::2])
LIVE_RATES = dict(n=MATMUL_N)
LIVE_TRITON = dict(n=TRITON_N)


def choices(p) -> dict:
    """What the suite runs on ``p`` (a ``gpulab.core.plan.Plan``): ``feats``, the matmul dtypes and units of ``p``'s
    compute capability (``precision.features``); ``matmul_dtypes``, the cuBLAS dtypes timed; ``matmul_skipped``,
    dtype -> the one-line reason for each dtype not timed (bf16, tf32 and fp8 on a T4; fp8 on an A100)."""
    feats = P.features(p.compute_capability, p.gpu.name)
    return dict(
        feats=feats,
        matmul_dtypes=[d for d in P.MATMUL_DTYPES if feats.has(d)],
        matmul_skipped={d: P.gate(d, feats) for d in P.MATMUL_DTYPES if not feats.has(d)},
    )


def planned_features():
    """``precision.features`` of the GPU gpulab plans for (``plan.current()``; GPULAB_AS_GPU=T4 gives a T4's)."""
    return choices(plan.current())["feats"]


def rate_features(shown: live.Shown, gpu: str = reference.DEFAULT_GPU):
    """``precision.features`` of the GPU whose matmul rates ``shown`` holds: the GPU planned for where they were
    measured now (``shown.live``: the suite times that plan's dtypes), else the recording's GPU of ``gpu``'s
    reference file (its profile's compute capability and name)."""
    if shown.live:
        return planned_features()
    profile = live.recorded(gpu)["profile"]
    return P.features(tuple(profile["compute_capability"]), profile["gpu"])


# ---- measurements: ReLU and cuBLAS rates (GPU only), gpulab's Triton matmul errors (GPU or interpreter) ------


def relu_rates(n: int, dtypes=tuple(P.RELU_DTYPES), warmup_ms: float = 50, rep_ms: float = 300) -> list[dict]:
    """gpulab's ReLU and torch.relu on n random elements per dtype: ms (median), GB/s (2n*itemsize bytes)
    and ratio = torch ms / gpulab ms (>= 1: as fast or faster). GPU only (raises NoGPUTimingError)."""
    timing.require_gpu("ReLU bandwidth")
    rows = []
    gen = torch.Generator(device=timing.device()).manual_seed(0)
    for d in dtypes:
        x = torch.randn(n, device=timing.device(), generator=gen).to(P.RELU_DTYPES[d])
        t_ours = timing.time_ms(lambda: relu(x), warmup_ms=warmup_ms, rep_ms=rep_ms)
        t_torch = timing.time_ms(lambda: torch.relu(x), warmup_ms=warmup_ms, rep_ms=rep_ms)
        nbytes = P.relu_bytes(n, d)
        rows.append(
            dict(
                dtype=d,
                n=n,
                bytes=nbytes,
                gpulab_ms=t_ours.median_ms,
                torch_ms=t_torch.median_ms,
                gpulab_gbps=t_ours.rate(nbytes, 1e9),
                torch_gbps=t_torch.rate(nbytes, 1e9),
                ratio=t_torch.median_ms / t_ours.median_ms,
            )
        )
        x = None  # free it before the next dtype's
    return rows


def matmul_rates(n: int = MATMUL_N, dtypes=P.MATMUL_DTYPES) -> dict:
    """cuBLAS TFLOP/s per dtype for n x n x n (2n^3 FLOPs), None where the planned GPU lacks it
    (``precision.features``). GPU or test clock (raises NoGPUTimingError elsewhere)."""
    timing.require_gpu("a matmul rate")
    feats = planned_features()
    return {
        d: (timing.time_ms(matmul_fn(d, n), warmup_ms=50, rep_ms=200).rate(2 * n**3) if feats.has(d) else None)
        for d in dtypes
    }


def relu_study(n: int = RELU_N, sweep=RELU_SWEEP) -> dict:
    """The suite's ReLU steps: ``relu``, ``relu_rates(n)``, and ``relu_sweep``, ``relu_rates`` at each of ``sweep``
    (shorter budgets). GPU or test clock only."""
    return run(progress=False, relu_n=n, relu_sweep=sweep, steps=("relu", "relu_sweep"))


def rates_study(n: int = MATMUL_N) -> dict:
    """The suite's ``matmul`` rates: ``{"n_rate": n, "tflops": matmul_rates(n)}``. GPU or test clock only."""
    return timing.stamp({"n_rate": n, "tflops": matmul_rates(n)})


def triton_rates(n: int = TRITON_N) -> dict:
    """The suite's ``triton_matmul``: gpulab's Triton fp32 matmul, n x n x n, with input_precision "tf32" and
    "ieee": ``{"n": n, p: {"ms", "tflops", "error"}}`` (error from ``triton_matmul_errors``). GPU or test clock
    only."""
    timing.require_gpu("a Triton matmul rate")
    gen = torch.Generator(device=timing.device()).manual_seed(0)
    a = torch.randn(n, n, device=timing.device(), generator=gen)
    b = torch.randn(n, n, device=timing.device(), generator=gen)
    rec = {"n": n}
    for p in ("tf32", "ieee"):
        t = timing.time_ms(lambda: matmul_precision(a, b, input_precision=p), warmup_ms=25, rep_ms=200)
        rec[p] = {"ms": t.median_ms, "tflops": t.rate(2 * n**3)}
    a = b = None
    errs = triton_matmul_errors(n)
    for p in ("tf32", "ieee"):
        rec[p]["error"] = errs[p]
    return timing.stamp(rec)


def triton_matmul_errors(n: int, seed: int = 0) -> dict:
    """Relative error of gpulab's Triton fp32 matmul with input_precision "tf32" and "ieee" on random
    normal n x n inputs, against float64; the interpreter cuts "tf32" inputs as a GPU does (triton_compat)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, n, generator=g).to(gpulab.DEVICE)
    b = torch.randn(n, n, generator=g).to(gpulab.DEVICE)
    ref = a.double() @ b.double()
    return {
        p: tolerances.relative_error(ref, matmul_precision(a, b, input_precision=p), "norm") for p in ("tf32", "ieee")
    }


def accumulation_errors(ks, m: int = 16, seed: int = 0, positive: bool = False) -> dict:
    """fp16 products summed in fp16 vs in fp32 by gpulab's Triton matmul, for each K in ``ks``: relative error
    of C (m x m) against float64 of the same fp16 inputs. ``positive`` draws inputs from U(0, 1) (sums that
    only grow, where fp16 accumulation stalls) instead of N(0, 1). Returns {"k": [...], "fp16": [...],
    "fp32": [...], "m": m, "inputs": "N(0,1)" or "U(0,1)"}."""
    g = torch.Generator().manual_seed(seed)
    out = {"k": [], "fp16": [], "fp32": [], "m": m, "inputs": "U(0,1)" if positive else "N(0,1)"}
    for k in ks:
        draw = torch.rand if positive else torch.randn
        a = draw(m, k, generator=g).half().to(gpulab.DEVICE)
        b = draw(k, m, generator=g).half().to(gpulab.DEVICE)
        ref = a.double() @ b.double()
        out["k"].append(int(k))
        for acc, key in ((torch.float16, "fp16"), (torch.float32, "fp32")):
            out[key].append(tolerances.relative_error(ref, matmul_precision(a, b, acc_dtype=acc), "norm"))
    return out


def run(
    progress: bool = True,
    relu_n: int = RELU_N,
    relu_sweep=RELU_SWEEP,
    matmul_n: int = MATMUL_N,
    error_n: int = ERROR_N,
    triton_n: int = TRITON_N,
    acc_ks=ACC_KS,
    acc_m: int = ACC_M,
    steps=None,
) -> dict:
    """Measure everything listed in the module docstring; returns a JSON-able dict. GPU only. ``steps``: a subset
    of ``STEPS`` (default all); the record holds the keys of the steps run. Raises ValueError naming an unknown
    step."""
    unknown = set(steps or ()) - set(STEPS)
    if unknown:
        raise ValueError(f"steps must be drawn from {STEPS}, got unknown {sorted(unknown)}")
    timing.require_gpu("the lesson03 suite")
    todo = [s for s in STEPS if steps is None or s in steps]
    bar = tqdm(todo, desc="lesson03", disable=not progress)
    out = {}
    for step in bar:
        bar.set_postfix_str(step)
        if step == "relu":
            out["relu"] = relu_rates(relu_n)
        elif step == "relu_sweep":
            out["relu_sweep"] = sum((relu_rates(n, warmup_ms=10, rep_ms=60) for n in relu_sweep), [])
        elif step == "matmul":
            out["matmul"] = {"n_rate": matmul_n, "tflops": matmul_rates(matmul_n)}
            out["matmul"].update(n_error=error_n, error=P.matmul_errors(error_n, feats=planned_features()))
        elif step == "triton_matmul":
            out["triton_matmul"] = {k: v for k, v in triton_rates(triton_n).items() if k != "clock"}
        else:
            out["accumulation"] = accumulation_errors(acc_ks, m=acc_m)
    return timing.stamp(out)


def report(data: dict, full: bool = False) -> str:
    """A short table (at most 15 lines) of the steps the record holds: ReLU per dtype with ratios to torch.relu,
    matmul rate and error per dtype, the Triton tf32/ieee matmul, and the accumulation errors at the smallest and
    largest K. ``full=True`` adds the ReLU size sweep (GB/s and ratio per n and dtype)."""
    lines = []
    if data.get("relu"):
        lines += [
            f"ReLU at n = {data['relu'][0]['n']:,} (ratio = torch ms / gpulab ms; target >= 0.95):",
            f"  {'dtype':5} {'gpulab ms':>10} {'GB/s':>7} {'torch ms':>9} {'GB/s':>7} {'ratio':>6}",
        ]
        for r in data["relu"]:
            flag = "" if r["ratio"] >= 0.95 else "  BELOW TARGET"
            lines.append(
                f"  {r['dtype']:5} {r['gpulab_ms']:10.4f} {r['gpulab_gbps']:7.0f} {r['torch_ms']:9.4f} "
                f"{r['torch_gbps']:7.0f} {r['ratio']:6.3f}{flag}"
            )
    if data.get("matmul"):
        m = data["matmul"]
        lines.append(f"cuBLAS matmul: rate at {m['n_rate']}^3, relative error vs float64 at {m['n_error']}^3:")
        for d, rate in m["tflops"].items():
            err = m["error"].get(d)
            lines.append(
                f"  {d:5} "
                + (f"{rate:8.1f} TFLOP/s" if rate else "   (not on this GPU)")
                + (f"   error {err:.2e}" if err is not None else "")
            )
    if data.get("triton_matmul"):
        t = data["triton_matmul"]
        lines.append(
            f"Triton fp32 matmul {t['n']}^3: "
            + ", ".join(f"{p} {t[p]['tflops']:.1f} TFLOP/s error {t[p]['error']:.2e}" for p in ("tf32", "ieee"))
        )
    if data.get("accumulation"):
        a = data["accumulation"]
        lines.append(
            f"accumulation (fp16 inputs, {a['m']}x{a['m']} output): K={a['k'][0]}: fp16 acc "
            f"{a['fp16'][0]:.2e}, fp32 acc {a['fp32'][0]:.2e}; K={a['k'][-1]}: fp16 acc {a['fp16'][-1]:.2e}, "
            f"fp32 acc {a['fp32'][-1]:.2e}"
        )
    if full and data.get("relu_sweep"):
        lines.append("ReLU sweep (gpulab GB/s, torch GB/s, ratio):")
        for r in data["relu_sweep"]:
            lines.append(
                f"  {r['dtype']:5} n = {r['n']:>11,}: {r['gpulab_gbps']:7.0f} {r['torch_gbps']:7.0f} {r['ratio']:6.3f}"
            )
    return "\n".join(lines)
