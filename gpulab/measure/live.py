"""What a notebook shows: a result measured now, or its recording, and the one label that says which.

Every live-or-recorded result is a ``Shown``, read by name (``shown.data``, ``shown.where``, ``shown.live``): a
lesson's live cell is one call, ``shown = live.measure_or_recall(lesson08.KEY, lambda: lesson08.run(**LIVE))``.
On a GPU (``gpulab.core.timing.live()``) it runs the suite now and labels the result ``timing.where()`` ("measured
now on NVIDIA H200", naming the plan when GPULAB_AS_GPU chooses as another GPU); under the test clock the same path
runs on the CPU and the label is ``timing.FAKE_LABEL``; elsewhere it returns the recording of that suite in
``gpulab/data`` with ``reference.label`` ("no GPU here: recorded on NVIDIA H200 (...)"), or None with a sentence
saying that nothing is recorded yet. ``profile`` does the same for the roofs a lesson's model needs: this GPU's
device profile, or the recording's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gpulab

from ..core import reference, timing
from . import device


@dataclass(frozen=True)
class Shown:
    """A result a notebook shows. ``data``: the record or value (None when nothing is recorded); ``where``: the
    label for titles and reports; ``live``: True when it comes from this machine's GPU (measured now, or this
    GPU's saved profile) or the test clock, False when it is a recording. Read by name: a ``Shown`` does not
    unpack into a tuple."""

    data: Any
    where: str
    live: bool


def recorded(gpu: str = reference.DEFAULT_GPU) -> dict:
    """The reference file of ``gpu`` (``reference.load``), loaded once per process."""
    if gpu not in _LOADED:
        _LOADED[gpu] = reference.load(gpu)
    return _LOADED[gpu]


_LOADED: dict[str, dict] = {}

MATMUL_N = 8192  # the profile's matmul size (``device.measure_profile``)
FAKE_MATMUL_N = 64  # under the test clock: the product runs once, in the interpreter's torch on the CPU


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


def profile(matmul: tuple[str, ...] | None = None, gpu: str = reference.DEFAULT_GPU) -> Shown:
    """The roofs of a lesson's model: a device profile as JSON (``gpu``, ``sms``, ``compute_capability``, ``l2_mb``,
    ``copy_tbps`` in TB/s, ``matmul_tflops`` {dtype: TFLOP/s or None}, ``provenance``).

    Where ``timing.live()``: this GPU's profile saved in the cache (notebook 00b or ``python -m gpulab.bench``
    saves it), labelled with its date and path; without one, measured now, labelled ``timing.where()``: ``matmul``
    None measures the whole profile and saves it (``device.get_profile``: the copy and five matmul rates at
    8192^3, about 10 s); a tuple of dtypes measures the copy and those matmul rates alone and saves nothing (a
    lesson that needs one roof does not time five). Under the test clock it is always measured (matmuls at
    ``FAKE_MATMUL_N``), stamped ``clock`` and never saved. Elsewhere the recording's ``profile``
    (``recall("profile", gpu)``)."""
    if not timing.live():
        return recall("profile", gpu)
    saved = None if timing.is_fake() else device.load_profile()
    if saved is not None:
        when = saved.provenance.get("date", "on an unrecorded date")
        return Shown(
            saved.to_json(), f"this GPU's profile ({saved.gpu}, measured {when}, {device.profile_path()})", True
        )
    n = FAKE_MATMUL_N if timing.is_fake() else MATMUL_N
    if matmul is None:
        measured = device.get_profile(matmul_n=n)
        kept = "" if timing.is_fake() else f"; saved at {device.profile_path()}"
        return Shown(timing.stamp(measured.to_json()), timing.where() + kept, True)
    props = device.properties()
    measured = device.DeviceProfile(
        gpu=props["name"],
        sms=props["sms"],
        compute_capability=list(props["compute_capability"]),
        l2_mb=(props["l2_bytes"] or 0) / 1e6,
        copy_tbps=device.measure_copy_tbps(),
        matmul_tflops={d: device.measure_matmul_tflops(d, n) for d in matmul},
        provenance=device.provenance(),
    )
    alone = "the copy" + "".join(f", the {d} matmul" for d in matmul)
    return Shown(timing.stamp(measured.to_json()), f"{timing.where()} ({alone} alone, unsaved)", True)


def computed_here() -> str:
    """The label of a result computed (not timed) on this machine now: "computed now on the GPU" where kernels run
    on one, "computed now in Triton's interpreter on the CPU" elsewhere (the test clock times nothing it computes)."""
    return "computed now on the GPU" if gpulab.ON_GPU else "computed now in Triton's interpreter on the CPU"
