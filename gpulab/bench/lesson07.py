"""Lesson 07 (tiling, tile and wave quantization) benchmark suite: ``python -m gpulab.bench --only lesson07``.

GPU only. Measures, in one run (minutes, most of them the dense sweep):

- headline: gpulab's matmul (autotuned, the path ``choose_path`` takes) against torch.matmul (cuBLAS) at
  4096^3 and 8192^3 in bf16 and fp16, ratio = torch ms / gpulab ms (target: >= 0.9 in bf16), and the
  portable pointer kernel beside it;
- awkward sizes 1793, 2049, 4097 (bf16): torch.matmul on the unpadded tensors, torch.matmul after zero-padding
  to a multiple of 8 (copies timed; its result is a strided view of the padded product), gpulab (TMA path: A
  and B copied into row-padded buffers, C stored into one and copied back to a contiguous tensor, all
  timed) and gpulab's pointer kernel (masked, no copy), and the row-pad copy of A and B alone; target:
  gpulab >= 2x torch. Each is timed three ways: eager calls (``time_ms``: Python and every launch on the CPU,
  which at 1793 takes longer than the GPU work), the same calls replayed from a CUDA graph (``time_ms(...,
  graph=True)``: the GPU's time, launch cost removed on both sides), and the kernels alone (torch.profiler);
- correctness at M = 1000, N = 999, K = 1001 in fp16: gpulab and torch against float64, and against each other;
- fp32 at 4096^3: gpulab with input_precision tf32 and ieee against torch (TF32 on and off);
- the tile study: the pointer kernel with square T x T x T tiles (one pipeline stage, so its input tiles take
  2 T^2 s bytes), fp32 (ieee) and bf16, at 4096^3: TFLOP/s, shared memory and registers of the compiled
  kernel, beside the model's footprint; T whose model footprint exceeds the SM's shared memory is not run;
- no reuse: the build's first step (``matmul_steps.naive_kernel``) in fp32 at 2048^3, with its 2 N^3 requested
  loads per second;
- alignment: load instructions in the PTX of the pointer kernel compiled for N = 4096 and N = 4097;
- the build: each step of the teaching matmul (``kernels.matmul_steps``: no reuse, tiled, grouped, pipelined)
  and the fast path (``matmul``, autotuned) with torch.matmul beside them, fp16 at 4096^3: ms, TFLOP/s, and
  the model's requested input bytes and intensity (FLOP/byte) of each step, to place it on the roofline;
- the dense sweep: every N from 1024 to 4352, bf16, torch.matmul and gpulab with one fixed config
  (``config="heuristic"``, nothing tuned per N), each call captured in a CUDA graph and its replay timed
  (``time_ms(..., graph=True)``: the GPU's time, without the Python launch cost that would flatten the small
  N), do_bench with 1 ms warm-up and 5 ms of repeats; a point that fails is recorded as None with its error,
  the sweep goes on.
"""

from __future__ import annotations

import re

import torch
from torch.profiler import ProfilerActivity, profile
from tqdm.auto import tqdm

import gpulab

from ..core import dtypes, hardware, plan, reference, timing
from ..core.tolerances import relative_error
from ..kernels import matmul as mm
from ..kernels import matmul_steps
from ..kernels.matmul import MatmulConfig
from ..kernels.resources import kernel_resources
from ..measure import live
from ..models import tiling, waves
from ..models.precision import _with_precision
from ..models.waves import alignment_split, model_correlation, sweep_rates, sweep_timing, wave_plan
from ..models.waves import matmul_tflops as tflops  # every rate of this suite (tools/tune_matmul.py imports it here)
from . import lesson00, planned

KEY = "lesson07"
HEADLINE_NS = (4096, 8192)
AWKWARD_NS = (1793, 2049, 4097)
CORRECTNESS_SHAPE = (1000, 999, 1001)
FP32_N = 4096
TILE_TS = (16, 32, 64, 128, 256)
TILE_N = 4096
NOREUSE_N = 2048
BUILD_N = 4096
BUILD_DTYPE = matmul_steps.BUILD_DTYPE
SWEEP = (1024, 4352)  # every N in this closed range
ALIGNMENT_NS = (4096, 4097)
#: What notebooks 07 and 07b run live (``run(**LIVE_BUILD)``, ``run(**LIVE)``): the build at 2048 (07), and the
#: sweep at ``LIVE_SWEEP_NS`` (07b), drawn over the recorded full curve: one small N, the last N of one wave of
#: 128 x 256 tiles on an H200's 132 SMs (2048: 8 x 16 = 128 tiles), the next aligned N (2056: 9 x 17 = 153
#: tiles, two waves), and one large N. The rest of the suite they show from the recording.
LIVE_BUILD = dict(steps=("build",), build_n=2048)
LIVE_SWEEP_NS = (1024, 2048, 2056, 4096)
LIVE = dict(steps=("sweep",), sweep_ns=LIVE_SWEEP_NS)
SWEEP_WARMUP_MS, SWEEP_REP_MS = 1, 5
TARGET_ALIGNED, TARGET_AWKWARD = 0.9, 2.0


def _dt(name):
    return dtypes.torch_dtype(name, allowed=("bf16", "fp16", "fp32"))


def choices(p, headline_ns=HEADLINE_NS, tile_ts=TILE_TS) -> dict:
    """What the suite runs on ``p`` (a ``gpulab.core.plan.Plan``): ``dtype``, the 16-bit dtype of the awkward sizes,
    the tile study, alignment and the sweep ("bf16", or "fp16" without bf16 tensor cores); ``headline_dtypes``
    (bf16 and fp16, once each); ``headline_kept`` and ``headline_skipped`` (A, B and C must fit the plan's
    memory); ``tile_dtypes``; ``tiles_skipped``: the (dtype, T) whose model footprint 2 T^2 s exceeds one block's
    shared memory on ``p`` (``tile_study`` records them as skipped); ``smem_per_block_bytes``; ``gpu``."""
    dt = p.dtype("bf16")
    kept, skipped = planned.split(p, headline_ns, lambda n: 3 * n * n * 2)
    tile_dtypes = ("fp32", dt)
    smem = p.smem_per_block_bytes
    return dict(
        gpu=p.gpu.name,
        dtype=dt,
        headline_dtypes=planned.dtypes_for(p, ("bf16", "fp16")),
        headline_kept=kept,
        headline_skipped=skipped,
        tile_dtypes=tile_dtypes,
        smem_per_block_bytes=smem,
        tiles_skipped=[(d, T) for d in tile_dtypes for T in tile_ts if tiling.footprint_bytes(T, d) > smem],
    )


def _plan():
    return plan.current()


def _rand(*shape, dtype):
    return torch.randn(*shape, device=gpulab.DEVICE, dtype=dtype)


def _empty_cache():
    if gpulab.ON_GPU:
        torch.cuda.empty_cache()


def _gpu_name() -> str:
    return torch.cuda.get_device_name(0) if gpulab.ON_GPU else "no GPU (interpreter)"


def _smem_per_sm(gpu_name: str) -> int | None:
    """Shared memory per SM in bytes: the datasheet table, else what torch reports, else None."""
    spec = hardware.find(gpu_name)
    if spec and spec.smem_per_sm_kib:
        return spec.smem_per_sm_kib * 1024
    if not gpulab.ON_GPU:
        return None
    return getattr(torch.cuda.get_device_properties(0), "shared_memory_per_multiprocessor", None)


def _row(method, n, t, **extra):
    return {
        "method": method,
        "n": n,
        "ms": t.median_ms,
        "p20_ms": t.p20_ms,
        "p80_ms": t.p80_ms,
        "tflops": tflops(n, t.median_ms),
        **extra,
    }


def headline(ns=HEADLINE_NS, dtypes=("bf16", "fp16")) -> list[dict]:
    """gpulab (autotuned, auto path), gpulab's pointer kernel (bf16, heuristic) and torch.matmul per size."""
    rows = []
    for d in dtypes:
        for n in ns:
            a, b = _rand(n, n, dtype=_dt(d)), _rand(n, n, dtype=_dt(d))
            path = mm.choose_path(a.dtype)
            mm.matmul(a, b)  # autotune and compile outside the timing
            cfg = mm.tuned_config(a, b, path)
            tt = timing.time_ms(lambda: torch.matmul(a, b), warmup_ms=25, rep_ms=200)
            tg = timing.time_ms(lambda: mm.matmul(a, b), warmup_ms=25, rep_ms=200)
            rows.append(_row("torch", n, tt, dtype=d))
            rows.append(
                _row(
                    "gpulab", n, tg, dtype=d, path=path, config=mm.config_label(cfg), ratio=tt.median_ms / tg.median_ms
                )
            )
            if d == dtypes[0] and path != "pointer":
                mm.matmul(a, b, path="pointer", config="heuristic")
                tp = timing.time_ms(
                    lambda: mm.matmul(a, b, path="pointer", config="heuristic"), warmup_ms=25, rep_ms=200
                )
                rows.append(
                    _row(
                        "gpulab pointer",
                        n,
                        tp,
                        dtype=d,
                        path="pointer",
                        config=mm.config_label(mm.heuristic_config(n, n, n, a.dtype, "pointer")),
                        ratio=tt.median_ms / tp.median_ms,
                    )
                )
            a = b = None  # free the buffers before the next size (the lambdas above hold the names)
            _empty_cache()
    return rows


def gpu_kernel_ms(fn, iters: int = 20) -> float:
    """GPU time of ``fn``'s kernels alone, ms per call: the sum of the device time of every kernel it launches,
    from ``torch.profiler`` (CUDA activity), over ``iters`` back-to-back calls (operands stay in L2). Unlike
    ``time_ms``, the CPU time spent launching (Python, Triton's launcher) is left out: it shows what the kernels
    cost when launch overhead is hidden (a CUDA graph, a larger batch of work, a C++ caller)."""
    fn()
    timing.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        timing.synchronize()
    us = sum(
        getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0) or 0
        for e in prof.key_averages()
    )
    return us / iters / 1e3


COPY_METHOD = "row-pad copy of A and B"


def copy_bytes(n: int, itemsize: int = 2) -> int:
    """Bytes the row-pad copy of A and B (both n x n) moves: each read once and written once."""
    return 4 * n * n * itemsize


def awkward(ns=AWKWARD_NS, dtype="bf16") -> list[dict]:
    """Sizes whose rows are not 16-byte aligned: torch as is, torch after zero-padding, gpulab (auto path and
    the masked pointer kernel) and the row-pad copy alone; ratios against torch on the unpadded tensors."""
    rows = []
    for n in ns:
        a, b = _rand(n, n, dtype=_dt(dtype)), _rand(n, n, dtype=_dt(dtype))
        n8 = waves.cdiv(n, 8) * 8

        def torch_padded():
            ap = torch.zeros(n, n8, device=a.device, dtype=a.dtype)
            bp = torch.zeros(n8, n8, device=a.device, dtype=a.dtype)
            ap[:, :n] = a
            bp[:n, :n] = b
            return torch.matmul(ap, bp)[:, :n]

        fns = {
            "torch": lambda: torch.matmul(a, b),
            "torch zero-padded": torch_padded,
            "gpulab": lambda: mm.matmul(a, b),
            "gpulab pointer (masked)": lambda: mm.matmul(a, b, path="pointer", config="heuristic"),
            COPY_METHOD: lambda: mm.pad_rows_many([a, b]),
        }
        times = {}
        for name, fn in fns.items():
            fn()  # compile / tune outside the timing
            times[name] = timing.time_ms(fn, warmup_ms=25, rep_ms=200)
        graphed = {}
        for name in ("torch", "torch zero-padded", "gpulab", COPY_METHOD):
            try:  # the same calls replayed from a CUDA graph: no Python or launch cost on either side
                graphed[name] = timing.time_ms(fns[name], warmup_ms=25, rep_ms=200, graph=True)
            except Exception as e:  # noqa: BLE001 - a failed capture marks the point, it does not end the suite
                print(f"lesson07: CUDA-graph capture failed at N={n} for {name}: {e!r}")
        gpu = {}
        for name in ("torch", "gpulab"):
            try:
                gpu[name] = gpu_kernel_ms(fns[name])
            except Exception as e:  # noqa: BLE001 - a profiler failure marks the point, it does not end the suite
                gpu[name] = None
                print(f"lesson07: torch.profiler failed at N={n} for {name}: {e!r}")
        for name, t in times.items():
            if name == COPY_METHOD:
                row = {
                    "method": name,
                    "n": n,
                    "ms": t.median_ms,
                    "p20_ms": t.p20_ms,
                    "p80_ms": t.p80_ms,
                    "dtype": dtype,
                    "tbps": copy_bytes(n) / (t.median_ms * 1e-3) / 1e12,
                }
                if name in graphed:  # eager is CPU-bound at these sizes; the replay is the copy's own rate
                    g = graphed[name].median_ms
                    row.update(graph_ms=g, graph_tbps=copy_bytes(n) / (g * 1e-3) / 1e12)
                rows.append(row)
                continue
            extra = {"dtype": dtype, "ratio": times["torch"].median_ms / t.median_ms}
            if gpu.get(name) is not None:
                extra["gpu_kernel_ms"] = gpu[name]
                if gpu.get("torch") is not None and gpu[name] > 0:
                    extra["gpu_kernel_ratio"] = gpu["torch"] / gpu[name]
            if name in graphed and "torch" in graphed:
                extra.update(
                    graph_ms=graphed[name].median_ms, graph_ratio=graphed["torch"].median_ms / graphed[name].median_ms
                )
            if name == "gpulab":
                extra.update(
                    path=mm.choose_path(a.dtype), config=mm.config_label(mm.tuned_config(a, b, mm.choose_path(a.dtype)))
                )
            rows.append(_row(name, n, t, **extra))
    return rows


def correctness(shape=CORRECTNESS_SHAPE, dtype="fp16") -> dict:
    """Max abs and relative Frobenius error against float64 of gpulab and torch, and max |gpulab - torch|."""
    M, N, K = shape
    a, b = _rand(M, K, dtype=_dt(dtype)), _rand(K, N, dtype=_dt(dtype))
    ref = mm.matmul_ref(a, b)
    ours, theirs = mm.matmul(a, b).double(), torch.matmul(a, b).double()
    out = {"shape": list(shape), "dtype": dtype}
    for name, c in (("gpulab", ours), ("torch", theirs)):
        out[name] = {"max_abs_error": float((c - ref).abs().max()), "rel_error": float((c - ref).norm() / ref.norm())}
    out["max_abs_gpulab_minus_torch"] = float((ours - theirs).abs().max())
    out["max_abs_ref"] = float(ref.abs().max())
    return out


def fp32_rates(n=FP32_N) -> list[dict]:
    """gpulab (pointer path) with input_precision tf32 / ieee against torch with TF32 on / off, and errors."""
    a, b = _rand(n, n, dtype=torch.float32), _rand(n, n, dtype=torch.float32)
    ref = a.double() @ b.double()
    rows = []
    for prec, torch_prec in (("tf32", "high"), ("ieee", "highest")):
        tfn = lambda: _with_precision(torch_prec, lambda: torch.matmul(a, b))  # noqa: E731
        gfn = lambda: mm.matmul(a, b, input_precision=prec)  # noqa: E731
        gfn()
        tt, tg = timing.time_ms(tfn, warmup_ms=25, rep_ms=200), timing.time_ms(gfn, warmup_ms=25, rep_ms=200)
        rows.append(_row("torch", n, tt, precision=prec, error=relative_error(ref, tfn(), "norm")))
        rows.append(
            _row(
                "gpulab",
                n,
                tg,
                precision=prec,
                error=relative_error(ref, gfn(), "norm"),
                config=mm.config_label(mm.tuned_config(a, b, "pointer", prec)),
                ratio=tt.median_ms / tg.median_ms,
            )
        )
    return rows


def tile_config(T: int):
    """The tile study's launch shape: T x T output tiles, T-deep steps, one stage, 4 warps (8 from T = 128)."""
    return MatmulConfig(T, T, T, GROUP_M=8, num_warps=8 if T >= 128 else 4, num_stages=1)


def tile_study(ts=TILE_TS, n=TILE_N, dtypes=("fp32", "bf16"), gpu_name=None, smem_limit=None) -> list[dict]:
    """Rate of the pointer kernel against square tile size T (see ``tile_config``); shared memory and registers
    of the compiled kernel beside the model footprint 2 T^2 s. T whose footprint does not fit the shared memory
    per SM of ``gpu_name`` (default this GPU), or ``smem_limit`` bytes where given (the plan's per block), is
    not run: its row says so under ``skipped``."""
    smem = _smem_per_sm(gpu_name or _gpu_name())
    if smem_limit is not None:
        smem = min(smem, smem_limit) if smem else smem_limit
    rows = []
    for d in dtypes:
        a, b = _rand(n, n, dtype=_dt(d)), _rand(n, n, dtype=_dt(d))
        c = torch.empty(n, n, device=a.device, dtype=a.dtype)
        for T in ts:
            cfg = tile_config(T)
            fp = tiling.footprint_bytes(T, d)
            row = {
                "T": T,
                "dtype": d,
                "n": n,
                "footprint_bytes": fp,
                "smem_per_sm_bytes": smem,
                "intensity": tiling.tile_intensity(T, d),
                "loads": tiling.input_loads(n, tile=T),
            }
            if smem is not None and fp > smem:
                row["skipped"] = f"model footprint {fp / 1024:.0f} KiB > {smem / 1024:.0f} KiB of shared memory per SM"
                rows.append(row)
                continue
            try:
                k = mm.launch(a, b, c, cfg, "pointer", "ieee")
                t = timing.time_ms(lambda: mm.launch(a, b, c, cfg, "pointer", "ieee"), warmup_ms=10, rep_ms=100)
                row.update(ms=t.median_ms, tflops=tflops(n, t.median_ms), **kernel_resources(k))
            except Exception as e:  # noqa: BLE001  (out of resources, or a compiler limit: recorded, not fatal)
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            rows.append(row)
        a = b = c = None  # free the buffers before the next size (the lambdas above hold the names)
        _empty_cache()
    return rows


def noreuse(n=NOREUSE_N) -> dict:
    """The no-reuse step (``matmul_steps.matmul_step(a, b, "no reuse")``, ``StepConfig()``'s launch) in fp32: ms,
    TFLOP/s, and its requested loads (2 N^3 elements) per second."""
    a, b = _rand(n, n, dtype=torch.float32), _rand(n, n, dtype=torch.float32)
    c = torch.empty(n, n, device=a.device, dtype=a.dtype)
    matmul_steps.matmul_step(a, b, "no reuse", out=c)
    t = timing.time_ms(lambda: matmul_steps.matmul_step(a, b, "no reuse", out=c), warmup_ms=10, rep_ms=200)
    loads_bytes = 2 * n**3 * 4
    return {
        "n": n,
        "dtype": "fp32",
        "ms": t.median_ms,
        "tflops": tflops(n, t.median_ms),
        "requested_load_bytes": loads_bytes,
        "requested_load_tbps": loads_bytes / t.median_ms / 1e9,
    }


def build_steps(n=BUILD_N, dtype=BUILD_DTYPE, config=None) -> list[dict]:
    """The lesson's build at n x n x n: each teaching step (``matmul_steps.STEPS``, launch shape ``config``,
    default ``StepConfig()``), then gpulab's fast path and torch.matmul. Each row: step, ms, TFLOP/s, and for
    the teaching steps the model's requested input bytes (``matmul_steps.step_counts``) and intensity."""
    config = config or matmul_steps.StepConfig()
    d = _dt(dtype)
    a, b = _rand(n, n, dtype=d), _rand(n, n, dtype=d)
    c = torch.empty(n, n, device=a.device, dtype=d)
    fns = {step: (lambda step=step: matmul_steps.matmul_step(a, b, step, config, out=c)) for step in matmul_steps.STEPS}
    fns["fast path"] = lambda: mm.matmul(a, b)
    fns["torch"] = lambda: torch.matmul(a, b)
    rows = []
    for step, fn in fns.items():
        fn()  # compile (and for the fast path, autotune) outside the timing
        t = timing.time_ms(fn, warmup_ms=10, rep_ms=100)
        row = {
            "step": step,
            "n": n,
            "dtype": dtype,
            "ms": t.median_ms,
            "p20_ms": t.p20_ms,
            "p80_ms": t.p80_ms,
            "tflops": tflops(n, t.median_ms),
        }
        if step in matmul_steps.STEPS:
            flops, nbytes = matmul_steps.step_counts(step, n, n, n, a.element_size(), config)
            row.update(
                model_bytes=nbytes,
                intensity=flops / nbytes,
                config=f"{config.BLOCK_M}x{config.BLOCK_N}x{config.BLOCK_K} w{config.num_warps}",
            )
        elif step == "fast path":
            row["config"] = mm.config_label(mm.tuned_config(a, b, mm.choose_path(d)))
        rows.append(row)
    _empty_cache()
    return rows


def ptx_loads(ptx: str) -> dict:
    """Global-memory load instructions in PTX by bytes per instruction, plus cp.async (asynchronous copies to
    shared memory, what software pipelining uses) and cp.async.bulk.tensor (TMA) counts."""
    widths: dict = {}
    for m in re.finditer(r"\bld\.global((?:\.[\w:]+)*)", ptx):
        mods = m.group(1)
        vec = re.search(r"\.v(\d)", mods)
        bits = re.search(r"\.[bfsu](\d+)\b", mods)
        if bits:
            nbytes = (int(vec.group(1)) if vec else 1) * int(bits.group(1)) // 8
            widths[str(nbytes)] = widths.get(str(nbytes), 0) + 1
    copies: dict = {}
    for m in re.finditer(
        r"\bcp\.async\.c[ag]\.shared\.global\S*\s*\[[^\]]*\],\s*\[[^\]]*\],\s*(0x[0-9a-fA-F]+|\d+)", ptx
    ):
        nbytes = str(int(m.group(1), 0))
        copies[nbytes] = copies.get(nbytes, 0) + 1
    return {
        "ld.global bytes per instruction": widths,
        "cp.async bytes per instruction": copies,
        "cp.async": sum(copies.values()),
        "cp.async.bulk.tensor": len(re.findall(r"\bcp\.async\.bulk\.tensor", ptx)),
    }


def alignment(ns=ALIGNMENT_NS, dtype="bf16") -> list[dict]:
    """PTX load widths of the pointer kernel (heuristic config) compiled for each N. Triton specializes an
    int argument divisible by 16 (so row strides of N elements are 16-byte aligned); N = 4097 is not. The
    interpreter compiles nothing: there a row has ``"ptx": None`` and no load counts."""
    rows = []
    for n in ns:
        a, b = _rand(n, n, dtype=_dt(dtype)), _rand(n, n, dtype=_dt(dtype))
        c = torch.empty(n, n, device=a.device, dtype=a.dtype)
        cfg = mm.heuristic_config(n, n, n, a.dtype, "pointer")
        k = mm.launch(a, b, c, cfg, "pointer")  # None in the interpreter
        loads = ptx_loads(k.asm["ptx"]) if k is not None else {"ptx": None}
        rows.append({"n": n, "dtype": dtype, "config": mm.config_label(cfg), **loads})
        a = b = c = None  # free the buffers before the next size (the lambdas above hold the names)
        _empty_cache()
    return rows


def dense_sweep(
    lo=SWEEP[0],
    hi=SWEEP[1],
    dtype="bf16",
    progress=True,
    warmup_ms=SWEEP_WARMUP_MS,
    rep_ms=SWEEP_REP_MS,
    step=1,
    ns=None,
) -> dict:
    """torch.matmul and gpulab (``config="heuristic"``: the config of the largest N, nothing tuned per N) at
    every N in lo..hi (step ``step``), or at the N of ``ns`` where given, N x N x N, each timed by CUDA-graph
    replay. Returns lists ``ns``, ``torch_ms``, ``gpulab_ms`` (None where a point failed) and ``errors``."""
    ns = list(range(lo, hi + 1, step)) if ns is None else sorted(ns)
    hi = max(ns)
    d = _dt(dtype)
    buf_a = _rand(hi * hi, dtype=d)  # every N takes contiguous views of these: no allocation per N
    buf_b = _rand(hi * hi, dtype=d)
    path = mm.choose_path(d)
    cfg = mm.heuristic_config(hi, hi, hi, d, path)
    out = {
        "dtype": dtype,
        "path": path,
        "config": mm.config_label(cfg),
        "tile": list(cfg.tile),
        "sms": mm.num_sms(),
        "warmup_ms": warmup_ms,
        "rep_ms": rep_ms,
        "timing": "CUDA graph replay",
        "ns": [],
        "torch_ms": [],
        "gpulab_ms": [],
        "errors": {},
    }
    for n in tqdm(ns, desc="lesson07 sweep", disable=not progress, mininterval=2):
        a, b = buf_a[: n * n].view(n, n), buf_b[: n * n].view(n, n)
        out["ns"].append(n)
        for key, fn in (
            ("torch_ms", lambda: torch.matmul(a, b)),
            ("gpulab_ms", lambda: mm.matmul(a, b, config="heuristic")),
        ):
            try:
                out[key].append(round(timing.time_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, graph=True).median_ms, 6))
            except Exception as e:  # noqa: BLE001  (a failed point is marked, the sweep goes on)
                out[key].append(None)
                out["errors"][f"{key[:-3]} {n}"] = f"{type(e).__name__}: {str(e)[:160]}"
    return out


STEPS = ("headline", "awkward", "correctness", "fp32", "tiles", "no reuse", "build", "alignment", "sweep")


def run(
    progress: bool = True,
    headline_ns=HEADLINE_NS,
    awkward_ns=AWKWARD_NS,
    sweep=SWEEP,
    sweep_step: int = 1,
    sweep_ns=None,
    tile_ts=TILE_TS,
    tile_n=TILE_N,
    noreuse_n=NOREUSE_N,
    fp32_n=FP32_N,
    correctness_shape=CORRECTNESS_SHAPE,
    build_n=BUILD_N,
    alignment_ns=ALIGNMENT_NS,
    steps=None,
) -> dict:
    """Measure everything in the module docstring; returns a JSON-able dict. GPU only. ``steps``: a subset of
    ``STEPS`` to run (default all; the dense sweep takes most of the time); ``sweep_ns``: the sweep's N in place
    of every ``sweep_step``-th N of ``sweep``. A partial record reads in ``report``,
    and ``python -m gpulab.bench --only lesson07 --steps ... --record`` merges it into the reference file."""
    timing.require_gpu("the lesson07 suite")
    unknown = set(steps or ()) - set(STEPS)
    if unknown:
        raise ValueError(f"steps must be drawn from {STEPS}, got unknown {sorted(unknown)}")
    steps = [s for s in STEPS if steps is None or s in steps]
    ch = choices(_plan(), headline_ns, tile_ts)
    dt = ch["dtype"]
    out = {
        "gpu": _gpu_name(),
        "plan": ch["gpu"],
        "dtype": dt,
        "sms": mm.num_sms(),
        "targets": {"aligned_bf16": TARGET_ALIGNED, "awkward_bf16": TARGET_AWKWARD},
    }
    bar = tqdm(steps, desc="lesson07", disable=not progress)
    for step in bar:
        bar.set_postfix_str(step)
        if step == "headline":
            out["headline"] = headline(ch["headline_kept"], ch["headline_dtypes"])
            if ch["headline_skipped"]:
                out["headline_skipped"] = ch["headline_skipped"]
        elif step == "awkward":
            out["awkward"] = awkward(awkward_ns, dt)
        elif step == "correctness":
            out["correctness"] = correctness(correctness_shape)
        elif step == "fp32":
            out["fp32"] = fp32_rates(fp32_n)
        elif step == "tiles":
            out["tiles"] = tile_study(
                tile_ts, tile_n, ch["tile_dtypes"], gpu_name=ch["gpu"], smem_limit=ch["smem_per_block_bytes"]
            )
        elif step == "no reuse":
            out["noreuse"] = noreuse(noreuse_n)
        elif step == "build":
            out["build"] = build_steps(build_n)
        elif step == "alignment":
            out["alignment"] = alignment(alignment_ns, dtype=dt)
        else:
            out["sweep"] = dense_sweep(sweep[0], sweep[1], dtype=dt, progress=progress, step=sweep_step, ns=sweep_ns)
        _empty_cache()
    tuned = mm.tuned_configs()
    if tuned:  # a run that autotuned nothing (the sweep takes a fixed config) leaves the recorded choices alone
        out["tuned_configs"] = tuned
    return out


# ---- reading the record (both modes) ------------------------------------------------------------------------


SHORT_SWEEP = 4  # a sweep of at most this many N is reported N by N, on one line


def _f(rate) -> str:
    return "failed" if rate is None else f"{rate:.0f}"


def summary(data: dict) -> str:
    """At most about 15 lines: the bf16 headline ratios, the awkward sizes (CUDA graph and eager), the build
    steps and the dense sweep's means; a step missing from ``data`` is left out (``report`` has everything)."""
    t_al, t_awk = data["targets"]["aligned_bf16"], data["targets"]["awkward_bf16"]
    lines = [f"{data['gpu']} ({data['sms']} SMs); ratio = torch ms / gpulab ms (>= 1: gpulab as fast or faster)"]
    for r in data.get("headline", []):
        if r["method"] == "gpulab" and r["dtype"] == data.get("dtype", "bf16"):
            lines.append(
                f"  {r['dtype']} {r['n']}^3: gpulab {r['tflops']:6.1f} TFLOP/s, ratio {r['ratio']:.2f} (target >= {t_al})"
            )
    lines += [f"  {r['n']}^3 not run: {r['skipped']}" for r in data.get("headline_skipped", [])]
    for r in data.get("awkward", []):
        if r["method"] == "gpulab":
            g = (
                f"CUDA graph {r['graph_ms'] * 1e3:6.1f} us, ratio {r['graph_ratio']:.2f} (target >= {t_awk}); "
                if r.get("graph_ms") is not None
                else ""
            )
            lines.append(
                f"  {data.get('dtype', 'bf16')} {r['n']}^3: {g}eager {r['ms'] * 1e3:6.1f} us, ratio {r['ratio']:.2f}"
            )
    if "build" in data:
        b0 = data["build"][0]
        lines.append(f"  the build, {b0['dtype']} {b0['n']}^3 (model intensity = 2N^3 / requested bytes):")
    for r in data.get("build", []):
        model = f", model {r['intensity']:6.1f} FLOP/B" if "intensity" in r else ""
        lines.append(f"    {r['step']:10} {r['ms']:9.3f} ms {r['tflops']:7.1f} TFLOP/s{model}")
    if "sweep" in data and len(data["sweep"]["ns"]) <= SHORT_SWEEP:  # a few N: each one's rates
        s = data["sweep"]
        rates = zip(s["ns"], sweep_rates(s, "torch"), sweep_rates(s, "gpulab"))
        lines.append(
            f"  sweep ({sweep_timing(s)}), TFLOP/s torch / gpulab: "
            + ", ".join(f"N = {n} {_f(t)} / {_f(g)}" for n, t, g in rates)
        )
    elif "sweep" in data:
        s = data["sweep"]
        sp = {m: alignment_split(s, m) for m in ("torch", "gpulab")}
        lines.append(
            f"  dense sweep {s['ns'][0]}..{s['ns'][-1]} ({sweep_timing(s)}), mean TFLOP/s N % 8 == 0 / other: torch "
            f"{sp['torch']['aligned_mean_tflops']:.0f} / {sp['torch']['misaligned_mean_tflops']:.0f}, gpulab "
            f"{sp['gpulab']['aligned_mean_tflops']:.0f} / {sp['gpulab']['misaligned_mean_tflops']:.0f}"
        )
    return "\n".join(lines)


def report(data: dict, full: bool = False) -> str:
    """``full=False``: ``summary(data)``. ``full=True``: every table: headline and awkward sizes with ratios and
    targets, correctness, fp32, the tile study, no reuse, the build, alignment and a summary of the dense sweep;
    a step missing from ``data`` (a run with ``steps``) is left out. A step kept from an older record
    (``step_provenance``) says when it was recorded."""
    if not full:
        return summary(data)
    t_al, t_awk = data["targets"]["aligned_bf16"], data["targets"]["awkward_bf16"]
    kept = data.get("step_provenance", {})

    def when(key):
        return f" (recorded {kept[key].get('date', '?')})" if key in kept else ""

    lines = [
        f"{data['gpu']} ({data['sms']} SMs). ratio = torch ms / gpulab ms (>= 1: gpulab as fast or faster); "
        f"targets: bf16 >= {t_al} at the headline sizes, >= {t_awk} at the awkward sizes (CUDA graph)"
    ]
    if "headline" in data:
        lines.append(f"headline{when('headline')}:")
        lines.append(f"  {'dtype':5} {'N':>5} {'method':16} {'ms':>9} {'TFLOP/s':>8} {'ratio':>6}  config")
    for r in data.get("headline", []):
        flag = ""
        if r["method"] == "gpulab" and r["dtype"] == data.get("dtype", "bf16"):
            flag = "  target met" if r["ratio"] >= t_al else f"  BELOW TARGET (>= {t_al})"
        lines.append(
            f"  {r['dtype']:5} {r['n']:5} {r['method']:16} {r['ms']:9.4f} {r['tflops']:8.1f} "
            f"{r.get('ratio', float('nan')):6.3f}  {r.get('path', '')} {r.get('config', '')}{flag}"
        )
    if "awkward" in data:
        lines.append(
            f"awkward sizes{when('awkward')} (bf16; ratio against torch on the unpadded tensors; eager calls, "
            "CUDA-graph replay (the target, launch cost removed on both sides) and the kernels alone):"
        )
    for r in data.get("awkward", []):
        if r["method"] == COPY_METHOD:  # a copy: bytes per second, not FLOPs or a speed-up
            tbps = copy_bytes(r["n"]) / (r["ms"] * 1e-3) / 1e12
            g = (
                f"; CUDA graph {r['graph_ms'] * 1e3:7.1f} us, {r['graph_tbps']:5.2f} TB/s"
                if r.get("graph_ms") is not None
                else ""
            )
            lines.append(
                f"  {r['n']:5} {r['method']:24} {r['ms']:9.4f} ms  {tbps:5.2f} TB/s{g} (reads and writes A and B)"
            )
            continue
        flag = ""
        if (
            r["method"] == "gpulab" and r.get("graph_ms") is None
        ):  # a row without graph timing: the eager ratio is the target
            flag = "  target met" if r["ratio"] >= t_awk else f"  BELOW TARGET (>= {t_awk})"
        gk = f"; kernels alone {r['gpu_kernel_ms'] * 1e3:7.1f} us" if r.get("gpu_kernel_ms") is not None else ""
        if r.get("gpu_kernel_ratio") is not None and r["method"] == "gpulab":
            gk += f", ratio {r['gpu_kernel_ratio']:.2f}"
        if r.get("graph_ms") is not None:
            gk += f"; CUDA graph {r['graph_ms'] * 1e3:7.1f} us, ratio {r['graph_ratio']:.2f}"
            if r["method"] == "gpulab":
                gk += "  target met" if r["graph_ratio"] >= t_awk else f"  BELOW TARGET (>= {t_awk})"
        lines.append(
            f"  {r['n']:5} {r['method']:24} {r['ms']:9.4f} ms {r['tflops']:7.1f} TFLOP/s "
            f"ratio {r['ratio']:6.3f}{flag}{gk}"
        )
    if "correctness" in data:
        c = data["correctness"]
        lines.append(
            f"correctness{when('correctness')} {c['dtype']} M, N, K = {tuple(c['shape'])}: max abs error vs "
            f"float64 gpulab {c['gpulab']['max_abs_error']:.3g}, torch {c['torch']['max_abs_error']:.3g} "
            f"(max |C| {c['max_abs_ref']:.3g}); max |gpulab - torch| {c['max_abs_gpulab_minus_torch']:.3g}"
        )
    for r in data.get("fp32", []):
        lines.append(
            f"fp32 {r['n']} {r['precision']:4} {r['method']:6}: {r['tflops']:7.1f} TFLOP/s, error "
            f"{r['error']:.2e}" + (f", ratio {r['ratio']:.3f}" if "ratio" in r else "") + when("fp32")
        )
    if "tiles" in data:
        lines.append(f"tile study{when('tiles')} (pointer kernel, T x T x T tiles, 1 stage; footprint 2 T^2 s):")
    for r in data.get("tiles", []):
        head = (
            f"  {r['dtype']:4} T={r['T']:3} I=T/s={r['intensity']:5.1f} "
            f"footprint {r['footprint_bytes'] / 1024:6.1f} KiB"
        )
        if "skipped" in r or "error" in r:
            lines.append(f"{head}: not run ({r.get('skipped') or r.get('error')})")
        else:
            lines.append(
                f"{head}: {r['tflops']:7.2f} TFLOP/s, compiled shared {r['shared_bytes']} B, regs "
                f"{r['n_regs']}, spills {r['n_spills']}"
            )
    if "noreuse" in data:
        nr = data["noreuse"]
        lines.append(
            f"no reuse fp32 {nr['n']}^3{when('noreuse')}: {nr['ms']:.3f} ms, {nr['tflops']:.2f} TFLOP/s; "
            f"requested loads 2N^3 x 4 B at {nr['requested_load_tbps']:.1f} TB/s"
        )
    if "build" in data:
        lines.append(f"the build{when('build')}, {data['build'][0]['dtype']} {data['build'][0]['n']}^3:")
    for r in data.get("build", []):
        model = (
            f", model {r['model_bytes'] / 1e9:8.2f} GB requested, {r['intensity']:6.1f} FLOP/B"
            if "intensity" in r
            else ""
        )
        lines.append(f"  {r['step']:10} {r['ms']:9.3f} ms {r['tflops']:7.1f} TFLOP/s{model}  {r.get('config', '')}")
    for r in (r for r in data.get("alignment", []) if "ptx" not in r):  # a row without PTX has no loads to show
        lines.append(
            f"PTX of the pointer kernel at N={r['n']}{when('alignment')}: global loads by bytes/instruction "
            f"{r['ld.global bytes per instruction']}, async copies to shared memory by bytes "
            f"{r['cp.async bytes per instruction']}"
        )
    if "sweep" not in data:
        return "\n".join(lines)
    s = data["sweep"]
    lines.append(
        f"dense sweep N = {s['ns'][0]}..{s['ns'][-1]} ({len(s['ns'])} sizes, {s['dtype']}; gpulab {s['path']} "
        f"{s['config']}){when('sweep')}; mean TFLOP/s over N % 8 == 0 / other N:"
    )
    for m in ("torch", "gpulab"):
        sp = alignment_split(s, m)
        lines.append(
            f"  {m:6}: {sp['aligned_mean_tflops']:6.1f} / {sp['misaligned_mean_tflops']:6.1f}; failed points "
            f"{sp['failed']}; correlation with the wave model (aligned N) {model_correlation(s, m):.2f}"
        )
    return "\n".join(lines)


# ---- what notebooks 07 and 07b show: measured now, or the recording, and the lines read from it ---------------


def roofs(gpu: str = reference.DEFAULT_GPU) -> live.Shown:
    """The roofs notebook 07 counts the build against: ``data`` holds ``profile`` (a device profile),
    ``fp16_tflops`` (its fp16 matmul rate at 8192^3, TFLOP/s) and ``l2_tbps`` (lesson 00's L2 plateau, TB/s).

    ``lesson00.roofs`` of the fp16 matmul alone: where ``timing.live()`` this GPU's, labelled so (the profile saved
    in the cache, else the copy and the fp16 matmul measured now; the L2 plateau measured now); where gpulab's
    hardware table lacks this GPU's caches, the profile's copy bandwidth stands in for the L2 and the label says
    so. Elsewhere the recording of ``gpu``. Raises KeyError naming the key when that file lacks the profile or
    lesson 00."""
    shown = lesson00.roofs(matmul=(BUILD_DTYPE,), gpu=gpu)
    profile, l2 = shown.data["profile"], shown.data["l2_tbps"]
    data = dict(profile=profile, fp16_tflops=profile["matmul_tflops"][BUILD_DTYPE], l2_tbps=l2)
    if l2 is None:
        return live.Shown(dict(data, l2_tbps=profile["copy_tbps"]), f"{shown.where}: the copy stands in", shown.live)
    return live.Shown(data, shown.where, shown.live)


def build_now_or_recorded() -> live.Shown:
    """The build (``run(**LIVE_BUILD)``) measured now where ``timing.live()``, else the recording's; ``data``
    None, with "no GPU recording of the build yet", when the record has no build."""
    shown = live.measure_or_recall(KEY, lambda: run(**LIVE_BUILD))
    if shown.data and "build" in shown.data:
        return shown
    return live.Shown(None, "no GPU recording of the build yet", shown.live)


def _by(rows, *keys) -> dict:
    return {tuple(r[k] for k in keys): r for r in rows}


def kernel_ratios(data: dict, dtype: str = "bf16", awkward_n: int = 1793) -> str:
    """Three lines from a record: per headline N, the tuned pointer kernel's ratio (with its config) and the
    fast path's (TMA, persistent loop); at ``awkward_n``, the masked pointer kernel's and the padded TMA path's,
    eager and in a CUDA graph. Ratio: torch ms / gpulab ms."""
    head = _by([r for r in data["headline"] if r["dtype"] == dtype], "method", "n")
    lines = [
        f"{n}³: tuned pointer kernel {head[('gpulab pointer', n)]['ratio']:.2f} ({head[('gpulab pointer', n)]['config']}); "
        f"+ TMA and persistent loop {head[('gpulab', n)]['ratio']:.2f}"
        for n in sorted({n for m, n in head if m == "gpulab pointer"})
    ]
    awk = _by(data["awkward"], "method", "n")
    g = awk[("gpulab", awkward_n)]
    lines.append(
        f"{awkward_n}³ (odd rows): masked pointer kernel {awk[('gpulab pointer (masked)', awkward_n)]['ratio']:.2f} "
        f"eager; padded TMA {g['ratio']:.2f} eager, {g['graph_ratio']:.2f} in a CUDA graph"
    )
    return "\n".join(lines)


def cublas_rates(data: dict, dtype: str = "fp16") -> str:
    """One line: torch.matmul's (cuBLAS) TFLOP/s at each headline N in ``dtype``."""
    rates = {r["n"]: r["tflops"] for r in data["headline"] if r["method"] == "torch" and r["dtype"] == dtype}
    ns = sorted(rates)
    return f"cuBLAS {dtype}: " + ", ".join(f"{rates[n]:.0f} TFLOP/s at {n}³" for n in ns) + " (recorded headline)"


def tile_lines(data: dict) -> str:
    """Two lines: the fp32 tile study at T = 64 and 128 (registers spilled), and fp32 against cuBLAS with TF32
    and with exact IEEE inputs."""
    t = _by(data["tiles"], "dtype", "T")
    fp32 = {r["precision"]: r for r in data["fp32"] if r["method"] == "gpulab"}
    return (
        f"fp32 T = 64: {t[('fp32', 64)]['tflops']:.1f} TFLOP/s; T = 128: {t[('fp32', 128)]['tflops']:.1f} "
        f"({t[('fp32', 128)]['n_spills']} registers spilled)\n"
        f"fp32 against cuBLAS at {fp32['tf32']['n']}³: TF32 inputs {fp32['tf32']['ratio']:.2f}x, "
        f"exact IEEE inputs {fp32['ieee']['ratio']:.2f}x"
    )


def awkward_table(data: dict) -> str:
    """The awkward sizes as a table (one line per N and method, the copy left out: it has no FLOP rate and is
    part of gpulab's time): CUDA-graph us and ratio, eager us and ratio, the kernels alone (us)."""
    lines = [f"{'N':>5} {'method':24} {'graph us':>9} {'ratio':>6} {'eager us':>9} {'ratio':>6} {'kernels us':>10}"]
    for r in data["awkward"]:
        if r["method"] == COPY_METHOD:
            continue
        g = f"{r['graph_ms'] * 1e3:9.1f} {r['graph_ratio']:6.2f}" if r.get("graph_ms") else f"{'-':>9} {'-':>6}"
        k = f"{r['gpu_kernel_ms'] * 1e3:10.1f}" if r.get("gpu_kernel_ms") else ""
        lines.append(f"{r['n']:5} {r['method']:24} {g} {r['ms'] * 1e3:9.1f} {r['ratio']:6.2f} {k}".rstrip())
    return "\n".join(lines)


def graph_and_eager(data: dict) -> str:
    """Per awkward N: gpulab's ratio in a CUDA graph and eager, and eager - graph, the time per call the GPU
    waits for the CPU (us and share of the eager call)."""
    by = _by(data["awkward"], "method", "n")
    lines = []
    for n in sorted(n for m, n in by if m == "gpulab"):
        g = by[("gpulab", n)]
        cpu_us = (g["ms"] - g["graph_ms"]) * 1e3
        lines.append(
            f"{n}: gpulab {g['graph_ratio']:.2f}x cuBLAS in the graph, {g['ratio']:.2f}x eager; eager - graph = "
            f"{cpu_us:5.1f} us per call the GPU waits for the CPU ({cpu_us / (g['ms'] * 1e3):.0%} of the eager call)"
        )
    return "\n".join(lines)


def alignment_lines(data: dict) -> str:
    """Per N of the alignment study: the pointer kernel's global loads and async copies by bytes per
    instruction (from its PTX)."""
    return "\n".join(
        f"pointer kernel compiled for N = {r['n']}: global loads by bytes per instruction "
        f"{r['ld.global bytes per instruction']}, async copies to shared memory by bytes {r['cp.async bytes per instruction']}"
        for r in data["alignment"]
    )


def sweep_lines(data: dict, n: int = 1793) -> str:
    """Three lines: at ``n``, the dense sweep's ratio (eager, with the sweep's date) beside the awkward table's
    (graph and eager, with the record's date); per method, the mean rate over aligned and other N and the
    correlation with the wave model over aligned N."""
    s = data["sweep"]
    i = s["ns"].index(n)
    g = _by(data["awkward"], "method", "n")[("gpulab", n)]
    sweep_date = data.get("step_provenance", {}).get("sweep", data["provenance"]).get("date", "?")
    lines = [
        f"sweep at {n} ({sweep_timing(s).split(' (')[0]}, {sweep_date}): gpulab {s['torch_ms'][i] / s['gpulab_ms'][i]:.2f}x "
        f"cuBLAS; awkward table (graph and eager, {data['provenance']['date']}): {g['graph_ratio']:.2f}x and {g['ratio']:.2f}x"
    ]
    for method in ("torch", "gpulab"):
        sp = alignment_split(s, method)
        lines.append(
            f"{method:6}: mean {sp['aligned_mean_tflops']:6.1f} TFLOP/s where N % 8 == 0, "
            f"{sp['misaligned_mean_tflops']:6.1f} elsewhere; correlation with the wave model over aligned N: "
            f"{model_correlation(s, method):.2f}"
        )
    return "\n".join(lines)


def build_lines(data: dict) -> str:
    """The build's table from a record (at most 7 lines): per step its time (ms), its rate (TFLOP/s) and its
    model intensity (2N^3 / requested bytes, FLOP/B); the fast path and cuBLAS beside them. "" without a build."""
    rows = data.get("build") or []
    if not rows:
        return ""
    lines = [f"the build, {rows[0]['dtype']} {rows[0]['n']}^3 (model intensity = 2N^3 / requested bytes):"]
    for r in rows:
        model = f", model {r['intensity']:6.1f} FLOP/B" if "intensity" in r else ""
        lines.append(f"  {r['step']:10} {r['ms']:9.3f} ms {r['tflops']:7.1f} TFLOP/s{model}")
    return "\n".join(lines)


def wave_step(data: dict, ns=(2048, 2056)) -> list[dict]:
    """The wave step in the dense sweep: for each N of ``ns`` in the record, the tiles of the sweep's tile on its
    SMs (``waves.wave_plan``), the waves, the busy SMs of the last wave, and gpulab's and cuBLAS's measured rate
    (TFLOP/s, 2N^3 over the recorded ms). Raises KeyError when the record has no sweep."""
    s = data["sweep"]
    out = []
    for n in ns:
        if n not in s["ns"]:
            continue
        i = s["ns"].index(n)
        p = wave_plan(n, tile=tuple(s["tile"]), sms=s["sms"])
        rates = {m: tflops(n, s[f"{m}_ms"][i]) for m in ("gpulab", "torch")}
        out.append(dict(n=n, tiles=p.tiles, waves=p.waves, last_busy=p.busy_per_wave()[-1], **rates))
    return out
