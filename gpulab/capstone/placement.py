"""Every recorded operation on the roofline: its bound time and what bounds it.

For an operation with F FLOPs and D bytes (``gpulab.capstone.recorder.OpRecord``) on a GPU with peak C for
that operation and bandwidth B, the bound is ``t >= max(F/C, D/B)`` (``gpulab.models.roofline.bound``). The peak is
the one that applies (``gpulab.models.roofline.peak_for``): the tensor-core rate of the operation's dtype for an
operation with matmul FLOPs (bf16, fp16; fp32 on the CUDA cores, or TF32 with ``tf32=True``), the FP32
CUDA-core rate otherwise. The class:

- ``"overhead"``: the bound is below the launch overhead (``LAUNCH_OVERHEAD_US``): launching the kernel
  from the CPU takes longer than the GPU needs to run it (``gpulab.models.fusion``'s launch-overhead model);
- ``"compute"``: F/C > D/B;
- ``"memory"``: otherwise.

Source: the roofline of Williams, Waterman and Patterson (2009) as Stanford CS336 Lecture 5 states it, and
the lecture's Builder Test: divide an operation's FLOPs by its bytes and name the habit that moves it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import hardware, validate
from ..models import fusion, roofline
from .recorder import GROUPS

LAUNCH_OVERHEAD_US = fusion.LAUNCH_OVERHEAD_US  # µs per kernel launch: the launch-overhead model's
KINDS = ("compute", "memory", "overhead")


def spec_from_profile(profile: dict) -> hardware.GPUSpec:
    """A ``hardware.GPUSpec`` from a device profile (``gpulab.measure.device.DeviceProfile.to_json()``): the measured
    copy bandwidth and matmul rates as the ceilings. The FP32 CUDA-core rate (for elementwise work) is the
    measured fp32 matmul rate."""
    rates = {d: profile["matmul_tflops"].get(d) for d in hardware.DTYPES}
    return hardware.GPUSpec(
        f"{profile['gpu']} (measured)",
        profile.get("sms"),
        None,
        profile["copy_tbps"] * 1000,
        rates,
        tuple(profile.get("compute_capability") or ()) or None,
        ("device-profile",),
    )


def op_peak(spec: hardware.GPUSpec, dtype: str, matmul: bool, tf32: bool = False) -> float:
    """The peak (TFLOP/s) for an operation in ``dtype`` ("fp32", "bf16", "fp16"; "fp64" and integer or bool
    operations are given the fp32 rate); ``matmul``: whether it does matrix-product FLOPs."""
    dtype = dtype if dtype in ("bf16", "fp16") else "fp32"
    return roofline.peak_for(spec, "matmul" if matmul else "elementwise", dtype, tf32=tf32)


@dataclass(frozen=True)
class Placement:
    """One kernel on the roofline: ``name``, ``group``, FLOPs, bytes, the peak used (TFLOP/s), the two
    bounds (ms) and the class (one of ``KINDS``)."""

    name: str
    group: str
    flops: float
    bytes: float
    peak_tflops: float
    compute_ms: float
    memory_ms: float
    kind: str

    @property
    def time_ms(self) -> float:
        """The roofline bound max(F/C, D/B) in ms."""
        return max(self.compute_ms, self.memory_ms)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


def place_one(
    name: str,
    group: str,
    flops: float,
    bytes_moved: float,
    dtype: str,
    spec: hardware.GPUSpec,
    *,
    overhead_us: float = LAUNCH_OVERHEAD_US,
    tf32: bool = False,
) -> Placement:
    """Place one kernel (``flops`` FLOPs, ``bytes_moved`` bytes > 0) on ``spec``'s roofline; see the module
    docstring for the peak and the class."""
    overhead_us = validate.nonnegative("overhead_us", overhead_us)
    peak = op_peak(spec, dtype, flops > 0, tf32)
    b = roofline.bound(flops, bytes_moved, peak, spec.hbm_tbps)
    kind = "overhead" if b.time_ms < overhead_us * 1e-3 else b.limiter
    return Placement(name, group, float(flops), float(bytes_moved), peak, b.compute_ms, b.memory_ms, kind)


def place(
    records, spec: hardware.GPUSpec, *, overhead_us: float = LAUNCH_OVERHEAD_US, tf32: bool = False
) -> list[Placement]:
    """Place every kernel of ``records`` (``OpRecord``s; views and bookkeeping left out) on ``spec``."""
    if not isinstance(spec, hardware.GPUSpec):
        raise TypeError(
            f"spec must be a hardware.GPUSpec (hardware.get(name) or spec_from_profile), got {type(spec).__name__}"
        )
    return [
        place_one(r.name, r.group, r.flops, r.bytes, r.dtype, spec, overhead_us=overhead_us, tf32=tf32)
        for r in records
        if r.is_kernel and r.bytes > 0
    ]


def step_ms(placements, *, overhead_us: float = LAUNCH_OVERHEAD_US, graphs: bool = False) -> float:
    """Predicted step time in ms: each kernel takes its bound, and at least the launch overhead when launched
    one by one from the CPU (eager); replayed from a CUDA graph (``graphs``) only its bound."""
    floor = 0.0 if graphs else overhead_us * 1e-3
    return sum(max(p.time_ms, floor) for p in placements)


def by_group(placements, *, overhead_us: float = LAUNCH_OVERHEAD_US, graphs: bool = False) -> dict:
    """Per group (``GROUPS`` order, empty ones left out): kernels, FLOPs, bytes, intensity, predicted ms (as
    ``step_ms``) and its share of the step, and the ms of each class."""
    floor = 0.0 if graphs else overhead_us * 1e-3
    total = step_ms(placements, overhead_us=overhead_us, graphs=graphs) or 1.0
    out = {}
    for g in GROUPS:
        ps = [p for p in placements if p.group == g]
        if not ps:
            continue
        f, b = sum(p.flops for p in ps), sum(p.bytes for p in ps)
        ms = sum(max(p.time_ms, floor) for p in ps)
        out[g] = dict(
            kernels=len(ps),
            flops=f,
            bytes=b,
            intensity=f / b if b else 0.0,
            ms=ms,
            share=ms / total,
            **{f"{k}_ms": sum(max(p.time_ms, floor) for p in ps if p.kind == k) for k in KINDS},
        )
    return out


def kind_split(placements, *, overhead_us: float = LAUNCH_OVERHEAD_US, graphs: bool = False) -> dict:
    """Predicted ms per class (compute, memory, overhead) over the whole step."""
    floor = 0.0 if graphs else overhead_us * 1e-3
    return {k: sum(max(p.time_ms, floor) for p in placements if p.kind == k) for k in KINDS}
