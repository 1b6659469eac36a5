"""Launch plans cached per call shape: the host work a launcher would otherwise redo on every eager call.

A small problem called eagerly is bound by the CPU: at an awkward size the fast matmul chooses its config, checks
alignments, allocates row-padded scratch buffers and builds TMA descriptors before its kernels run, and the GPU
waits for that (``tools/launch_overhead.py`` measures how long). None of it changes between two calls of one
shape, so a launcher builds it once into a *plan* and keeps the plan here, under a key. The rules, for every
launcher that keeps plans in a ``PlanCache``:

1. The key holds everything that changes the launch: shapes, strides, dtypes, data-pointer alignment (mod 16),
   device, the current stream and thread, the GPU plan, the autotune mode, and the arguments that choose the
   path and config. Two calls under one key launch the same kernels, with the same config, into the same scratch
   buffers. Scratch reuse needs nothing more: calls on one stream run in order, and one thread at a time
   enqueues onto a stream (the thread is in the key).
2. Bounded: at most ``max_entries`` plans, the least recently used dropped first, holding at most
   ``max_scratch_bytes`` of scratch buffers in all; a plan whose scratch alone is larger is used once, not kept.
3. Nothing during CUDA graph capture (``capturing()``): a graph keeps the addresses of the buffers it was
   captured with, so a cached buffer that a later eager call overwrites, or that the cache drops and frees,
   would change the graph's replays. Under capture every call builds a fresh plan and the cache is not read.
4. Scratch is scratch: a launcher copies its results out of a plan's buffers and never returns a view of one.

A plan is any object with a ``scratch_bytes`` attribute (bytes of the buffers it holds).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import torch

import gpulab

MAX_ENTRIES = 32
MAX_SCRATCH_BYTES = 512 * 2**20


def capturing() -> bool:
    """True while the current CUDA stream captures a graph (always False in the interpreter)."""
    return gpulab.ON_GPU and torch.cuda.is_current_stream_capturing()


def launch_context(device: torch.device) -> tuple:
    """The part of a key that is not in the arguments: (current stream of ``device``, thread). The stream is
    None off CUDA devices."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None
    return stream, threading.get_ident()


class PlanCache:
    """Plans under keys, least recently used first out; see the module docstring for the rules.

    ``get(key, build, valid)`` returns the plan kept under ``key`` when ``valid(plan)`` holds, else
    ``build()`` (kept when the bounds allow). ``hits`` and ``misses`` count the lookups; ``enabled = False``
    (or ``with cache.disabled():``) builds every plan afresh, the launcher as it is without a cache."""

    def __init__(self, name: str, max_entries: int = MAX_ENTRIES, max_scratch_bytes: int = MAX_SCRATCH_BYTES):
        self.name = name
        self.max_entries = max_entries
        self.max_scratch_bytes = max_scratch_bytes
        self.enabled = True
        self.hits = self.misses = 0
        self._plans: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable, valid: Callable = lambda plan: True):
        if not self.enabled or capturing():
            return build()
        with self._lock:  # threads have their own keys, but share the dict
            plan = self._plans.get(key)
            if plan is not None and valid(plan):
                self._plans.move_to_end(key)
                self.hits += 1
                return plan
            self.misses += 1
            self._plans.pop(key, None)  # a stale plan's scratch goes before the new plan's is counted
        plan = build()  # outside the lock: it may autotune for seconds
        if plan.scratch_bytes <= self.max_scratch_bytes:
            with self._lock:
                while self._plans and (
                    len(self._plans) >= self.max_entries
                    or self.scratch_bytes + plan.scratch_bytes > self.max_scratch_bytes
                ):
                    self._plans.popitem(last=False)
                self._plans[key] = plan
        return plan

    @property
    def scratch_bytes(self) -> int:
        """Bytes of scratch buffers the kept plans hold."""
        return sum(p.scratch_bytes for p in self._plans.values())

    def __len__(self) -> int:
        return len(self._plans)

    def plans(self) -> list:
        """The kept plans, least recently used first."""
        return list(self._plans.values())

    def clear(self) -> None:
        """Drop every plan (and its scratch buffers) and zero the counters."""
        self._plans.clear()
        self.hits = self.misses = 0

    @contextlib.contextmanager
    def disabled(self):
        """Inside: every call builds its plan afresh and nothing is kept or read."""
        before = self.enabled
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = before
