"""Where the CPU time of an eager call goes: gpulab's bf16 matmul against torch's, N from 1024 to 4352.

    python tools/launch_overhead.py [--sizes 1024,1793,...] [--calls 100] [--profile-n 1793]   # GPU
    python tools/launch_overhead.py --stub [--no-cache]                                        # CPU
    python tools/launch_overhead.py --configs [--profile] | --flash [--profile]                # GPU

On a GPU, for each square bf16 size N: gpulab's and torch's eager time per call (``time_ms``, which is the
larger of the CPU's and the GPU's time when calls follow each other, as a learner calls them), and gpulab's host
time per call: ``calls`` calls enqueued behind a long ``torch.cuda._sleep`` kernel, so the GPU does none of their
work while the CPU's clock runs (a line says so if the GPU went idle before the last call). Then a cProfile top
of ``--profile-n``'s calls. ``GPULAB_AUTOTUNE=first`` skips the autotuning of each new size.

``--stub`` (no GPU needed: the interpreter's mode): the same sizes with every Triton launch the matmul makes
(``matmul_kernel``, ``matmul_tma_kernel``, ``pad.pad_rows_kernel``) replaced by a no-op, so what is timed is
gpulab's Python host path alone, the one that caches per call shape (``matmul.PLANS``); ``--no-cache`` times it
with the cache disabled. In the interpreter a config is the fixed ``INTERPRETER_CONFIG``, so the GPU's autotuner
lookup and the cost of Triton's own launches are not in these numbers; compare before and after, not with a GPU.

``--configs``: gpulab's matmul at 1793 once per TMA candidate config and its row-pad copy against an allocation.
``--flash``: the pieces of a 1793 call, and FlashAttention's forward beside SDPA's. Both GPU only. Everything
timed is a public gpulab function or torch's.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import gpulab  # noqa: E402
from gpulab.core.timing import require_gpu, time_ms  # noqa: E402

SIZES = (1024, 1793, 2048, 2049, 3072, 4096, 4097, 4352)
SLEEP_CYCLES = 400_000_000  # about 0.2 s at 2 GHz: longer than ``calls`` host paths, so none of them waits


def cpu_us(fn, calls: int) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def host_us(fn, calls: int) -> tuple[float, bool]:
    """(CPU us per call of ``fn`` while the GPU is busy with an earlier kernel, whether it stayed busy to the
    end). ``calls`` must be small enough for their launches to fit CUDA's launch queue (about 1000)."""
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    busy = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6, busy


def eager_us(fn) -> float:
    return time_ms(fn, warmup_ms=25, rep_ms=100).median_ms * 1e3


def profile(name: str, fn, calls: int, top: int = 15) -> None:
    """Print the ``top`` functions by own time of a cProfile of ``calls`` calls of ``fn``."""
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn()
    pr.disable()
    if gpulab.ON_GPU:
        torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    print(f"==== cProfile of {calls} calls: {name}\n{s.getvalue()}")


def sweep(sizes, calls: int, profile_n: int) -> None:
    """GPU: eager us per call of gpulab and torch, gpulab's host us per call, per square bf16 size."""
    from gpulab.kernels import matmul as mm

    print(f"{'N':>5} {'gpulab eager us':>16} {'torch eager us':>15} {'ratio':>6} {'gpulab host us':>15}")
    for n in sizes:
        a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        ours, theirs = (lambda: mm.matmul(a, b)), (lambda: torch.matmul(a, b))
        ours()  # autotune and compile outside the clocks
        g, t = eager_us(ours), eager_us(theirs)
        h, busy = host_us(ours, calls)
        note = "" if busy else "  (the GPU went idle: host time includes waiting)"
        print(f"{n:5d} {g:16.1f} {t:15.1f} {t / g:6.2f} {h:15.1f}{note}", flush=True)
    print(f"kept launch plans: {len(mm.PLANS)}, hits {mm.PLANS.hits}, misses {mm.PLANS.misses}")
    a, b = (torch.randn(profile_n, profile_n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    profile(f"gpulab matmul {profile_n}", lambda: mm.matmul(a, b), calls)


class _NoLaunch:
    """Stands in for a ``@triton.jit`` kernel: ``kernel[grid](...)`` does nothing."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def stub(sizes, calls: int, use_cache: bool, profile_n: int) -> None:
    """CPU: us per call of gpulab's matmul host path (TMA and pointer) with no kernel launched."""
    from gpulab.kernels import matmul as mm
    from gpulab.kernels import pad

    if gpulab.ON_GPU:
        raise SystemExit("--stub measures the host path in the interpreter: run it with GPULAB_MODE=interpreter")
    for module, name in ((mm, "matmul_kernel"), (mm, "matmul_tma_kernel"), (pad, "pad_rows_kernel")):
        setattr(module, name, _NoLaunch())
    plans = getattr(mm, "PLANS", None)  # None: a tree from before the cache (for before/after numbers)
    if not use_cache and plans is None:
        raise SystemExit("--no-cache: this tree has no matmul.PLANS")
    off = plans.disabled() if not use_cache else contextlib.nullcontext()
    cache = "cache on" if plans is not None and use_cache else "no cache"
    print(f"host path, no kernel launched ({cache}), bf16, us/call")
    print(f"{'N':>5} {'tma':>8} {'pointer':>8}")
    with off:
        for n in sizes:
            a, b = (torch.randn(n, n).to(torch.bfloat16) for _ in range(2))
            us = []
            for path in ("tma", "pointer"):
                fn = functools.partial(mm.matmul, a, b, path=path)
                best = float("inf")
                for _ in range(5):  # the best of five runs: the least disturbed
                    fn()
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        fn()
                    best = min(best, (time.perf_counter() - t0) / calls * 1e6)
                us.append(best)
            print(f"{n:5d} {us[0]:8.1f} {us[1]:8.1f}", flush=True)
        a, b = (torch.randn(profile_n, profile_n).to(torch.bfloat16) for _ in range(2))
        profile(f"gpulab matmul {profile_n} tma (stub)", functools.partial(mm.matmul, a, b, path="tma"), calls)


def row(name: str, fn, calls: int, graph: bool = True) -> None:
    """Print CPU us per call, eager and (with ``graph``) CUDA-graph GPU time of ``fn``."""
    cpu = cpu_us(fn, calls)
    te = time_ms(fn, warmup_ms=25, rep_ms=100).median_ms
    g = ""
    if graph:
        try:
            g = f"   graph {time_ms(fn, warmup_ms=25, rep_ms=100, graph=True).median_ms * 1e3:8.1f} us"
        except Exception as e:  # noqa: BLE001
            print(f"  graph capture failed for {name}: {e!r}"[:200])
            g = f"   graph {float('nan'):8.1f} us"
    print(f"{name:40} CPU {cpu:8.1f} us/call   eager {te * 1e3:8.1f} us{g}", flush=True)


def configs(calls: int, with_profile: bool) -> None:
    """GPU: gpulab's matmul at 1793 once per TMA candidate config; its row-pad copy against an allocation."""
    from gpulab.kernels import matmul as mm

    n = 1793
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for cfg in mm.CONFIGS["tma"]:
        fn = functools.partial(mm.matmul, a, b, config=cfg)
        fn()
        row(f"matmul 1793 {mm.config_label(cfg)}", fn, calls)
    fns = {
        "pad_rows_many([a, b]) 1793": lambda: mm.pad_rows_many([a, b]),
        "torch.empty(n, n)": lambda: torch.empty(n, n, device="cuda", dtype=torch.bfloat16),
    }
    for name, fn in fns.items():
        row(name, fn, calls, graph=False)
    if with_profile:
        profile("matmul 1793", functools.partial(mm.matmul, a, b, config=mm.CONFIGS["tma"][0]), calls, 18)
        profile("pad_rows_many", fns["pad_rows_many([a, b]) 1793"], calls, 18)


def flash(calls: int, with_profile: bool) -> None:
    """GPU: the pieces of a 1793 matmul call, and FlashAttention's forward beside SDPA's flash backend."""
    from gpulab.bench.lesson08 import sdpa_fn
    from gpulab.kernels import flash_attention as F
    from gpulab.kernels import matmul as mm

    n = 1793
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ap_, bp_ = mm.pad_rows(a), mm.pad_rows(b)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    mm.matmul(a, b)
    cfg = mm.tuned_config(a, b, "tma")
    q, k, v = (
        torch.randn(16, 16, 1024, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3)
    )
    qd, kd, vd = (t.detach() for t in (q, k, v))
    sdpa = sdpa_fn("FLASH_ATTENTION", True)
    fns = {
        "torch.matmul 1793": lambda: torch.matmul(a, b),
        "gpulab matmul 1793": lambda: mm.matmul(a, b),
        "  pad_rows(a)": lambda: mm.pad_rows(a),
        "  launch tma on padded A, B": lambda: mm.launch(ap_, bp_, c, cfg, "tma"),
        "  torch.empty(n, n)": lambda: torch.empty(n, n, device="cuda", dtype=torch.bfloat16),
        "sdpa flash fwd d128 L1k causal (grad)": lambda: sdpa(q, k, v),
        "gpulab flash_attention (grad)": lambda: F.flash_attention(q, k, v, True),
        "gpulab flash_attention_forward": lambda: F.flash_attention_forward(qd, kd, vd, True),
    }
    for name, fn in fns.items():
        row(name, fn, calls)
    if with_profile:
        for name in ("gpulab matmul 1793", "gpulab flash_attention (grad)"):
            profile(name, fns[name], calls)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="square sizes N, comma-separated")
    ap.add_argument("--calls", type=int, default=None, help="calls per measurement (GPU: 100, --stub: 500)")
    ap.add_argument("--profile-n", type=int, default=1793, help="the size whose calls cProfile shows")
    ap.add_argument("--stub", action="store_true", help="CPU: the host path with every kernel launch a no-op")
    ap.add_argument("--no-cache", action="store_true", help="with --stub: the launch-plan cache disabled")
    ap.add_argument("--configs", action="store_true", help="GPU: matmul 1793 per TMA candidate config")
    ap.add_argument("--flash", action="store_true", help="GPU: the pieces of a 1793 call, FlashAttention")
    ap.add_argument("--profile", action="store_true", help="with --configs or --flash: cProfile tops")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.stub:
        stub(sizes, args.calls or 500, not args.no_cache, args.profile_n)
        return 0
    require_gpu("launch overhead")
    calls = args.calls or 100
    if args.configs:
        configs(calls, args.profile)
    elif args.flash:
        flash(calls, args.profile)
    else:
        sweep(sizes, calls, args.profile_n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
