"""Reference measurements recorded on real GPUs, shipped in ``gpulab/data/``.

In interpreter mode nothing can be timed, so lessons draw their timing plots from these files and say so
in the plot title. Each file holds the provenance of its run (GPU, driver, CUDA, torch and Triton
versions, date), the device profile and the records of the benchmark suite. ``python -m gpulab.bench
--record`` on a GPU writes a new one.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[1] / "data"  # gpulab/data
DEFAULT_GPU = "h200"


def path_for(gpu: str = DEFAULT_GPU) -> Path:
    """The reference file for ``gpu`` (a short name such as ``"h200"``)."""
    return DATA_DIR / f"reference-{gpu.lower()}.json"


def available() -> list[str]:
    """Short names of the GPUs with recorded reference data."""
    return sorted(p.stem.removeprefix("reference-") for p in DATA_DIR.glob("reference-*.json"))


def load(gpu: str = DEFAULT_GPU) -> dict:
    """Load the reference data for ``gpu``: a dict (the file's JSON object).

    Raises ``FileNotFoundError`` naming the GPUs available; ``ValueError`` naming the file when it is not JSON (a
    truncated write) or not a JSON object."""
    p = path_for(gpu)
    if not p.exists():
        raise FileNotFoundError(f"no reference data for {gpu!r} at {p}; available: {available()}")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{p} is not valid JSON ({e}); restore it (git checkout) or record it again on a GPU") from e
    if not isinstance(data, dict):
        raise ValueError(f"{p} must hold a JSON object, got {type(data).__name__}; restore it or record it again")
    return data


def sass(target: str = "sm90") -> dict:
    """The instructions counted in lesson 04's compiled kernels for ``target`` (``gpulab/data/sass-<target>.json``,
    written by ``python tools/count_sass.py --write``; no GPU needed): ``target``, ``triton`` and ``rows``, one per
    (variant, block, num_warps) with ``per_element``, ``elements_per_thread`` and ``by_opcode``. Raises
    FileNotFoundError naming the command that writes it."""
    p = DATA_DIR / f"sass-{target}.json"
    if not p.exists():
        raise FileNotFoundError(f"no SASS counts at {p}: write them with `python tools/count_sass.py --write`")
    return json.loads(p.read_text())


def label(data: dict, key: str | None = None) -> str:
    """A one-line provenance label for plot titles: 'recorded on NVIDIA H200 (2026-11-29; driver ...)'.
    ``data``: a loaded reference file; ``key``: a lesson's key (e.g. "lesson07"), whose own provenance is used
    when it has one (lessons are recorded on different days), else the file's; with neither, the label says so
    ('recorded (no provenance in the file)') rather than guess."""
    p = data.get("provenance")
    if key is not None and isinstance(data.get(key), dict) and isinstance(data[key].get("provenance"), dict):
        p = data[key]["provenance"]
    if not isinstance(p, dict):
        return "recorded (no provenance in the file)"
    return (
        f"recorded on {p.get('gpu', '?')} ({p.get('date', '?')}; driver {p.get('driver', '?')}, "
        f"torch {p.get('torch', '?')}, Triton {p.get('triton', '?')})"
    )
