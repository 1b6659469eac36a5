"""gpulab: learn GPU performance by doing it.

Importing this package picks the execution mode once, before any Triton kernel is defined:

- ``"gpu"``: torch sees a CUDA GPU; kernels compile and run on it and timings are live.
- ``"interpreter"``: no GPU (or ``GPULAB_MODE=interpreter``); ``TRITON_INTERPRET=1`` is set so every
  ``@triton.jit`` kernel runs in Triton's interpreter on the CPU, on small inputs. Timings shown in this
  mode come from reference data recorded on a real GPU and say so.

It also picks which GPU to plan for (``gpulab.core.plan.current()``: dtypes, paths, sizes and autotuning lists for
that GPU; ``GPULAB_AS_GPU=T4`` plans as a T4 on any machine). ``gpulab.describe()`` prints the mode, the device,
the GPU planned for and the reasons. ``gpulab.size(gpu=..., interpreter=...)``
gives the problem size for the current mode, so notebooks never need editing.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass

from .core import plan as _plan
from .core.settings import SETTINGS

__all__ = ["MODE", "DEVICE", "ON_GPU", "Mode", "describe", "size", "mode_info"]
__version__ = "0.1.0"


@dataclass(frozen=True)
class Mode:
    """The execution mode chosen at import: ``name`` is ``"gpu"`` or ``"interpreter"``."""

    name: str
    device: str  # torch device string: "cuda" or "cpu"
    device_name: str  # e.g. "NVIDIA H200" or "CPU (Triton interpreter)"
    reason: str

    def __str__(self) -> str:
        return f"mode={self.name}  device={self.device} ({self.device_name})\n  why: {self.reason}"


# The oldest torch and Triton gpulab runs with, as in pyproject.toml's dependencies (a test checks they agree).
# Checked at import because the Colab install cell installs gpulab with --no-deps, never replacing Colab's own.
MIN_TORCH, MIN_TRITON = (2, 5), (3, 2)


def _release(version: str) -> tuple[int, ...]:
    """(major, minor) of a version string such as "2.11.0+cu128" or "3.6.0"."""
    parts = []
    for piece in version.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit()) if piece[:1].isdigit() else ""
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def check_versions(torch_version: str, triton_version: str | None) -> None:
    """Raise RuntimeError, naming both versions and what to do, if torch or Triton is older than gpulab needs.
    ``triton_version`` None (no Triton distribution found) is refused too."""
    problems = []
    if _release(torch_version) < MIN_TORCH:
        problems.append(f"torch {torch_version} (needs >= {'.'.join(map(str, MIN_TORCH))})")
    if triton_version is None or _release(triton_version) < MIN_TRITON:
        problems.append(f"Triton {triton_version or '(not installed)'} (needs >= {'.'.join(map(str, MIN_TRITON))})")
    if problems:
        raise RuntimeError(
            "gpulab cannot run with " + " and ".join(problems) + ". gpulab never installs torch or "
            "Triton over a runtime's own (on Colab they come with the image): use a newer runtime "
            "(on Colab: Runtime > Change runtime type, or a fresh session), or install a matching "
            "pair yourself with `pip install torch` outside Colab."
        )


def _installed_triton() -> str | None:
    from importlib import metadata

    for dist in ("triton", "pytorch-triton"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _kernels_already_defined() -> list[str]:
    """Kernel modules of gpulab imported before the mode was set (there should be none)."""
    return [m for m in sys.modules if m.startswith("gpulab.kernels.")]


def _choose_mode() -> Mode:
    forced = SETTINGS.mode
    why_forced = "GPULAB_MODE=interpreter is set"
    if not forced and os.environ.get("TRITON_INTERPRET") == "1":
        forced, why_forced = "interpreter", "TRITON_INTERPRET=1 was already set in the environment"

    import torch  # importing torch does not define Triton kernels, so it is safe before the switch

    check_versions(torch.__version__, _installed_triton())

    has_cuda = torch.cuda.is_available()
    if forced == "gpu" and not has_cuda:
        raise RuntimeError(
            "GPULAB_MODE=gpu was requested but torch sees no CUDA GPU "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda})"
        )
    if has_cuda and forced != "interpreter":
        os.environ.pop("TRITON_INTERPRET", None)
        name = torch.cuda.get_device_name(0)
        return Mode(
            "gpu",
            "cuda",
            name,
            f"torch {torch.__version__} sees a CUDA GPU ({name}); kernels compile for it and "
            "timings are live measurements",
        )
    os.environ["TRITON_INTERPRET"] = "1"
    if has_cuda:
        reason = f"{why_forced}, so kernels run in Triton's interpreter on the CPU although a GPU is present"
    else:
        build = "a CPU-only build" if torch.version.cuda is None else f"a CUDA {torch.version.cuda} build"
        reason = (
            f"torch {torch.__version__} ({build}) sees no CUDA GPU, so every Triton kernel runs in "
            "Triton's interpreter on the CPU with small inputs; timing plots show reference data "
            "recorded on a real GPU, labelled as such"
        )
    return Mode("interpreter", "cpu", "CPU (Triton interpreter)", reason)


if SETTINGS.as_gpu:
    _plan.as_gpu_spec(SETTINGS.as_gpu)  # a misspelt GPU name fails at import, naming the GPUs it takes

if _kernels_already_defined():  # pragma: no cover - defensive
    raise ImportError("gpulab kernel modules were imported before gpulab chose its mode")

_triton_before = "triton" in sys.modules and "TRITON_INTERPRET" not in os.environ
mode_info: Mode = _choose_mode()
if _triton_before and mode_info.name == "interpreter":
    import warnings

    warnings.warn(
        "triton was imported before gpulab: any @triton.jit kernel defined before `import gpulab` "
        "was built for a GPU and will fail here; import gpulab first (it sets TRITON_INTERPRET=1)",
        stacklevel=2,
    )
MODE: str = mode_info.name
DEVICE: str = mode_info.device
ON_GPU: bool = MODE == "gpu"


@functools.cache
def compute_capability() -> tuple[int, int]:
    """The GPU's (major, minor) compute capability, asked once (launchers check it on every call, and each
    query costs microseconds); (0, 0) in interpreter mode."""
    if not ON_GPU:
        return (0, 0)
    import torch

    return tuple(torch.cuda.get_device_capability())


# "full" (default): on a GPU, each kernel's autotuner times its candidate configs on the first call of a new size
# key and keeps the fastest. "first": take each list's first candidate untimed (test and notebook runs on a GPU
# use it to save the minutes of compiling every candidate; the benchmark suite never does).
AUTOTUNE: str = SETTINGS.autotune


def describe(print_it: bool = True) -> str:
    """Say which mode gpulab runs in, on which device, which GPU it plans for (``gpulab.core.plan.current()``), and
    why. Returns the text (and prints it)."""
    import torch
    import triton

    lines = [
        str(mode_info),
        f"  torch {torch.__version__}, triton {triton.__version__}, "
        f"TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET', '(unset)')}",
    ]
    if ON_GPU:
        p = torch.cuda.get_device_properties(0)
        lines.append(
            f"  {p.multi_processor_count} SMs, compute capability {p.major}.{p.minor}, {p.total_memory / 2**30:.0f} GiB"
        )
    lines.append(_plan.current().describe())
    text = "\n".join(lines)
    if print_it:
        print(text)
    return text


def size(*, gpu, interpreter):
    """Pick a problem size for the current mode: ``gpu`` on a GPU, ``interpreter`` otherwise.

    Lessons call this so that the same cell runs large on a GPU and small (seconds, not hours) in
    Triton's interpreter.
    """
    return gpu if ON_GPU else interpreter


def source(obj) -> str:
    """The source code of a function or a ``@triton.jit`` kernel (compiled or interpreted), for display."""
    import inspect

    return inspect.getsource(getattr(obj, "fn", obj))


#: The short names a notebook may write, ``from gpulab import roofline``: each layer's modules under the name of
#: the module alone (the folders are the layers: ``core`` below ``models`` below ``kernels`` below ``measure``
#: below the suites, figures and exercises). Package code imports the full name; ``tools/deps.py`` reads this
#: table to draw a notebook's arrows.
SHORT_NAMES: dict[str, str] = {
    **{m: f"gpulab.core.{m}" for m in ("dtypes", "hardware", "plan", "reference", "timing", "tolerances")},
    **{
        m: f"gpulab.models.{m}"
        for m in (
            "attention",
            "comm",
            "formats",
            "fusion",
            "memory",
            "online_softmax",
            "precision",
            "recompute",
            "roofline",
            "sectors",
            "simt",
            "tiling",
            "waves",
        )
    },
    **{m: f"gpulab.measure.{m}" for m in ("counters", "device", "live")},
}


def __getattr__(name: str):
    """``gpulab.<short name>`` (PEP 562): the module that ``SHORT_NAMES`` gives, imported on first use.
    Raises AttributeError for any other name."""
    if name in SHORT_NAMES:
        import importlib  # a short name resolves only when a notebook asks for it

        return importlib.import_module(SHORT_NAMES[name])
    raise AttributeError(f"module 'gpulab' has no attribute {name!r}")
