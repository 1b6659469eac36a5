"""What a notebook shows: a suite measured now, or its recording, and the one label that says which.

A lesson's live cell is one call: ``shown = live.measure_or_recall(lesson08.KEY, lambda: lesson08.run(**LIVE))``.
On a GPU (``gpulab.core.timing.live()``) it runs the suite now and labels the result ``timing.where()`` ("measured now
on NVIDIA H200", naming the plan when GPULAB_AS_GPU chooses as another GPU); under the test clock the same path
runs on the CPU and the label is ``timing.FAKE_LABEL``; elsewhere it returns the recording of that suite in
``gpulab/data`` with ``reference.label`` ("no GPU here: recorded on NVIDIA H200 (...)"), or None with a
sentence saying that nothing is recorded yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core import reference, timing


@dataclass(frozen=True)
class Shown:
    """``data``: the suite's record (None when nothing is recorded); ``where``: the label for titles and
    reports; ``live``: True when measured now (or under the test clock)."""

    data: Any
    where: str
    live: bool

    def __iter__(self):  # measured, where = live.measure_or_recall(...)
        return iter((self.data, self.where))


def recorded(gpu: str = reference.DEFAULT_GPU) -> dict:
    """The reference file of ``gpu`` (``reference.load``), loaded once per process."""
    if gpu not in _LOADED:
        _LOADED[gpu] = reference.load(gpu)
    return _LOADED[gpu]


_LOADED: dict[str, dict] = {}


def recall(key: str | None, gpu: str = reference.DEFAULT_GPU) -> Shown:
    """The recording of suite ``key`` (None: the whole file, e.g. its ``profile``) on ``gpu``, labelled
    "no GPU here: recorded on ..." when this machine has no GPU and "recorded on ..." when it has one;
    ``data`` None with "no recording yet ..." when the file lacks ``key``."""
    rec = recorded(gpu)
    data = rec if key is None else rec.get(key)
    if data is None:
        return Shown(None, f"no recording yet for {key} (python -m gpulab.bench --only {key} --record on a GPU)", False)
    prefix = "" if timing.live() else "no GPU here: "
    return Shown(data, prefix + reference.label(rec, key), False)


def measure_or_recall(key: str | None, run: Callable[[], Any], gpu: str = reference.DEFAULT_GPU) -> Shown:
    """``run()`` now where ``timing.live()`` (a GPU, or the test clock), labelled ``timing.where()``; else
    ``recall(key, gpu)``. ``run``: a function of no arguments returning the suite's record (or any value the
    lesson draws). Exceptions of ``run`` propagate: a live cell that fails is a bug, not a reason to show old
    numbers."""
    if timing.live():
        return Shown(timing.stamp(run()), timing.where(), True)
    return recall(key, gpu)
