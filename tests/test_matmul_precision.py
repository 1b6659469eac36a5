"""gpulab.kernels.matmul_precision: the Triton matmul against float64 on seeded random inputs (fresh each run, the
seed in a failure's report) of awkward shapes, within gpulab.core.tolerances.MATMUL_PRECISION_REL per input precision
and accumulator; the bf16 interpreter detector and its workaround."""

import gpulab  # first: it sets TRITON_INTERPRET=1 before triton is imported  # isort: skip
import pytest
import torch
import triton

from gpulab.core.tolerances import MATMUL_PRECISION_REL, matmul_rel_bound, relative_error
from gpulab.kernels import matmul_precision as mp

pytestmark = pytest.mark.usefixtures("seed")
FP32_SUMS = MATMUL_PRECISION_REL["ieee"]  # fp32 accumulation of exact products
SHAPES = [(1, 1, 1), (17, 33, 70), (65, 17, 129), (1, 100, 1793), (40, 1, 33)]
if gpulab.ON_GPU:
    SHAPES += [(1000, 1000, 1000), (1793, 1000, 257)]


def _rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)


def _rel(c, ref):
    """||c - ref||_F / ||ref||_F in float64; inf if c holds a NaN (an unwritten element)."""
    return relative_error(ref, c, kind="norm")


@pytest.mark.parametrize("precision", ["tf32", "ieee"])
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_fp32_matches_float64_within_the_modes_tolerance(M, N, K, precision):
    a, b = _rand(M, K), _rand(K, N)
    err = _rel(mp.matmul_precision(a, b, input_precision=precision), mp.matmul_precision_ref(a, b))
    assert err < matmul_rel_bound(torch.float32, precision), f"{precision}: relative error {err:.2e}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M,N,K", SHAPES[:4])
def test_16bit_inputs_with_fp32_accumulation(M, N, K, dtype):
    a, b = _rand(M, K, dtype=dtype), _rand(K, N, dtype=dtype)
    err = _rel(mp.matmul_precision(a, b), mp.matmul_precision_ref(a, b))
    assert err < FP32_SUMS, f"{dtype}: relative error {err:.2e}"  # products of 16-bit values are exact in fp32


def test_non_contiguous_inputs():
    a, b = _rand(40, 24).t(), _rand(33, 40).t()  # (24, 40) and (40, 33), transposed views
    assert _rel(mp.matmul_precision(a, b, "ieee"), mp.matmul_precision_ref(a, b)) < FP32_SUMS


def test_tf32_is_less_precise_than_ieee():
    # the interpreter cuts "tf32" inputs to TF32 as the tensor cores do (gpulab.core.triton_compat)
    n = 512 if gpulab.ON_GPU else 64
    a, b = _rand(n, n), _rand(n, n)
    ref = mp.matmul_precision_ref(a, b)
    e_tf32 = _rel(mp.matmul_precision(a, b, "tf32"), ref)
    e_ieee = _rel(mp.matmul_precision(a, b, "ieee"), ref)
    assert e_tf32 > 20 * e_ieee and FP32_SUMS < e_tf32 < MATMUL_PRECISION_REL["tf32"], (e_tf32, e_ieee)


def test_fp16_accumulation_error_grows_with_k_and_fp32_does_not():
    errs = {}
    for k in (16, 4096):
        a, b = _rand(16, k, dtype=torch.float16), _rand(k, 16, dtype=torch.float16)
        ref = mp.matmul_precision_ref(a, b)
        errs[k] = (
            _rel(mp.matmul_precision(a, b, acc_dtype=torch.float16), ref),
            _rel(mp.matmul_precision(a, b, acc_dtype=torch.float32), ref),
        )
    assert errs[4096][0] > 3 * errs[16][0], errs  # fp16 running sum: error grows with K
    assert errs[4096][0] > 100 * errs[4096][1], errs
    assert max(errs[16][1], errs[4096][1]) < FP32_SUMS, errs


def test_every_output_element_written_and_nothing_past_the_end():
    M, N, K = 33, 17, 40
    a, b = _rand(M, K), _rand(K, N)
    c = torch.full((M + 3, N), float("nan"), device=gpulab.DEVICE)
    c[M:] = -7.0
    mp.matmul_precision_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 16))](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        BLOCK_M=32,
        BLOCK_N=16,
        BLOCK_K=16,
        INPUT_PRECISION="ieee",
        ACC_FP16=False,
        UPCAST=False,
    )
    assert _rel(c[:M], mp.matmul_precision_ref(a, b)) < FP32_SUMS
    assert torch.all(c[M:] == -7.0), "the mask must stop writes beyond M"


def test_empty_and_k_zero():
    assert mp.matmul_precision(_rand(0, 5), _rand(5, 3)).shape == (0, 3)
    z = mp.matmul_precision(_rand(4, 0), _rand(0, 3))
    assert z.shape == (4, 3) and torch.all(z == 0)


def test_bad_input_names_the_argument():
    a = _rand(8, 8)
    with pytest.raises(TypeError, match="a must be a torch.Tensor"):
        mp.matmul_precision([[1.0]], a)
    with pytest.raises(TypeError, match="b must have dtype"):
        mp.matmul_precision(a, a.double())
    with pytest.raises(TypeError, match="same dtype"):
        mp.matmul_precision(a, a.half())
    with pytest.raises(ValueError, match="must agree on K"):
        mp.matmul_precision(a, _rand(7, 8))
    with pytest.raises(ValueError, match="a must have 2 dimension"):
        mp.matmul_precision(_rand(8), a)
    with pytest.raises(ValueError, match="input_precision must be one of"):
        mp.matmul_precision(a, a, input_precision="tf32x3")
    with pytest.raises(ValueError, match="acc_dtype must be"):
        mp.matmul_precision(a, a, acc_dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="acc_dtype=torch.float16 needs fp16 inputs"):
        mp.matmul_precision(a, a, acc_dtype=torch.float16)
    with pytest.raises(ValueError, match="BLOCK_K must be a power of two"):
        mp.matmul_precision(a, a, blocks=(16, 16, 24))


# ---- the bf16 dot in the interpreter ------------------------------------------------------------------


def test_detector_verdict_on_this_triton():
    try:
        got, expected = mp.bf16_dot_probe()
    except Exception:  # noqa: BLE001 -- a Triton whose bf16 dot cannot run at all: the detector must say "not exact"
        assert not gpulab.ON_GPU and not mp.bf16_dot_is_exact()
        return
    assert mp.bf16_dot_is_exact() == torch.equal(got, expected)
    if gpulab.ON_GPU:
        assert mp.bf16_dot_is_exact(), "the native bf16 tensor-core dot must be exact on small integers"
    elif triton.__version__.startswith("3.9"):
        # Triton 3.9's interpreter multiplies the raw bf16 bit patterns (seen here): the detector must say so
        assert not mp.bf16_dot_is_exact()
        assert got.abs().max() > 1e6, "raw uint16 bit patterns multiplied give huge numbers"


@pytest.mark.parametrize("M,N,K", [(16, 16, 16), (17, 33, 40), (1, 70, 100)])
def test_bf16_small_integers_exact_with_the_workaround(M, N, K):
    a = torch.randint(-2, 3, (M, K)).to(torch.bfloat16).to(gpulab.DEVICE)
    b = torch.randint(-2, 3, (K, N)).to(torch.bfloat16).to(gpulab.DEVICE)
    c = mp.matmul_precision(a, b)  # upcast_bf16=None: the workaround only where the detector says so
    assert torch.equal(c.double().cpu(), mp.matmul_precision_ref(a, b).cpu())


@pytest.mark.skipif(gpulab.ON_GPU, reason="the workaround matters only in a broken interpreter")
def test_without_the_workaround_a_broken_interpreter_is_wrong():
    if mp.bf16_dot_is_exact():
        pytest.skip("this Triton's interpreter multiplies bf16 correctly")
    a = torch.randint(-2, 3, (16, 16)).to(torch.bfloat16)
    b = torch.randint(-2, 3, (16, 16)).to(torch.bfloat16)
    a[0, 0] = 1.0  # at least one nonzero product
    assert not torch.equal(mp.matmul_precision(a, b, upcast_bf16=False).double(), mp.matmul_precision_ref(a, b))


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a CUDA GPU (a 4 GiB operand)")
def test_element_offsets_past_2_31_do_not_wrap():
    # rows 2^20 elements apart: the last row's offset is 2048 * 2^20 * ... > 2^31 elements; int32 offsets wrap
    S, M, K = 2**20, 2049, 16
    store = torch.zeros(S * (M - 1) + K, dtype=torch.float16, device="cuda")
    a = store.as_strided((M, K), (S, 1))
    a[-1] = 1.0
    b = torch.ones(K, 16, dtype=torch.float16, device="cuda")
    c = mp.matmul_precision(a, b)
    assert c[-1].eq(16.0).all() and c[:-1].eq(0.0).all()
