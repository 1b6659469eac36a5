"""gpulab.models.formats: value tables, rounding, saturation, the MX and NVFP4 scale rules, bits per value, errors.

Expected tables are built here independently of the module (from the bit-field definitions, or from torch's
own float8_e4m3fn decoding), not by calling the functions under test.
"""

import math

import numpy as np
import pytest
import torch

import gpulab
from gpulab import figures
from gpulab.core import tolerances
from gpulab.models import formats as F

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report

DEV = gpulab.DEVICE


def _e4m3_from_fields() -> set:
    """E4M3 finite values from the definition: bias 7, 3 mantissa bits, subnormals, S.1111.111 = NaN."""
    vals = set()
    for e in range(16):
        for m in range(8):
            if e == 15 and m == 7:
                continue  # NaN
            v = m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
            vals |= {v, -v}
    return vals


# ------------------------------------------------------------------------------------------ value tables
def test_e2m1_table_is_the_15_values():
    assert F.e2m1_values().tolist() == [-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert F.e2m1_values(nonnegative=True).tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    codes = torch.arange(16, dtype=torch.uint8)
    assert F.decode_e2m1(codes)[8].item() == 0 and math.copysign(1, F.decode_e2m1(codes)[8].item()) == -1  # -0


def test_e4m3_table_counts_and_extremes():
    v = F.e4m3_values()
    assert len(v) == 253  # 256 codes - 2 NaNs, +0 and -0 merged
    assert len(F.e4m3_values(nonnegative=True)) == 127
    assert set(v.tolist()) == _e4m3_from_fields()
    assert v.max().item() == 448.0 and v.min().item() == -448.0
    pos = v[v > 0]
    assert pos.min().item() == 2.0**-9  # smallest subnormal
    assert pos[pos >= 2.0**-6].min().item() == 2.0**-6  # smallest normal
    assert pos[pos < 2.0**-6].max().item() == 7 * 2.0**-9  # largest subnormal


def test_e4m3_decode_matches_torch_float8():
    codes = torch.arange(256, dtype=torch.uint8)
    ours = F.decode_e4m3(codes)
    theirs = codes.view(torch.float8_e4m3fn).float()
    assert torch.equal(torch.isnan(ours), torch.isnan(theirs))
    assert torch.isnan(ours).nonzero().flatten().tolist() == [0x7F, 0xFF]
    ok = ~torch.isnan(ours)
    assert torch.equal(ours[ok], theirs[ok])
    assert torch.equal(F.encode_e4m3(ours[ok]), codes[ok])  # encode inverts decode, -0 included


def test_e8m0_table():
    v = F.e8m0_values()
    assert len(v) == 255 and v[0].item() == 2.0**-127 and v[-1].item() == 2.0**127
    assert torch.equal(v, torch.tensor([2.0**k for k in range(-127, 128)], dtype=torch.float64))
    assert torch.isnan(F.decode_e8m0(torch.tensor([0xFF], dtype=torch.uint8))).all()
    assert F.encode_e8m0(torch.tensor([-127, 0, 127])).tolist() == [0, 127, 254]
    with pytest.raises(ValueError, match="exponent"):
        F.encode_e8m0(torch.tensor([128]))


# --------------------------------------------------------------------------------------------- rounding
@pytest.mark.parametrize("q, table", [(F.quantize_e4m3, F.e4m3_values), (F.quantize_e2m1, F.e2m1_values)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_grid_values_roundtrip_exactly(q, table, dtype):
    v = table().to(dtype).to(DEV)
    out = q(v)
    assert out.dtype == dtype and torch.equal(out, v)


def test_e2m1_ties_to_even_and_saturation():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -5.0, 6.5, 7.0, 100.0, -1e9, math.inf, -math.inf])
    want = [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, -4.0, 6.0, 6.0, 6.0, -6.0, 6.0, -6.0]
    assert F.quantize_e2m1(x.to(DEV)).tolist() == want
    assert torch.isnan(F.quantize_e2m1(torch.tensor([math.nan]))).all()
    assert F.quantize_e2m1(torch.tensor([0.26, 0.74, 4.99, 5.01])).tolist() == [0.5, 0.5, 4.0, 6.0]  # not ties


def test_e4m3_ties_to_even_and_saturation():
    # ties: 1.0625 between 1 (even) and 1.125; 1.1875 between 1.125 and 1.25 (even); 2^-10 between 0 and 2^-9;
    # in [256, 512) the spacing is 32: 400 = 12.5 * 32 -> 384, 432 = 13.5 * 32 -> 448; then saturation
    x = torch.tensor([1.0625, 1.1875, 2.0**-10, 3 * 2.0**-10, 400.0, 432.0, 464.0, 470.0, 1e6, -1e6, math.inf])
    want = [1.0, 1.25, 0.0, 2.0**-8, 384.0, 448.0, 448.0, 448.0, 448.0, -448.0, 448.0]
    assert F.quantize_e4m3(x.to(DEV)).tolist() == want


def test_e4m3_rounding_matches_torch_cast_on_random_values(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(20000, generator=g) * torch.exp2(torch.randint(-14, 10, (20000,), generator=g).float())
    x = x.clamp(-440, 440)  # torch's cast of values above 448 is a separate convention (we saturate)
    mids = (F.e4m3_values()[:-1] + F.e4m3_values()[1:]) / 2  # exact midpoints: the ties
    x = torch.cat([x, mids.float().clamp(-440, 440)])
    assert torch.equal(F.quantize_e4m3(x), x.to(torch.float8_e4m3fn).float())


# ----------------------------------------------------------------------------------------------- MXFP8
def test_mx_scale_rule_on_hand_made_blocks():
    # floor(log2(1000)) = 9 -> e = 9 - 8 = 1, scale 2; 1000 / 2 = 500 > 448 clamps to 448 -> 896 (spec 6.3)
    x = torch.tensor([1000.0] + [1.0] * 31, device=DEV)
    q = F.quantize_mxfp8(x)
    assert q.scales.tolist() == [2.0] and q.scale_codes.tolist() == [128]
    y = F.dequantize(q)
    assert y[0].item() == 896.0 and torch.equal(y[1:], x[1:])
    # amax 448 * 2^-3 = 56: floor(log2 56) = 5 -> e = -3, elements x * 8, exact
    x = torch.tensor([56.0, -3.5, 0.125] + [0.0] * 29)
    q = F.quantize_mxfp8(x)
    assert q.scales.tolist() == [2.0**-3] and q.scale_codes.tolist() == [124]
    assert q.elements[0, :3].tolist() == [448.0, -28.0, 1.0] and torch.equal(F.dequantize(q), x)
    # the same block times 2^40: only the scale changes, and dequantize keeps float32's range
    q = F.quantize_mxfp8(x * 2.0**40)
    assert q.scale_codes.tolist() == [124 + 40] and torch.equal(F.dequantize(q), x * 2.0**40)
    # amax exactly a power of two: 1.0 -> e = -8
    assert F.quantize_mxfp8(torch.ones(32)).scale_codes.tolist() == [127 - 8]


def test_mx_scale_clamps_to_e8m0_range():
    assert F.mx_shared_exponent(torch.tensor([2.0**-140, 2.0**127 * 1.5, 0.0])).tolist() == [-127, 119, -127]
    tiny = torch.full((32,), 2.0**-130, dtype=torch.float64)
    q = F.quantize_mxfp8(tiny)
    assert q.scale_codes.tolist() == [0] and q.elements.abs().max().item() == 2.0**-3  # 2^-130 / 2^-127


def test_mx_zero_block_partial_block_and_shapes():
    x = torch.randn(3, 5, 70, device=DEV)
    x[1, 2, :32] = 0.0  # an all-zero block
    q = F.quantize_mxfp8(x)
    assert q.elements.shape == (3, 5, 3, 32) and q.scales.shape == (3, 5, 3) and q.element_codes.dtype == torch.uint8
    assert q.scale_codes[1, 2, 0].item() == 0 and q.elements[1, 2, 0].abs().max().item() == 0
    assert (q.elements[..., -1, 6:] == 0).all()  # padding of the last partial block (70 = 2*32 + 6)
    y = F.dequantize(q)
    assert y.shape == x.shape and y.dtype == torch.float32 and y.device == x.device
    assert (y[1, 2, :32] == 0).all()
    # the partial block quantizes exactly as the same 6 values padded by hand
    last = F.dequantize(F.quantize_mxfp8(torch.cat([x[0, 0, 64:], torch.zeros(26, device=DEV)])))
    assert torch.equal(y[0, 0, 64:], last[:6])
    assert tolerances.relative_error(x, y) < 2.0**-4  # half an E4M3 ulp is 2^-4 relative


def test_mx_nan_and_inf_blocks():
    x = torch.randn(96)
    x[3], x[40] = math.nan, math.inf
    q = F.quantize_mxfp8(x)
    assert q.scale_codes.tolist()[:2] == [0xFF, 0xFF] and q.scale_codes[2].item() != 0xFF
    assert (q.elements[:2] == 0).all() and torch.isnan(q.scales[:2]).all()  # NaN lives in the scale only
    y = F.dequantize(q)
    assert torch.isnan(y[:64]).all() and not torch.isnan(y[64:]).any()


def test_codes_decode_to_elements_and_scales():
    x = torch.randn(4, 100) * 10
    q = F.quantize_mxfp8(x, block=32)
    assert torch.equal(F.decode_e4m3(q.element_codes), q.elements)
    assert torch.equal(F.decode_e8m0(q.scale_codes), q.scales)
    p = F.quantize_nvfp4(x)
    assert torch.equal(F.decode_e2m1(p.element_codes), p.elements)
    assert torch.equal(F.decode_e4m3(p.scale_codes), p.scales)


# ----------------------------------------------------------------------------------------------- NVFP4
def test_nvfp4_two_level_scales_on_a_hand_made_tensor():
    x = torch.zeros(32, dtype=torch.float64)
    x[0] = 2688.0  # tensor amax = 448 * 6 -> s_t = 1
    x[16:20] = torch.tensor([3.0, -1.5, 0.7, 0.0])  # block 2 amax 3 -> s_b = 3 / 6 = 0.5
    q = F.quantize_nvfp4(x)
    assert q.tensor_scale == 1.0 and q.scales.tolist() == [448.0, 0.5]
    assert q.elements[0, 0].item() == 6.0 and q.elements[1, :4].tolist() == [6.0, -3.0, 1.5, 0.0]  # 1.4 -> 1.5
    y = F.dequantize(q)
    assert y[0].item() == 2688.0 and y[16:20].tolist() == [3.0, -1.5, 0.75, 0.0]


def test_nvfp4_dequantize_is_e_times_sb_times_st_rounded_once():
    x = torch.randn(5, 48, dtype=torch.float64, device=DEV)
    x = x * (5000 / x.abs().max())  # |x| <= 5000, then one element set to the amax:
    x[2, 7] = -5376.0  # tensor scale = 5376 / (6 x 448 = 2688) = 2
    q = F.quantize_nvfp4(x)
    assert q.tensor_scale == 2.0
    want = (q.elements.double() * q.scales.double().unsqueeze(-1) * q.tensor_scale).reshape(5, 48).float()
    assert torch.equal(F.dequantize(q), want)
    assert tolerances.relative_error(x, F.dequantize(q)) < 0.25


def test_nvfp4_block_scale_rounds_to_e4m3_and_elements_saturate():
    x = torch.tensor([2688.0] + [0.0] * 15 + [6.9] + [0.0] * 15)  # s_t = 1; 6.9 / 6 = 1.15 -> E4M3 1.125
    q = F.quantize_nvfp4(x)
    assert q.scales.tolist() == [448.0, 1.125]
    assert q.elements[1, 0].item() == 6.0  # 6.9 / 1.125 = 6.13 -> saturates to 6
    assert q.scale_codes[1].item() == 0x39  # 1.125 = 2^0 * (1 + 1/8): exponent field 7, mantissa 1


def test_nvfp4_zero_tensor_zero_block_partial_block_and_shapes():
    z = F.quantize_nvfp4(torch.zeros(2, 16))
    assert F.dequantize(z).abs().max().item() == 0 and z.tensor_scale == 1.0
    x = torch.randn(3, 7, 41, device=DEV)
    x[0, 0, :16] = 0
    q = F.quantize_nvfp4(x)
    assert q.elements.shape == (3, 7, 3, 16) and q.scales.shape == (3, 7, 3)
    assert q.scales[0, 0, 0].item() == 0
    y = F.dequantize(q)
    assert y.shape == x.shape and y.dtype == torch.float32 and (y[0, 0, :16] == 0).all()
    assert F.quantize_nvfp4(x.flatten(), pad=True).elements.shape == (3 * 7 * 41 // 16 + 1, 16)


def test_nvfp4_nan_block():
    x = torch.randn(48)
    x[20] = math.nan
    q = F.quantize_nvfp4(x)
    assert q.scale_codes.tolist()[1] == 0x7F and math.isfinite(q.tensor_scale)
    y = F.dequantize(q)
    assert torch.isnan(y[16:32]).all() and not torch.isnan(y[:16]).any() and not torch.isnan(y[32:]).any()


@pytest.mark.parametrize("block", [1, 8, 17, 64])
def test_other_block_sizes_run_and_keep_the_grid(block):
    x = torch.randn(2, 100, device=DEV)
    for q in (F.quantize_mxfp8(x, block), F.quantize_nvfp4(x, block)):
        assert q.elements.shape == (2, -(-100 // block), block) and F.dequantize(q).shape == x.shape
    assert F.quantize_mxfp8(x, 1).elements.abs().max() <= 448


# ------------------------------------------------------------------------------------------- bad input
def test_bad_input_raises_naming_the_argument():
    for fn in (F.quantize_mxfp8, F.quantize_nvfp4):
        with pytest.raises(TypeError, match="x must have a floating dtype"):
            fn(torch.arange(32))
        with pytest.raises(TypeError, match="x must be a torch.Tensor"):
            fn([1.0] * 32)
        with pytest.raises(ValueError, match="block"):
            fn(torch.randn(32), 0)
        with pytest.raises(ValueError, match="block"):
            fn(torch.randn(32), -16)
        with pytest.raises(TypeError, match="block"):
            fn(torch.randn(32), 16.0)
        with pytest.raises(ValueError, match=r"block \(16\) must divide"):
            fn(torch.randn(40), 16, pad=False)
        with pytest.raises(ValueError, match="x must have at least 1 dimension"):
            fn(torch.tensor(1.0))
    with pytest.raises(TypeError, match="x must have a floating dtype"):
        F.quantize_e4m3(torch.ones(3, dtype=torch.int32))
    with pytest.raises(TypeError, match="codes must have dtype uint8"):
        F.decode_e4m3(torch.ones(3))
    with pytest.raises(ValueError, match="v must hold E4M3 values"):
        F.encode_e4m3(torch.tensor([1.01]))
    with pytest.raises(ValueError, match="v must hold E2M1 values"):
        F.encode_e2m1(torch.tensor([2.5]))
    with pytest.raises(ValueError, match="fmt"):
        F.bits_per_value("int4")
    with pytest.raises(ValueError, match="fmt"):
        F.roundtrip(torch.randn(4), "int4")
    with pytest.raises(TypeError, match="q must be a BlockQuantized"):
        F.dequantize(torch.randn(4))


def test_fp8_per_tensor_scale_keeps_finite_values_finite():
    # the scale comes from the finite values: amax 896 -> s = 896 / 448 = 2; inf and NaN pass through
    x = torch.tensor([1.0, -3.0, 896.0, 0.3, math.inf, math.nan, -math.inf])
    y = F.roundtrip(x, "fp8_e4m3")
    # 0.3 / 2 = 0.15 lies in E4M3's binade [2^-3, 2^-2), spacing 2^-6: 9.6 steps round to 10, 10 * 2^-6 * 2 = 0.3125
    assert y[:4].tolist() == [1.0, -3.0, 896.0, 0.3125]
    assert y[4] == math.inf and math.isnan(y[5]) and y[6] == -math.inf
    assert F.roundtrip(torch.tensor([math.inf, math.nan]), "fp8_e4m3").isnan().tolist() == [False, True]
    assert torch.equal(F.roundtrip(torch.tensor([0.0, 0.0]), "fp8_e4m3"), torch.zeros(2))


def test_numpy_ints_are_ints():
    x = F.gaussian_data(64)
    assert torch.equal(F.roundtrip(x, "mxfp8", np.int64(16)), F.roundtrip(x, "mxfp8", 16))
    assert F.bits_per_value("nvfp4", block=np.int32(16), numel=np.int64(1024)) == 4.5 + 32 / 1024


# -------------------------------------------------------------------------------------- bits per value
def test_bits_per_value():
    assert F.bits_per_value("mxfp8") == 8.25
    assert F.bits_per_value("nvfp4") == 4.5
    assert F.bits_per_value("nvfp4", numel=1024) == 4.5 + 32 / 1024
    assert F.bits_per_value("mxfp8", numel=1024) == 8.25  # no tensor scale
    assert F.bits_per_value("mxfp8", block=16) == 8.5 and F.bits_per_value("nvfp4", block=32) == 4.25
    assert F.bits_per_value("fp8_e4m3") == 8 and F.bits_per_value("fp8_e4m3", numel=64) == 8.5
    assert F.bits_per_value("bf16") == F.bits_per_value("fp16") == 16
    with pytest.raises(ValueError, match="block"):
        F.bits_per_value("bf16", block=32)


# ------------------------------------------------------------------------------------- error ordering
def test_error_ordering_on_realistic_data():
    rows = F.error_vs_bits()
    err = {(r["data"], r["format"]): r["rel_error"] for r in rows}
    for data in ("gaussian", "outliers"):
        assert err[(data, "fp16")] < err[(data, "bf16")] < err[(data, "mxfp8")] < err[(data, "nvfp4")]
    # one per-tensor FP8 scale: the 1000x outliers push the Gaussian bulk toward E4M3's subnormals
    assert err[("outliers", "mxfp8")] < err[("outliers", "fp8_e4m3")]
    assert err[("outliers", "fp8_e4m3")] > 1.2 * err[("gaussian", "fp8_e4m3")]
    assert err[("outliers", "mxfp8")] < 1.1 * err[("gaussian", "mxfp8")]  # block scales isolate outliers
    assert 0.01 < err[("gaussian", "mxfp8")] < 2.0**-4  # about half an E4M3 ulp (2^-3) on average
    bits = {(r["data"], r["format"]): r["bits_per_value"] for r in rows}
    assert bits[("gaussian", "mxfp8")] == 8.25 and bits[("gaussian", "nvfp4")] == 4.5 + 32 / 4096


def test_error_grows_with_block_size_on_outliers():
    x = F.outlier_data()
    errs = [tolerances.relative_error(x, F.roundtrip(x, "nvfp4", b)) for b in (8, 64, 512)]
    assert errs[0] < errs[1] < errs[2]


def test_relative_error_kinds():
    assert not hasattr(F, "relative_error")  # one relative_error: gpulab.core.tolerances
    ref = torch.tensor([1.0, -2.0, 0.0, 4.0])
    got = torch.tensor([1.5, -2.0, 0.0, 3.0])
    assert tolerances.relative_error(ref, got) == pytest.approx((0.5 + 0 + 0.25) / 3)
    assert tolerances.relative_error(ref, got, "norm") == pytest.approx(math.sqrt(1.25) / math.sqrt(21))
    assert tolerances.relative_error(ref, torch.tensor([1.0, -2.0, math.nan, 4.0])) == math.inf


def test_figure_has_plain_lists():
    fig = figures.lesson03.error_vs_bits_figure(F.error_vs_bits(formats=("mxfp8", "nvfp4", "bf16")))
    assert len(fig.data) == 2
    for tr in fig.data:
        assert isinstance(tr.x, (list, tuple)) and isinstance(tr.y, (list, tuple))  # plotly keeps lists as tuples
        assert all(isinstance(v, float) for v in tr.x) and all(isinstance(v, float) for v in tr.y)


@pytest.mark.parametrize("big", [1.6e41, -1e42, 1e300])
def test_one_huge_finite_value_overflows_alone_never_the_tensor(big):
    # float64 input beyond float32's range: the FP32 scale saturates at float32's max, the huge element comes back
    # +-inf (float32 overflow), every other element stays finite and is quantized with the saturated scale
    fmax = torch.finfo(torch.float32).max
    g = torch.Generator().manual_seed(3)
    x = torch.randn(32, generator=g, dtype=torch.float64)
    x[16:] *= 1e38  # a second NVFP4 block of large but float32-representable values
    x[0] = big
    for fmt in ("fp8_e4m3", "nvfp4", "mxfp8"):
        y = F.roundtrip(x, fmt)
        assert not y.isnan().any(), f"{fmt}: a finite input gave NaN at {y.isnan().nonzero().flatten().tolist()}"
        assert y[0] == math.copysign(math.inf, big), f"{fmt}: {big} should overflow float32 to a signed inf"
        assert torch.isfinite(y[1:]).all(), fmt
    expected = (F.quantize_e4m3(x / fmax) * fmax).float()  # fp8_e4m3 with s = float32 max
    assert torch.equal(F.roundtrip(x, "fp8_e4m3")[1:], expected[1:])
    y = F.roundtrip(x, "nvfp4")
    i = int(x[16:].abs().argmax()) + 16  # the second block's largest value: E4M3 s_b and E2M1 rounding, <= 6.25%
    assert abs(float(y[i]) - float(x[i])) <= 0.0625 * abs(float(x[i]))
