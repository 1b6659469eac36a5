"""Lesson 08 (FlashAttention) benchmark suite: ``python -m gpulab.bench --only lesson08``.

GPU only. bf16 throughout (fp16 where the GPU planned for has no bf16 tensor cores: ``choices``). In one run:

- ``headline``: the lesson's settings (``setting_shape``), B*L = 16384 tokens and H*d = 2048 (so B = 16384/L, H = 2048/d), d in
  (64, 128), L in (1024, 4096, 16384), causal and not. Forward and backward (through autograd) of gpulab's
  Triton FlashAttention, of SDPA's flash backend (``sdpa_kernel(SDPBackend.FLASH_ATTENTION)``, the target:
  ratio = SDPA ms / ours ms >= 1.0) and of SDPA's cuDNN backend (``SDPBackend.CUDNN_ATTENTION``, the stretch),
  as ms and TFLOP/s (forward 4*B*H*L^2*d, halved when causal; backward 2.5x forward); the max difference of
  ours from SDPA flash (out, dq, dk, dv) relative to its largest entry; the autotuner's choice.
- ``sweep``: naive attention (S and P in HBM) against ours, forward, B=1, H=16, d=128, non-causal, L = 2^10 ..
  2^16: ms eager and ``graph_ms`` replayed from a CUDA graph (their difference is the launch cost) and extra peak
  memory beside ``gpulab.models.attention.memory_model``; naive's out-of-memory is caught and
  recorded as ``oom``, and a length whose model bytes do not fit the plan (``choices``) is not run: recorded as
  ``oom`` with the reason under ``skipped``.
- ``memory``: ours, extra memory held after forward and the peak over forward + backward, L = 2^10 .. 2^16
  (B=1, H=16, d=128): per token it stays flat, so it grows as O(L).
- ``teaching``: the teaching kernel (``kernels.flash_teaching``) against the production kernel piece by piece
  (``TEACHING_STEPS``), forward and backward, at ``TEACHING_SETTINGS`` of the headline shape: what each extra
  piece of the production kernel buys.
- ``target``: the headline's rows at the lesson's own setting (``TARGET``: d = 128, L = 4096, causal and not), the
  ones a full run's headline holds, measured alone otherwise: the step ``tools/gpu_check.py`` runs
  (``HEADLINE_STEPS``), a fraction of the headline's compiles and benchmarks.

The record's ``tuning`` counts where the autotuner's choices of the run came from (``kernels._autotune.origins``:
timed now, or stored for this GPU).

A few minutes, most of it the autotuner's first benchmarks. ``measure`` times one forward and records
its peak memory, catching out-of-memory (``run_catching_oom``); ``roofline_points`` places a record's
forward kernels on the roofline, under ``roofs``.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from tqdm.auto import tqdm

from ..core import dtypes, plan, reference, timing
from ..kernels import _autotune
from ..kernels import flash_attention as fa
from ..kernels import flash_teaching as ft
from ..measure import live
from ..models import attention
from ..models.roofline import KernelPoint
from . import lesson00, planned

KEY = "lesson08"
DTYPE = "bf16"
TOKENS, HIDDEN = 16384, 2048
HEAD_DIMS = fa.LESSON_HEAD_DIMS
LENGTHS = (1024, 4096, 16384)
SWEEP = tuple(2**e for e in range(10, 17))
SWEEP_SHAPE = dict(B=1, H=16, d=128)
MEMORY_LENGTHS = SWEEP
#: What notebook 08 runs live (``run(**LIVE)``): the headline at one non-causal setting, the sweep at three lengths
#: (1024, 4096, 16384: a point each side of naive's crossover, the lengths notebook 08 reads; ``sweep_shown`` adds
#: the recording's other lengths, labelled) and the memory step at two. All are non-causal, so one set of forward
#: and backward kernels compiles. The rest (every length, head dimension and causal flag, the teaching step) it
#: shows from the recording. The costly lengths (naive at 32768 reads and writes 34 GB of S and P a call, flash at
#: 65536 is 35 TFLOP a call) stay in the suite.
LIVE = dict(
    head_dims=(128,),
    lengths=(4096,),
    causals=(False,),
    sweep_lengths=(2**10, 2**12, 2**14),
    memory_lengths=(2**12, 2**14),
    steps=("headline", "sweep", "memory"),
)
#: What notebook 08b runs live (``run(**LIVE_BACKWARD)``): what it draws from a record, the headline at lesson 08's
#: live setting (the forward and backward timed) and the memory step at two lengths, no sweep.
LIVE_BACKWARD = dict(
    head_dims=(128,),
    lengths=(4096,),
    causals=(False,),
    memory_lengths=(2**12, 2**14),
    steps=("headline", "memory"),
)


def _sweep_bytes(L: int, B: int = SWEEP_SHAPE["B"], H: int = SWEEP_SHAPE["H"], d: int = SWEEP_SHAPE["d"]) -> int:
    """Bytes naive attention allocates at L in the sweep: q, k, v and the model's peak (S and P)."""
    return 3 * B * H * L * d * 2 + attention.memory_model(B, H, L, d, 2, "naive")["peak_bytes"]


def _memory_bytes(L: int, B: int = SWEEP_SHAPE["B"], H: int = SWEEP_SHAPE["H"], d: int = SWEEP_SHAPE["d"]) -> int:
    """Bytes the memory step allocates at L: q, k, v, dO and the atomic backward's peak (the largest mode)."""
    return 4 * B * H * L * d * 2 + attention.flash_training_memory(B, H, L, d, 2, "atomic")["peak_bytes"]


def choices(p, sweep_lengths=SWEEP, memory_lengths=MEMORY_LENGTHS) -> dict:
    """What the suite runs on ``p`` (a ``gpulab.core.plan.Plan``): ``dtype`` ("bf16", or "fp16" without bf16 tensor
    cores), ``tma`` (whether the teaching step's TMA row runs; ``tma_skip`` the reason when not), the naive
    sweep's lengths ``naive_kept`` and ``naive_skipped`` (records ``{"L", "skipped"}``: S and P would not fit;
    flash runs at every length), and the memory step's ``memory_kept`` and ``memory_skipped``."""
    naive_kept, naive_skipped = planned.split(p, sweep_lengths, _sweep_bytes, key="L")
    mem_kept, mem_skipped = planned.split(p, memory_lengths, _memory_bytes, key="L")
    return dict(
        dtype=p.dtype("bf16"),
        tma=p.attention_tma,
        tma_skip=p.feature_skip("tma"),
        naive_kept=naive_kept,
        naive_skipped=naive_skipped,
        memory_kept=mem_kept,
        memory_skipped=mem_skipped,
    )


def _plan():
    return plan.current()


def is_oom(e: BaseException) -> bool:
    """True for torch's out-of-memory error (``torch.OutOfMemoryError``, also raised as
    ``torch.cuda.OutOfMemoryError``)."""
    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    return isinstance(e, oom)


def run_catching_oom(fn):
    """Call ``fn()``; return ``(result, False)``, or ``(None, True)`` if it ran out of GPU memory (the cache is
    emptied so the next call starts clean). Any other error propagates."""
    try:
        return fn(), False
    except Exception as e:  # noqa: BLE001  (only OOM is caught; the rest is re-raised)
        if not is_oom(e):
            raise
    timing.empty_cache()
    return None, True


def measure(fn, warmup_ms: float = 10, rep_ms: float = 60, graph: bool = False) -> dict:
    """Peak memory above what is allocated before the call (bytes; of a second call, after the first has compiled
    and autotuned) and time (ms, ``gpulab.core.timing.time_ms``) of
    ``fn()`` on the GPU; with ``graph``, also ``graph_ms``: the same call captured in a CUDA graph and replayed
    (``time_ms(graph=True)``), so that eager ms minus graph ms is what launching from Python costs (lesson 04).
    Out of memory gives ``{"oom": True, "ms": None, "peak_bytes": None}`` (and ``graph_ms`` None), not an error.
    Raises NoGPUTimingError in interpreter mode."""
    timing.require_gpu("an attention measurement")

    def once():
        fn()  # a first call apart: the autotuner's trial buffers of a new shape are not the method's memory
        timing.synchronize()
        base = timing.memory_allocated()
        timing.reset_peak_memory()
        out = fn()
        timing.synchronize()
        peak = timing.max_memory_allocated() - base
        del out
        return peak

    extra = {"graph_ms": None} if graph else {}
    peak, oom = run_catching_oom(once)
    if oom:
        return {"oom": True, "ms": None, "peak_bytes": None, **extra}
    t, oom = run_catching_oom(lambda: timing.time_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms))
    if oom:
        return {"oom": True, "ms": None, "peak_bytes": int(peak), **extra}
    if graph:
        g, oom = run_catching_oom(lambda: timing.time_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, graph=True))
        extra["graph_ms"] = None if oom else g.median_ms
    return {"oom": False, "ms": t.median_ms, "peak_bytes": int(peak), **extra}


def setting_shape(L: int, d: int, tokens: int = TOKENS, hidden: int = HIDDEN) -> tuple[int, int, int, int]:
    """(B, H, L, d) of a headline setting: B*L = ``tokens`` (16384), H*d = ``hidden`` (2048)."""
    return tokens // L, hidden // d, L, d


def setting_flops(
    L: int, d: int, causal: bool, backward: bool = False, tokens: int = TOKENS, hidden: int = HIDDEN
) -> float:
    """FLOPs of one headline setting (``setting_shape``) by ``attention.attention_flops``: forward 4*B*H*L^2*d,
    halved when causal; backward 2.5x the forward."""
    B, H, _, _ = setting_shape(L, d, tokens, hidden)
    return attention.attention_flops(B, H, L, L, d, causal, backward=backward)


def _qkv(B, H, L, d, requires_grad=False, seed=0):
    dt = dtypes.torch_dtype(choices(_plan())["dtype"])
    g = torch.Generator(device=timing.device()).manual_seed(seed)
    mk = lambda: torch.randn(B, H, L, d, device=timing.device(), dtype=dt, generator=g)  # noqa: E731
    q, k, v, do = mk(), mk(), mk(), mk()
    if requires_grad:
        q, k, v = (t.requires_grad_() for t in (q, k, v))
    return q, k, v, do


def sdpa_fn(backend_name: str, causal: bool):
    """``fn(q, k, v)``: torch's scaled_dot_product_attention restricted to one backend (a name of
    ``torch.nn.attention.SDPBackend``: "FLASH_ATTENTION", "CUDNN_ATTENTION", ...), ``is_causal=causal``."""
    backend = getattr(SDPBackend, backend_name)

    def fn(q, k, v):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return fn


def _fwd_bwd_ms(fn, q, k, v, do) -> dict:
    """Forward ms of fn(q, k, v), and backward ms of torch.autograd.grad(out, (q, k, v), do)."""
    out = fn(q, k, v)
    torch.autograd.grad(out, (q, k, v), do, retain_graph=True)  # compile and autotune outside the timing
    fwd = timing.time_ms(lambda: fn(q, k, v), warmup_ms=25, rep_ms=100)
    bwd = timing.time_ms(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True), warmup_ms=25, rep_ms=100)
    return {"fwd_ms": fwd.median_ms, "bwd_ms": bwd.median_ms}


def headline(
    head_dims=HEAD_DIMS,
    lengths=LENGTHS,
    progress: bool = True,
    tokens: int = TOKENS,
    hidden: int = HIDDEN,
    causals=(False, True),
) -> list[dict]:
    """One row per (d, L, causal) of ``causals``: ms, TFLOP/s and ratios of ours, SDPA flash and SDPA cuDNN; see
    the module docstring. ``tokens`` = B*L and ``hidden`` = H*d fix the shape (``setting_shape``)."""
    rows = []
    jobs = [(d, L, c) for d in head_dims for L in lengths for c in causals]
    for d, L, causal in tqdm(jobs, desc="lesson08 headline", disable=not progress):
        B, H, _, _ = setting_shape(L, d, tokens, hidden)
        q, k, v, do = _qkv(B, H, L, d, requires_grad=True, seed=L + d)
        fl_f = setting_flops(L, d, causal, tokens=tokens, hidden=hidden)
        fl_b = setting_flops(L, d, causal, backward=True, tokens=tokens, hidden=hidden)
        row = {"d": d, "L": L, "causal": causal, "B": B, "H": H, "fwd_flops": fl_f, "bwd_flops": fl_b}
        impls = {
            "ours": lambda q_, k_, v_: fa.flash_attention(q_, k_, v_, causal),
            "flash": sdpa_fn("FLASH_ATTENTION", causal),
            "cudnn": sdpa_fn("CUDNN_ATTENTION", causal),
        }
        grads = {}
        for name, fn in impls.items():
            try:
                r = _fwd_bwd_ms(fn, q, k, v, do)
                out = fn(q, k, v)
                grads[name] = [out.detach(), *torch.autograd.grad(out, (q, k, v), do)]
            except Exception as e:  # noqa: BLE001  (a backend that does not run here is a result)
                row[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
                continue
            row[name] = {
                **r,
                "fwd_tflops": fl_f / (r["fwd_ms"] * 1e-3) / 1e12,
                "bwd_tflops": fl_b / (r["bwd_ms"] * 1e-3) / 1e12,
            }
        if "fwd_ms" in row.get("flash", {}) and "fwd_ms" in row.get("ours", {}):
            row["fwd_ratio"] = row["flash"]["fwd_ms"] / row["ours"]["fwd_ms"]
            row["bwd_ratio"] = row["flash"]["bwd_ms"] / row["ours"]["bwd_ms"]
        if "ours" in grads and "flash" in grads:
            row["diff_vs_flash"] = {
                n: float((a.float() - b.float()).abs().max() / b.float().abs().max())
                for n, a, b in zip(("out", "dq", "dk", "dv"), grads["ours"], grads["flash"])
            }
        configs = fa.chosen_configs(q, k, v, causal)
        chosen = {part: fa.config_label(c) if c else None for part, c in configs.items()}
        row["config_fwd"] = chosen.pop("fwd")
        row["config_bwd"] = f"{fa.DEFAULT_BWD_MODE}: " + ", ".join(f"{p} {c}" for p, c in chosen.items())
        rows.append(row)
        q = k = v = do = grads = None  # free the buffers before the next size (the lambdas above hold the names)
        timing.empty_cache()
    return rows


def sweep(lengths=SWEEP, B=SWEEP_SHAPE["B"], H=SWEEP_SHAPE["H"], d=SWEEP_SHAPE["d"], progress: bool = True) -> dict:
    """Naive against flash forward over L (non-causal): ms, measured extra peak memory (None when out of
    memory), and the model's bytes."""
    ch = choices(_plan(), sweep_lengths=lengths)
    skipped = {r["L"]: r["skipped"] for r in ch["naive_skipped"]}
    rows = []
    for L in tqdm(lengths, desc="lesson08 sweep", disable=not progress):
        q, k, v, _ = _qkv(B, H, L, d, seed=L)
        fns = {"naive": lambda: attention.naive_attention(q, k, v), "flash": lambda: fa.flash_attention(q, k, v)}
        for method, fn in fns.items():
            if method == "naive" and L in skipped:  # out of memory on the GPU planned for: not run
                m = {"oom": True, "ms": None, "peak_bytes": None, "graph_ms": None, "skipped": skipped[L]}
            else:
                m = measure(fn, graph=True)
            model = attention.memory_model(B, H, L, d, 2, method)
            nbytes = attention.naive_bytes(B, H, L, d, 2) if method == "naive" else attention.flash_bytes(B, H, L, d, 2)
            rows.append(
                {
                    "L": L,
                    "method": method,
                    **m,
                    "model_peak_bytes": model["peak_bytes"],
                    "flops": attention.attention_flops(B, H, L, L, d),
                    "bytes_model": nbytes,
                }
            )
        q = k = v = None  # free the buffers before the next size (the lambdas above hold the names)
        timing.empty_cache()
    return {"B": B, "H": H, "d": d, "dtype": ch["dtype"], "causal": False, "rows": rows}


def sweep_shown(measured: dict | None, recorded: dict | None, recorded_where: str = "") -> dict | None:
    """The sweep notebook 08 draws: ``measured``'s (a lesson08 record, measured now or recorded) with the rows of
    every length it lacks from ``recorded``'s sweep (the recording's record) added, each marked ``recorded: True``,
    and ``recorded_where`` (their label) under that key, when the two sweeps have one shape (B, H, d, dtype); else
    ``measured``'s sweep as it is (None without one). So a live sweep of ``LIVE``'s three lengths keeps the
    recording's seven on the figure, each point saying where it was measured."""
    sw, rec = (measured or {}).get("sweep"), (recorded or {}).get("sweep")
    if sw is None or rec is None or any(sw[k] != rec[k] for k in ("B", "H", "d", "dtype")):
        return sw
    have = {r["L"] for r in sw["rows"]}
    extra = [{**r, "recorded": True} for r in rec["rows"] if r["L"] not in have]
    if not extra:
        return sw
    rows = sorted(sw["rows"] + extra, key=lambda r: (r["L"], r["method"]))
    return {**sw, "rows": rows, "recorded_where": recorded_where}


def memory(
    lengths=MEMORY_LENGTHS, B=SWEEP_SHAPE["B"], H=SWEEP_SHAPE["H"], d=SWEEP_SHAPE["d"], progress: bool = True
) -> dict:
    """Ours, through autograd: extra memory held after forward (O and lse) and the peak over forward +
    backward (adds delta and the gradients), above q, k, v and dO, per L; beside the model."""
    ch = choices(_plan(), memory_lengths=lengths)
    rows = []
    with fa.untuned():  # the bytes depend on the dq mode, never on the tiles: each list's first config, no autotuning
        for L in tqdm(ch["memory_kept"], desc="lesson08 memory", disable=not progress):
            rows.append(_memory_row(L, B, H, d))
            timing.empty_cache()
    return {
        "B": B,
        "H": H,
        "d": d,
        "dtype": ch["dtype"],
        "bwd_mode": fa.DEFAULT_BWD_MODE,
        "rows": rows,
        "skipped": ch["memory_skipped"],
    }


def _memory_row(L: int, B: int, H: int, d: int) -> dict:
    """One length of the memory step: held and peak bytes above the inputs, beside the model."""
    q, k, v, do = _qkv(B, H, L, d, requires_grad=True, seed=L)
    torch.autograd.grad(fa.flash_attention(q, k, v), (q, k, v), do)  # compile outside the measurement
    timing.synchronize()
    base = timing.memory_allocated()
    timing.reset_peak_memory()
    out = fa.flash_attention(q, k, v)
    timing.synchronize()
    held = timing.memory_allocated() - base
    grads = torch.autograd.grad(out, (q, k, v), do)
    timing.synchronize()
    peak = timing.max_memory_allocated() - base
    model = attention.flash_training_memory(B, H, L, d, 2, fa.DEFAULT_BWD_MODE)
    del grads
    return {
        "L": L,
        "held_bytes": int(held),
        "peak_bytes": int(peak),
        "model_held_bytes": model["held_bytes"],
        "model_peak_bytes": model["peak_bytes"],
    }


STEPS = ("headline", "sweep", "memory", "teaching", "target")
#: The lesson's own setting (``target``): d = 128, L = 4096, causal and not.
TARGET = dict(head_dims=(128,), lengths=(4096,), causals=(False, True))
#: What ``tools/gpu_check.py`` runs (``python -m gpulab.bench --only lesson08 --steps target``).
HEADLINE_STEPS = ("target",)


def target(rows=None, progress: bool = True, tokens: int = TOKENS, hidden: int = HIDDEN) -> list[dict]:
    """The headline's rows at ``TARGET`` (ours against SDPA flash and cuDNN, forward and backward): those of ``rows``
    (a headline of the same run) when it holds every one, else ``headline`` at ``TARGET`` now. GPU only."""
    want = [(d, L, c) for d in TARGET["head_dims"] for L in TARGET["lengths"] for c in TARGET["causals"]]
    have = {(r["d"], r["L"], r["causal"]): r for r in rows or ()}
    if all(w in have for w in want):
        return [have[w] for w in want]
    return headline(TARGET["head_dims"], TARGET["lengths"], progress, tokens, hidden, TARGET["causals"])


def run(
    progress: bool = True,
    head_dims=HEAD_DIMS,
    lengths=LENGTHS,
    sweep_lengths=SWEEP,
    memory_lengths=MEMORY_LENGTHS,
    steps=None,
    tokens: int = TOKENS,
    hidden: int = HIDDEN,
    shape=SWEEP_SHAPE,
    teaching_settings=None,
    causals=(False, True),
) -> dict:
    """Measure everything in the module docstring; returns a JSON-able dict. GPU only. ``steps``: a subset of
    ``STEPS`` (default all, ``target`` then read from the headline); ``python -m gpulab.bench --only lesson08 --steps
    teaching --record`` merges a partial run into the reference file. ``tokens``, ``hidden``: the headline and
    teaching shape (``setting_shape``); ``shape``: ``{"B", "H", "d"}`` of the sweep and the memory step;
    ``teaching_settings``: (d, L) pairs (default ``TEACHING_SETTINGS``); ``causals``: the headline's causal flags.
    Raises ValueError naming an unknown step."""
    timing.require_gpu("the lesson08 suite")
    unknown = set(steps or ()) - set(STEPS)
    if unknown:
        raise ValueError(f"steps must be drawn from {STEPS}, got unknown {sorted(unknown)}")
    out = {"dtype": choices(_plan())["dtype"]}
    jobs = {
        "headline": lambda: headline(head_dims, lengths, progress, tokens, hidden, causals),
        "sweep": lambda: sweep(sweep_lengths, **shape, progress=progress),
        "memory": lambda: memory(memory_lengths, **shape, progress=progress),
        "teaching": lambda: teaching(teaching_settings or TEACHING_SETTINGS, progress, tokens, hidden),
        "target": lambda: target(out.get("headline"), progress, tokens, hidden),
    }
    for k in STEPS:
        if steps is None or k in steps:
            out[k] = jobs[k]()
    out["tuning"] = _autotune.origins("flash_attention")
    return out


TEACHING_SETTINGS = ft.LESSON_SETTINGS  # (d, L) of the teaching-against-production step, both causal flags
#: (key, what it adds), in order: each forward step adds one piece of the production kernel to the one above.
TEACHING_STEPS = {
    "fwd": (
        ("teaching", "teaching (64x64 tiles, exp, all masked)"),
        ("fixed", "+ exp2, unmasked full tiles (same tiles)"),
        ("autotuned", "+ autotuned tiles, warps, stages"),
        ("tma", "+ TMA loads (the default on Hopper)"),
    ),
    "bwd": (
        ("teaching", "teaching (2 kernels, delta in torch)"),
        ("fused", "production, dq mode fused"),
        ("split", "production, dq mode split (default)"),
        ("atomic", "production, dq mode atomic"),
    ),
}


def teaching(
    settings=TEACHING_SETTINGS, progress: bool = True, tokens: int = TOKENS, hidden: int = HIDDEN
) -> list[dict]:
    """The teaching kernel against the production kernel, piece by piece (``TEACHING_STEPS``), bf16 at the
    headline shape (``setting_shape``) for each (d, L) of ``settings`` and both causal flags. One row per
    setting: ``fwd_ms`` and ``bwd_ms`` dicts keyed by step (an error string where a step cannot run), and the
    FLOPs. The backward steps time the backward kernels alone, given the forward's out and lse. GPU only."""
    timing.require_gpu("the lesson08 teaching step")
    rows = []
    jobs = [(d, L, c) for d, L in settings for c in (False, True)]
    for d, L, causal in tqdm(jobs, desc="lesson08 teaching", disable=not progress):
        B, H, _, _ = setting_shape(L, d, tokens, hidden)
        q, k, v, do = _qkv(B, H, L, d, seed=L + d)
        fixed = fa.fwd_config(*ft.planned_blocks(d, q.element_size(), "fwd"), 4, 2)  # the teaching forward's tiles
        out, lse = fa.flash_attention_forward(q, k, v, causal)
        fwd = {
            "teaching": lambda: ft.flash_teaching_forward(q, k, v, causal),
            "fixed": lambda: fa.flash_attention_forward(q, k, v, causal, config=fixed, use_tma=False),
            "autotuned": lambda: fa.flash_attention_forward(q, k, v, causal, use_tma=False),
            "tma": lambda: fa.flash_attention_forward(q, k, v, causal, use_tma=True),
        }
        t_out, t_lse = ft.flash_teaching_forward(q, k, v, causal)
        bwd = {"teaching": lambda: ft.flash_teaching_backward(q, k, v, t_out, t_lse, do, causal)}
        bwd.update(
            {m: (lambda m=m: fa.flash_attention_backward(q, k, v, out, lse, do, causal, mode=m)) for m in fa.BWD_MODES}
        )
        row = {
            "d": d,
            "L": L,
            "causal": causal,
            "B": B,
            "H": H,
            "fwd_flops": setting_flops(L, d, causal, tokens=tokens, hidden=hidden),
            "bwd_flops": setting_flops(L, d, causal, backward=True, tokens=tokens, hidden=hidden),
            "fwd_ms": {},
            "bwd_ms": {},
        }
        tma_skip = choices(_plan())["tma_skip"]
        for part, fns in (("fwd_ms", fwd), ("bwd_ms", bwd)):
            for name, fn in fns.items():
                if name == "tma" and tma_skip:
                    row[part][name] = tma_skip
                    continue
                try:
                    fn()  # compile and autotune outside the timing
                    row[part][name] = timing.time_ms(fn, warmup_ms=25, rep_ms=100).median_ms
                except Exception as e:  # noqa: BLE001  (a step that cannot run here is a result)
                    row[part][name] = f"{type(e).__name__}: {str(e)[:120]}"
        rows.append(row)
        q = k = v = do = out = lse = t_out = t_lse = (
            None  # free the buffers before the next size (the lambdas above hold the names)
        )
        timing.empty_cache()
    return rows


def teaching_report(rows: list[dict] | None) -> str:
    """What each piece of the production kernel buys: per step of ``TEACHING_STEPS``, TFLOP/s at each setting
    of ``rows`` (``teaching``'s result) and the speed-up over the teaching kernel; then causal tile skipping,
    causal time over non-causal time. Says so plainly when ``rows`` is None (no recording yet)."""
    if not rows:
        return "no recording yet of the teaching-against-production step (run the lesson08 suite on a GPU)"
    cols = [r for r in rows if not r["causal"]]
    head = " ".join(f"d={r['d']} L={r['L']}".rjust(15) for r in cols)
    lines = [f"bf16, non-causal; TFLOP/s (x the teaching kernel)   {head}"]
    for part, flops in (("fwd", "fwd_flops"), ("bwd", "bwd_flops")):
        for key, label in TEACHING_STEPS[part]:
            cells = []
            for r in cols:
                ms, base = r[f"{part}_ms"].get(key), r[f"{part}_ms"].get("teaching")
                if not isinstance(ms, float):
                    what = "skipped" if isinstance(ms, str) and ms.startswith("skipped") else "failed"
                    cells.append(f"{what if ms else '-':>15}")
                    continue
                x = f" ({base / ms:4.2f}x)" if isinstance(base, float) else ""
                cells.append(f"{r[flops] / (ms * 1e-3) / 1e12:7.0f}{x:>8}")
            lines.append(f"  {part} {label:40} " + " ".join(cells))
    pairs = {(r["d"], r["L"]): {} for r in rows}
    for r in rows:
        pairs[(r["d"], r["L"])][r["causal"]] = r
    skip = []
    for (d, L), p in pairs.items():
        if True in p and False in p:
            for key in ("teaching", "tma"):
                a, b = p[True]["fwd_ms"].get(key), p[False]["fwd_ms"].get(key)
                if isinstance(a, float) and isinstance(b, float):
                    skip.append(f"{key} d={d} L={L}: {a / b:.2f}")
    if skip:
        lines.append("  causal tile skipping, causal ms / non-causal ms (1.0 = no skipping):")
        lines += _pack(skip, indent="    ")
    return "\n".join(lines)


def _pack(items: list[str], indent: str, width: int = 110) -> list[str]:
    """``items`` joined by "; " into lines of at most ``width`` characters (an item longer than that gets a line
    of its own), each starting with ``indent``."""
    lines, line = [], ""
    for item in items:
        if line and len(indent) + len(line) + 2 + len(item) > width:
            lines.append(indent + line)
            line = ""
        line = f"{line}; {item}" if line else item
    return lines + ([indent + line] if line else [])


def _block_m(config: str | None, default: int = 128) -> int:
    """BLOCK_M of an autotuner's choice as the record holds it ("BLOCK_M: 64, BLOCK_N: 128, ..."), else
    ``default``."""
    m = re.search(r"BLOCK_M: (\d+)", config or "")
    return int(m.group(1)) if m else default


def roofs(gpu: str = reference.DEFAULT_GPU) -> live.Shown:
    """The roofs notebook 08b puts the attention forward under: ``lesson00.roofs`` (``data``: ``profile``, a whole
    device profile, and ``l2_tbps``, lesson 00's L2 plateau in TB/s or None), with ``peak_tflops`` (the profile's
    bf16 matmul rate, fp16 where it has none: a T4) and ``ridges`` ({roof: FLOP/B}: "HBM", and "L2" where there is
    a plateau). Where ``timing.live()`` this GPU's (the saved profile, else the whole profile measured now and
    saved; the L2 plateau measured now), elsewhere the recording of ``gpu``. Raises KeyError naming the key when
    that file lacks the profile or lesson 00."""
    shown = lesson00.roofs(gpu=gpu)
    profile, l2 = shown.data["profile"], shown.data["l2_tbps"]
    peak = profile["matmul_tflops"].get("bf16") or profile["matmul_tflops"]["fp16"]
    ridges = {"HBM": peak / profile["copy_tbps"], **({"L2": peak / l2} if l2 else {})}
    return live.Shown(dict(shown.data, peak_tflops=peak, ridges=ridges), shown.where, shown.live)


def roofline_points(data: dict | None, l2_bytes: int | None = None) -> list:
    """``roofline.KernelPoint``s of a record. Ours, forward, non-causal, per headline setting, at each boundary
    of its bytes: "flash L2" with the bytes its SMs request from L2 (``attention.flash_l2_bytes`` at the
    autotuner's BLOCK_M, 128 when the record does not say), read against the L2 roof, and "flash DRAM" with the
    bytes that reach DRAM (``attention.flash_dram_bytes``, each tensor once while a head's K and V fit in
    ``l2_bytes``; None: assume they fit), read against the HBM roof. Then naive attention's forward at each L of
    the sweep that did not run out of memory (``attention.naive_bytes``, no reuse; none when the record has no
    sweep). FLOPs by
    ``attention.attention_flops``. [] for None."""
    points = []
    if not data:
        return points
    dt = data.get("dtype", DTYPE)
    for r in data["headline"]:
        if "fwd_ms" in r.get("ours", {}) and not r["causal"]:
            shape = (r["B"], r["H"], r["L"], r["d"], 2)
            for where, nb in (
                ("L2", attention.flash_l2_bytes(*shape, block_m=_block_m(r.get("config_fwd")))),
                ("DRAM", attention.flash_dram_bytes(*shape, l2_bytes=l2_bytes)),
            ):
                name = f"flash {where} d={r['d']} L={r['L']}"
                points.append(KernelPoint(name, r["fwd_flops"], nb, r["ours"]["fwd_ms"], dtype=dt, op_kind="matmul"))
    sw = data.get("sweep") or {"rows": []}  # a record without the sweep (notebook 08b's live run) has no naive points
    for r in sw["rows"]:
        if r["method"] == "naive" and not r["oom"]:
            points.append(
                KernelPoint(
                    f"naive fwd d={sw['d']} L={r['L']}",
                    r["flops"],
                    attention.naive_bytes(sw["B"], sw["H"], r["L"], sw["d"], 2),
                    r["ms"],
                    dtype=dt,
                    op_kind="matmul",
                )
            )
    return points


AUTOTUNE_SETTINGS = ((128, 1024), (64, 1024), (128, 4096))  # (d, L) of the autotune report


def autotune_report(settings=AUTOTUNE_SETTINGS, progress: bool = True) -> list[dict]:
    """What the autotuner picks for the FlashAttention forward, against every candidate timed alone: per (d, L)
    of ``settings`` and both causal flags, at the headline shape (``setting_shape``, bf16), TFLOP/s of each
    candidate of ``fwd_candidates`` launched with its fixed config (or its error), of the default (autotuned)
    launch, the config the autotuner chose, and SDPA's flash backend beside. GPU only
    (``python -m gpulab.bench --autotune-report lesson08``)."""
    timing.require_gpu("the lesson08 autotune report")
    rows = []
    for d, L in tqdm(settings, desc="lesson08 autotune report", disable=not progress):
        B, H, _, _ = setting_shape(L, d)
        q, k, v, _ = _qkv(B, H, L, d, seed=L + d)
        for causal in (False, True):
            flops = setting_flops(L, d, causal)
            row = {"d": d, "L": L, "B": B, "H": H, "causal": causal, "fixed_tflops": {}}
            for cfg in fa.fwd_candidates(q.dtype, causal, d):
                try:
                    t = timing.time_ms(
                        lambda: fa.flash_attention_forward(q, k, v, causal, config=cfg), warmup_ms=25, rep_ms=100
                    )
                    row["fixed_tflops"][fa.config_label(cfg)] = t.rate(flops)
                except Exception as e:  # noqa: BLE001  (a candidate that cannot run here is a result)
                    row["fixed_tflops"][fa.config_label(cfg)] = f"{type(e).__name__}: {str(e)[:120]}"
            t = timing.time_ms(lambda: fa.flash_attention_forward(q, k, v, causal), warmup_ms=25, rep_ms=100)
            row["autotuned_tflops"] = t.rate(flops)
            chosen = fa.chosen_configs(q, k, v, causal)["fwd"]
            row["autotuned_config"] = fa.config_label(chosen) if chosen else None
            sdpa = sdpa_fn("FLASH_ATTENTION", causal)
            row["sdpa_flash_tflops"] = timing.time_ms(lambda: sdpa(q, k, v), warmup_ms=25, rep_ms=100).rate(flops)
            rows.append(row)
        q = k = v = None  # free the buffers before the next size (the lambdas above hold the names)
    return rows


def autotune_report_text(rows: list[dict]) -> str:
    """``autotune_report``'s rows as a table: each candidate's TFLOP/s, the autotuned launch and its choice."""
    lines = [
        "FlashAttention forward, bf16, B*L = 16384, H*d = 2048: TFLOP/s of each candidate with a fixed "
        "config, of the autotuned launch (its choice in brackets) and of SDPA flash"
    ]
    for r in rows:
        fixed = ", ".join(
            f"{c} {_f(x, '.0f') if isinstance(x, float) else 'failed'}" for c, x in r["fixed_tflops"].items()
        )
        lines.append(
            f"  d={r['d']:3d} L={r['L']:5d} causal={str(r['causal']):5}: {fixed}; autotuned "
            f"{r['autotuned_tflops']:.0f} [{r['autotuned_config']}]; SDPA flash {r['sdpa_flash_tflops']:.0f}"
        )
    return "\n".join(lines)


def _f(x, fmt="6.0f"):
    return format(x, fmt) if isinstance(x, (int, float)) else f"{'-':>{int(fmt.split('.')[0] or 6)}}"


def headline_report(data: dict) -> str:
    """The headline table: TFLOP/s of ours, SDPA flash and SDPA cuDNN, forward and backward, the ratio against
    SDPA flash, and how many settings cuDNN leads in (``cudnn_leads``). About 15 lines."""
    lines = [
        "bf16, B*L = 16384, H*d = 2048; TFLOP/s (fwd 4BHL^2d, halved if causal; bwd 2.5x); "
        "ratio = SDPA flash ms / ours ms (target >= 1.0)",
        f"  {'d':>3} {'L':>6} {'causal':6} | {'ours':>6} {'flash':>6} {'cuDNN':>6} {'ratio':>6} | "
        f"{'ours':>6} {'flash':>6} {'cuDNN':>6} {'ratio':>6}   (forward | backward)",
    ]
    for r in data["headline"]:
        o, fl, cu = r.get("ours", {}), r.get("flash", {}), r.get("cudnn", {})
        below = "fwd_ratio" in r and min(r["fwd_ratio"], r["bwd_ratio"]) < 1.0
        lines.append(
            f"  {r['d']:3d} {r['L']:6d} {str(r['causal']):6} | {_f(o.get('fwd_tflops'))} "
            f"{_f(fl.get('fwd_tflops'))} {_f(cu.get('fwd_tflops'))} {_f(r.get('fwd_ratio'), '6.2f')} | "
            f"{_f(o.get('bwd_tflops'))} {_f(fl.get('bwd_tflops'))} {_f(cu.get('bwd_tflops'))} "
            f"{_f(r.get('bwd_ratio'), '6.2f')}{'  BELOW TARGET' if below else ''}"
        )
    leads = cudnn_leads(data["headline"])
    lines.append(
        f"  cuDNN ahead of ours: forward {leads['fwd'][0]} of {leads['fwd'][1]}, backward "
        f"{leads['bwd'][0]} of {leads['bwd'][1]} settings"
    )
    return "\n".join(lines)


def cudnn_leads(headline: list[dict]) -> dict:
    """``{"fwd": (n, of), "bwd": (n, of)}``: in how many of the settings where both ran SDPA's cuDNN backend
    reached a higher rate than ours."""
    out = {}
    for pass_ in ("fwd", "bwd"):
        key = f"{pass_}_tflops"
        both = [r for r in headline if key in r.get("ours", {}) and key in r.get("cudnn", {})]
        out[pass_] = (sum(r["cudnn"][key] > r["ours"][key] for r in both), len(both))
    return out


def sweep_report(sweep: dict) -> str:
    """Naive against flash forward over L: ms, flash's CUDA-graph replay ms ("-" where the record has none:
    recorded before the suite measured it), measured extra peak memory and the model's (GiB)."""
    s = sweep
    lines = [
        f"naive (S, P in HBM) against flash, forward, B={s['B']}, H={s['H']}, d={s['d']}, {s['dtype']}:",
        f"  {'L':>6} | {'naive ms':>9} {'GiB':>7} {'model':>7} | {'flash ms':>9} {'graph':>7} {'GiB':>7} {'model':>7}",
    ]
    for L in sorted({r["L"] for r in s["rows"]}):
        by = {r["method"]: r for r in s["rows"] if r["L"] == L}
        cells = []
        for m in ("naive", "flash"):
            r = by.get(m, {})
            if r.get("oom"):
                cells.append(f"{'out of memory':>17} {r['model_peak_bytes'] / 2**30:7.2f}")
            else:
                graph = f" {_f(r.get('graph_ms'), '7.3f')}" if m == "flash" else ""
                cells.append(
                    f"{_f(r.get('ms'), '9.3f')}{graph} {_f((r.get('peak_bytes') or 0) / 2**30, '7.3f')} "
                    f"{r.get('model_peak_bytes', 0) / 2**30:7.3f}"
                )
        lines.append(f"  {L:6d} | {cells[0]} | {cells[1]}")
    lines += [f"  naive at L = {r['L']} not run: {r['skipped']}" for r in s["rows"] if r.get("skipped")]
    return "\n".join(lines)


def memory_report(memory: dict) -> str:
    """Flash, through autograd: memory held after the forward and the peak over forward + backward, per token,
    beside the model (flat per token = O(L))."""
    m = memory
    lines = [f"flash, memory above q, k, v, dO (B={m['B']}, H={m['H']}, d={m['d']}), B/token (flat = O(L)):"]
    for r in m["rows"]:
        lines.append(
            f"  L = {r['L']:6d}: held {r['held_bytes'] / r['L']:7.0f} (model {r['model_held_bytes'] / r['L']:6.0f}), "
            f"peak {r['peak_bytes'] / r['L']:7.0f} (model {r['model_peak_bytes'] / r['L']:6.0f})"
        )
    lines += [f"  L = {r['L']:6d}: out of memory, not run ({r['skipped']})" for r in m.get("skipped", [])]
    return "\n".join(lines)


def tuning_line(tuning: dict | None) -> str:
    """Where the autotuner's choices of a record came from (its ``tuning``: {origin: keys}), in one line; "" when
    the record does not say."""
    if not tuning:
        return ""
    return "autotuner's configs: " + "; ".join(f"{n} {'key' if n == 1 else 'keys'} {o}" for o, n in tuning.items())


def report(data: dict, full: bool = False) -> str:
    """The naive/flash sweep (about 10 lines), then two lines on the headline and one on the memory; ``full=True``
    prints, after the sweep, the headline table, the memory table and the teaching-against-production table. A
    record without a headline (``--steps target``) shows its target rows as the headline table; the last line says
    where the autotuner's configs came from, when the record says."""
    parts = [sweep_report(data["sweep"])] if "sweep" in data else []
    if "target" in data and "headline" not in data:
        parts.append(headline_report({"headline": data["target"]}))
    if full:
        if "headline" in data:
            parts.append(headline_report(data))
        if "memory" in data:
            parts.append(memory_report(data["memory"]))
        parts.append(teaching_report(data.get("teaching")))
    else:
        if "headline" in data:
            parts.append(_headline_summary(data["headline"]))
        if data.get("memory", {}).get("rows"):
            per_token = [r["peak_bytes"] / r["L"] for r in data["memory"]["rows"]]
            lo, hi = f"{min(per_token):.0f}", f"{max(per_token):.0f}"
            parts.append(f"memory: peak {lo} B/token at every L" if lo == hi else f"memory: peak {lo} to {hi} B/token")
        if "teaching" in data and not parts:  # a teaching-only run: its table is the report
            parts.append(teaching_report(data["teaching"]))
    return "\n".join(parts + [line for line in [tuning_line(data.get("tuning"))] if line])


def _headline_summary(rows: list[dict]) -> str:
    """Two lines: the range of ours / SDPA flash over the headline ``rows`` and how many settings cuDNN leads."""
    leads = cudnn_leads(rows)
    ratios = [r[k] for r in rows for k in ("fwd_ratio", "bwd_ratio") if k in r]
    if not ratios:
        return "headline: no ratios"
    below = sum(r < 1.0 for r in ratios)
    return (
        f"headline: ours / SDPA flash {min(ratios):.2f}x to {max(ratios):.2f}x"
        f"{f' ({below} ratios BELOW TARGET 1.0)' if below else ''}\n  cuDNN ahead of ours in "
        f"{leads['fwd'][0]} of {leads['fwd'][1]} forward, {leads['bwd'][0]} of {leads['bwd'][1]} backward settings"
    )


#: A launch is hidden where eager minus graph replay is at most this many ms, or this fraction of the replay's time.
HIDDEN_MS, HIDDEN_FRACTION = 0.005, 0.05


def launch_report(sweep: dict) -> str:
    """Flash's forward per L of the sweep, eager against CUDA-graph replay: eager ms, graph ms and the difference
    (what launching from Python costs where the kernel does not hide it, lesson 04), one line per L. A difference
    within ``HIDDEN_MS`` or ``HIDDEN_FRACTION`` of the graph's time, or below 0, is a launch hidden behind the
    kernel (the CPU launches the next kernel while this one runs), and the line says so. Where the record has no
    ``graph_ms`` (it was recorded before the suite measured it) the line says so and names the command that
    records it."""
    lines = ["flash forward, eager against CUDA-graph replay (eager - graph: the launch not hidden by the kernel):"]
    missing = []
    for r in sorted((r for r in sweep["rows"] if r["method"] == "flash" and not r.get("oom")), key=lambda r: r["L"]):
        g = r.get("graph_ms")
        if g is None:
            missing.append(r["L"])
            continue
        gap = r["ms"] - g
        cost = (
            f"launch {gap:+.3f} ms"
            if gap > max(HIDDEN_MS, HIDDEN_FRACTION * g)
            else f"launch hidden by the kernel (eager - graph {gap:+.3f} ms, within the timings' spread)"
        )
        lines.append(f"  L = {r['L']:6d}: eager {r['ms']:.3f} ms, graph {g:.3f} ms, {cost}")
    if missing:
        lines.append(
            f"  L = {', '.join(map(str, missing))}: no graph replay in this record (it awaits a GPU re-record: "
            "python -m gpulab.bench --only lesson08 --record)"
        )
    return "\n".join(lines)
