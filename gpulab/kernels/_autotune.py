"""One autotuner for the fast kernels (``matmul``, ``flash_attention``, and lessons 04 and 06's ``sincos``,
``strided``, ``transpose``): a cache keyed on the problem, filled by
timing every candidate config once, and stores of the choices so that a key is timed once per GPU, not once per
process.

``pick(key, candidates, make_run)`` returns the config cached under ``key``; on a miss it

- takes ``candidates[0]`` untimed when ``GPULAB_AUTOTUNE=first`` (``gpulab.core.settings.SETTINGS.autotune``);
- otherwise takes a stored choice for ``key`` (below), or calls ``fastest(candidates, make_run())``, caches what it
  returns and stores it;
- inside ``untimed()``, takes ``candidates[0]`` and caches nothing: a correctness check holds for every candidate
  (autotuning chooses for speed), so it need not pay for timing them, nor leave its choice to later launches.

``fastest`` follows two rules:

1. Skip what cannot launch. Each candidate is launched once first (this compiles it); one that raises (too
   much shared memory, an option this GPU or Triton lacks) is no candidate.
2. One clock for every candidate. Candidates are timed by CUDA-graph replay (``gpulab.core.timing.time_ms(graph=True)``):
   a config changes only the GPU's time, and an eager call of a small problem is bound by the CPU's Python
   and launch cost, so eager timings would rank configs by CPU noise (``tools/launch_overhead.py --configs``
   shows both costs; lesson 07's awkward sizes in ``gpulab/data`` record eager against graph times). If the
   capture of any candidate fails, every candidate is timed eagerly instead, so that one ranking never mixes
   the two clocks.

Stored choices (``GPULAB_AUTOTUNE=full`` on a CUDA GPU only). Timing a key costs a compile and a benchmark per
candidate (about a second each for the FlashAttention kernels), and the lessons launch the same keys in many cells,
notebooks and suites. A choice is stored with the GPU's name (``torch.cuda.get_device_name``), Triton's version
and a digest of the candidate list it was chosen from, and is taken only where all three match; anything else is
timed. Two stores, looked up in this order:

1. this machine's: ``<gpulab cache dir>/autotune/<gpu>.json`` (``gpulab.core.settings.cache_dir``); every key timed
   here is added, so a session's cells and notebooks time each key once;
2. the recording: ``gpulab/data/autotune-<gpu>.json``, the keys that ``python -m gpulab.bench --record`` timed on
   that GPU (``record``), so a learner on a recorded GPU and Triton times only what the recording lacks.

``fresh()`` ignores both (``--record`` runs in it, so that a recording tunes anew); ``origin(key)`` says where a
choice came from. GPU only when timing (``time_ms`` raises ``NoGPUTimingError`` in the interpreter); launchers take
a fixed config there and never call ``pick``. The idea is Triton's ``triton.autotune`` (a benchmark per key, the best
config cached, and its ``cache_results`` on disk); this module adds the graph clock, the recorded choices and one
cache that reports can read (``chosen``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

from ..core import reference, settings, timing

_CACHE: dict = {}  # key (a tuple whose first item names the kernel) -> the chosen config
_ORIGIN: dict = {}  # key -> where its choice came from (``origin``)
_TIMED: dict = {}  # key string -> stored entry, for the keys timed in this process (what ``record`` writes)
_UNTIMED = [False]  # inside untimed()
_FRESH = [False]  # inside fresh()
STORES_ON = True  # False: no store is read or written (tests/conftest.py: a test never meets a user's choices)
_LOADED: dict = {}  # path -> its entries, read once per process


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
    ``SETTINGS.autotune == "first"``; else a stored choice (module docstring), else ``fastest(candidates,
    make_run(), ...)``, which is then stored. ``make_run()`` is called only when timing; it returns ``run(config)``,
    which launches one candidate (on scratch outputs, so the caller's buffers are untouched)."""
    if key not in _CACHE:
        if not candidates:
            raise ValueError(f"no candidate configs for {key!r}")
        if _UNTIMED[0]:
            return candidates[0]
        if settings.SETTINGS.autotune == "first":
            _CACHE[key], _ORIGIN[key] = candidates[0], "first candidate, untimed (GPULAB_AUTOTUNE=first)"
        else:
            found = _stored(key, candidates)
            if found is not None:
                _CACHE[key], _ORIGIN[key] = found
            else:
                _CACHE[key] = fastest(candidates, make_run(), rep_ms=rep_ms, what=what)
                _ORIGIN[key] = "timed now"
                _store(key, candidates, _CACHE[key])
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


@contextlib.contextmanager
def fresh():
    """Inside: a key not cached in this process is timed, whatever the stores hold (they still take what is timed)."""
    before = _FRESH[0]
    _FRESH[0] = True
    try:
        yield
    finally:
        _FRESH[0] = before


def cached(key: Hashable):
    """The config cached under ``key``, or None if that key was never tuned."""
    return _CACHE.get(key)


def origin(key: Hashable) -> str | None:
    """Where the choice cached under ``key`` came from: "timed now", "timed earlier on this machine (<path>)",
    "recorded on <GPU> (<file>, <date>)" or the first candidate untimed; None if ``key`` is not cached."""
    return _ORIGIN.get(key)


def chosen(kernel: str) -> dict:
    """What autotuning chose so far for one kernel: ``{key without its first item: config}``."""
    return {k[1:]: v for k, v in _CACHE.items() if k[0] == kernel}


def origins(kernel: str) -> dict:
    """Where each choice of one kernel came from (``origin``): ``{origin: number of keys}``."""
    out: dict = {}
    for k, v in _ORIGIN.items():
        if k[0] == kernel:
            out[v] = out.get(v, 0) + 1
    return out


def clear() -> None:
    """Forget every choice of this process and the stores as read (the next launch of each key takes a stored choice
    or is timed again)."""
    _CACHE.clear()
    _ORIGIN.clear()
    _TIMED.clear()
    _LOADED.clear()


# ---- the stores ----------------------------------------------------------------------------------------------


def config_label(config) -> str:
    """A config as one stable string: a ``triton.Config``'s meta-parameters and launch options, sorted; else its
    ``repr`` (a frozen dataclass, a tuple)."""
    kw = getattr(config, "all_kwargs", None)
    return repr(sorted(kw().items())) if callable(kw) else repr(config)


def key_label(key: Hashable) -> str:
    """A key as one string: its items joined by "|" (``("flash_attention", "fwd", torch.bfloat16, 128, ...)`` ->
    ``"flash_attention|fwd|torch.bfloat16|128|..."``)."""
    return "|".join(str(k) for k in key) if isinstance(key, tuple) else str(key)


def digest(candidates: Sequence) -> str:
    """16 hex digits naming a candidate list (its ``config_label``s in order): a stored choice holds only for the
    list it was chosen from."""
    return hashlib.sha256("\n".join(config_label(c) for c in candidates).encode()).hexdigest()[:16]


def identity() -> tuple[str, str] | None:
    """``(GPU name, Triton version)`` under which choices are stored: a CUDA GPU's; None without one (the
    interpreter, or a test that pretends a GPU), and None while the stores are off."""
    if not STORES_ON:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    import triton

    return torch.cuda.get_device_name(0), triton.__version__


def store_path(gpu: str) -> Path:
    """This machine's store for ``gpu`` (a device name): ``<cache dir>/autotune/<gpu, lower case, dashes>.json``."""
    return settings.cache_dir() / "autotune" / f"{re.sub(r'[^a-z0-9]+', '-', gpu.lower()).strip('-')}.json"


def recorded_paths() -> list[Path]:
    """The recorded stores in ``gpulab/data`` (``autotune-<gpu>.json``), each naming its GPU inside."""
    return sorted(reference.DATA_DIR.glob("autotune-*.json"))


def _load(path: Path, ident: tuple[str, str]) -> dict:
    """The file at ``path`` if it is a store of ``ident`` (same GPU name and Triton version), else {} (also for a
    missing or unreadable file)."""
    if path not in _LOADED:
        try:
            _LOADED[path] = json.loads(path.read_text())
        except (OSError, ValueError):
            _LOADED[path] = {}
    data = _LOADED[path]
    return data if (data.get("gpu"), data.get("triton")) == ident else {}


def _stored(key: Hashable, candidates: Sequence):
    """``(config, origin)`` of a stored choice of ``key`` among ``candidates`` (module docstring), or None."""
    ident = identity()
    if ident is None or _FRESH[0]:
        return None
    want, label = digest(candidates), key_label(key)
    for path in [store_path(ident[0]), *recorded_paths()]:
        data = _load(path, ident)
        entry = data.get("choices", {}).get(label)
        if not entry or entry.get("candidates") != want:
            continue
        match = [c for c in candidates if config_label(c) == entry.get("config")]
        if match:
            where = (
                f"timed earlier on this machine ({path})"
                if path.parent != reference.DATA_DIR
                else f"recorded on {data['gpu']} (gpulab/data/{path.name}, {data.get('date', '?')})"
            )
            return match[0], where
    return None


def _store(key: Hashable, candidates: Sequence, config) -> None:
    """Remember a timed choice for ``record`` and add it to this machine's store (skipped without a GPU or when the
    cache directory cannot be written)."""
    entry = {"config": config_label(config), "candidates": digest(candidates)}
    _TIMED[key_label(key)] = entry
    ident = identity()
    if ident is None:
        return
    path = store_path(ident[0])
    with contextlib.suppress(OSError):
        _LOADED.pop(path, None)
        data = _load(path, ident) or {"gpu": ident[0], "triton": ident[1], "choices": {}}
        data["choices"][key_label(key)] = entry
        _write(path, data)


def _write(path: Path, data: dict) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (a temporary file in the same folder, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _LOADED[path] = data
    return path


def record(path: Path, provenance: dict) -> Path | None:
    """Add the keys timed in this process to the recorded store at ``path`` (``gpulab/data/autotune-<gpu>.json``),
    keeping its other keys when it was recorded on the same GPU with the same Triton (else starting anew), with
    ``provenance`` (``gpulab.measure.device.provenance()``: gpu, triton, date, ...). Returns the path, or None when nothing
    was timed. GPU only (``python -m gpulab.bench --record``)."""
    if not _TIMED:
        return None
    gpu, triton_version = provenance["gpu"], provenance["triton"]
    _LOADED.pop(path, None)
    old = _load(path, (gpu, triton_version))
    choices = {**old.get("choices", {}), **_TIMED}
    return _write(path, {**provenance, "gpu": gpu, "triton": triton_version, "choices": choices})
