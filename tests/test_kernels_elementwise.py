"""Vector add and ReLU against float64 references, on seeded random inputs (fresh each run, the seed in a
failure's report) and awkward sizes, with outputs poisoned before launch (the launchers' torch.empty_like, and
direct launches into NaN-filled outputs); bf16 subnormals, on a GPU and in the interpreter."""

import gpulab  # first: it picks the mode before triton is imported  # isort: skip
import pytest
import torch
import triton

from gpulab.core.tolerances import assert_close_elementwise
from gpulab.kernels import relu as relu_mod
from gpulab.kernels import vector_add as add_mod

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZES = [1, 17, 1000, 1793, 4097] if not gpulab.ON_GPU else [1, 17, 1000, 1793, 4097, 2**20 + 3]


def _rand(n, dtype):
    return (torch.randn(n, dtype=torch.float64) * 3).to(dtype).to(gpulab.DEVICE)  # seeded by the seed fixture


@pytest.fixture
def poisoned(monkeypatch):
    """Every torch.empty_like the launchers call returns NaNs, so an element left unwritten fails."""
    real = torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: real(t, **kw).fill_(float("nan")))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_vector_add_matches_float64(n, dtype, seed, poisoned):
    x, y = _rand(n, dtype), _rand(n, dtype)
    assert_close_elementwise(add_mod.vector_add(x, y), add_mod.vector_add_ref(x, y), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_relu_matches_float64(n, dtype, seed, poisoned):
    x = _rand(n, dtype)
    assert (x < 0).any() or n < 4, "inputs must include negatives"
    assert_close_elementwise(relu_mod.relu(x), relu_mod.relu_ref(x), dtype)


@pytest.mark.parametrize("block", [16, 128, 1024])
def test_kernels_write_every_element_of_a_poisoned_output(block, seed):
    n = 3 * block + 5  # a ragged last block
    x, y = _rand(n, torch.float32), _rand(n, torch.float32)
    z = torch.full((n,), float("nan"), device=gpulab.DEVICE)
    add_mod.vector_add_kernel[(triton.cdiv(n, block),)](x, y, z, n, BLOCK=block)
    assert_close_elementwise(z, add_mod.vector_add_ref(x, y), torch.float32)
    r = torch.full((n,), float("nan"), device=gpulab.DEVICE)
    relu_mod.relu_kernel[(triton.cdiv(n, block),)](x, r, n, BLOCK=block)
    assert_close_elementwise(r, relu_mod.relu_ref(x), torch.float32)


def test_kernels_do_not_write_past_the_end(seed):
    n, block = 100, 64
    x = _rand(n, torch.float32)
    buf = torch.full((2 * block,), -7.0, device=gpulab.DEVICE)
    relu_mod.relu_kernel[(triton.cdiv(n, block),)](x, buf, n, BLOCK=block)
    assert torch.all(buf[n:] == -7.0), "the mask must stop writes beyond n"


@pytest.mark.parametrize("dtype", DTYPES)
def test_relu_special_values_match_torch(dtype):
    # NaN stays NaN, as in torch.relu (tl.maximum(x, 0) would turn NaN into 0). The sign of a zero result is not
    # compared: torch.relu(-0.0) is -0.0 on the CPU but +0.0 on CUDA (seen on the H200), and both equal 0.
    x = torch.tensor(
        [float("nan"), -0.0, 0.0, -1.5, 2.5, float("inf"), float("-inf")], dtype=dtype, device=gpulab.DEVICE
    )
    got, ref = relu_mod.relu(x).cpu(), torch.relu(x).cpu()
    assert torch.equal(got.isnan(), ref.isnan()), f"NaN handling: got {got}, torch gives {ref}"
    keep = ~ref.isnan()
    assert torch.equal(got[keep], ref[keep]), (got, ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_add_special_values_match_torch(dtype):
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([inf, -inf, inf, nan, 1.0, -0.0], dtype=dtype, device=gpulab.DEVICE)
    y = torch.tensor([1.0, -inf, -inf, 1.0, nan, -0.0], dtype=dtype, device=gpulab.DEVICE)
    got, ref = add_mod.vector_add(x, y).cpu(), (x + y).cpu()
    assert torch.equal(got.isnan(), ref.isnan()), (got, ref)
    keep = ~ref.isnan()
    assert torch.equal(got[keep], ref[keep]) and torch.equal(got[keep].signbit(), ref[keep].signbit()), (got, ref)


# bf16 subnormals are m * U for m in 1..127 (U = 2^-133, the smallest). On a GPU both casts of the kernels
# (bf16 -> fp32 on load, fp32 -> bf16 on store) are exact. In Triton's interpreter each cast of a subnormal
# drops the leading 1 of m (2^p <= m < 2^(p+1)) and shifts the rest up: m -> (m - 2^p) * 2^(7-p), sign kept
# (see vector_add_kernel). The expected values below follow that rule by hand.
U = 2.0**-133
SUB_X = [U, 3 * U, 3 * U, 127 * U, -127 * U, 2.0**-126, 1.0, 15 * U]
SUB_Y = [0.0, 0.0, 3 * U, 0.0, 0.0, -U, U, 0.0]
SUB_SUM = {
    "gpu": [U, 3 * U, 6 * U, 127 * U, -127 * U, 127 * U, 1.0, 15 * U],  # x + y rounded to nearest bf16
    # U loads as 0 | 3U loads as 64U, stores as 0 | 64U + 64U = 2^-126, a normal: stored as it is (the exact
    # sum 6U is 21 times smaller: not flushed, not within one ulp) | 127U loads as 126U, stores as 124U | sign
    # kept | -U loads as -0 | 15U loads as 112U, stores as 96U (6.4 times 15U)
    "interpreter": [0.0, 0.0, 2.0**-126, 124 * U, -124 * U, 2.0**-126, 1.0, 96 * U],
}
SUB_RELU_X = [U, 3 * U, 127 * U, -3 * U, 15 * U]
SUB_RELU = {"gpu": [U, 3 * U, 127 * U, 0.0, 15 * U], "interpreter": [0.0, 0.0, 124 * U, 0.0, 96 * U]}


def _bf16(values):
    t = torch.tensor(values, dtype=torch.float64)
    assert torch.equal(t.to(torch.bfloat16).double(), t), "every value must be exact in bf16"
    return t.to(torch.bfloat16).to(gpulab.DEVICE)


def test_bf16_subnormals_exact_on_a_gpu_and_garbled_in_the_interpreter():
    total = add_mod.vector_add(_bf16(SUB_X), _bf16(SUB_Y)).double().cpu().tolist()
    assert total == SUB_SUM[gpulab.MODE], f"got {[v / U for v in total]} units of 2^-133"
    relu = relu_mod.relu(_bf16(SUB_RELU_X)).double().cpu().tolist()
    assert relu == SUB_RELU[gpulab.MODE], f"got {[v / U for v in relu]} units of 2^-133"


def test_fp16_subnormals_are_exact_everywhere():
    u = 2.0**-24  # fp16's smallest subnormal: the interpreter's fp16 casts are NumPy's, exact
    x = torch.tensor([u, 3 * u, 1023 * u, -5 * u, 2.0**-14], dtype=torch.float16, device=gpulab.DEVICE)
    assert torch.equal(add_mod.vector_add(x, x).cpu(), (x.cpu().double() * 2).half())
    assert torch.equal(relu_mod.relu(x).cpu(), torch.relu(x.cpu()))


@pytest.mark.parametrize("block", [0, -1, 3, 1000, 1024.0, "1024", True])
def test_launchers_reject_bad_block(block):
    x = torch.randn(8, device=gpulab.DEVICE)
    with pytest.raises((TypeError, ValueError), match="block must be"):
        relu_mod.relu(x, block=block)
    with pytest.raises((TypeError, ValueError), match="block must be"):
        add_mod.vector_add(x, x, block=block)


def test_empty_input_returns_empty():
    e = torch.empty(0, device=gpulab.DEVICE)
    assert add_mod.vector_add(e, e).numel() == 0 and relu_mod.relu(e).numel() == 0


def test_launchers_reject_bad_input():
    x = torch.randn(8, device=gpulab.DEVICE)
    with pytest.raises(ValueError, match="x and y must have the same shape"):
        add_mod.vector_add(x, torch.randn(9, device=gpulab.DEVICE))
    with pytest.raises(TypeError, match="y must have dtype"):
        add_mod.vector_add(x, torch.arange(8, device=gpulab.DEVICE))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        relu_mod.relu([1.0, -1.0])
    with pytest.raises(ValueError, match="x must be contiguous"):
        relu_mod.relu(torch.randn(4, 4, device=gpulab.DEVICE).t())
    with pytest.raises(TypeError, match="x and y must have the same dtype"):
        add_mod.vector_add(x, x.half())


def test_hand_counts():
    assert add_mod.vector_add_counts(10, 4) == (10, 120)
    assert relu_mod.relu_counts(10, "fp32") == (10, 80)  # seed: 8n bytes fp32
    assert relu_mod.relu_counts(10, "fp16") == (10, 40)  # seed: 4n bytes fp16
    with pytest.raises(ValueError, match="dtype"):
        relu_mod.relu_counts(10, 4)
