"""The one tolerance table, and the error measures that use it, shared by tests, checkers and notebooks.

Four kinds of result, four bounds (all against a float64 reference of the same rounded inputs):

- elementwise (one rounding of an exactly computed value): ``|got - ref| <= ulp(dtype) |ref|``. Half an
  ulp would do for round-to-nearest; one ulp because Triton's interpreter rounds fp32 -> bf16 by truncation.
- matmul (a sum of K products): ``ulp(dtype)|ref| + (K + 2) 2^-24 (|A| @ |B|) + tiny(dtype)``, plus
  ``2^-9 (|A| @ |B|)`` where fp32 inputs are cut to TF32 (10 mantissa bits, up to 2^-10 relative each, so
  2^-9 a product: measured on an H200, a teaching tl.dot in fp32 exceeded 2^-10 at K = 3). Higham, "Accuracy and
  Stability of Numerical Algorithms", 2nd ed., section 3.1 (the ``gamma_K`` bound for a dot product).
- attention (softmax and two matmuls): ``max |got - ref| <= rel(dtype) * max(max |ref|, floor)`` per
  tensor; fp16 and bf16 round P and dS to the dtype before their matmuls, as FlashAttention does. fp32
  attention whose dots declare TF32 takes twice fp16's bound (``attention_rel``).
- a whole matrix product, as the precision lesson measures it (input precision and accumulator):
  ``relative_error(ref, got, kind="norm") < matmul_rel_bound(dtype, input_precision)``.

Every bound follows the arithmetic a kernel declares, never the machine it runs on: a dot declared TF32 gets
the TF32 bound in Triton's interpreter too, which gpulab makes cut fp32 inputs to TF32 as the tensor cores do
(``gpulab.core.triton_compat``), so the interpreter is held to the bound that matters on a GPU.
"""

from __future__ import annotations

import math

import torch

#: One unit in the last place, relative: 2^-(mantissa bits).
ULP = {torch.float64: 2.0**-52, torch.float32: 2.0**-23, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
#: Absolute floor: the spacing of subnormals (fp16), or the smallest normal where subnormals may be flushed.
TINY = {torch.float64: 2.0**-1022, torch.float32: 2.0**-126, torch.float16: 2.0**-24, torch.bfloat16: 2.0**-126}
#: Attention forward (out) and backward (dq, dk, dv), relative to the reference's largest magnitude.
ATTENTION_REL = {torch.float32: 2e-5, torch.float16: 2.0**-8, torch.bfloat16: 2.0**-5}
ATTENTION_GRAD_REL = {torch.float32: 5e-5, torch.float16: 2.0**-7, torch.bfloat16: 2.0**-4}
#: The log-sum-exp, |got - ref| / (1 + |ref|): kept in fp32 by every kernel.
LSE_ABS = 1e-5
#: Triton's ``input_precision`` of an fp32 ``tl.dot`` that names none (``TRITON_F32_DEFAULT`` unset).
DEFAULT_INPUT_PRECISION = "tf32"
#: An fp32-accumulated matmul, relative Frobenius error ``||C - C_ref|| / ||C_ref||``, per declared
#: ``input_precision`` of its fp32 dot. "tf32" cuts each fp32 input to TF32 (10 explicit mantissa bits, NVIDIA,
#: "NVIDIA A100 Tensor Core GPU Architecture" (2020), TF32; the tensor cores drop the low bits: up to 2^-10
#: relative each, ``gpulab.core.triton_compat``), so a product is off by up to 2^-9 ~ 1.95e-3 relative, and the
#: norm by about 2^-10 on random signs; 2e-3 holds even inputs all cut by almost a TF32 ulp, with the fp32
#: sums. "ieee", and fp16/bf16 inputs (their products are exact in fp32), leave only the fp32 sums: Higham's
#: gamma_K with u = 2^-24 is 6e-8 K in the worst case, and random signs keep the norm near sqrt(K) u, 5e-6 at
#: K = 8192 for one running sum (tiled sums do better): 1e-5.
MATMUL_PRECISION_REL = {"tf32": 2e-3, "ieee": 1e-5}


def matmul_rel_bound(dtype: torch.dtype, input_precision: str = DEFAULT_INPUT_PRECISION) -> float:
    """The bound ``MATMUL_PRECISION_REL`` sets on ``relative_error(ref, c, "norm")`` of an fp32-accumulated
    matmul whose inputs have ``dtype`` (torch.float32, float16 or bfloat16) and whose dot declares
    ``input_precision`` ("tf32" or "ieee"; used for fp32 inputs only: 16-bit products are exact in fp32).
    The declared precision decides, on any machine. Raises ValueError for another dtype or precision."""
    if input_precision not in MATMUL_PRECISION_REL:
        raise ValueError(f"input_precision must be one of {tuple(MATMUL_PRECISION_REL)}, got {input_precision!r}")
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"dtype must be torch.float32, float16 or bfloat16, got {dtype!r}")
    return MATMUL_PRECISION_REL[input_precision if dtype == torch.float32 else "ieee"]


def attention_rel(dtype: torch.dtype, input_precision: str = DEFAULT_INPUT_PRECISION, grad: bool = False) -> float:
    """The bound on ``max_rel_error`` of attention (``ATTENTION_GRAD_REL`` for dq, dk, dv where ``grad``, else
    ``ATTENTION_REL`` for the output) whose inputs have ``dtype`` (torch.float32, float16 or bfloat16) and whose
    dots declare ``input_precision`` ("tf32" or "ieee"; Triton's default "tf32" unless named). fp32 with "tf32"
    dots: twice fp16's bound, since TF32 cuts each input by up to 2^-10 where fp16 rounds by up to 2^-11 (the
    score q . k, the bulk of the error, is off by twice as much). Raises ValueError for another dtype or
    precision."""
    table = ATTENTION_GRAD_REL if grad else ATTENTION_REL
    if declares_tf32(dtype, input_precision):
        return 2 * table[torch.float16]
    if dtype not in table:
        raise ValueError(f"dtype must be torch.float32, float16 or bfloat16, got {dtype!r}")
    return table[dtype]


def declares_tf32(dtype: torch.dtype, input_precision: str = DEFAULT_INPUT_PRECISION) -> bool:
    """True where a dot of ``dtype`` inputs declaring ``input_precision`` cuts its inputs to TF32 (fp32
    inputs, "tf32"): the ``tf32`` argument of ``matmul_bound``, ``matmul_mismatch`` and ``matmul_violation``.
    Raises ValueError for an unknown ``input_precision``."""
    if input_precision not in MATMUL_PRECISION_REL:
        raise ValueError(f"input_precision must be one of {tuple(MATMUL_PRECISION_REL)}, got {input_precision!r}")
    return dtype == torch.float32 and input_precision == "tf32"


def _first_bad(bad: torch.Tensor, got64: torch.Tensor, ref64: torch.Tensor) -> str:
    idx = bad.nonzero()[0].tolist()
    return (
        f"{int(bad.sum())} of {got64.numel()} elements off; first at index {idx}: "
        f"got {got64[tuple(idx)].item()!r}, expected {ref64[tuple(idx)].item()!r}"
    )


def elementwise_mismatch(got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype | None = None) -> str | None:
    """None when every element of ``got`` is within one ulp of ``dtype`` (default ``got.dtype``) of the
    float64 ``ref``; else a message naming how many differ and the first (index, got, expected). NaN in
    ``got`` where ``ref`` is finite (an unwritten, poisoned element) counts as a mismatch."""
    dtype = dtype or got.dtype
    got64, ref64 = got.detach().double().cpu(), ref.detach().double().cpu()
    if got64.shape != ref64.shape:
        return f"shape {tuple(got64.shape)} != reference {tuple(ref64.shape)}"
    tol = ULP[dtype] * ref64.abs() + TINY[dtype]
    same_special = (got64 == ref64) | (torch.isnan(got64) & torch.isnan(ref64))
    bad = ~same_special & ~((got64 - ref64).abs() <= tol)
    return _first_bad(bad, got64, ref64) if bad.any() else None


def assert_close_elementwise(got, ref, dtype=None) -> None:
    """Raise AssertionError with ``elementwise_mismatch``'s message when it finds one."""
    msg = elementwise_mismatch(got, ref, dtype)
    if msg:
        raise AssertionError(msg)


def matmul_bound(a: torch.Tensor, b: torch.Tensor, ref64: torch.Tensor, tf32: bool = False) -> torch.Tensor:
    """The elementwise error bound (float64, CPU, shape (M, N)) of ``a @ b`` in ``a.dtype`` against the
    float64 ``ref64``; see the module docstring."""
    mag = a.detach().double().abs().cpu() @ b.detach().double().abs().cpu()
    k = a.shape[1]
    return ULP[a.dtype] * ref64.abs() + ((k + 2) * 2.0**-24 + (2.0**-9 if tf32 else 0.0)) * mag + TINY[a.dtype]


def matmul_mismatch(c, a, b, ref64, tf32: bool = False) -> str | None:
    """None when ``c`` is within ``matmul_bound`` everywhere; else how many elements differ and the first."""
    c64 = c.detach().double().cpu()
    if c64.shape != ref64.shape:
        return f"shape {tuple(c64.shape)} != reference {tuple(ref64.shape)}"
    bad = ~((c64 - ref64).abs() <= matmul_bound(a, b, ref64, tf32))
    return _first_bad(bad, c64, ref64) if bad.any() else None


def matmul_violation(c, a, b, ref64, tf32: bool = False) -> float:
    """max over elements of |c - ref| / bound: <= 1 passes (inf for NaN)."""
    err = (c.detach().double().cpu() - ref64).abs() / matmul_bound(a, b, ref64, tf32)
    return float(torch.nan_to_num(err, nan=math.inf).max()) if err.numel() else 0.0


def max_rel_error(got: torch.Tensor, ref: torch.Tensor, floor: float = 1e-3) -> float:
    """``max |got - ref| / max(max |ref|, floor)`` in float64 (inf for NaN or inf in ``got``); 0.0 if empty.
    The attention tolerances bound this."""
    got64, ref64 = got.detach().double().cpu(), ref.detach().double().cpu()
    if got64.numel() == 0:
        return 0.0
    if not torch.isfinite(got64).all():
        return math.inf
    return float((got64 - ref64).abs().max()) / max(float(ref64.abs().max()), floor)


def relative_error(ref: torch.Tensor, approx: torch.Tensor, kind: str = "mean") -> float:
    """Relative error of ``approx`` against ``ref``, in float64; returns a float.

    kind="mean": mean over the nonzero elements of |approx - ref| / |ref| (each value counts once, so a few
    outliers cannot hide the error on the bulk); a NaN or inf anywhere in approx - ref gives inf.
    kind="norm": ||approx - ref||_2 / ||ref||_2 (Frobenius for matrices), dominated by the largest values.
    ref, approx: same shape, any float dtype, any device. Returns 0.0 when ref has no nonzero element and
    approx equals it. Raises ValueError for different shapes or an unknown kind.
    """
    if ref.shape != approx.shape:
        raise ValueError(f"ref and approx must have the same shape, got {tuple(ref.shape)} and {tuple(approx.shape)}")
    if kind not in ("mean", "norm"):
        raise ValueError(f"kind must be 'mean' or 'norm', got {kind!r}")
    r, a = ref.detach().double().cpu().flatten(), approx.detach().double().cpu().flatten()
    diff = torch.nan_to_num((a - r).abs(), nan=math.inf)
    if kind == "norm":
        den, num = float(torch.linalg.vector_norm(r)), float(torch.linalg.vector_norm(diff))
    else:
        if torch.isinf(diff).any():
            return math.inf
        nz = r != 0
        den, num = float(nz.sum()), float((diff[nz] / r[nz].abs()).sum())
    return num / den if den else (0.0 if num == 0 else math.inf)
