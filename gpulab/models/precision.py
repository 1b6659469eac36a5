"""Precision: fewer bytes, faster units, and the error each choice costs.

- ReLU bytes: ``relu_bytes(n, dtype)``, 2n * itemsize (8n fp32, 4n fp16; CS336 Lecture 5, "Reduce
  precision"); the suite ``gpulab.bench.lesson03`` measures GB/s against ``torch.relu``.
- Matmul rate and error per dtype (fp32, tf32, bf16, fp16, fp8): ``matmul_errors`` gives
  ``||C - C_ref||_F / ||C_ref||_F`` against a float64 reference of the *same* random inputs (A, B drawn in
  float64, then cast to each dtype). On a GPU the products come from cuBLAS (``torch._scaled_mm`` for fp8,
  e4m3 inputs, per-tensor scales amax/448); on the CPU they are emulated: inputs rounded to the dtype
  (TF32: 10 mantissa bits, round to nearest, ties away, as ``cvt.rna.tf32.f32``), products summed by torch
  on the CPU. ``gpulab.bench.lesson03`` times cuBLAS per dtype (``matmul_rates``) and measures gpulab's Triton
  matmul (``triton_matmul_errors``, ``accumulation_errors``: fp16 products summed in fp16 and in fp32).
- Hardware gating: ``features(cc, name)`` says which dtypes and units a compute capability has: bf16 and
  tf32 tensor cores need 8.0 (a T4, 7.5, has neither), fp8 needs 8.9 (Ada, Hopper), native MXFP8 / NVFP4
  block-scaled matmul needs 10.0 (Blackwell) (NVIDIA CUDA C++ Programming Guide, compute capabilities; PTX
  ISA, ``mma`` with ``.kind::mxf8f6f4`` / ``.kind::mxf4nvf4`` on sm_100a).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

import gpulab

from ..core import dtypes, tolerances, validate

MATMUL_DTYPES = dtypes.MATMUL
#: name -> torch dtype of the ReLU dtypes, read from the one table (``gpulab.core.dtypes``).
RELU_DTYPES = {name: dtypes.torch_dtype(name) for name in dtypes.ELEMENTWISE}
FP8_MAX = 448.0  # largest finite float8_e4m3fn


# ---- hardware gating ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Features:
    """What a GPU of compute capability ``cc`` offers. ``missing`` maps a feature to why it is absent."""

    cc: tuple | None
    name: str
    available: dict = field(default_factory=dict)  # feature -> bool
    missing: dict = field(default_factory=dict)  # feature -> reason

    def has(self, feature: str) -> bool:
        if feature not in self.available:
            raise ValueError(f"feature must be one of {list(self.available)}, got {feature!r}")
        return self.available[feature]


FEATURES = ("fp32", "tf32", "bf16", "fp16", "fp8", "mx_native")
_NEEDS = {"tf32": (8, 0), "bf16": (8, 0), "fp16": (7, 0), "fp8": (8, 9), "mx_native": (10, 0)}
_WHAT = {
    "tf32": "TF32 tensor cores",
    "bf16": "bf16 tensor cores",
    "fp16": "fp16 tensor cores",
    "fp8": "fp8 (e4m3/e5m2) tensor cores",
    "mx_native": "native MXFP8/NVFP4 block-scaled matmul",
}


def features(cc, name: str = "") -> Features:
    """Which matmul dtypes/units exist at compute capability ``cc`` ((major, minor), or None for no GPU).

    With ``cc=None`` (the interpreter) nothing runs on tensor cores: every feature is missing, and the
    lesson computes errors by emulation on the CPU instead. Raises ``ValueError`` for a malformed cc.
    """
    if cc is not None:
        if (
            not isinstance(cc, (tuple, list))
            or len(cc) != 2
            or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0 for v in cc)
        ):
            raise ValueError(f"cc must be (major, minor) ints, e.g. (9, 0), got {cc!r}")
        cc = tuple(int(v) for v in cc)
    avail, missing = {}, {}
    for f in FEATURES:
        if cc is None:
            avail[f] = False
            missing[f] = "no GPU here (Triton interpreter): nothing runs on tensor cores"
            continue
        need = _NEEDS.get(f, (0, 0))
        avail[f] = cc >= need
        if not avail[f]:
            who = f"{name} " if name else ""
            missing[f] = f"{_WHAT[f]} need compute capability >= {need[0]}.{need[1]}; this GPU {who}has {cc[0]}.{cc[1]}"
    return Features(cc, name or ("CPU (interpreter)" if cc is None else f"cc {cc[0]}.{cc[1]}"), avail, missing)


def this_gpu() -> Features:
    """``features`` of the GPU gpulab runs on (all missing in the interpreter)."""
    if not gpulab.ON_GPU:
        return features(None)
    return features(gpulab.compute_capability(), gpulab.mode_info.device_name)


def gate(feature: str, feats: Features | None = None) -> str | None:
    """None if ``feature`` is available, else a sentence saying why not (for the lesson to print)."""
    feats = feats or this_gpu()
    return None if feats.has(feature) else f"skipped {feature}: {feats.missing[feature]}"


# ---- relu -------------------------------------------------------------------------------------------


def relu_bytes(n: int, dtype: str) -> int:
    """Bytes an out-of-place ReLU on n elements must move: read x, write y (8n fp32, 4n fp16/bf16)."""
    if dtype not in RELU_DTYPES:
        raise ValueError(f"dtype must be one of {list(RELU_DTYPES)}, got {dtype!r}")
    n = validate.integer("n", n)
    return 2 * n * RELU_DTYPES[dtype].itemsize


# ---- matmul error per dtype --------------------------------------------------------------------------


def round_to_tf32(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> the nearest TF32 value (10 explicit mantissa bits; ties away from zero), still fp32."""
    bits = x.float().contiguous().view(torch.int32)
    rounded = (bits + 0x1000) & ~0x1FFF
    keep = ~torch.isfinite(x.float())  # inf/nan stay as they are
    return torch.where(keep, x.float(), rounded.view(torch.float32))


def fp8_quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor fp8: scale = amax / 448; returns (x / scale as float8_e4m3fn, scale as fp32 scalar)."""
    amax = x.abs().max().float().clamp(min=1e-12)
    scale = amax / FP8_MAX
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


def _product(dtype: str, a64: torch.Tensor, b64: torch.Tensor, emulate: bool) -> torch.Tensor:
    """C for ``dtype`` from float64 inputs: on the GPU with cuBLAS, else emulated on the CPU."""
    dev = "cpu" if emulate else "cuda"
    a, b = a64.to(dev), b64.to(dev)
    if dtype == "fp8":
        qa, sa = fp8_quantize(a)
        qb, sb = fp8_quantize(b)
        if emulate:
            return (qa.float() * sa) @ (qb.float() * sb)
        return torch._scaled_mm(qa, qb.t().contiguous().t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    if dtype == "tf32":
        if emulate:
            return round_to_tf32(a) @ round_to_tf32(b)
        return _with_precision("high", lambda: a.float() @ b.float())
    tdtype = dtypes.torch_dtype(dtype)
    if dtype == "fp32" and not emulate:
        return _with_precision("highest", lambda: a.float() @ b.float())
    return a.to(tdtype) @ b.to(tdtype)


def _with_precision(precision: str, fn):
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        return fn()
    finally:
        torch.set_float32_matmul_precision(old)


def matmul_errors(
    n: int, dtypes=MATMUL_DTYPES, seed: int = 0, emulate: bool | None = None, feats: Features | None = None
) -> dict:
    """Relative error ||C - C_ref||_F / ||C_ref||_F per dtype for one pair of random normal n x n inputs.

    A and B are drawn once in float64; each dtype casts the same A and B. ``emulate`` (default: not on a
    GPU) computes on the CPU. On a GPU, dtypes the GPU lacks (``features``) get None. Returns
    {dtype: error or None, ..., "how": "cuBLAS on <gpu>" or "emulated on the CPU"}.
    """
    emulate = (not gpulab.ON_GPU) if emulate is None else emulate
    if not emulate and not gpulab.ON_GPU:
        raise RuntimeError("emulate=False needs a GPU; gpulab is in interpreter mode")
    feats = feats or (None if emulate else this_gpu())
    g = torch.Generator().manual_seed(seed)
    a64 = torch.randn(n, n, generator=g, dtype=torch.float64)
    b64 = torch.randn(n, n, generator=g, dtype=torch.float64)
    ref = a64 @ b64 if emulate else (a64.cuda() @ b64.cuda())
    out = {}
    for d in dtypes:
        if d not in MATMUL_DTYPES:
            raise ValueError(f"dtype must be one of {MATMUL_DTYPES}, got {d!r}")
        if feats is not None and not feats.has(d):
            out[d] = None
            continue
        out[d] = tolerances.relative_error(ref, _product(d, a64, b64, emulate), "norm")
    out["how"] = "emulated on the CPU (inputs rounded, sums by torch)" if emulate else f"cuBLAS on {feats.name}"
    return out


# ---- the lesson's table and choice -------------------------------------------------------------------


def matmul_table(errors: dict, rates: dict | None = None, feats: Features | None = None) -> str:
    """One line per dtype: rate (if known), error (if known), or why the dtype was skipped. Never raises for
    a dtype the GPU lacks: that row says so and the lesson carries on."""
    feats = feats or this_gpu()
    lines = []
    for d in MATMUL_DTYPES:
        if d not in errors and not (rates and d in rates):
            continue
        why = gate(d, feats) if feats.cc is not None else None
        rate, err = (rates or {}).get(d), errors.get(d)
        if why and rate is None and err is None:
            lines.append(f"{d:5} {why}")
            continue
        lines.append(
            f"{d:5} "
            + (f"{rate:8.1f} TFLOP/s  " if rate else "")
            + (f"relative error {err:.2e}" if err is not None else "error not measured")
        )
    return "\n".join(lines)


def fastest_within(budget: float, errors: dict, rates: dict) -> str | None:
    """The dtype with the highest rate whose error is <= ``budget`` (None if none fits).

    budget: a relative error >= 0 (inf: any error). errors: dtype name -> relative error >= 0, or None where it
    was not measured (the GPU lacks the dtype), as ``matmul_errors`` returns it; keys that are not dtypes of
    ``MATMUL_DTYPES`` (its ``"how"``) are ignored. rates: dtype name -> TFLOP/s > 0, or None (or absent) where
    unknown; a dtype without a rate is not chosen. Raises TypeError/ValueError naming the argument (and the
    dtype) for anything else."""
    budget = validate.nonnegative("budget", budget, finite=False)
    for name, table in (("errors", errors), ("rates", rates)):
        if not isinstance(table, Mapping):
            raise TypeError(f"{name} must be a dict of dtype name -> number or None, got {type(table).__name__}")
    err = {d: validate.nonnegative(f"errors[{d!r}]", errors[d]) for d in MATMUL_DTYPES if errors.get(d) is not None}
    rate = {d: validate.positive(f"rates[{d!r}]", rates[d]) for d in MATMUL_DTYPES if rates.get(d) is not None}
    ok = [d for d, e in err.items() if e <= budget and d in rate]
    return max(ok, key=lambda d: rate[d]) if ok else None


def log_spaced_ks(lo: int = 16, hi: int = 16384) -> list[int]:
    """Powers of two from lo to hi inclusive (the first at or above lo, the last at or below hi)."""
    return [2**i for i in range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)]
