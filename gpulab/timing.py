"""Honest GPU timing: ``time_ms``, ``capture_graph``, ``require_gpu`` and ``NoGPUTimingError``.

On a GPU, ``time_ms`` wraps ``triton.testing.do_bench``: it warms up, then times many launches with CUDA
events and returns the median and the 20th/80th percentiles. Before every timed launch do_bench zeroes a
buffer larger than the L2 cache, so each launch reads its inputs from HBM, not from a warm L2
(METHOD.md: "if the inputs fit in the cache, repeated runs over one buffer measure the cache").

In Triton's interpreter there is no GPU to time: ``time_ms`` raises ``NoGPUTimingError`` rather than
return a CPU wall-clock time that could be mistaken for a GPU measurement. Lessons show recorded
reference data instead (``gpulab.reference``), labelled with the GPU it came from.

This module is the bottom of the measuring layer: kernels (autotuners), the device profile and the
benchmark suites import it; it imports nothing of gpulab's but the mode.
"""

from __future__ import annotations

import gc
from dataclasses import asdict, dataclass

import gpulab


class NoGPUTimingError(RuntimeError):
    """Raised when asked for a GPU timing in interpreter mode."""


@dataclass(frozen=True)
class Timing:
    """A GPU timing in milliseconds: median and the 20th/80th percentiles of many launches."""

    median_ms: float
    p20_ms: float
    p80_ms: float

    def rate(self, amount: float, unit: float = 1e12) -> float:
        """``amount`` per second at the median time, divided by ``unit`` (1e12: TFLOP/s or TB/s)."""
        return amount / (self.median_ms * 1e-3) / unit

    def asdict(self) -> dict:
        return asdict(self)


def require_gpu(what: str = "a GPU timing") -> None:
    """Raise ``NoGPUTimingError`` unless gpulab runs on a GPU."""
    if not gpulab.ON_GPU:
        raise NoGPUTimingError(
            f"{what} needs a CUDA GPU; gpulab is in {gpulab.MODE} mode ({gpulab.mode_info.reason}). "
            "Interpreter runs are not GPU measurements: use gpulab.reference for recorded data."
        )


def time_ms(fn, *, warmup_ms: float = 50, rep_ms: float = 300, graph: bool = False) -> Timing:
    """Time ``fn()`` on the GPU with ``triton.testing.do_bench``; returns a ``Timing`` in ms.

    ``warmup_ms`` and ``rep_ms`` are do_bench's warm-up and repeat budgets in milliseconds. Python's garbage
    collector is paused while timing (as ``timeit`` does). ``graph=True`` first captures one call of ``fn`` in a CUDA graph (``torch.cuda.CUDAGraph``, after one
    eager call that compiles and autotunes) and times the graph's replay instead: the same kernels on the
    GPU, with one cheap launch from the CPU in place of the Python wrapper and each kernel's launch. Use it to
    measure what the GPU does when the CPU would otherwise be the bottleneck (a few-microsecond kernel behind
    tens of microseconds of Python; CUDA C++ Programming Guide, "CUDA Graphs"). ``fn`` must be capturable: no
    host synchronization, no new shapes. Raises ``NoGPUTimingError`` in interpreter mode.
    """
    require_gpu()
    from triton.testing import do_bench

    if graph:
        fn = capture_graph(fn).replay
    # Python's garbage collector off while timing, as timeit does: a collection pass over a large heap (a long
    # suite holds many objects) would otherwise land inside some launches and slow the CPU side of the timing.
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        med, p20, p80 = do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.2, 0.8])
    finally:
        if was_enabled:
            gc.enable()
    return Timing(float(med), float(p20), float(p80))


def capture_graph(fn):
    """A ``torch.cuda.CUDAGraph`` holding one call of ``fn`` (GPU only): ``fn`` runs once eagerly on a side
    stream (compiling, autotuning, warming the allocator, as torch's CUDA-graph notes advise), then once
    under capture. ``graph.replay()`` repeats the captured kernels on the same buffers. Raises
    ``NoGPUTimingError`` in interpreter mode."""
    require_gpu("a CUDA graph")
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph
