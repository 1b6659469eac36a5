"""The interpreter computes what the GPU computes where a check can see it (gpulab.core.triton_compat): an fp32 tl.dot
under the default precision cuts its inputs to TF32 as the tensor cores do, "tf32x3" lands near fp32, "ieee" is
fp32; and lesson 08's old teaching check (fp32 held to float64 at fp32's bound, with TF32 dots), which failed on
the H200, now fails on the CPU too. On a GPU the dots here run on the tensor cores: the same assertions then check
the emulation against the hardware."""

import gpulab  # first: it sets TRITON_INTERPRET=1 before triton is imported  # isort: skip
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import gpulab.kernels  # noqa: F401  (in the interpreter it installs the patch for every launch below)
from gpulab.core import tolerances as tol
from gpulab.core import triton_compat
from gpulab.kernels import flash_teaching as T

M, N, K = 16, 16, 64
TF32_ULP = 2.0**-10  # the spacing of TF32 at 1: 10 explicit mantissa bits


@triton.jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, PREC: tl.constexpr):
    offs_m, offs_n, offs_k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :])  # (M, K)
    b = tl.load(b_ptr + offs_k[:, None] * N + offs_n[None, :])  # (K, N)
    if PREC == "default":
        c = tl.dot(a, b)  # input_precision=None: TRITON_F32_DEFAULT, else "tf32"
    else:
        c = tl.dot(a, b, input_precision=PREC)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], c)


def _dot(a: torch.Tensor, b: torch.Tensor, prec: str) -> torch.Tensor:
    """One tl.dot of fp32 a (M, K) and b (K, N) in a single program; returns (M, N) float32 on the CPU."""
    a, b = a.contiguous().to(gpulab.DEVICE), b.contiguous().to(gpulab.DEVICE)
    c = torch.full((a.shape[0], b.shape[1]), float("nan"), device=gpulab.DEVICE)  # poisoned: unwritten fails
    _dot_kernel[(1,)](a, b, c, a.shape[0], b.shape[1], a.shape[1], PREC=prec)
    return c.cpu()


def _cut(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> TF32 by dropping the 13 low mantissa bits (0xFFFFE000 as an int32 is -8192), written here apart
    from triton_compat's NumPy version."""
    return (x.contiguous().view(torch.int32) & -8192).view(torch.float32)


def _rand(*shape) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64).float()


def _fp32_sums_bound(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The error of summing K exact products in fp32: (K + 2) 2^-24 (|A| @ |B|) plus fp32's ulp of the result and
    its absolute floor (tolerances.matmul_bound without a TF32 term)."""
    ref = a.double() @ b.double()
    return tol.matmul_bound(a, b, ref, tf32=False)


# ---- (a) the dot itself ----------------------------------------------------------------------------------------


def _one_column(x: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    """a with x in column 0 (zeros elsewhere) and b with ones in row 0: c[i, j] = x[i] * 1, a single product."""
    a = torch.zeros(M, K)
    a[: len(x), 0] = torch.tensor(x, dtype=torch.float64).float()
    b = torch.zeros(K, N)
    b[0] = 1.0
    return a, b


def test_default_fp32_dot_cuts_inputs_toward_zero_by_hand():
    # one product x * 1 per element. TF32 keeps 10 mantissa bits: 1 + 3 * 2^-12 = 1 + 0.75 TF32 ulp is cut to
    # 1 (rounding to nearest would give 1 + 2^-10), its negative to -1; 1 + 2^-10 + 2^-23 loses its last bit.
    x = [1 + 3 * 2.0**-12, -(1 + 3 * 2.0**-12), 1 + 2.0**-10 + 2.0**-23, 0.5, -0.0]
    want = [1.0, -1.0, 1 + 2.0**-10, 0.5, 0.0]
    a, b = _one_column(x)
    for prec in ("default", "tf32"):
        c = _dot(a, b, prec)
        assert c[: len(x), 0].tolist() == want, prec
        assert torch.equal(c[: len(x)], c[: len(x), :1].expand(-1, N)), prec  # every column the same product
    assert _dot(a, b, "ieee")[: len(x), 0].tolist() == a[: len(x), 0].tolist()  # "ieee": exact fp32
    # tf32x3: big = rna(x) = 1 + 2^-10 (0.75 ulp rounds up), small = x - big = -2^-12: big * 1 + small * 1 = x
    assert _dot(a, b, "tf32x3")[0, 0].item() == a[0, 0].item()


@pytest.mark.usefixtures("seed")
def test_default_fp32_dot_equals_float64_of_tf32_cut_inputs():
    a, b = _rand(M, K), _rand(K, N)
    c = _dot(a, b, "default")
    ref_cut = _cut(a).double() @ _cut(b).double()
    err = (c.double() - ref_cut).abs()
    assert bool((err <= _fp32_sums_bound(_cut(a), _cut(b))).all()), f"max error {err.max():.2e} beyond fp32 sums"
    assert torch.equal(c, _dot(a, b, "tf32")), "the default of an fp32 dot is 'tf32'"
    # against the exact product the error is TF32's: past fp32's bound, within the TF32 bound (2^-9 a product)
    ref = a.double() @ b.double()
    assert tol.matmul_violation(c, a, b, ref) > 10, "a TF32 dot must miss fp32's bound"
    assert tol.matmul_violation(c, a, b, ref, tf32=True) <= 1
    rel = tol.relative_error(ref, c, "norm")
    assert TF32_ULP / 4 < rel < 2 * TF32_ULP, f"norm error {rel:.2e}: a TF32 cut is up to 2^-10 an input"


@pytest.mark.usefixtures("seed")
def test_ieee_is_fp32_and_tf32x3_lands_near_it():
    a, b = _rand(M, K), _rand(K, N)
    ref = a.double() @ b.double()
    c_ieee, c_x3, c_tf32 = _dot(a, b, "ieee"), _dot(a, b, "tf32x3"), _dot(a, b, "tf32")
    assert tol.matmul_mismatch(c_ieee, a, b, ref) is None
    assert tol.matmul_mismatch(c_x3, a, b, ref) is None  # three TF32 products: fp32's bound at K = 64
    e_x3, e_tf32 = tol.relative_error(ref, c_x3, "norm"), tol.relative_error(ref, c_tf32, "norm")
    assert e_x3 < e_tf32 / 100, (e_x3, e_tf32)
    assert not torch.equal(c_ieee, c_tf32)


def test_tf32x3_of_an_infinite_input_is_infinite():
    # big(inf) = inf, small = inf - inf = NaN: Triton sets the small products' NaN to 0 before adding inf * 1
    a, b = _one_column([1.0, 2.0])
    b[0, 3] = float("inf")
    c = _dot(a, b, "tf32x3")
    assert c[0, 3].item() == c[1, 3].item() == float("inf")
    assert c[0, 0].item() == 1.0 and c[1, 0].item() == 2.0


@pytest.mark.parametrize("env, like", [("ieee", "ieee"), ("tf32x3", "tf32x3"), (None, "tf32")])
def test_triton_f32_default_sets_the_default_precision(monkeypatch, env, like):
    # tl.dot(input_precision=None) reads TRITON_F32_DEFAULT at trace time (triton.knobs.language.fp32_default)
    g = torch.Generator().manual_seed(36)
    a, b = (torch.randn(*s, generator=g, dtype=torch.float64).float() for s in ((M, K), (K, N)))
    want = _dot(a, b, like)
    # A compiled kernel's in-memory cache key leaves TRITON_F32_DEFAULT out (only the on-disk cache's key holds it):
    # a "default" dot compiled under one value would serve the next case, so each case compiles afresh. A program
    # sets the variable once, before its first dot.
    if hasattr(_dot_kernel, "device_caches"):
        _dot_kernel.device_caches.clear()
    if env is None:
        monkeypatch.delenv("TRITON_F32_DEFAULT", raising=False)
    else:
        monkeypatch.setenv("TRITON_F32_DEFAULT", env)
    assert torch.equal(_dot(a, b, "default"), want)


def test_the_numpy_conversions_by_hand():
    # 3 * 2^-135 is subnormal: its two bits (14 and 15) lie above the 13 dropped ones; 3 * 2^-140's do not
    x = np.array(
        [1 + 3 * 2.0**-12, 1 + 2.0**-11, -(1 + 2.0**-11), np.inf, np.nan, 3.4028235e38, 3 * 2.0**-135, 3 * 2.0**-140],
        np.float32,
    )
    cut, rna = triton_compat.tf32_cut(x), triton_compat.tf32_rna(x)
    assert cut[:4].tolist() == [1.0, 1.0, -1.0, np.inf] and np.isnan(cut[4]) and cut[5] < x[5]
    assert cut[6] == x[6] == np.float32(3 * 2.0**-135) and cut[7] == 0.0 < x[7]
    # rna: a tie (1 + half a TF32 ulp) goes away from zero, both signs; fp32's largest rounds to inf
    assert rna[:4].tolist() == [1 + 2.0**-10, 1 + 2.0**-10, -(1 + 2.0**-10), np.inf] and np.isnan(rna[4])
    assert rna[5] == np.inf
    assert cut.dtype == rna.dtype == np.float32 and x[0] == np.float32(1 + 3 * 2.0**-12)  # x untouched


# ---- (b) lesson 08's teaching check ----------------------------------------------------------------------------


def _teaching_errors(L, d, blocks, causal):
    """(out, lse, grads) errors of the teaching FlashAttention in fp32 against float64, as
    tests/test_flash_teaching.py measures them (the same seeded inputs)."""
    g = torch.Generator().manual_seed(8 + L + d)
    q, k, v, do = (torch.randn(1, 2, L, d, generator=g, dtype=torch.float64).float().to(gpulab.DEVICE) for _ in "qkvd")
    out, lse = T.flash_teaching_forward(q, k, v, causal, blocks=blocks)
    grads = T.flash_teaching_backward(q, k, v, out, lse, do, causal, blocks=blocks)
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    r_out, r_lse = T.reference(q64, k64, v64, causal)
    r_grads = torch.autograd.grad(r_out, (q64, k64, v64), do.double())
    floor = max(r_grads[2].abs().max().item(), 1e-3)
    e_lse = ((lse.double() - r_lse).abs() / (1 + r_lse.abs())).max().item()
    e_grad = max(tol.max_rel_error(x, r, floor) for x, r in zip(grads, r_grads))
    return tol.max_rel_error(out, r_out), e_lse, e_grad


@pytest.mark.parametrize("causal", [False, True])
def test_old_lesson08_fp32_check_fails_with_tf32_dots(monkeypatch, causal):
    # Before commit 07c2bb4 the teaching kernels' fp32 dots took Triton's default, "tf32", and the check held them
    # to fp32's bounds: the H200 missed the LSE by about 5e-4, while the interpreter computed exact fp32 and
    # passed. The interpreter now cuts as the tensor cores do, so the old check fails here too.
    L, d, blocks = 45, 32, (16, 16)
    monkeypatch.setattr(T, "dot_precision", lambda dtype: tol.DEFAULT_INPUT_PRECISION)
    e_out, e_lse, e_grad = _teaching_errors(L, d, blocks, causal)
    assert e_lse > 10 * tol.LSE_ABS, f"old LSE check passes: {e_lse:.2e}"
    assert e_out > tol.ATTENTION_REL[torch.float32], f"old output check passes: {e_out:.2e}"
    assert e_grad > tol.ATTENTION_GRAD_REL[torch.float32], f"old gradient check passes: {e_grad:.2e}"
    # the bounds that follow TF32's arithmetic hold
    assert e_out <= tol.attention_rel(torch.float32, "tf32")
    assert e_grad <= tol.attention_rel(torch.float32, "tf32", grad=True)


@pytest.mark.parametrize("causal", [False, True])
def test_current_lesson08_fp32_check_passes(causal):
    assert T.dot_precision(torch.float32) == "ieee"  # the fix: fp32 dots declare "ieee"
    e_out, e_lse, e_grad = _teaching_errors(45, 32, (16, 16), causal)
    assert e_out <= tol.ATTENTION_REL[torch.float32]
    assert e_lse <= tol.LSE_ABS
    assert e_grad <= tol.ATTENTION_GRAD_REL[torch.float32]
