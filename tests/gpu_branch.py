"""The GPU branch of a launcher that autotunes with ``gpulab.kernels._autotune``, run in the interpreter: the kernel
module reads ``gpulab.ON_GPU`` as True, the autotuner starts empty, and ``time_ms`` (which raises without a GPU)
runs each candidate once and gives it a made-up median, so that the test chooses which candidate wins."""

from __future__ import annotations

import types

import gpulab
from gpulab.core import timing
from gpulab.kernels import _autotune


def on_gpu_branch(monkeypatch, module, winner: int) -> list:
    """Make ``module``'s launchers take their GPU branch and the autotuner pick candidate ``winner`` (an index into
    the candidates timed). Returns the list into which each timed call appends 1."""
    view = types.SimpleNamespace(**{k: getattr(gpulab, k) for k in ("DEVICE", "MODE")}, ON_GPU=True)
    monkeypatch.setattr(module, "gpulab", view)
    monkeypatch.setattr(_autotune, "_CACHE", {})
    monkeypatch.setattr(_autotune, "_ORIGIN", {})
    monkeypatch.setattr(_autotune, "_TIMED", {})
    monkeypatch.setattr(module, "_LAST", [None])
    calls: list = []

    def time_ms(fn, *, warmup_ms=50, rep_ms=300, graph=False):
        fn()
        calls.append(1)
        ms = 1.0 if len(calls) - 1 == winner else 2.0
        return timing.Timing(ms, ms, ms, fake=True)

    monkeypatch.setattr(timing, "time_ms", time_ms)
    return calls
