"""The roofline model: a kernel's time lower bound from its FLOPs and bytes.

For a kernel that does ``F`` floating-point operations and moves ``D`` bytes across the HBM boundary, on
a machine with peak rate ``C`` (FLOP/s) for *that kind of operation* and HBM bandwidth ``B`` (byte/s):

    t >= max(F / C, D / B)            (the bound; optimistic: it assumes perfect overlap)
    I = F / D                         (arithmetic intensity, FLOP/byte)
    I* = C / B                        (ridge point: below it the kernel is memory-bound)
    P <= min(C, B * I)                (attainable rate)

Source: Stanford CS336 Spring 2026 Lecture 5 notes ("Start with two budgets"); Williams, Waterman and
Patterson, "Roofline: an insightful visual performance model", CACM 52(4), 2009.

Units: FLOPs and bytes are plain counts; rates are given in TFLOP/s and TB/s (decimal) and times are
returned in milliseconds, so the seed example reads directly: C = 100 TFLOP/s, B = 1 TB/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import hardware, validate

# Which peak applies to which kind of operation (the seed lecture: "a tensor-core matrix-multiplication
# peak cannot be used as the peak rate for comparisons, exponentials, or arbitrary scalar code").
OP_KINDS = ("elementwise", "reduction", "matmul")


def intensity(flops: float, bytes_moved: float) -> float:
    """Arithmetic intensity I = F / D in FLOP/byte. Raises ``ValueError`` if ``bytes_moved <= 0``."""
    return validate.nonnegative("flops", flops) / validate.positive("bytes_moved", bytes_moved)


def ridge_point(peak_tflops: float, hbm_tbps: float) -> float:
    """Ridge point I* = C / B in FLOP/byte (C in TFLOP/s, B in TB/s)."""
    return validate.positive("peak_tflops", peak_tflops) / validate.positive("hbm_tbps", hbm_tbps)


def attainable_tflops(intensity_flop_per_byte: float, peak_tflops: float, hbm_tbps: float) -> float:
    """Attainable rate min(C, B * I) in TFLOP/s at intensity I (FLOP/byte)."""
    i = validate.nonnegative("intensity_flop_per_byte", intensity_flop_per_byte)
    return min(validate.positive("peak_tflops", peak_tflops), validate.positive("hbm_tbps", hbm_tbps) * i)


@dataclass(frozen=True)
class Bound:
    """The two lower bounds on a kernel's time, in ms, and which one binds."""

    compute_ms: float
    memory_ms: float
    intensity: float  # FLOP/byte
    ridge: float  # FLOP/byte

    @property
    def time_ms(self) -> float:
        return max(self.compute_ms, self.memory_ms)

    @property
    def limiter(self) -> str:
        """``"memory"`` or ``"compute"``: the larger bound (``"memory"`` on a tie)."""
        return "compute" if self.compute_ms > self.memory_ms else "memory"

    def __str__(self) -> str:
        return (
            f"I = {self.intensity:.3g} FLOP/B (ridge {self.ridge:.3g}): compute >= {self.compute_ms:.4g} ms, "
            f"memory >= {self.memory_ms:.4g} ms -> {self.limiter}-bound, t >= {self.time_ms:.4g} ms"
        )


def bound(flops: float, bytes_moved: float, peak_tflops: float, hbm_tbps: float) -> Bound:
    """Lower bounds t >= max(F/C, D/B) for ``flops`` FLOPs and ``bytes_moved`` bytes.

    ``peak_tflops`` is C in TFLOP/s and ``hbm_tbps`` is B in TB/s (decimal). Returns a ``Bound`` with both
    terms in milliseconds. Raises ``ValueError``/``TypeError`` naming the bad argument.
    """
    f = validate.nonnegative("flops", flops)
    d = validate.positive("bytes_moved", bytes_moved)
    c = validate.positive("peak_tflops", peak_tflops)
    b = validate.positive("hbm_tbps", hbm_tbps)
    return Bound(compute_ms=f / (c * 1e12) * 1e3, memory_ms=d / (b * 1e12) * 1e3, intensity=f / d, ridge=c / b)


def peak_for(spec: hardware.GPUSpec, op_kind: str, dtype: str = "fp32", *, tf32: bool = False) -> float:
    """The peak (TFLOP/s) that bounds an operation of ``op_kind`` in ``dtype`` on ``spec``.

    - ``elementwise`` and ``reduction``: the FP32 CUDA-core rate, whatever the storage dtype. Tensor cores
      only do matrix products, and code that loads fp16/bf16 and computes in fp32 registers runs on the FP32
      lanes. This is the roof for such code, not for every non-tensor instruction: where the GPU packs two
      16-bit results per lane (Hopper's bf16 add/multiply/FMA, twice the FP32 rate) the bf16 arithmetic
      itself can run faster, and exp2, log2, sin, cos and reciprocals run on the special-function units at a
      fraction of it. ``unit_rate`` and ``UNIT_RESULTS_PER_CLOCK`` give those units' rates.
    - ``matmul``: the tensor-core rate for ``dtype`` (``fp32`` means the CUDA cores unless ``tf32=True``).

    Raises ``ValueError`` for an unknown ``op_kind`` or ``dtype`` and ``LookupError`` if the GPU lacks
    the unit.
    """
    if not isinstance(spec, hardware.GPUSpec):
        raise TypeError(f"spec must be a hardware.GPUSpec (use hardware.get(name)), got {type(spec).__name__}")
    if op_kind not in OP_KINDS:
        raise ValueError(f"op_kind must be one of {OP_KINDS}, got {op_kind!r}")
    if dtype not in hardware.DTYPES:
        raise ValueError(f"dtype must be one of {hardware.DTYPES}, got {dtype!r}")
    if op_kind != "matmul":
        return spec.peak("fp32")
    if dtype == "fp32" and tf32:
        dtype = "tf32"
    return spec.peak(dtype)


@dataclass(frozen=True)
class KernelPoint:
    """A measured (or recorded) kernel on the roofline: counts by hand, time by measurement."""

    name: str
    flops: float
    bytes_moved: float
    time_ms: float
    dtype: str = "fp32"
    op_kind: str = "elementwise"
    source: str = "measured"  # "measured" live, or a reference-data label

    def __post_init__(self):
        validate.nonnegative("flops", self.flops)
        validate.positive("bytes_moved", self.bytes_moved)
        validate.positive("time_ms", self.time_ms)
        if self.dtype not in hardware.DTYPES:
            raise ValueError(f"dtype must be one of {hardware.DTYPES}, got {self.dtype!r}")
        if self.op_kind not in OP_KINDS:
            raise ValueError(f"op_kind must be one of {OP_KINDS}, got {self.op_kind!r}")

    @property
    def intensity(self) -> float:
        return intensity(self.flops, self.bytes_moved)

    @property
    def tflops(self) -> float:
        """Achieved rate in TFLOP/s."""
        return self.flops / (self.time_ms * 1e-3) / 1e12

    @property
    def tbps(self) -> float:
        """Achieved HBM traffic in TB/s, from the hand-counted bytes."""
        return self.bytes_moved / (self.time_ms * 1e-3) / 1e12


# ---------------------------------------------------------------------------------------------------------
# The non-tensor units and the instruction-issue roof (notebook 01).

#: Results per clock per SM of the units elementwise code runs on, by compute capability: ``fp32`` FP32
#: add/multiply/FMA lanes, ``bf16`` 16-bit add/multiply/FMA results (packed pairs: twice the FP32 lanes),
#: ``sfu`` the special-function units (the approximations behind exp2, log2, sin, cos, reciprocal and
#: reciprocal square root). Source: CUDA C++ Programming Guide, "Arithmetic Instructions", the table
#: "Throughput of Native Arithmetic Instructions (Operations per Clock Cycle per Multiprocessor)".
UNIT_RESULTS_PER_CLOCK = {(9, 0): {"fp32": 128, "bf16": 256, "sfu": 16}}


def _units(spec: hardware.GPUSpec) -> dict:
    if not isinstance(spec, hardware.GPUSpec):
        raise TypeError(f"spec must be a hardware.GPUSpec (use hardware.get(name)), got {type(spec).__name__}")
    units = UNIT_RESULTS_PER_CLOCK.get(spec.compute_capability)
    if units is None or not spec.sms:
        raise LookupError(
            f"no per-SM unit throughputs for {spec.name} (compute capability "
            f"{spec.compute_capability}); known: {sorted(UNIT_RESULTS_PER_CLOCK)}"
        )
    return units


def unit_rate(spec: hardware.GPUSpec, unit: str) -> float:
    """Results per second of ``unit`` ("fp32", "bf16" or "sfu") over the whole GPU, in units of 1e12 (one
    result = one lane's instruction; an FMA result is 2 FLOPs). The clock is the one the datasheet's FP32
    peak implies: ``fp32 TFLOP/s / (2 FLOPs x fp32 lanes x SMs)``. Raises ``ValueError`` for an unknown unit
    and ``LookupError`` for a GPU without a row in ``UNIT_RESULTS_PER_CLOCK``."""
    units = _units(spec)
    if unit not in units:
        raise ValueError(f"unit must be one of {tuple(units)}, got {unit!r}")
    clock_thz = spec.peak("fp32") / (2 * units["fp32"] * spec.sms)  # 1e12 clocks/s
    return units[unit] * spec.sms * clock_thz


def instructions_per_element(
    spec: hardware.GPUSpec, hbm_tbps: float, bytes_per_element: float, unit: str = "fp32"
) -> float:
    """How many ``unit`` instructions per element a GPU can issue in the time the memory moves the element:
    ``unit_rate / (hbm_tbps / bytes_per_element)``. A kernel that needs more per element is bound by
    instruction issue, not by bandwidth (the second roof). ``hbm_tbps`` in TB/s (e.g. the measured copy
    bandwidth); ``bytes_per_element`` read plus written (8 for an fp32 copy)."""
    elements_per_s = validate.positive("hbm_tbps", hbm_tbps) / validate.positive("bytes_per_element", bytes_per_element)
    return unit_rate(spec, unit) / elements_per_s
