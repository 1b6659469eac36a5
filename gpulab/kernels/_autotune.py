"""One autotuner for the fast kernels (``matmul``, ``flash_attention``): a cache keyed on the problem, filled by
timing every candidate config once.

``pick(key, candidates, make_run)`` returns the config cached under ``key``; on a miss it

- takes ``candidates[0]`` untimed when ``GPULAB_AUTOTUNE=first`` (``gpulab.settings.SETTINGS.autotune``);
- otherwise calls ``fastest(candidates, make_run())`` and caches what it returns;
- inside ``untimed()``, takes ``candidates[0]`` and caches nothing: a correctness check holds for every candidate
  (autotuning chooses for speed), so it need not pay for timing them, nor leave its choice to later launches.

``fastest`` follows two rules:

1. Skip what cannot launch. Each candidate is launched once first (this compiles it); one that raises (too
   much shared memory, an option this GPU or Triton lacks) is no candidate.
2. One clock for every candidate. Candidates are timed by CUDA-graph replay (``gpulab.timing.time_ms(graph=True)``):
   a config changes only the GPU's time, and an eager call of a small problem is bound by the CPU's Python
   and launch cost, so eager timings would rank configs by CPU noise (``tools/launch_overhead.py --configs``
   shows both costs; lesson 07's awkward sizes in ``gpulab/data`` record eager against graph times). If the
   capture of any candidate fails, every candidate is timed eagerly instead, so that one ranking never mixes
   the two clocks.

GPU only when timing (``time_ms`` raises ``NoGPUTimingError`` in the interpreter); launchers take a fixed
config there and never call ``pick``. The idea is Triton's ``triton.autotune`` (a benchmark per key, the best
config cached); this module adds the graph clock and one cache that reports can read (``chosen``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Hashable, Sequence

from .. import settings, timing

_CACHE: dict = {}  # key (a tuple whose first item names the kernel) -> the chosen config
_UNTIMED = [False]  # inside untimed()


def fastest(candidates: Sequence, run: Callable, *, warmup_ms: float = 10, rep_ms: float = 40, what: str = "config"):
    """The candidate whose ``run(candidate)`` takes the least GPU time (median ms of ``time_ms``), under the
    two rules of the module docstring. ``run`` launches one candidate once. Raises ``RuntimeError`` ("no
    {what} could run") when no candidate launches, ``NoGPUTimingError`` in the interpreter."""
    runnable = []
    for cfg in candidates:
        fn = functools.partial(run, cfg)
        try:
            fn()
        except Exception:  # noqa: BLE001  (a config this GPU or Triton cannot run is not a candidate)
            continue
        runnable.append((cfg, fn))
    if not runnable:
        raise RuntimeError(f"no {what} could run")
    try:  # one clock for all: graph replay, or eager for every candidate if any capture fails
        times = [timing.time_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, graph=True).median_ms for _, fn in runnable]
    except Exception:  # noqa: BLE001  (no CUDA graph here: eager timing still ranks GPU-bound sizes)
        times = [timing.time_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms).median_ms for _, fn in runnable]
    return runnable[min(range(len(times)), key=times.__getitem__)][0]


def pick(
    key: Hashable, candidates: Sequence, make_run: Callable[[], Callable], *, rep_ms: float = 40, what: str = "config"
):
    """The config cached under ``key`` (a tuple whose first item names the kernel, then whatever decides the
    best config: dtype, size buckets, flags). On a miss: ``candidates[0]`` untimed when
    ``SETTINGS.autotune == "first"``, else ``fastest(candidates, make_run(), ...)``. ``make_run()`` is called
    only when timing; it returns ``run(config)``, which launches one candidate (on scratch outputs, so the
    caller's buffers are untouched)."""
    if key not in _CACHE:
        if not candidates:
            raise ValueError(f"no candidate configs for {key!r}")
        if _UNTIMED[0]:
            return candidates[0]
        if settings.SETTINGS.autotune == "first":
            _CACHE[key] = candidates[0]
        else:
            _CACHE[key] = fastest(candidates, make_run(), rep_ms=rep_ms, what=what)
    return _CACHE[key]


@contextlib.contextmanager
def untimed():
    """Inside: a launch whose key is not cached takes ``candidates[0]`` untimed and caches nothing (see the module
    docstring); cached choices still apply."""
    before = _UNTIMED[0]
    _UNTIMED[0] = True
    try:
        yield
    finally:
        _UNTIMED[0] = before


def cached(key: Hashable):
    """The config cached under ``key``, or None if that key was never tuned."""
    return _CACHE.get(key)


def chosen(kernel: str) -> dict:
    """What autotuning chose so far for one kernel: ``{key without its first item: config}``."""
    return {k[1:]: v for k, v in _CACHE.items() if k[0] == kernel}


def clear() -> None:
    """Forget every choice (the next launch of each key tunes again)."""
    _CACHE.clear()
