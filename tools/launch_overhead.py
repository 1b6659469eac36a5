"""Where the CPU time of one call goes: gpulab's matmul at an awkward size and its FlashAttention forward.

    python tools/launch_overhead.py [--calls 300] [--profile] [--configs]

For each callable: CPU microseconds per call (``calls`` back-to-back calls without synchronizing, after a
warm-up: while the GPU keeps up, this is the Python and launch cost), GPU milliseconds per call replayed from
a CUDA graph (``time_ms(graph=True)``) and eager (``time_ms``). With ``--profile``, the top functions of a
cProfile of gpulab's calls. With ``--configs``, only gpulab's matmul at 1793 once per TMA candidate config (how
much a config changes CPU and GPU time) and its row-pad copy against an allocation. GPU only. Everything timed
is a public gpulab function (``matmul``, ``pad_rows_many``, ``launch``, ``flash_attention``) or torch's.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from gpulab.timing import require_gpu, time_ms  # noqa: E402


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


def profile(name: str, fn, calls: int, top: int = 22) -> None:
    """Print the ``top`` functions by own time of a cProfile of ``calls`` calls of ``fn``."""
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn()
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    print(f"==== cProfile of {calls} calls: {name}\n{s.getvalue()}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument(
        "--configs",
        action="store_true",
        help="only gpulab's matmul at 1793, once per TMA candidate config, and its row-pad copy",
    )
    args = ap.parse_args(argv)
    require_gpu("launch overhead")
    from gpulab.kernels import matmul as mm

    n = 1793
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ap_, bp_ = mm.pad_rows(a), mm.pad_rows(b)
    if args.configs:
        for cfg in mm.CONFIGS["tma"]:
            fn = functools.partial(mm.matmul, a, b, config=cfg)
            fn()
            row(f"matmul 1793 {mm.config_label(cfg)}", fn, args.calls)
        fns = {
            "pad_rows_many([a, b]) 1793": lambda: mm.pad_rows_many([a, b]),
            "torch.empty(n, n)": lambda: torch.empty(n, n, device="cuda", dtype=torch.bfloat16),
        }
        for name, fn in fns.items():
            row(name, fn, args.calls, graph=False)
        if args.profile:
            profile("matmul 1793", functools.partial(mm.matmul, a, b, config=mm.CONFIGS["tma"][0]), args.calls, 18)
            profile("pad_rows_many", fns["pad_rows_many([a, b]) 1793"], args.calls, 18)
        return 0

    from gpulab.bench.lesson08 import sdpa_fn
    from gpulab.kernels import flash_attention as F

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
        row(name, fn, args.calls)
    if args.profile:
        for name in ("gpulab matmul 1793", "gpulab flash_attention (grad)"):
            profile(name, fns[name], args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
