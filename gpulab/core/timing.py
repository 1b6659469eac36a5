"""Honest GPU timing: ``time_ms``, ``capture_graph``, ``require_gpu``, ``NoGPUTimingError``, and the labelled
test clock that lets every GPU-only path run on a CPU.

On a GPU, ``time_ms`` wraps ``triton.testing.do_bench``: it warms up, then times many launches with CUDA
events and returns the median and the 20th/80th percentiles. Before every timed launch do_bench zeroes a
buffer larger than the L2 cache, so each launch reads its inputs from HBM, not from a warm L2: when the inputs
fit in the cache, repeated runs over one buffer measure the cache.

In Triton's interpreter there is no GPU to time: ``time_ms`` raises ``NoGPUTimingError`` rather than
return a CPU wall-clock time that could be mistaken for a GPU measurement. Lessons show recorded
reference data instead (``gpulab.core.reference``), labelled with the GPU it came from.

The test clock (``test_clock()``, for tests only): inside it the GPU-only paths of the suites and the
notebooks' live branches run on the CPU, kernels in the interpreter, so CI executes them. ``require_gpu`` passes,
``time_ms`` calls ``fn`` once and returns a ``Timing`` with ``fake=True``, ``capture_graph`` returns a stand-in
whose ``replay`` calls ``fn``, and the memory meters return 0. Every label built by ``where()`` says
``FAKE_LABEL``; ``python -m gpulab.bench --record`` refuses fake data; the clock refuses to start inside a
Jupyter kernel or on a GPU, so a learner never sees a fake number.

This module is the bottom of the measuring layer: kernels (autotuners), the device profile and the
benchmark suites import it; it imports nothing of gpulab's but the mode.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from dataclasses import asdict, dataclass

import gpulab

#: What every label and record made under the test clock says (``where``, ``stamp``).
FAKE_LABEL = "FAKE test clock (gpulab.core.timing.test_clock): not a measurement"


class NoGPUTimingError(RuntimeError):
    """Raised when asked for a GPU timing in interpreter mode."""


@dataclass(frozen=True)
class Timing:
    """A GPU timing in milliseconds: median and the 20th/80th percentiles of many launches."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    fake: bool = False  # made by the test clock: never a GPU time

    def rate(self, amount: float, unit: float = 1e12) -> float:
        """``amount`` per second at the median time, divided by ``unit`` (1e12: TFLOP/s or TB/s)."""
        return amount / (self.median_ms * 1e-3) / unit

    def asdict(self) -> dict:
        d = asdict(self)
        if not self.fake:
            d.pop("fake")
        return d


class _TestClock:
    def __init__(self, ms: float):
        self.ms = ms
        self.calls = 0


_CLOCK: _TestClock | None = None


def _in_jupyter_kernel() -> bool:
    shell = sys.modules.get("IPython") and getattr(sys.modules["IPython"], "get_ipython", lambda: None)()
    return shell is not None and type(shell).__name__ != "TerminalInteractiveShell"


@contextlib.contextmanager
def test_clock(ms: float = 1.0):
    """Tests only: run GPU-only code on the CPU (see the module docstring). ``ms``: the fake median of every
    ``time_ms`` (a positive float). Yields the clock; ``clock.calls`` counts the timed calls. Raises RuntimeError
    on a GPU (there the real paths run), inside a Jupyter kernel (a notebook must never show a fake number), or
    when already inside a test clock; ValueError for a non-positive ``ms``."""
    global _CLOCK
    if gpulab.ON_GPU:
        raise RuntimeError("test_clock: gpulab runs on a GPU here; the real clock runs the GPU paths")
    if _in_jupyter_kernel():
        raise RuntimeError("test_clock is for tests: a notebook shows measurements or recordings, never fake times")
    if _CLOCK is not None:
        raise RuntimeError("test_clock: already inside a test clock")
    if not ms > 0:
        raise ValueError(f"ms must be a positive number of milliseconds, got {ms!r}")
    _CLOCK = _TestClock(float(ms))
    try:
        yield _CLOCK
    finally:
        _CLOCK = None


test_clock.__test__ = False  # a context manager, not a test, wherever a test module imports it


def is_fake() -> bool:
    """True inside ``test_clock()``."""
    return _CLOCK is not None


def live() -> bool:
    """True where the GPU-only paths run: on a GPU, or under the test clock."""
    return gpulab.ON_GPU or is_fake()


def device() -> str:
    """The torch device the GPU-only paths allocate on: "cuda" on a GPU, gpulab.DEVICE under the test clock."""
    return "cuda" if gpulab.ON_GPU else gpulab.DEVICE


def where() -> str:
    """The label of a number measured now: "measured now on NVIDIA H200", with the plan when GPULAB_AS_GPU
    chooses as another GPU ("..., choosing as a T4 would"); ``FAKE_LABEL`` under the test clock. A measured
    point is drawn against the GPU that measured it; the plan only chooses dtypes, paths and sizes."""
    if is_fake():
        return FAKE_LABEL
    require_gpu("a live label")
    import torch

    from . import plan

    name = torch.cuda.get_device_name(0)
    planned = plan.current().gpu.name
    return f"measured now on {name}" + ("" if planned.lower() in name.lower() else f", choosing as a {planned} would")


def stamp(data):
    """``data`` (a suite's record, a dict) with ``clock``: ``FAKE_LABEL`` added under the test clock; else
    unchanged. The CLI's ``--record`` refuses a record that carries it."""
    if is_fake() and isinstance(data, dict):
        data = {**data, "clock": FAKE_LABEL}
    return data


def is_fake_record(data) -> bool:
    """True if ``data`` (a record, or a dict of records) was made under the test clock."""
    if not isinstance(data, dict):
        return False
    return data.get("clock") == FAKE_LABEL or any(is_fake_record(v) for v in data.values() if isinstance(v, dict))


def synchronize() -> None:
    """``torch.cuda.synchronize()`` on a GPU; nothing under the test clock (the interpreter is synchronous)."""
    if gpulab.ON_GPU:
        import torch

        torch.cuda.synchronize()


def empty_cache() -> None:
    """``torch.cuda.empty_cache()`` on a GPU; nothing elsewhere."""
    if gpulab.ON_GPU:
        import torch

        torch.cuda.empty_cache()


def reset_peak_memory() -> None:
    """``torch.cuda.reset_peak_memory_stats()`` on a GPU; nothing under the test clock."""
    if gpulab.ON_GPU:
        import torch

        torch.cuda.reset_peak_memory_stats()


def memory_allocated() -> int:
    """Bytes the caching allocator holds for tensors now (``torch.cuda.memory_allocated``); 0 under the test
    clock, which has no device memory to read."""
    require_gpu("a memory reading")
    if not gpulab.ON_GPU:
        return 0
    import torch

    return torch.cuda.memory_allocated()


def max_memory_allocated() -> int:
    """Peak bytes since ``reset_peak_memory`` (``torch.cuda.max_memory_allocated``); 0 under the test clock."""
    require_gpu("a memory reading")
    if not gpulab.ON_GPU:
        return 0
    import torch

    return torch.cuda.max_memory_allocated()


def require_gpu(what: str = "a GPU timing") -> None:
    """Raise ``NoGPUTimingError`` unless gpulab runs on a GPU or under the test clock."""
    if not live():
        raise NoGPUTimingError(
            f"{what} needs a CUDA GPU; gpulab is in {gpulab.MODE} mode ({gpulab.mode_info.reason}). "
            "Interpreter runs are not GPU measurements: use gpulab.core.reference for recorded data."
        )


def time_ms(fn, *, warmup_ms: float = 50, rep_ms: float = 300, graph: bool = False) -> Timing:
    """Time ``fn()`` on the GPU with ``triton.testing.do_bench``; returns a ``Timing`` in ms.

    ``warmup_ms`` and ``rep_ms`` are do_bench's warm-up and repeat budgets in milliseconds. Python's garbage
    collector is paused while timing (as ``timeit`` does). ``graph=True`` first captures one call of ``fn`` in a CUDA graph (``torch.cuda.CUDAGraph``, after one
    eager call that compiles and autotunes) and times the graph's replay instead: the same kernels on the
    GPU, with one cheap launch from the CPU in place of the Python wrapper and each kernel's launch. Use it to
    measure what the GPU does when the CPU would otherwise be the bottleneck (a few-microsecond kernel behind
    tens of microseconds of Python; CUDA C++ Programming Guide, "CUDA Graphs"). ``fn`` must be capturable: no
    host synchronization, no new shapes. Raises ``NoGPUTimingError`` in interpreter mode. Under the test clock
    ``fn`` runs once and the result is the clock's fake ``Timing``.
    """
    require_gpu()
    if _CLOCK is not None:
        fn()
        _CLOCK.calls += 1
        return Timing(_CLOCK.ms, _CLOCK.ms, _CLOCK.ms, fake=True)
    from triton.testing import do_bench

    if graph:
        fn = capture_graph(fn).replay
    # Python's garbage collector off while timing, as timeit does: a collection pass over a large heap (a long
    # suite holds many objects) would otherwise land inside some launches and slow the CPU side of the timing.
    # Before it, the young generations are collected (the cycles made since the last collection); a full collection
    # of a notebook kernel's heap (torch, plotly, inductor loaded) takes 0.1 to 0.5 s, which every call would pay.
    gc.collect(1)
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
    ``NoGPUTimingError`` in interpreter mode; under the test clock, a stand-in whose ``replay()`` calls ``fn``."""
    require_gpu("a CUDA graph")
    if _CLOCK is not None:
        fn()
        return _GraphStandIn(fn)
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


@dataclass(frozen=True)
class _GraphStandIn:
    """The test clock's CUDA graph: ``replay`` calls the function again."""

    fn: object

    def replay(self):
        return self.fn()
