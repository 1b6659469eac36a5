"""gpulab's Triton FlashAttention against float64 references within gpulab.core.tolerances' attention bounds: tiny
and random shapes (L = 1 .. 300 in the interpreter; inputs seeded, the seed in a failure's report), Lq != Lk,
both causal flags, every dtype, every backward mode, the TMA load path, poisoned outputs, the causal convention
against SDPA, and input checks naming the argument. On a GPU the same tests run, plus larger shapes and the
autotuned path."""

import math
import random

import gpulab  # first: it picks the mode before triton is imported  # isort: skip
import pytest
import torch
import triton

from gpulab.core.tolerances import ATTENTION_GRAD_REL, ATTENTION_REL, LSE_ABS, max_rel_error
from gpulab.kernels import flash_attention as F

pytestmark = pytest.mark.usefixtures("seed")
DEV = gpulab.DEVICE
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _rand(B, H, L, d, dtype, scale=1.0):
    return (torch.randn(B, H, L, d, dtype=torch.float64) * scale).to(dtype).to(DEV)


def _inputs(B, H, Lq, Lk, d, dtype):
    return _rand(B, H, Lq, d, dtype), _rand(B, H, Lk, d, dtype), _rand(B, H, Lk, d, dtype), _rand(B, H, Lq, d, dtype)


def _ref(q, k, v, do, causal, sm_scale=None):
    """Float64 out, lse and gradients (autograd through the materialised reference)."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    out, lse = F.flash_attention_ref(q64, k64, v64, causal, sm_scale)
    grads = torch.autograd.grad(out, (q64, k64, v64), do.double())
    return out.detach(), lse.detach(), grads


def _close(name, got, ref, rel, what="", floor=1e-3):
    """max |got - ref| / max(max |ref|, floor) <= rel (gpulab.core.tolerances.max_rel_error: inf for NaN or inf)."""
    assert got.shape == ref.shape, f"{name}: shape {tuple(got.shape)} != {tuple(ref.shape)} {what}"
    err = max_rel_error(got, ref, floor)
    hint = " (a NaN or inf: an unwritten element?)" if err == math.inf else ""
    assert err <= rel, f"{name}: max error / max(max |ref|, {floor:.3g}) = {err:.3g} > {rel:.3g}{hint} {what}"


def _check_all(q, k, v, do, causal, out, lse, grads, sm_scale=None, what=""):
    dt = q.dtype
    r_out, r_lse, r_grads = _ref(q, k, v, do, causal, sm_scale)
    _close("out", out, r_out, ATTENTION_REL[dt], what)
    assert torch.isfinite(lse).all(), f"lse: non-finite {what}"
    lse_err = ((lse.double().cpu() - r_lse.cpu()).abs() / (1 + r_lse.cpu().abs())).max().item() if lse.numel() else 0
    assert lse_err <= LSE_ABS, f"lse: error {lse_err:.3g} > {LSE_ABS} {what}"
    floor = r_grads[2].abs().max().item() if r_grads[2].numel() else 1.0  # dq, dk are 0 when Lk = 1; dv = dO
    for name, g, r in zip(("dq", "dk", "dv"), grads, r_grads):
        _close(name, g, r, ATTENTION_GRAD_REL[dt], what, floor=min(floor, 1.0))


def _through_autograd(q, k, v, do, causal, sm_scale=None):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out, lse = F.flash_attention(q, k, v, causal, sm_scale, return_lse=True)
    return out, lse, torch.autograd.grad(out, (q, k, v), do)


# ---- shapes -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_tiny_shape_one_key(dtype, causal):
    # L = 1, d = 16: softmax over one key is 1, so out = v, dq = dk = 0, dv = dO
    q, k, v, do = _inputs(2, 1, 1, 1, 16, dtype)
    out, lse, grads = _through_autograd(q, k, v, do, causal)
    _check_all(q, k, v, do, causal, out, lse, grads, what=f"L=1 {dtype} causal={causal}")
    assert torch.equal(out, v)


@pytest.mark.parametrize(
    "d, dtype, causal", [((16, 32, 64, 128)[i % 4], DTYPES[i % 3], bool(i % 2)) for i in range(12)]
)
def test_random_length_forward_and_backward(d, dtype, causal):
    L = random.randint(1, 300)  # seeded by the seed fixture
    B, H = (1, 2) if L % 2 else (2, 1)
    q, k, v, do = _inputs(B, H, L, L, d, dtype)
    out, lse, grads = _through_autograd(q, k, v, do, causal)
    _check_all(q, k, v, do, causal, out, lse, grads, what=f"B={B} H={H} L={L} d={d} {dtype} causal={causal}")


@pytest.mark.parametrize("lq, lk", [(70, 45), (45, 70), (1, 33), (33, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_lq_differs_from_lk(lq, lk, causal):
    q, k, v, do = _inputs(1, 2, lq, lk, 32, torch.float32)
    out, lse, grads = _through_autograd(q, k, v, do, causal)
    _check_all(q, k, v, do, causal, out, lse, grads, what=f"Lq={lq} Lk={lk} causal={causal}")


@pytest.mark.parametrize("lq, lk", [(70, 45), (45, 70)])
def test_causal_convention_is_sdpa_is_causal(lq, lk):
    # SDPA's is_causal is the top-left mask torch.ones(Lq, Lk).tril(): the reference and the kernel follow it
    q, k, v, _ = _inputs(1, 2, lq, lk, 16, torch.float32)
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q.double().cpu(), k.double().cpu(), v.double().cpu(), is_causal=True
    )
    ref, _ = F.flash_attention_ref(q, k, v, causal=True)
    assert torch.allclose(ref.cpu(), sdpa, atol=1e-12)
    assert torch.equal(F.causal_mask(lq, lk), torch.ones(lq, lk).tril().bool())
    out, _ = F.flash_attention_forward(q, k, v, causal=True)
    _close("out", out, sdpa, ATTENTION_REL[torch.float32], f"Lq={lq} Lk={lk}")


@pytest.mark.parametrize("mode", F.BWD_MODES)
@pytest.mark.parametrize("causal", [False, True])
def test_every_backward_mode(mode, causal):
    q, k, v, do = _inputs(1, 2, 77, 93, 32, torch.float16)
    out, lse = F.flash_attention_forward(q, k, v, causal)
    grads = F.flash_attention_backward(q, k, v, out, lse, do, causal, mode=mode)
    _check_all(q, k, v, do, causal, out, lse, grads, what=f"mode={mode} causal={causal}")


@pytest.mark.parametrize("causal", [False, True])
def test_causal_backward_honours_the_mask(causal):
    # One widely copied tutorial's backward masked as if always causal. Each flag must give its own reference,
    # and the two references differ a lot (so a backward that ignores the flag fails one of these).
    q, k, v, do = _inputs(1, 1, 96, 96, 16, torch.float32)
    out, lse = F.flash_attention_forward(q, k, v, causal)
    for mode in F.BWD_MODES:
        grads = F.flash_attention_backward(q, k, v, out, lse, do, causal, mode=mode)
        r_other = _ref(q, k, v, do, not causal)[2]
        _check_all(q, k, v, do, causal, out, lse, grads, what=f"mode={mode}")
        assert (grads[1].double().cpu() - r_other[1].cpu()).abs().max() > 0.05 * r_other[1].abs().max()


@pytest.mark.parametrize("bm, bn", [(16, 16), (64, 32), (32, 32)])
def test_other_tile_shapes(bm, bn):
    q, k, v, do = _inputs(1, 1, 100, 100, 16, torch.float32)
    for causal in (False, True):
        out, lse = F.flash_attention_forward(q, k, v, causal, config=F.fwd_config(bm, bn))
        grads = F.flash_attention_backward(
            q,
            k,
            v,
            out,
            lse,
            do,
            causal,
            mode="split",
            config=F.bwd_config(bn, 2 * bn, bm, bn),
            dq_config=F.bwd_config(bn, 2 * bn, bm, bn),
        )
        _check_all(q, k, v, do, causal, out, lse, grads, what=f"BLOCK_M={bm} BLOCK_N={bn} causal={causal}")


@pytest.mark.skipif(F.TensorDescriptor is None, reason="this Triton has no tensor descriptors")
@pytest.mark.parametrize("causal", [False, True])
def test_tma_descriptor_loads(causal):
    # the TMA path (lengths multiples of TMA_ROW_MULTIPLE): Lq != Lk, two heads, causal masks on the band
    q, k, v, do = _inputs(1, 2, 128, 256, 16, torch.bfloat16)
    assert F.tma_lengths_ok(128, 256) and not F.tma_lengths_ok(128, 250) and not F.tma_lengths_ok(50, 256)
    out, lse = F.flash_attention_forward(q, k, v, causal, use_tma=True)
    for mode in F.BWD_MODES:
        grads = F.flash_attention_backward(q, k, v, out, lse, do, causal, mode=mode, use_tma=True)
        _check_all(q, k, v, do, causal, out, lse, grads, what=f"TMA causal={causal} mode={mode}")


def test_custom_scale_and_large_scores():
    q, k, v, do = _inputs(1, 2, 65, 65, 64, torch.float32)
    for scale in (0.01, 1.0):
        out, lse, grads = _through_autograd(q, k, v, do, False, scale)
        _check_all(q, k, v, do, False, out, lse, grads, sm_scale=scale, what=f"sm_scale={scale}")


@pytest.mark.parametrize("mode", F.BWD_MODES)
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the interpreter, in unstored rows
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_very_negative_logsumexp_stays_finite(mode):
    # every score about -700, so lse ~ -700: for the zero-filled key rows past Lk in the last key block,
    # exp(0 - lse) overflows to inf. Those rows are never stored, and in "atomic" mode they must not reach dQ.
    k0 = torch.randn(16, dtype=torch.float64)
    k = (k0 + 0.05 * torch.randn(1, 1, 37, 16, dtype=torch.float64)).float().to(DEV)
    q = (-k0 * (2800 / (k0 @ k0)) * (1 + 0.01 * torch.randn(1, 1, 29, 16, dtype=torch.float64))).float().to(DEV)
    v, do = _rand(1, 1, 37, 16, torch.float32), _rand(1, 1, 29, 16, torch.float32)
    out, lse = F.flash_attention_forward(q, k, v)
    assert lse.max() < -600, "the test needs very negative scores"
    grads = F.flash_attention_backward(q, k, v, out, lse, do, mode=mode)
    assert torch.isfinite(out).all() and all(torch.isfinite(g).all() for g in grads), mode


@pytest.mark.skipif(F.TensorDescriptor is None, reason="this Triton has no tensor descriptors")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:All-NaN slice encountered:RuntimeWarning")  # head 1, by design
@pytest.mark.parametrize("L", [20, 128])
def test_tma_tiles_past_a_head_do_not_leak_the_next_heads_inf(causal, L):
    # A TMA tile of a last (partial) block of rows would read the next head's first rows, and masking the scores
    # is not enough: 0 * inf = NaN in the matmuls with those rows. So L = 20 must fall back to masked pointer
    # loads, and L = 128 has no partial tile. Head 1 holds inf/NaN; head 0 must not see it.
    q, k, v, do = _inputs(1, 2, L, L, 16, torch.float32)
    q0, k0, v0, do0 = (t[:, :1].clone() for t in (q, k, v, do))
    q[:, 1], do[:, 1], v[:, 1] = float("inf"), float("inf"), float("inf")
    k[:, 1] = float("nan")
    out, lse = F.flash_attention_forward(q, k, v, causal, use_tma=True)
    out_ok, lse_ok = F.flash_attention_forward(q0, k0, v0, causal, use_tma=False)
    _close("out (head 0)", out[:, :1], out_ok.double(), 1e-6)
    for mode in F.BWD_MODES:
        grads = F.flash_attention_backward(
            q, k, v, out_ok.expand_as(q), lse_ok.expand_as(lse), do, causal, mode=mode, use_tma=True
        )
        ok = F.flash_attention_backward(q0, k0, v0, out_ok, lse_ok, do0, causal, mode=mode, use_tma=False)
        for name, g, r in zip(("dq", "dk", "dv"), grads, ok):
            _close(f"{name} (head 0)", g[:, :1], r.double(), 1e-6, f"mode={mode}")


# ---- poisoned outputs: every element must be written ------------------------------------------------------


def test_kernels_write_every_element_of_poisoned_outputs():
    B, H, Lq, Lk, d = 1, 2, 45, 70, 32
    q, k, v, do = _inputs(B, H, Lq, Lk, d, torch.float32)
    for causal in (False, True):
        out = torch.full_like(q, float("nan"))
        lse = torch.full((B, H, Lq), float("nan"), device=DEV)
        cfg = F.INTERPRETER_FWD
        F.flash_attention_fwd_kernel[(triton.cdiv(Lq, cfg.kwargs["BLOCK_M"]), B * H)](
            q,
            k,
            v,
            out,
            lse,
            None,
            None,
            None,
            F.LOG2E / math.sqrt(d),
            Lq,
            Lk,
            HEAD_DIM=d,
            CAUSAL=causal,
            USE_TMA=False,
            UPCAST=False,
            DOT_PREC="ieee",
            **cfg.kwargs,
        )
        for mode in F.BWD_MODES:
            bufs = list(F.bwd_prepare(q, k, v, out, lse, do, mode))
            for i in (6, 7, 8):
                if not (mode == "atomic" and i == 6):  # the atomic dq buffer must start at zero
                    bufs[i].fill_(float("nan"))
            for part in F.MODE_PARTS[mode]:
                F.bwd_launch(part, tuple(bufs), causal, 1 / math.sqrt(d))
            _check_all(q, k, v, do, causal, out, lse, bufs[6:], what=f"poisoned, mode={mode} causal={causal}")


# ---- the autograd Function and the input checks ---------------------------------------------------------


def test_function_returns_lse_not_differentiable_and_empty_queries():
    q, k, v, _ = _inputs(1, 1, 20, 20, 16, torch.float32)
    q.requires_grad_()
    out = F.flash_attention(q, k, v)
    assert out.requires_grad and out.grad_fn is not None
    out2, lse = F.flash_attention(q, k, v, return_lse=True)
    assert not lse.requires_grad and lse.dtype == torch.float32 and lse.shape == (1, 1, 20)
    assert torch.equal(out, out2)
    e = torch.empty(1, 1, 0, 16, device=DEV)
    o, l = F.flash_attention_forward(e, k, v)
    assert o.shape == e.shape and l.shape == (1, 1, 0)


def test_non_contiguous_inputs_are_accepted():
    q, k, v, do = _inputs(1, 3, 40, 40, 16, torch.float32)
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)  # (B, H, L, d) view of a (B, L, H, d) tensor
    assert not qt.is_contiguous()
    out, lse, grads = _through_autograd(qt, k, v, do, True)
    _check_all(q, k, v, do, True, out, lse, grads)


def test_bad_input_raises_naming_the_argument():
    q, k, v, _ = _inputs(1, 1, 8, 8, 16, torch.float32)
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        F.flash_attention([1.0], k, v)
    with pytest.raises(TypeError, match="k must have dtype"):
        F.flash_attention(q, k.double(), v)
    with pytest.raises(TypeError, match="q and v must have the same dtype"):
        F.flash_attention(q, k, v.half())
    with pytest.raises(ValueError, match="q must have 4 dimension"):
        F.flash_attention(q[0], k, v)
    with pytest.raises(ValueError, match="head dimension d"):
        F.flash_attention(*(_rand(1, 1, 8, 48, torch.float32) for _ in range(3)))
    with pytest.raises(ValueError, match="k and v must have the same shape"):
        F.flash_attention(q, k, _rand(1, 1, 9, 16, torch.float32))
    with pytest.raises(ValueError, match="must share"):
        F.flash_attention(q, _rand(1, 2, 8, 16, torch.float32), _rand(1, 2, 8, 16, torch.float32))
    with pytest.raises(ValueError, match="at least one key"):
        F.flash_attention(q, k[:, :, :0], v[:, :, :0])
    with pytest.raises(TypeError, match="causal must be a bool"):
        F.flash_attention(q, k, v, causal=1)
    with pytest.raises(ValueError, match="sm_scale must be a positive"):
        F.flash_attention(q, k, v, sm_scale=-1.0)
    big = torch.zeros(1, F.MAX_GRID_Y + 1, 1, 16, device=DEV)
    with pytest.raises(ValueError, match="B \\* H must be at most"):
        F.flash_attention(big, big, big)
    with pytest.raises(ValueError, match="mode must be one of"):
        F.flash_attention_backward(q, k, v, q, torch.zeros(1, 1, 8, device=DEV), q, mode="nope")
    with pytest.raises(ValueError, match="causal attention needs BLOCK_M % BLOCK_N"):
        F.flash_attention_forward(q, k, v, True, config=F.fwd_config(16, 32))


def test_sm_scale_extremes_give_finite_results_or_name_the_argument():
    # sm_scale * log2(e) is passed to the kernel as fp32: past fp32's range it became inf (NaN everywhere)
    q, k, v, _ = _inputs(1, 1, 17, 17, 16, torch.float32)
    for scale in (1e-30, 1e20):  # uniform and one-hot softmax: both finite in float64 and in the kernel
        out, _ = F.flash_attention_forward(q, k, v, False, scale)
        r_out, _ = F.flash_attention_ref(q, k, v, False, scale)
        _close("out", out, r_out, ATTENTION_REL[torch.float32], f"sm_scale={scale}")
    for scale in (1e300, 10**400):
        with pytest.raises(ValueError, match="sm_scale"):
            F.flash_attention(q, k, v, sm_scale=scale)
    import numpy as np

    out = F.flash_attention(q, k, v, sm_scale=np.float32(0.25))  # any real number type
    _close("out", out, F.flash_attention_ref(q, k, v, False, 0.25)[0], ATTENTION_REL[torch.float32])


@pytest.mark.filterwarnings("ignore:Input #:UserWarning")  # gradcheck on fp32 (the kernels have no float64)
def test_autograd_edge_cases():
    q, k, v, _ = _inputs(1, 2, 9, 11, 16, torch.float32)
    # gradcheck's undefined-gradient check calls backward with dout = None
    args = tuple(t.detach().clone().requires_grad_() for t in (q, k, v))
    assert torch.autograd.gradcheck(
        lambda a, b, c: F.flash_attention(a, b, c, True), args, eps=1e-3, atol=2e-2, rtol=2e-2, fast_mode=True
    )
    # the backward kernels are not differentiable: a second derivative must raise, not silently drop this term
    qq = q.detach().clone().requires_grad_()
    (g,) = torch.autograd.grad(F.flash_attention(qq, k, v).pow(2).sum(), qq, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiable once"):
        torch.autograd.grad((g.sum() + qq.pow(3).sum()), qq)


def test_l_bucket():
    assert [F.l_bucket(n) for n in (1, 256, 257, 1024, 3000, 4096, 5000, 16384, 10**6)] == [
        256,
        256,
        1024,
        1024,
        4096,
        4096,
        16384,
        16384,
        16384,
    ]


# ---- GPU only ---------------------------------------------------------------------------------------------

gpu = [pytest.mark.gpu, pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a CUDA GPU")]


@pytest.mark.parametrize("L, d", [(1000, 64), (1793, 128), (4097, 64)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a CUDA GPU")
def test_gpu_large_shapes_autotuned(L, d, dtype, causal):
    q, k, v, do = _inputs(1, 2, L, L, d, dtype)
    out, lse, grads = _through_autograd(q, k, v, do, causal)
    _check_all(q, k, v, do, causal, out, lse, grads, what=f"GPU L={L} d={d} {dtype} causal={causal}")


@pytest.mark.parametrize("mode", F.BWD_MODES)
@pytest.mark.parametrize("use_tma", [False, True])
@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a CUDA GPU")
def test_gpu_every_path_against_float64(mode, use_tma):
    if use_tma and not F.tma_available():
        pytest.skip("no TMA on this GPU")
    q, k, v, do = _inputs(2, 4, 1000, 1000, 128, torch.bfloat16)
    for causal in (False, True):
        out, lse = F.flash_attention_forward(q, k, v, causal, use_tma=use_tma)
        grads = F.flash_attention_backward(q, k, v, out, lse, do, causal, mode=mode, use_tma=use_tma)
        _check_all(q, k, v, do, causal, out, lse, grads, what=f"mode={mode} tma={use_tma} causal={causal}")


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU or torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_inputs_on_two_gpus_name_the_argument():
    q, k, v, _ = _inputs(1, 1, 8, 8, 16, torch.float16)
    with pytest.raises(ValueError, match="q and v must be on the same device"):
        F.flash_attention(q, k, v.to("cuda:1"))


def test_autotune_candidates_keep_the_tiling_rules():
    kept = F.fwd_candidates(torch.bfloat16, causal=True)
    assert kept and all(c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0 for c in kept)
    assert len(kept) < len(F.FWD_CONFIGS)  # (64, 128) is dropped: the band would not start on a tile edge
    assert F.fwd_candidates(torch.bfloat16, causal=False) == F.FWD_CONFIGS
    assert F.fwd_candidates(torch.float32, causal=False) == F.FP32_FWD_CONFIGS
    for part in F.BWD_CONFIGS:
        kept = F.bwd_candidates(part, torch.bfloat16)
        assert kept and all(
            c.kwargs["BLOCK_N1"] % c.kwargs["BLOCK_M1"] == 0 and c.kwargs["BLOCK_M2"] % c.kwargs["BLOCK_N2"] == 0
            for c in kept
        )
    assert F.bwd_candidates("fused", torch.float32) == F.FP32_BWD_CONFIGS


class _Recorder:
    """Stands in for a @triton.jit kernel: records each launch's config, then launches the real kernel."""

    def __init__(self, kernel, launched):
        self.kernel, self.launched = kernel, launched

    def __getitem__(self, grid):
        def launch(*args, **kw):
            self.launched.append(tuple(sorted((k, v) for k, v in kw.items() if k.startswith(("BLOCK", "num_")))))
            return self.kernel[grid](*args, **kw)

        return launch


def _key(cfg):
    return tuple(sorted({**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}.items()))


def test_autotune_through_the_shared_autotuner(monkeypatch):
    """On a GPU every launch without a config is autotuned by ``kernels._autotune``: the fastest candidate on the
    (here fake) graph clock is taken, cached per key (a second length in the same bucket is not timed again), and
    tuning runs on scratch outputs: the atomic backward's dq, which accumulates, is still right afterwards.
    ``GPULAB_AUTOTUNE=first`` takes the first candidate untimed. The GPU is pretended (kernels run in the
    interpreter), so the logic is under test, not a speed."""
    import gpulab.core.timing as timing
    from gpulab.core import settings
    from gpulab.kernels import _autotune

    launched = []
    monkeypatch.setattr(_autotune, "_CACHE", {})
    monkeypatch.setattr(gpulab, "ON_GPU", True)
    monkeypatch.setattr(settings, "SETTINGS", settings.read({}))
    monkeypatch.setattr(F, "flash_attention_fwd_kernel", _Recorder(F.flash_attention_fwd_kernel, launched))
    monkeypatch.setattr(F, "flash_attention_bwd_kernel", _Recorder(F.flash_attention_bwd_kernel, launched))
    fast = {_key(F.FWD_CONFIGS[2]), _key(F.BWD_CONFIGS["atomic"][1])}  # not the first of their lists
    graphs = []

    def fake_time_ms(fn, warmup_ms=0, rep_ms=0, graph=False):
        fn()
        graphs.append(graph)
        return timing.Timing(1.0 if launched[-1] in fast else 2.0, 0.0, 0.0)

    monkeypatch.setattr(timing, "time_ms", fake_time_ms)
    q, k, v, do = _inputs(1, 2, 40, 40, 16, torch.float16)
    out, lse = F.flash_attention_forward(q, k, v, use_tma=False)
    assert launched[-1] == _key(F.FWD_CONFIGS[2]) and len(graphs) == len(F.FWD_CONFIGS) and all(graphs)
    grads = F.flash_attention_backward(q, k, v, out, lse, do, mode="atomic", use_tma=False)
    assert launched[-1] == _key(F.BWD_CONFIGS["atomic"][1])
    _check_all(q, k, v, do, False, out, lse, grads, what="after autotuning")
    assert F.tuned_configs() == {
        "fwd float16 d=16 causal=False tma=False L<=256": F.config_label(F.FWD_CONFIGS[2]),
        "atomic float16 d=16 causal=False tma=False L<=256": F.config_label(F.BWD_CONFIGS["atomic"][1]),
    }
    assert F.chosen_configs(q, k, v, bwd_mode="atomic", use_tma=False) == {
        "fwd": F.FWD_CONFIGS[2],
        "atomic": F.BWD_CONFIGS["atomic"][1],
    }
    n = len(graphs)
    q2, k2, v2, _ = _inputs(1, 2, 70, 70, 16, torch.float16)  # the same bucket (L <= 256): no new timing
    F.flash_attention_forward(q2, k2, v2, use_tma=False)
    assert len(graphs) == n and launched[-1] == _key(F.FWD_CONFIGS[2])
    monkeypatch.setattr(settings, "SETTINGS", settings.read({"GPULAB_AUTOTUNE": "first"}))
    F.flash_attention_forward(q, k, v, causal=True, use_tma=False)  # a new key: the first causal candidate
    assert len(graphs) == n and launched[-1] == _key(F.fwd_candidates(torch.float16, True)[0])


@pytest.mark.parametrize("i", [0, 1])
def test_fp32_configs(i):
    q, k, v, do = _inputs(1, 1, 77, 77, 128, torch.float32)
    for causal in (False, True):
        out, lse = F.flash_attention_forward(q, k, v, causal, config=F.FP32_FWD_CONFIGS[i])
        cfg = F.FP32_BWD_CONFIGS[i]
        grads = F.flash_attention_backward(q, k, v, out, lse, do, causal, mode="split", config=cfg, dq_config=cfg)
        _check_all(q, k, v, do, causal, out, lse, grads, what=f"fp32 config {i} causal={causal}")


def test_negative_views_refused_in_inputs_and_resolved_in_the_incoming_gradient():
    """A negative view's memory holds -x; kernels read memory. Inputs are refused by name; a gradient autograd
    hands to backward as a negative view is resolved (the caller cannot choose its form), so dq, dk, dv match
    float64 for -do."""
    q, k, v, do = _inputs(1, 2, 9, 9, 16, torch.float32)
    with pytest.raises(ValueError, match=r"^k is a negative view"):
        F.flash_attention(q, torch._neg_view(k), v)
    out, lse, grads = _through_autograd(q, k, v, torch._neg_view(do), causal=True)
    _check_all(q, k, v, -do, True, out, lse, grads)
