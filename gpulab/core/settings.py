"""The GPULAB_* environment switches, read once at import into one frozen ``Settings`` object.

Every module that needs a switch reads ``gpulab.core.settings.SETTINGS``; nothing else reads the environment
for a GPULAB_* name. ``read()`` parses a mapping (``os.environ`` by default), so tests can check a
choice without touching the process environment.

| variable | values | meaning |
|---|---|---|
| GPULAB_MODE | gpu, interpreter, unset | force a mode (``gpulab.__init__`` chooses otherwise) |
| GPULAB_AUTOTUNE | full (default), first | time every candidate config (or take the choice stored for this GPU and Triton: ``kernels._autotune``), or take each list's first untimed |
| GPULAB_STATIC_FIGURES | 1 | draw static plotly figures instead of FigureWidget |
| GPULAB_CACHE_DIR | a path | where the device profile, compile results and CUDA builds go (default: the user cache directory; ``cache_dir()``) |
| GPULAB_AS_GPU | a GPU name of ``gpulab.core.hardware`` (T4, L4, A100, H200, ...) | choose sizes, dtypes and paths as on that GPU |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    """The parsed switches: ``mode`` ("" when unset), ``autotune``, ``static_figures``, ``cache_dir``, ``as_gpu``
    (validated against the hardware table by ``gpulab.core.plan`` when gpulab is imported)."""

    mode: str = ""
    autotune: str = "full"
    static_figures: bool = False
    cache_dir: str | None = None
    as_gpu: str | None = None


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = env.get(name, "").strip().lower() or default
    if value not in allowed:
        shown = " or ".join(repr(a) for a in allowed if a)
        raise ValueError(f"{name} must be {shown} (or unset), got {value!r}")
    return value


def read(env: Mapping[str, str] | None = None) -> Settings:
    """Parse the GPULAB_* switches from ``env`` (default ``os.environ``). Raises ValueError naming the
    variable and the values it takes when one is set to something else."""
    env = os.environ if env is None else env
    static = env.get("GPULAB_STATIC_FIGURES", "").strip()
    if static not in ("", "0", "1"):
        raise ValueError(f"GPULAB_STATIC_FIGURES must be '1' or '0' (or unset), got {static!r}")
    return Settings(
        mode=_choice(env, "GPULAB_MODE", ("", "gpu", "interpreter"), ""),
        autotune=_choice(env, "GPULAB_AUTOTUNE", ("full", "first"), "full"),
        static_figures=static == "1",
        cache_dir=env.get("GPULAB_CACHE_DIR") or None,
        as_gpu=env.get("GPULAB_AS_GPU", "").strip() or None,
    )


SETTINGS: Settings = read()


def cache_dir() -> Path:
    """gpulab's cache directory: ``GPULAB_CACHE_DIR`` when set, else the user cache directory (platformdirs)."""
    if SETTINGS.cache_dir:
        return Path(SETTINGS.cache_dir).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("gpulab", appauthor=False))
