"""The fused bias + GELU kernel (``kernels.bias_gelu``, lesson 09's suite and exercise 09's solution) against
float64: seeded random inputs, awkward shapes, poisoned outputs, writes stopped at the end, 16-bit storage, and
input checks naming the argument."""

import gpulab  # first: it picks the mode before triton is imported  # isort: skip
import math

import pytest
import torch

from gpulab.kernels import bias_gelu as G

pytestmark = pytest.mark.usefixtures("seed")

SHAPES = [(1, 1), (3, 17), (7, 1793), (33, 100)] + ([(8192, 3072)] if gpulab.ON_GPU else [])
REL = {torch.float32: 2.0**-18, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}  # fp32 ulps; one rounding to 16 bits


def _by_hand(x, bias):
    """GELU_tanh(x + bias) from its definition in float64 (math.tanh per element: not the code under test)."""
    h = (x.double() + bias.double()).cpu()
    flat = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))) for v in h.flatten().tolist()]
    return torch.tensor(flat, dtype=torch.float64).view(h.shape)


@pytest.mark.parametrize("M, N", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_matches_float64(M, N, dtype, poisoned):
    x = (torch.randn(M, N, dtype=torch.float64) * 3).to(dtype).to(gpulab.DEVICE)
    bias = torch.randn(N, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)
    out = G.bias_gelu(x, bias)  # torch.empty poisoned: an element left unwritten is NaN
    ref = G.bias_gelu_ref(x, bias).cpu()
    got = out.double().cpu()
    assert out.dtype == dtype and out.shape == x.shape and not torch.isnan(got).any()
    assert ((got - ref).abs() <= REL[dtype] * ref.abs() + 1e-6).all(), (got - ref).abs().max()
    if M * N <= 4096:
        assert torch.allclose(ref, _by_hand(x, bias), rtol=1e-12, atol=1e-12)  # the reference is the formula


def test_writes_into_out_and_stops_at_the_end():
    M, N = 3, 100
    x, bias = torch.randn(M, N, device=gpulab.DEVICE), torch.randn(N, device=gpulab.DEVICE)
    buf = torch.full((M * N + G.BLOCK,), -7.0, device=gpulab.DEVICE)
    out = buf[: M * N].view(M, N)
    assert G.bias_gelu(x, bias, out, block=256) is out
    assert torch.all(buf[M * N :] == -7.0), "the mask must stop writes at M * N"
    assert torch.allclose(out.double().cpu(), G.bias_gelu_ref(x, bias).cpu(), rtol=2.0**-18, atol=1e-6)


def test_bad_input_names_the_argument():
    x, bias = torch.randn(4, 8, device=gpulab.DEVICE), torch.randn(8, device=gpulab.DEVICE)
    with pytest.raises(ValueError, match="bias must have shape"):
        G.bias_gelu(x, torch.randn(4, device=gpulab.DEVICE))
    with pytest.raises(ValueError, match="bias must have 1 dimension"):
        G.bias_gelu(x, bias[None])
    with pytest.raises(TypeError, match="x must have dtype"):
        G.bias_gelu(x.double(), bias)
    with pytest.raises(ValueError, match="x must be contiguous"):
        G.bias_gelu(x.t(), torch.randn(4, device=gpulab.DEVICE))
    with pytest.raises(ValueError, match="x and out must have the same shape"):
        G.bias_gelu(x, bias, torch.empty(8, 4, device=gpulab.DEVICE))
    with pytest.raises(ValueError, match="block must be"):
        G.bias_gelu(x, bias, block=100)
    assert G.bias_gelu(x[:0], bias).shape == (0, 8)
    assert G.bias_gelu_bytes(8192, 3072) == (2 * 8192 * 3072 + 3072) * 4
