"""Block-scaled number formats, emulated in plain torch: MXFP8 and NVFP4 with their element and scale types.

Every function here is exact to the format's definition: values are computed in float64 (which holds every
E4M3, E2M1 and E8M0 value and every product of them exactly) and rounded once, to nearest with ties to even.
They run on CPU or GPU tensors alike; no Triton, no hardware support needed.

Formats (the seed lecture: "MXFP8 uses a scale for each block of 32 values; ... a block of 16 values has an
E4M3 scale, with an additional FP32 tensor scale"):

- ``E4M3`` (OCP 8-bit floating point "e4m3fn", the MX element type of MXFP8; OCP MX v1.0 section 5.3.1):
  1 sign, 4 exponent (bias 7), 3 mantissa bits; subnormals; no infinity; NaN = S.1111.111; max 448.
- ``E2M1`` (OCP MX v1.0 section 5.3.3, FP4): 1 sign, 2 exponent (bias 1), 1 mantissa bit: +-{0, 0.5, 1, 1.5,
  2, 3, 4, 6}; no infinity, no NaN.
- ``E8M0`` (OCP MX v1.0 section 5.4.1, the MX scale type): 8 exponent bits, bias 127, no sign, no mantissa,
  no zero: code c in 0..254 is 2^(c-127); 0xFF is NaN (NVIDIA CUDA math API, ``__nv_fp8_e8m0``).
- ``MXFP8`` (OCP MX v1.0 sections 5 and 6.3): blocks of 32 values along the last dim, one E8M0 scale each,
  E4M3 elements. Scale rule (section 6.3): shared_exp = floor(log2(amax_block)) - emax_elem, emax_elem = 8
  for E4M3, clamped to E8M0's range; elements = quantize_e4m3(x / 2^shared_exp), clamping to max normal.
- ``NVFP4`` (NVIDIA, Transformer Engine docs "FP8 and FP4", NVFP4 blog): E2M1 elements, one E4M3 scale per
  16 values, one FP32 tensor scale: s_t = amax(x) / (448 * 6); s_b = quantize_e4m3(amax_block / 6 / s_t);
  elements = quantize_e2m1(x / (s_b * s_t)); x ~= e * s_b * s_t.

Overflow convention: every element quantizer saturates (values beyond the largest finite value, including
+-inf, become +-max finite), as OCP MX 6.3 prescribes for MX elements ("clamp to max normal") and as NVIDIA's
``__NV_SATFINITE`` conversions do; an E4M3 NaN or an "overflow to NaN" would poison a whole block's matmul.
torch 2.13's CPU cast to ``torch.float8_e4m3fn`` saturated the same way in a run here (470, 1000 and inf
became 448); the tests compare with that cast only inside +-448, where rounding is all that differs.
NaN stays NaN. The FP32 scales (NVFP4's tensor scale, plain FP8's per-tensor scale) saturate the same way, at
float32's largest finite value: a scale rounded to FP32 infinity (amax beyond about 1.5e41 for FP8, 9.1e41 for
NVFP4) would make every element 0 * inf = NaN. What comes back is float32: an element whose value lies beyond
float32's range comes back +-inf (IEEE 754-2019 section 7.4, overflow under round to nearest, as the bf16 and fp16
casts of ``roundtrip`` do), element by element; the rest of the tensor is quantized with the saturated scale.
In the block formats a block that holds a NaN or an infinity gets a NaN scale (E8M0 0xFF,
E4M3 0x7F), so the whole block dequantizes to NaN: the OCP MX meaning of a NaN scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core import tolerances, validate

__all__ = [
    "E4M3_MAX",
    "E2M1_MAX",
    "E4M3_EMAX",
    "E2M1_EMAX",
    "E8M0_BIAS",
    "E8M0_MIN_EXP",
    "E8M0_MAX_EXP",
    "MX_BLOCK",
    "NVFP4_BLOCK",
    "FORMATS",
    "decode_e4m3",
    "decode_e2m1",
    "decode_e8m0",
    "encode_e4m3",
    "encode_e2m1",
    "encode_e8m0",
    "e4m3_values",
    "e2m1_values",
    "e8m0_values",
    "quantize_e4m3",
    "quantize_e2m1",
    "BlockQuantized",
    "quantize_mxfp8",
    "quantize_nvfp4",
    "dequantize",
    "mx_shared_exponent",
    "bits_per_value",
    "roundtrip",
    "gaussian_data",
    "outlier_data",
    "error_vs_bits",
]

E4M3_MAX = 448.0  # S.1111.110 = 1.75 * 2^8
E2M1_MAX = 6.0  # S.11.1 = 1.5 * 2^2
E4M3_EMAX = 8  # exponent of the largest E4M3 binade (OCP MX v1.0 table of element formats)
E2M1_EMAX = 2
E8M0_BIAS = 127
E8M0_MIN_EXP = -127  # code 0x00
E8M0_MAX_EXP = 127  # code 0xFE; 0xFF is NaN
MX_BLOCK = 32  # OCP MX v1.0: k = 32 for every MX format
NVFP4_BLOCK = 16  # NVIDIA NVFP4: 16 values per E4M3 scale
_E4M3 = dict(mbits=3, emin=-6, maxval=E4M3_MAX)  # emin: exponent of the smallest normal binade (1 - bias)
_E2M1 = dict(mbits=1, emin=0, maxval=E2M1_MAX)
_E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # codes 0..7; bit 3 is the sign

# Formats that roundtrip/error_vs_bits know: name -> element bits (scales are added by bits_per_value).
FORMATS = ("mxfp8", "nvfp4", "fp8_e4m3", "bf16", "fp16")
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# ----------------------------------------------------------------------------------------- input checks
def _check_x(name: str, x) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _FLOAT_DTYPES:
        raise TypeError(
            f"{name} must have a floating dtype (float16, bfloat16, float32, float64), "
            f"got {str(x.dtype).replace('torch.', '')}"
        )


def _check_codes(name: str, codes) -> None:
    if not isinstance(codes, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(codes).__name__}")
    if codes.dtype != torch.uint8:
        raise TypeError(f"{name} must have dtype uint8, got {str(codes.dtype).replace('torch.', '')}")


# ------------------------------------------------------------------------------ element formats: decode
def decode_e4m3(codes: torch.Tensor) -> torch.Tensor:
    """E4M3 bit patterns -> values. codes: uint8, any shape. Returns float32, same shape; 0x7F/0xFF -> NaN.

    Normal (exponent field E in 1..15): (-1)^S * 2^(E-7) * (1 + M/8); subnormal (E = 0): (-1)^S * 2^-6 * M/8.
    Raises TypeError unless codes is a uint8 tensor. Source: OCP 8-bit floating point spec (E4M3, "fn").
    """
    _check_codes("codes", codes)
    c = codes.to(torch.int64)
    sign = torch.where(c >= 128, -1.0, 1.0).to(torch.float64)
    e, m = (c >> 3) & 0xF, (c & 0x7).to(torch.float64)
    mag = torch.where(e == 0, m / 8 * 2.0**-6, (1 + m / 8) * torch.exp2((e - 7).to(torch.float64)))
    mag = torch.where((c & 0x7F) == 0x7F, float("nan"), mag)
    return (sign * mag).to(torch.float32)


def decode_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """E2M1 bit patterns (low 4 bits of each uint8) -> values. codes: uint8 in 0..15, any shape.

    Returns float32, same shape. Raises TypeError for a non-uint8 tensor, ValueError for a code above 15.
    Source: OCP MX v1.0 section 5.3.3.
    """
    _check_codes("codes", codes)
    if codes.numel() and int(codes.max()) > 15:
        raise ValueError(f"codes must be E2M1 codes in 0..15, got {int(codes.max())}")
    table = torch.tensor(_E2M1_MAGNITUDES, dtype=torch.float32, device=codes.device)
    c = codes.to(torch.int64)
    return torch.where(c >= 8, -1.0, 1.0) * table[c & 7]


def decode_e8m0(codes: torch.Tensor) -> torch.Tensor:
    """E8M0 scale codes -> 2^(code - 127); 0xFF -> NaN. codes: uint8, any shape. Returns float32 (2^-127 is a
    float32 subnormal, held exactly). Raises TypeError unless uint8. Source: OCP MX v1.0 section 5.4.1."""
    _check_codes("codes", codes)
    c = codes.to(torch.float64)
    return torch.where(codes == 0xFF, float("nan"), torch.exp2(c - E8M0_BIAS)).to(torch.float32)


# ------------------------------------------------------------------------------- value tables
def e4m3_values(nonnegative: bool = False) -> torch.Tensor:
    """Every distinct finite E4M3 value, sorted, float64 on the CPU (+0 and -0 count once).

    Decodes all 256 codes and drops the two NaNs: 253 values from -448 to 448 (127 non-negative ones with
    ``nonnegative=True``), smallest positive 2^-9. Counts verified in tests/test_formats.py.
    """
    v = decode_e4m3(torch.arange(256, dtype=torch.uint8)).double()
    v = torch.unique(v[~torch.isnan(v)])  # sorted; unique merges -0 with +0
    return v[v >= 0] if nonnegative else v


def e2m1_values(nonnegative: bool = False) -> torch.Tensor:
    """Every distinct E2M1 value, sorted, float64: the 15 values +-{0.5, 1, 1.5, 2, 3, 4, 6} and 0."""
    v = torch.unique(decode_e2m1(torch.arange(16, dtype=torch.uint8)).double())
    return v[v >= 0] if nonnegative else v


def e8m0_values() -> torch.Tensor:
    """Every E8M0 value, sorted, float64: 2^-127 .. 2^127, 255 values (no zero, no sign, 0xFF is NaN)."""
    return decode_e8m0(torch.arange(255, dtype=torch.uint8)).double()


# ------------------------------------------------------------------------------ element formats: quantize
def _rne(x: torch.Tensor, mbits: int, emin: int, maxval: float) -> torch.Tensor:
    """Round float64 ``x`` to the nearest value of a minifloat with ``mbits`` mantissa bits, smallest normal
    exponent ``emin`` (subnormals below it) and largest finite ``maxval``; ties to even; saturate."""
    a = x.abs()
    a = torch.where(torch.isinf(a), maxval, a)
    _, ex = torch.frexp(a)  # a = m * 2^ex with m in [0.5, 1): floor(log2 a) = ex - 1
    e = torch.clamp(ex.to(torch.int64) - 1, min=emin)  # below emin the spacing stays 2^(emin - mbits)
    ulp = torch.exp2((e - mbits).to(torch.float64))
    q = torch.round(a / ulp) * ulp  # torch.round: ties to even; a / ulp is exact (power-of-two scaling)
    q = torch.clamp(q, max=maxval)  # saturate; RNE may also carry into the next binade, clamped here too
    return torch.where(torch.isnan(x), x, torch.copysign(q, x))


def quantize_e4m3(x: torch.Tensor) -> torch.Tensor:
    """Round x to the nearest E4M3 value (ties to even), saturating at +-448 (inf too); NaN stays NaN.

    x: float16/bfloat16/float32/float64, any shape, any device. Returns the same dtype, shape and device
    (every E4M3 value is exact in each of them). Raises TypeError for another dtype. The E4M3 grid: OCP 8-bit
    floating point spec; saturation: OCP MX v1.0 section 6.3 and NVIDIA ``__NV_SATFINITE``.
    """
    _check_x("x", x)
    return _rne(x.double(), **_E4M3).to(x.dtype)


def quantize_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Round x to the nearest E2M1 value (ties to even), saturating at +-6 (inf too); NaN stays NaN (E2M1 has
    no NaN: the block formats carry it in the scale). Same dtypes, shape and errors as ``quantize_e4m3``."""
    _check_x("x", x)
    return _rne(x.double(), **_E2M1).to(x.dtype)


def encode_e4m3(v: torch.Tensor) -> torch.Tensor:
    """E4M3 values -> bit patterns (uint8, same shape). v must already be on the grid (use quantize_e4m3);
    NaN -> 0x7F, -0.0 -> 0x80. Raises TypeError for a non-float dtype, ValueError for an off-grid value."""
    _check_x("v", v)
    v64 = v.double()
    q = _rne(v64, **_E4M3)
    if not torch.equal(torch.nan_to_num(q, nan=0.0), torch.nan_to_num(v64, nan=0.0)):
        raise ValueError("v must hold E4M3 values only (round with quantize_e4m3 first)")
    a = v64.abs()
    _, ex = torch.frexp(a)
    e = ex.to(torch.int64) - 1
    sub = a < 2.0**-6
    m_sub = (a / 2.0**-9).round().to(torch.int64)
    m_norm = ((a / torch.exp2(e.to(torch.float64)) - 1) * 8).round().to(torch.int64)
    bits = torch.where(sub, m_sub, ((e + 7) << 3) | m_norm)
    bits = torch.where(torch.isnan(v64), 0x7F, bits)
    return (bits | (torch.signbit(v64).to(torch.int64) << 7) * (~torch.isnan(v64))).to(torch.uint8)


def encode_e2m1(v: torch.Tensor) -> torch.Tensor:
    """E2M1 values -> 4-bit codes held in uint8 (same shape); -0.0 -> 8. v must be on the grid and finite.
    Raises TypeError for a non-float dtype, ValueError for an off-grid value or NaN."""
    _check_x("v", v)
    v64 = v.double()
    table = torch.tensor(_E2M1_MAGNITUDES, dtype=torch.float64, device=v.device)
    idx = torch.searchsorted(table, v64.abs().contiguous()).clamp(max=7)
    if torch.isnan(v64).any() or not torch.equal(table[idx], v64.abs()):
        raise ValueError("v must hold E2M1 values only (round with quantize_e2m1 first)")
    return (idx | (torch.signbit(v64).to(torch.int64) << 3)).to(torch.uint8)


def encode_e8m0(exponent: torch.Tensor) -> torch.Tensor:
    """Scale exponents -> E8M0 codes (exponent + 127, uint8, same shape). exponent: integer tensor in -127..127,
    or a float tensor of integer values in that range whose NaNs become 0xFF.

    An E8M0 code *is* an exponent (OCP MX v1.0 section 5.4.1: the scale is 2^(code - 127), no mantissa), and the
    spec's scale rule (section 6.3, ``mx_shared_exponent``) only ever yields integer exponents: it defines no
    rounding of a fractional one. So a non-integer exponent (3.7) is refused rather than rounded or truncated:
    round the scale's *value* first (``mx_shared_exponent`` floors log2 of the block's amax). Raises TypeError
    for a non-tensor or a bool tensor, ValueError naming the first offending value for a non-integer, infinite
    or out-of-range exponent."""
    if not isinstance(exponent, torch.Tensor):
        raise TypeError(f"exponent must be a torch.Tensor, got {type(exponent).__name__}")
    if exponent.dtype == torch.bool or exponent.is_complex():
        raise TypeError(f"exponent must be an integer or real float tensor, got {exponent.dtype}")
    nan = torch.isnan(exponent) if exponent.is_floating_point() else torch.zeros_like(exponent, dtype=torch.bool)
    if exponent.is_floating_point():
        x = torch.where(nan, 0.0, exponent.double())
        outside = ~((x >= E8M0_MIN_EXP) & (x <= E8M0_MAX_EXP))  # before the cast: inf or 1e30 has no int64
        if outside.any():
            value = float(x[outside].flatten()[0])
            raise ValueError(f"exponent must lie in [{E8M0_MIN_EXP}, {E8M0_MAX_EXP}], got {value}")
        fractional = x != torch.round(x)
        if fractional.any():
            value = float(x[fractional].flatten()[0])
            raise ValueError(
                f"exponent must hold integer exponents (or NaN), got {value}: E8M0 stores 2^e for an integer e "
                "and OCP MX v1.0 defines no rounding of a fractional one (see mx_shared_exponent)"
            )
    e = torch.where(nan, 0, exponent).to(torch.int64)
    if e.numel() and (int(e.min()) < E8M0_MIN_EXP or int(e.max()) > E8M0_MAX_EXP):
        raise ValueError(f"exponent must lie in [{E8M0_MIN_EXP}, {E8M0_MAX_EXP}], got [{int(e.min())}, {int(e.max())}]")
    return torch.where(nan, 0xFF, e + E8M0_BIAS).to(torch.uint8)


# --------------------------------------------------------------------------------------- block formats
@dataclass
class BlockQuantized:
    """A tensor in a block-scaled format, as ``quantize_mxfp8``/``quantize_nvfp4`` return it.

    With x of shape (..., n), block b and nb = ceil(n / b) blocks per row (the last one zero-padded):
      elements:      (..., nb, b) float32, the element values (on the E4M3 or E2M1 grid), padding included.
      element_codes: (..., nb, b) uint8, their bit patterns (E4M3 codes, or E2M1 codes in the low 4 bits).
      scales:        (..., nb) float32, each block's scale value (2^e for MXFP8, the E4M3 s_b for NVFP4;
                     NaN where the block held a NaN or an infinity).
      scale_codes:   (..., nb) uint8, their bit patterns (E8M0 or E4M3).
      tensor_scale:  the FP32 tensor scale s_t (NVFP4), or None (MXFP8).
      shape:         x's shape; block: b; format: "mxfp8" or "nvfp4".
    """

    format: str
    elements: torch.Tensor
    element_codes: torch.Tensor
    scales: torch.Tensor
    scale_codes: torch.Tensor
    shape: tuple
    block: int
    tensor_scale: float | None = None


_FP32_MAX = torch.finfo(torch.float32).max


def _fp32_scale(value: float) -> float:
    """``value`` (>= 0, finite) as an FP32 scale: rounded to float32, saturating at float32's largest finite value
    (the module docstring's overflow convention); 1.0 for 0 (nothing to scale)."""
    return min(float(torch.tensor(value, dtype=torch.float64).float()), _FP32_MAX) or 1.0


def _blocks(x: torch.Tensor, block: int, pad: bool) -> torch.Tensor:
    """x (..., n) -> float64 (..., nb, block), zero-padded on the right (zeros change no block's amax)."""
    _check_x("x", x)
    block = validate.positive_int("block", block)
    if x.ndim == 0:
        raise ValueError("x must have at least 1 dimension (blocks run along the last), got a 0-d tensor")
    n = x.shape[-1]
    if n % block and not pad:
        raise ValueError(f"block ({block}) must divide x's last dimension ({n}) when pad=False")
    x64 = x.double()
    if n % block:
        x64 = torch.nn.functional.pad(x64, (0, block - n % block))
    return x64.reshape(*x.shape[:-1], -1, block)


def mx_shared_exponent(amax: torch.Tensor, emax_elem: int = E4M3_EMAX) -> torch.Tensor:
    """OCP MX v1.0 section 6.3: shared_exp = floor(log2(amax)) - emax_elem, clamped to E8M0's [-127, 127].

    amax: float tensor of block maxima (>= 0), any shape. Returns float64 of the same shape: integer values,
    -127 where amax == 0 (an all-zero block: the smallest scale; its elements are all zero anyway), NaN where
    amax is NaN or inf. floor(log2) is taken from the exponent bits (frexp), so it is exact.
    """
    a = amax.double()
    _, ex = torch.frexp(torch.where(torch.isfinite(a), a, 1.0))
    e = (ex.to(torch.float64) - 1 - emax_elem).clamp(E8M0_MIN_EXP, E8M0_MAX_EXP)
    e = torch.where(a == 0, float(E8M0_MIN_EXP), e)
    return torch.where(torch.isfinite(a), e, float("nan"))


def quantize_mxfp8(x: torch.Tensor, block: int = MX_BLOCK, pad: bool = True) -> BlockQuantized:
    """Quantize x to MXFP8: E4M3 elements, one E8M0 scale per ``block`` consecutive values of the last dim.

    x: (..., n) float16/bfloat16/float32/float64, any device. block: positive int (32 is OCP MXFP8; other
    sizes keep the same scale rule, for the lesson's slider). pad: zero-pad a partial last block (if False,
    block must divide n). Scale (OCP MX v1.0 section 6.3): e = floor(log2(amax_block)) - 8 clamped to
    [-127, 127]; elements = quantize_e4m3(x / 2^e) (values of x / 2^e in (448, 512) clamp to 448). All-zero
    block: e = -127, elements 0. NaN or inf in a block: scale NaN (0xFF), elements 0, block dequantizes to NaN.
    Returns a ``BlockQuantized`` (shapes there). Raises TypeError (x's dtype, block not an int) or ValueError
    (block <= 0, 0-d x, block not dividing n with pad=False), naming the argument.
    """
    xb = _blocks(x, block, pad)  # (..., nb, block) float64
    amax = xb.abs().amax(dim=-1)  # (..., nb); NaN propagates
    e = mx_shared_exponent(amax)  # (..., nb), NaN for non-finite blocks
    scale = torch.exp2(torch.nan_to_num(e, nan=0.0))
    elems = _rne(xb / scale.unsqueeze(-1), **_E4M3)
    elems = torch.where(torch.isnan(e).unsqueeze(-1), 0.0, elems)
    return BlockQuantized(
        "mxfp8",
        elems.float(),
        encode_e4m3(elems),
        torch.where(torch.isnan(e), e, scale).float(),
        encode_e8m0(e),
        tuple(x.shape),
        block,
    )


def quantize_nvfp4(x: torch.Tensor, block: int = NVFP4_BLOCK, pad: bool = True) -> BlockQuantized:
    """Quantize x to NVFP4: E2M1 elements, one E4M3 scale per ``block`` values of the last dim, one FP32 scale.

    x: (..., n) float16/bfloat16/float32/float64, any device. block: positive int (16 is NVIDIA's NVFP4).
    Two-level scaling (NVIDIA NVFP4 recipe, Transformer Engine): s_t = float32(amax(x) / (448 * 6)) over the
    finite values of x (1.0 if they are all zero; saturating at float32's largest finite value); s_b = quantize_e4m3(amax_block / 6 / s_t), computed in
    float64; elements = quantize_e2m1(x / (s_b * s_t)) (saturating at 6 where s_b rounded down). A block whose
    s_b is 0 (all zeros, or amax_block below 2^-10 * 6 * s_t) has elements 0. NaN or inf in a block: s_b NaN
    (E4M3 0x7F), elements 0, the block dequantizes to NaN. Returns a ``BlockQuantized``. Raises as
    ``quantize_mxfp8``.
    """
    xb = _blocks(x, block, pad)  # (..., nb, block) float64
    amax = xb.abs().amax(dim=-1)  # (..., nb)
    bad = ~torch.isfinite(amax)
    finite_amax = float(torch.where(bad, 0.0, amax).max()) if amax.numel() else 0.0
    s_t = _fp32_scale(finite_amax / (E4M3_MAX * E2M1_MAX))
    s_b = _rne(torch.where(bad, 0.0, amax) / E2M1_MAX / s_t, **_E4M3)  # (..., nb) on the E4M3 grid
    denom = (s_b * s_t).unsqueeze(-1)
    elems = torch.where(denom > 0, _rne(xb / torch.where(denom > 0, denom, 1.0), **_E2M1), 0.0)
    elems = torch.where(bad.unsqueeze(-1), 0.0, elems)
    s_b = torch.where(bad, float("nan"), s_b)
    return BlockQuantized(
        "nvfp4", elems.float(), encode_e2m1(elems), s_b.float(), encode_e4m3(s_b), tuple(x.shape), block, s_t
    )


def dequantize(q: BlockQuantized) -> torch.Tensor:
    """Back to numbers: elements * scale (* tensor_scale for NVFP4), padding dropped.

    q: a ``BlockQuantized``. Returns float32 of shape q.shape on q's device (the product is formed in float64
    and rounded once to float32). Raises TypeError for anything else.
    """
    if not isinstance(q, BlockQuantized):
        raise TypeError(f"q must be a BlockQuantized (from quantize_mxfp8/quantize_nvfp4), got {type(q).__name__}")
    y = q.elements.double() * q.scales.double().unsqueeze(-1)  # (..., nb, block)
    if q.tensor_scale is not None:
        y = y * q.tensor_scale
    n = q.shape[-1]
    return y.reshape(*q.shape[:-1], -1)[..., :n].float()


# -------------------------------------------------------------------------------------- bits per value
def bits_per_value(fmt: str, block: int | None = None, numel: int | None = None) -> float:
    """Storage bits per value, scales included.

    fmt: "mxfp8" (8 + 8/block; 8.25 at block 32), "nvfp4" (4 + 8/block; 4.5 at block 16), "fp8_e4m3"
    (8, one per-tensor FP32 scale), "bf16"/"fp16" (16), "fp32" (32). block: defaults to the format's (32, 16).
    numel: the tensor's size; when given, the 32-bit tensor scale of "nvfp4" and "fp8_e4m3" is amortised over
    it (+ 32/numel); when None it is left out (the large-tensor limit). Raises ValueError for an unknown fmt,
    a block with a format that has none, or numel <= 0; TypeError for a non-int block.
    """
    if fmt not in ("mxfp8", "nvfp4", "fp8_e4m3", "bf16", "fp16", "fp32"):
        raise ValueError(f"fmt must be one of mxfp8, nvfp4, fp8_e4m3, bf16, fp16, fp32, got {fmt!r}")
    if numel is not None:
        numel = validate.positive_int("numel", numel)
    if fmt in ("mxfp8", "nvfp4"):
        block = (MX_BLOCK if fmt == "mxfp8" else NVFP4_BLOCK) if block is None else block
        block = validate.positive_int("block", block)
        bits = (8.0 if fmt == "mxfp8" else 4.0) + 8.0 / block
        return bits + (32.0 / numel if fmt == "nvfp4" and numel else 0.0)
    if block is not None:
        raise ValueError(f"block must be None for {fmt} (it has no block scales), got {block}")
    if fmt == "fp8_e4m3":
        return 8.0 + (32.0 / numel if numel else 0.0)
    return {"bf16": 16.0, "fp16": 16.0, "fp32": 32.0}[fmt]


# ------------------------------------------------------------------------------- error on realistic data
def roundtrip(x: torch.Tensor, fmt: str, block: int | None = None) -> torch.Tensor:
    """x through format ``fmt`` and back: float32, x's shape and device.

    fmt: "mxfp8", "nvfp4" (block defaults 32 / 16; a block holding NaN or inf comes back NaN, see the module
    docstring), "fp8_e4m3" (plain FP8 without blocks), "bf16", "fp16" (a cast, round to nearest even; fp16
    overflows to inf beyond 65504). Raises ValueError for an unknown fmt; as the quantizers else.

    The per-tensor scale of "fp8_e4m3": s = amax / 448 held in FP32, amax taken over the *finite* values of
    x (s = 1 if they are all zero or there are none; s saturates at float32's largest finite value); each finite
    element becomes quantize_e4m3(x / s) * s, and inf and NaN elements pass through as they are, so one inf
    cannot turn the tensor into NaN. Elements beyond float32's range come back +-inf, one by one (the module
    docstring's overflow convention); no finite x gives a NaN.
    """
    _check_x("x", x)
    if fmt == "mxfp8":
        return dequantize(quantize_mxfp8(x, MX_BLOCK if block is None else block))
    if fmt == "nvfp4":
        return dequantize(quantize_nvfp4(x, NVFP4_BLOCK if block is None else block))
    if block is not None:
        raise ValueError(f"block must be None for {fmt!r}, got {block}")
    if fmt == "fp8_e4m3":
        x64 = x.double()
        finite = torch.isfinite(x64)
        amax = float(torch.where(finite, x64.abs(), 0.0).max()) if x.numel() else 0.0
        s = _fp32_scale(amax / E4M3_MAX)
        return torch.where(finite, _rne(x64 / s, **_E4M3) * s, x64).float()
    if fmt in ("bf16", "fp16"):
        return x.to(torch.bfloat16 if fmt == "bf16" else torch.float16).float()
    raise ValueError(f"fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")


def gaussian_data(n: int = 4096, seed: int = 0, device: str = "cpu") -> torch.Tensor:
    """n values from N(0, 1), float32 on ``device``, from a fixed seed (1-D)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=g, dtype=torch.float32).to(device)


def outlier_data(
    n: int = 4096, seed: int = 0, n_outliers: int = 8, factor: float = 1000.0, device: str = "cpu"
) -> torch.Tensor:
    """``gaussian_data`` with ``n_outliers`` values at random places pushed to at least ``factor`` in magnitude
    (sign kept; float32, 1-D): the shape of activations with a few large channels. The default is 1000x, not
    100x: E4M3 spans about 18 binades (2^-9 .. 448), so a 100x outlier under one per-tensor scale still leaves
    the Gaussian bulk in E4M3's normal range and per-tensor FP8 loses nothing to it (tests/test_formats.py
    checks what 1000x does)."""
    x = gaussian_data(n, seed)
    g = torch.Generator().manual_seed(seed + 1)
    idx = torch.randperm(n, generator=g)[:n_outliers]
    x[idx] = x[idx].sign() * (x[idx].abs() + 1.0) * factor  # >= factor in magnitude, sign kept
    return x.to(device)


def error_vs_bits(
    datasets: dict | None = None,
    mx_block: int = MX_BLOCK,
    nv_block: int = NVFP4_BLOCK,
    formats=FORMATS,
    kind: str = "mean",
) -> list[dict]:
    """Relative error (against the float64 data) and bits per value of each format on each data set.

    datasets: {name: 1-D or N-D float tensor}; default {"gaussian": gaussian_data(), "outliers":
    outlier_data()} (4096 values each). mx_block / nv_block: block sizes for mxfp8 / nvfp4. kind: the
    ``gpulab.core.tolerances.relative_error`` kind ("mean" or "norm"). formats: names from ``FORMATS``. Returns a list
    of dicts {"data", "format", "block" (int or None), "bits_per_value" (scales included, tensor scale
    amortised over the data's numel), "rel_error"}, one per (data set, format), in that order.
    """
    if datasets is None:
        datasets = {"gaussian": gaussian_data(), "outliers": outlier_data()}
    rows = []
    for name, x in datasets.items():
        for fmt in formats:
            block = {"mxfp8": mx_block, "nvfp4": nv_block}.get(fmt)
            y = roundtrip(x, fmt, block)
            rows.append(
                dict(
                    data=name,
                    format=fmt,
                    block=block,
                    rel_error=tolerances.relative_error(x, y, kind),
                    bits_per_value=bits_per_value(fmt, block, numel=x.numel()),
                )
            )
    return rows
