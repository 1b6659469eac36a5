"""gpulab.kernels.pad: the row-padding copy that makes any fp16/bf16 matrix readable by TMA."""
import gpulab  # first: it picks the mode before triton is imported
import pytest
import torch

from gpulab.kernels import pad as P


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (17, 1), (33, 1793), (9, 257), (300, 513)])
def test_pad_rows_copies_every_element_into_aligned_rows(shape, dtype, monkeypatch):
    t = torch.randn(shape, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)
    real = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: real(*a, **kw).fill_(float("nan")))  # poison
    v = P.pad_rows(t)
    assert v.shape == t.shape and P.aligned16(v)
    assert torch.equal(v.cpu(), t.cpu()), "an element was not copied (NaN poison) or copied wrong"
    if P.aligned16(t):
        assert v is t, "an aligned matrix is used as it is, not copied"
    else:
        assert v.data_ptr() != t.data_ptr() and (v.stride(0) * v.element_size()) % 16 == 0


def test_pad_rows_handles_views_and_bad_input():
    base = torch.randn(40, 50, device=gpulab.DEVICE).half()
    t = base[3:20, 5:36]             # unaligned base pointer and a row stride of 50 elements
    v = P.pad_rows(t)
    assert P.aligned16(v) and torch.equal(v.cpu(), t.cpu())
    tt = base.t()                    # last dimension not contiguous
    assert torch.equal(P.pad_rows(tt).cpu(), tt.cpu())
    with pytest.raises(ValueError, match="t must have 2 dimension"):
        P.pad_rows(torch.randn(3, device=gpulab.DEVICE))
    with pytest.raises(TypeError, match="t must be a torch.Tensor"):
        P.pad_rows([[1.0]])
