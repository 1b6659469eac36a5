"""Per-dtype tolerances for checking kernels against float64 references.

Elementwise results are one rounding of an exactly computed value, so half an ulp would do; the bound is one
ulp of the dtype because Triton 3.9's interpreter rounds fp32 -> bf16 by truncation, not to nearest
(seen in gpulab's tests on CPU).
"""
import torch

ULP_REL = {torch.float32: 2.0**-23, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.float64: 2.0**-52}


def assert_close_elementwise(got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> None:
    """Assert every element of ``got`` is within one ulp (relative) of the float64 ``ref``; name the first bad one."""
    got64 = got.double().cpu()
    ref64 = ref.double().cpu()
    assert got64.shape == ref64.shape, f"shape {tuple(got64.shape)} != reference {tuple(ref64.shape)}"
    assert not torch.isnan(got64).any(), f"NaN at flat index {torch.isnan(got64).flatten().nonzero()[0].item()}"
    tol = ULP_REL[dtype] * ref64.abs() + 1e-30
    bad = ((got64 - ref64).abs() > tol).flatten().nonzero()
    if len(bad):
        i = bad[0].item()
        raise AssertionError(f"{len(bad)} of {got64.numel()} elements off; first at flat index {i}: "
                             f"got {got64.flatten()[i].item()!r}, expected {ref64.flatten()[i].item()!r}")
