"""This GPU's measured ceilings, saved as a device profile that later lessons reuse.

Two numbers bound every kernel on the roofline (``gpulab.models.roofline``): the HBM bandwidth and the peak
rate of the unit doing the work. The datasheet (``gpulab.core.hardware``) gives what the vendor promises;
this module measures what the GPU you are on delivers:

- copy bandwidth: ``y.copy_(x)`` on a buffer much larger than L2, counting bytes read plus written;
- matmul rate per dtype: ``torch.matmul`` (cuBLAS) of two random N x N matrices, 2N^3 FLOPs, in fp32
  (TF32 off), tf32, bf16, fp16, and fp8 (``torch._scaled_mm``, e4m3, unit scales) where compute
  capability >= 8.9.

The profile is a JSON file in the user's cache directory, written atomically (a temporary file, then
``os.replace``), so an interrupted run never leaves a half-written profile.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import gpulab

from ..core import dtypes, timing
from ..core.timing import require_gpu, time_ms

MATMUL_DTYPES = dtypes.MATMUL  # the cuBLAS rates the profile measures, one per dtype name


@dataclass
class DeviceProfile:
    """Measured ceilings of one GPU. Rates in TFLOP/s and TB/s (decimal); sizes in the ``provenance``."""

    gpu: str
    sms: int
    compute_capability: list
    l2_mb: float
    copy_tbps: float  # bytes read + written per second / 1e12
    matmul_tflops: dict = field(default_factory=dict)  # dtype -> TFLOP/s, None where unsupported
    provenance: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> DeviceProfile:
        """The profile a JSON object holds. Raises ValueError naming a missing field or a field out of range
        (``_validate``)."""
        missing = [k for k in ("gpu", "sms", "compute_capability", "l2_mb", "copy_tbps") if k not in d]
        if missing:
            raise ValueError(f"device profile is missing {missing}")
        profile = cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
        _validate(profile)
        return profile


def provenance() -> dict:
    """Where a measurement comes from: GPU, driver, CUDA, torch and Triton versions, UTC date."""
    import torch
    import triton

    out = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
        "mode": gpulab.MODE,
    }
    if gpulab.ON_GPU:
        out["gpu"] = torch.cuda.get_device_name(0)
        out["driver"] = _driver_version()
    return timing.stamp(out)


#: The GPU the test clock stands in for (``properties``): two SMs of a compute capability 9.0 part, so that a suite
#: planned from it launches few programs in the interpreter. Its name is in no hardware table.
FAKE_GPU = dict(
    name="FAKE GPU (test clock)",
    sms=2,
    compute_capability=(9, 0),
    regs_per_sm=65536,
    smem_per_sm=228 * 1024,
    l2_bytes=1 << 20,
    memory_bytes=1 << 30,
    threads_per_sm=2048,
)


def properties(device: int = 0) -> dict:
    """The measuring GPU as torch reports it: name, sms, compute_capability, regs_per_sm, smem_per_sm, l2_bytes
    and memory_bytes in bytes, threads_per_sm (None where torch lacks one). Under the test clock, ``FAKE_GPU``.
    Raises ``NoGPUTimingError`` in interpreter mode. Always the GPU that runs, never the plan's
    (GPULAB_AS_GPU chooses sizes, not whose ceilings a measurement is drawn against)."""
    require_gpu("this GPU's properties")
    if not gpulab.ON_GPU:
        return dict(FAKE_GPU)
    import torch

    p = torch.cuda.get_device_properties(device)
    return dict(
        name=p.name,
        sms=p.multi_processor_count,
        compute_capability=(p.major, p.minor),
        regs_per_sm=getattr(p, "regs_per_multiprocessor", None),
        smem_per_sm=getattr(p, "shared_memory_per_multiprocessor", None),
        l2_bytes=getattr(p, "L2_cache_size", None),
        memory_bytes=p.total_memory,
        threads_per_sm=getattr(p, "max_threads_per_multi_processor", None),
    )


def _driver_version() -> str:
    try:
        import subprocess

        r = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def cache_dir() -> Path:
    """The user's cache directory for gpulab: ``gpulab.core.settings.cache_dir()`` (``GPULAB_CACHE_DIR`` overrides it)."""
    from ..core import settings

    return settings.cache_dir()


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def profile_path(gpu_name: str | None = None) -> Path:
    """Where the profile of ``gpu_name`` (default: this GPU) lives."""
    if gpu_name is None:
        gpu_name = properties()["name"]
    return cache_dir() / f"profile-{_slug(gpu_name)}.json"


def write_json_atomic(path: Path, data) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (temporary file in the same folder, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def save_profile(profile: DeviceProfile, path: Path | None = None) -> Path:
    """Save ``profile`` atomically (default: ``profile_path(profile.gpu)``). Returns the path. Raises ValueError
    for a profile made under the test clock (its provenance says so): fake numbers are never saved."""
    _validate(profile)
    if timing.is_fake_record(profile.provenance):
        raise ValueError("a profile measured under the test clock is fake: it is never saved")
    return write_json_atomic(Path(path).expanduser() if path else profile_path(profile.gpu), profile.to_json())


def load_profile(path: Path | None = None, gpu_name: str | None = None) -> DeviceProfile | None:
    """Load a saved profile, or ``None`` if there is none. Raises ``ValueError`` on a corrupt file."""
    path = Path(path).expanduser() if path is not None else profile_path(gpu_name)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError(f"expected a JSON object, got {type(data).__name__}")
        profile = DeviceProfile.from_json(data)
        _validate(profile)
        return profile
    except (ValueError, TypeError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError too
        raise ValueError(f"device profile {path} is unreadable ({e}); delete it and measure again") from e


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _validate(p: DeviceProfile) -> None:
    """Raise ``ValueError`` naming the field unless: gpu is a non-empty string; sms a positive int;
    compute_capability two non-negative ints, the major at least 1 (a list, as JSON holds it, or a tuple); l2_mb a
    finite number >= 0 (0 where torch reports no L2 size); copy_tbps and every matmul rate positive and finite
    (a rate may be None: the GPU lacks that dtype)."""
    import math

    if not isinstance(p.gpu, str) or not p.gpu.strip():
        raise ValueError(f"gpu must be a non-empty string (the GPU's name), got {p.gpu!r}")
    if not isinstance(p.sms, int) or isinstance(p.sms, bool) or p.sms < 1:
        raise ValueError(f"sms must be a positive int (the number of SMs), got {p.sms!r}")
    cc = p.compute_capability
    if (
        not isinstance(cc, (list, tuple))
        or len(cc) != 2
        or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cc)
        or cc[0] < 1
    ):
        raise ValueError(f"compute_capability must be [major, minor], two ints with major >= 1, got {cc!r}")
    if not _is_number(p.l2_mb) or not (p.l2_mb >= 0 and math.isfinite(p.l2_mb)):
        raise ValueError(f"l2_mb must be a finite number of MB >= 0, got {p.l2_mb!r}")
    rates = {"copy_tbps": p.copy_tbps}
    if not isinstance(p.matmul_tflops, dict):
        raise ValueError("matmul_tflops must be an object of dtype -> TFLOP/s")
    rates.update({f"matmul_tflops[{d}]": r for d, r in p.matmul_tflops.items() if r is not None})
    for name, r in rates.items():
        if not _is_number(r) or not (r > 0 and math.isfinite(r)):
            raise ValueError(f"{name} must be a positive finite number, got {r!r}")


# ---- measurements (GPU only) ---------------------------------------------------------------------------


FAKE_COPY_BYTES = 1 << 16  # one buffer of the copy under the test clock


def measure_copy_tbps(n_bytes: int | None = None) -> float:
    """HBM copy bandwidth in TB/s: ``y.copy_(x)`` on float32 buffers, counting bytes read + written.

    ``n_bytes`` is the size of one buffer (default 4 GiB, or an eighth of free memory if smaller; always
    many times the L2; ``FAKE_COPY_BYTES`` under the test clock). Raises ``NoGPUTimingError`` in interpreter mode.
    """
    require_gpu("copy bandwidth")
    import torch

    if n_bytes is None:
        n_bytes = min(4 * 2**30, torch.cuda.mem_get_info()[0] // 8) if gpulab.ON_GPU else FAKE_COPY_BYTES
    n = n_bytes // 4
    x = torch.randn(n, device=timing.device())
    y = torch.empty_like(x)
    t = time_ms(lambda: y.copy_(x))
    x = y = None  # drop the buffers so empty_cache can return their memory
    timing.empty_cache()
    return t.rate(2 * n * 4)


def supports(dtype: str) -> bool:
    """Whether this GPU runs a ``dtype`` matmul on tensor cores (fp32 always runs, on CUDA cores)."""
    require_gpu()
    import torch

    cc = tuple(properties()["compute_capability"])
    return {
        "fp32": True,
        "tf32": cc >= (8, 0),
        "bf16": cc >= (8, 0),
        "fp16": cc >= (7, 0),
        "fp8": cc >= (8, 9) and hasattr(torch, "_scaled_mm"),
    }[dtype]


def matmul_fn(dtype: str, n: int):
    """A zero-argument function that multiplies two random n x n ``dtype`` matrices with cuBLAS."""
    import torch

    if dtype not in MATMUL_DTYPES:
        raise ValueError(f"dtype must be one of {MATMUL_DTYPES}, got {dtype!r}")
    dev = timing.device()
    if dtype == "fp8":
        a = torch.randn(n, n, device=dev).to(dtypes.torch_dtype("fp8"))
        b = torch.randn(n, n, device=dev).to(dtypes.torch_dtype("fp8")).t()  # column-major, as cuBLASLt needs
        one = torch.ones((), device=dev)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    tdtype = dtypes.torch_dtype(dtype)
    a = torch.randn(n, n, device=dev, dtype=tdtype)
    b = torch.randn(n, n, device=dev, dtype=tdtype)
    precision = "high" if dtype == "tf32" else "highest"

    def run():
        old = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(precision)
        try:
            return a @ b
        finally:
            torch.set_float32_matmul_precision(old)

    return run


def measure_matmul_tflops(dtype: str, n: int = 8192) -> float | None:
    """cuBLAS matmul rate in TFLOP/s for two random n x n ``dtype`` matrices (2n^3 FLOPs).

    Returns ``None`` where the GPU lacks the dtype (``supports``). Raises ``NoGPUTimingError`` in
    interpreter mode, ``ValueError`` for an unknown dtype.
    """
    require_gpu("a matmul rate")
    if dtype not in MATMUL_DTYPES:
        raise ValueError(f"dtype must be one of {MATMUL_DTYPES}, got {dtype!r}")
    if not supports(dtype):
        return None
    fn = matmul_fn(dtype, n)
    return time_ms(fn, warmup_ms=100, rep_ms=500).rate(2 * n**3)


def measure_profile(matmul_n: int = 8192, progress: bool = True, copy_bytes: int | None = None) -> DeviceProfile:
    """Measure this GPU's ceilings (copy bandwidth of ``copy_bytes`` buffers, ``measure_copy_tbps``'s default if
    None; matmul rate per dtype at ``matmul_n``). Takes seconds."""
    require_gpu("a device profile")
    from tqdm.auto import tqdm

    props = properties()
    steps = ["copy", *MATMUL_DTYPES]
    results = {}
    for step in tqdm(steps, desc="measuring ceilings", disable=not progress):
        results[step] = measure_copy_tbps(copy_bytes) if step == "copy" else measure_matmul_tflops(step, matmul_n)
    prov = provenance()
    prov.update(
        copy="y.copy_(x), float32, bytes read + written, do_bench median",
        matmul=f"torch.matmul {matmul_n}^3 random normal, 2n^3 FLOPs, do_bench median; "
        "fp8 via torch._scaled_mm e4m3 unit scales, bf16 out",
    )
    return DeviceProfile(
        gpu=props["name"],
        sms=props["sms"],
        compute_capability=list(props["compute_capability"]),
        l2_mb=(props["l2_bytes"] or 0) / 1e6,
        copy_tbps=results["copy"],
        matmul_tflops={d: results[d] for d in MATMUL_DTYPES},
        provenance=prov,
    )


def get_profile(measure: bool = True, progress: bool = True, matmul_n: int = 8192) -> DeviceProfile:
    """The profile of the GPU that runs (``properties()["name"]``, whatever GPULAB_AS_GPU plans for): the saved
    one if present, else measured now (matmuls at ``matmul_n``) and saved when ``measure``. Under the test clock
    it is measured every time (small buffers) and never saved or loaded.

    Raises ``NoGPUTimingError`` in interpreter mode and ``LookupError`` if none is saved and
    ``measure`` is False.
    """
    require_gpu("this GPU's profile")
    if timing.is_fake():
        return measure_profile(matmul_n=matmul_n, progress=progress)
    p = load_profile()
    if p is None:
        if not measure:
            raise LookupError(f"no device profile at {profile_path()}; run notebook 00 or python -m gpulab.bench")
        p = measure_profile(matmul_n=matmul_n, progress=progress)
        save_profile(p)
    return p


def copy_bandwidth() -> float:
    """This GPU's copy bandwidth in TB/s, for a lesson's model: the saved profile's (``get_profile``'s file, written
    by notebook 00 or ``python -m gpulab.bench``) where there is one, else ``measure_copy_tbps()`` now and unsaved
    (a whole profile also times five matmul dtypes: seconds more on a cold cache). Under the test clock always
    measured. Raises ``NoGPUTimingError`` in interpreter mode, ``ValueError`` on a corrupt saved profile."""
    require_gpu("this GPU's copy bandwidth")
    saved = None if timing.is_fake() else load_profile()
    return saved.copy_tbps if saved is not None else measure_copy_tbps()
