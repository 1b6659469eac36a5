"""The teaching FlashAttention (gpulab.kernels.flash_teaching): forward and backward against float64 autograd,
both causal flags, lengths that are multiples of no tile, blocks of unequal sizes; and its input checks."""

import gpulab  # first: it picks the mode  # isort: skip
import inspect

import pytest
import torch

from gpulab.core import tolerances as tol
from gpulab.kernels import flash_teaching as T

SEED = 8
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if gpulab.ON_GPU else [])


def _inputs(B, H, L, d, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, L, d, generator=g, dtype=torch.float64).to(dtype).to(gpulab.DEVICE) for _ in range(4)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "L, d, blocks", [(1, 16, (16, 16)), (45, 32, (16, 16)), (70, 16, (32, 16)), (33, 16, (16, 32))]
)
def test_forward_and_backward_match_float64(dtype, causal, L, d, blocks):
    seed = SEED + L + d
    q, k, v, do = _inputs(1, 2, L, d, dtype, seed)
    out, lse = T.flash_teaching_forward(q, k, v, causal, blocks=blocks)
    dq, dk, dv = T.flash_teaching_backward(q, k, v, out, lse, do, causal, blocks=blocks)
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    r_out, r_lse = T.reference(q64, k64, v64, causal)
    r_dq, r_dk, r_dv = torch.autograd.grad(r_out, (q64, k64, v64), do.double())
    msg = f"seed {seed}, L={L}, d={d}, blocks={blocks}, causal={causal}, {dtype}"
    assert tol.max_rel_error(out, r_out) <= tol.ATTENTION_REL[dtype], msg
    assert ((lse.double() - r_lse).abs() / (1 + r_lse.abs())).max().item() <= tol.LSE_ABS, msg
    floor = max(r_dv.abs().max().item(), 1e-3)  # dq and dk are 0 when L = 1
    for name, g, r in (("dq", dq, r_dq), ("dk", dk, r_dk), ("dv", dv, r_dv)):
        assert tol.max_rel_error(g, r, floor) <= tol.ATTENTION_GRAD_REL[dtype], (name, msg)


def test_causal_row_zero_is_value_zero_by_hand():
    # with causal=True query 0 sees only key 0: out[..., 0, :] = v[..., 0, :] and lse_0 = q_0 . k_0 / sqrt(d)
    q, k, v, _ = _inputs(1, 1, 20, 16, torch.float32, SEED)
    out, lse = T.flash_teaching_forward(q, k, v, True)
    rel = tol.ATTENTION_REL[torch.float32]  # q . k through an fp32 tl.dot declared "ieee"
    assert torch.allclose(out[0, 0, 0], v[0, 0, 0], rtol=1e-6, atol=1e-6)
    assert lse[0, 0, 0].item() == pytest.approx(
        (q[0, 0, 0].double() @ k[0, 0, 0].double()).item() / 4, rel=rel, abs=rel
    )


def test_fp32_dots_declare_ieee_and_16_bit_dots_the_default():
    # the teaching check compares fp32 with float64 at fp32's bound: a TF32 dot (a GPU's default) misses it
    assert T.dot_precision(torch.float32) == "ieee"
    assert T.dot_precision(torch.float16) == T.dot_precision(torch.bfloat16) == tol.DEFAULT_INPUT_PRECISION
    for kernel in (T.flash_fwd_kernel, T._rebuild_p, T.flash_bwd_dkdv_kernel, T.flash_bwd_dq_kernel):
        src = inspect.getsource(kernel.fn)  # every dot names the declared precision
        assert src.count("tl.dot(") == src.count("input_precision=DOT_PREC") > 0, kernel.fn.__name__


def test_bad_inputs_are_named():
    q, k, v, _ = _inputs(1, 1, 20, 16, torch.float32, SEED)
    with pytest.raises(ValueError, match="k must have q's shape"):
        T.flash_teaching_forward(q, k[:, :, :10].contiguous(), v)
    with pytest.raises(ValueError, match="head dimension"):
        T.flash_teaching_forward(*(torch.zeros(1, 1, 4, 24, device=gpulab.DEVICE) for _ in range(3)))
    with pytest.raises(TypeError, match="causal must be a bool"):
        T.flash_teaching_forward(q, k, v, 1)
    with pytest.raises(ValueError, match="blocks"):
        T.flash_teaching_forward(q, k, v, blocks=(16, 8))
    with pytest.raises(TypeError, match="dtype"):
        T.flash_teaching_forward(q.double(), k.double(), v.double())
    out, lse = T.flash_teaching_forward(q, k, v)
    with pytest.raises(ValueError, match="lse must have shape"):
        T.flash_teaching_backward(q, k, v, out, lse[:, :, :5], out)


GPUS = ("T4", "L4", "A100 40GB SXM", "H200")


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("d", [64, 128])
def test_planned_blocks_are_the_largest_tiles_that_fit(gpu, d):
    from gpulab.core import plan

    p = plan.for_gpu(plan.as_gpu_spec(gpu))
    for itemsize in (2, 4):
        for part in T.PARTS:
            got = T.planned_blocks(d, itemsize, part, p)
            if p.small_tiles:  # below 8.0: no 64-row tile (spills)
                tiles = T.FMA_TILES
            else:  # fp32's "ieee" dots run on FMA too: the tiles that spill least at this d
                tiles = T.FP32_TILES[part][d] if itemsize == 4 else T.GPU_TILES
            i = tiles.index(got)
            fits = T.smem_bytes(part, *got, d, itemsize) <= p.smem_per_block_bytes
            assert fits or got == tiles[-1], (gpu, d, itemsize, part)  # none fits: the smallest
            if itemsize == 2:  # fp16, bf16: always a tile that fits
                assert fits, (gpu, d, part)
            for larger in tiles[:i]:  # every larger tile is over the limit
                assert T.smem_bytes(part, *larger, d, itemsize) > p.smem_per_block_bytes, (gpu, d, part, larger)
            if gpu in ("A100 40GB SXM", "H200") and itemsize == 2:
                assert got == T.GPU_BLOCKS == (64, 64), (gpu, d, part)


def test_fp32_tiles_have_no_64_row_tile_from_8_0():
    # fp32 dots are "ieee" (FP32 FMA, operands in registers): at d = 32 a 64x64 forward spills on 9.0, 32x32 not
    from gpulab.core import plan

    h200 = plan.for_gpu(plan.as_gpu_spec("H200"))
    assert T.planned_blocks(32, 4, "fwd", h200) == (32, 32) and T.planned_blocks(128, 4, "fwd", h200) == (16, 16)
    assert T.planned_blocks(32, 4, "dkdv", h200) == (16, 16) and T.planned_blocks(32, 4, "dq", h200) == (32, 32)
    assert all(bm < 64 for part in T.PARTS for d in T.HEAD_DIMS for bm, _ in T.FP32_TILES[part][d])
    with pytest.raises(ValueError, match="head_dim must be one of"):
        T.planned_blocks(48, 4, "fwd", h200)


def test_planned_blocks_shrink_where_shared_memory_is_short():
    from gpulab.core import plan

    t4, l4 = (plan.for_gpu(plan.as_gpu_spec(name)) for name in ("T4", "L4"))
    assert T.planned_blocks(128, 2, "dkdv", l4) == (64, 32)  # 99 KiB: 64x64's estimate is over
    # a T4 (7.5): tl.dot on FMA, so the register-light tiles, which fit its 64 KiB too
    assert all(T.planned_blocks(128, 2, part, t4) == T.FMA_TILES[0] == (32, 16) for part in T.PARTS)
    assert T.smem_bytes("dkdv", 64, 64, 128, 2) == 128 * 1024  # the compiler's 128 KiB on 7.5
    with pytest.raises(ValueError, match="part"):
        T.planned_blocks(64, 2, "bwd", t4)
    with pytest.raises(ValueError, match="itemsize"):
        T.planned_blocks(64, 8, "fwd", t4)
    with pytest.raises(ValueError, match="head_dim"):
        T.planned_blocks(0, 2, "fwd", t4)


def test_default_blocks_are_the_interpreters_or_the_plans():
    # the launchers' blocks=None: INTERPRETER_BLOCKS here, planned_blocks on a GPU
    q, k, v, do = _inputs(1, 1, 37, 32, torch.float32, SEED)
    out, lse = T.flash_teaching_forward(q, k, v)
    want = T.flash_teaching_forward(q, k, v, blocks=T.INTERPRETER_BLOCKS if not gpulab.ON_GPU else None)
    assert torch.equal(out, want[0]) and torch.equal(lse, want[1])
    grads = T.flash_teaching_backward(q, k, v, out, lse, do)
    assert all(g.shape == q.shape and torch.isfinite(g).all() for g in grads)
