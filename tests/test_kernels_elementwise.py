"""Vector add and ReLU against float64 references, on fresh random inputs and awkward sizes, with outputs
poisoned before launch (the launchers allocate with torch.empty; we poison the allocator's next block by
checking with sizes whose tail is not a multiple of the block, and by a direct poisoned-output launch)."""
import pytest
import torch
import triton

import gpulab
from gpulab.kernels import relu as relu_mod
from gpulab.kernels import vector_add as add_mod
from tests._tolerances import assert_close_elementwise

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZES = [1, 17, 1000, 1793, 4097] if not gpulab.ON_GPU else [1, 17, 1000, 1793, 4097, 2**20 + 3]


def _rand(n, dtype, gen):
    return (torch.randn(n, generator=gen, dtype=torch.float64) * 3).to(dtype).to(gpulab.DEVICE)


@pytest.fixture
def gen():
    g = torch.Generator().manual_seed(torch.seed())  # fresh inputs every run
    return g


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_vector_add_matches_float64(n, dtype, gen):
    x, y = _rand(n, dtype, gen), _rand(n, dtype, gen)
    assert_close_elementwise(add_mod.vector_add(x, y), add_mod.vector_add_ref(x, y), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_relu_matches_float64(n, dtype, gen):
    x = _rand(n, dtype, gen)
    assert (x < 0).any() or n < 4, "inputs must include negatives"
    assert_close_elementwise(relu_mod.relu(x), relu_mod.relu_ref(x), dtype)


@pytest.mark.parametrize("block", [16, 128, 1024])
def test_kernels_write_every_element_of_a_poisoned_output(block, gen):
    n = 3 * block + 5  # a ragged last block
    x, y = _rand(n, torch.float32, gen), _rand(n, torch.float32, gen)
    z = torch.full((n,), float("nan"), device=gpulab.DEVICE)
    add_mod.vector_add_kernel[(triton.cdiv(n, block),)](x, y, z, n, BLOCK=block)
    assert_close_elementwise(z, add_mod.vector_add_ref(x, y), torch.float32)
    r = torch.full((n,), float("nan"), device=gpulab.DEVICE)
    relu_mod.relu_kernel[(triton.cdiv(n, block),)](x, r, n, BLOCK=block)
    assert_close_elementwise(r, relu_mod.relu_ref(x), torch.float32)


def test_kernels_do_not_write_past_the_end(gen):
    n, block = 100, 64
    x = _rand(n, torch.float32, gen)
    buf = torch.full((2 * block,), -7.0, device=gpulab.DEVICE)
    relu_mod.relu_kernel[(triton.cdiv(n, block),)](x, buf, n, BLOCK=block)
    assert torch.all(buf[n:] == -7.0), "the mask must stop writes beyond n"


@pytest.mark.parametrize("dtype", DTYPES)
def test_relu_special_values_match_torch(dtype):
    # NaN stays NaN, as in torch.relu (tl.maximum(x, 0) would turn NaN into 0). The sign of a zero result is not
    # compared: torch.relu(-0.0) is -0.0 on the CPU but +0.0 on CUDA (seen on the H200), and both equal 0.
    x = torch.tensor([float("nan"), -0.0, 0.0, -1.5, 2.5, float("inf"), float("-inf")], dtype=dtype,
                     device=gpulab.DEVICE)
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
    assert relu_mod.relu_counts(10, 4) == (10, 80)  # seed: 8n bytes fp32
    assert relu_mod.relu_counts(10, 2) == (10, 40)  # seed: 4n bytes fp16
