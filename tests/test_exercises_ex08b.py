"""Lesson 08b's checkers: the FlashAttention backward in torch and in Triton, right, with each usual mistake
(named by its float64 answer), with an L x L matrix, unattempted; the float64 formulas against autograd."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import math

import pytest
import torch
import triton

from gpulab.exercises import ex08b, ex08b_solutions, hint
from gpulab.kernels.flash_attention import flash_attention_ref


def tiled(q, k, v, o, lse, do, causal, block=32, delta=True, scaled=True, masked=True, transpose=True, lse_used=True):
    """A tiled torch backward written apart from the checker's formulas, each usual mistake a switch."""
    L, d = q.shape[2], q.shape[3]
    sc = 1 / math.sqrt(d) if scaled else 1.0
    dl = (do * o).sum(-1) if delta else torch.zeros_like(lse)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for i in range(0, L, block):
        r = slice(i, min(i + block, L))
        for j in range(0, L, block):
            c = slice(j, min(j + block, L))
            s = q[..., r, :] @ k[..., c, :].transpose(-1, -2) / math.sqrt(d)
            p = torch.exp(s - lse[..., r, None]) if lse_used else torch.exp(s)
            if causal and masked:
                p = torch.where(torch.arange(j, c.stop)[None, :] <= torch.arange(i, r.stop)[:, None], p, 0.0)
            dv[..., c, :] += p.transpose(-1, -2) @ do[..., r, :]
            ds = p * (do[..., r, :] @ v[..., c, :].transpose(-1, -2) - dl[..., r, None])
            dq[..., r, :] += ds @ k[..., c, :] * sc
            if transpose:
                dk[..., c, :] += ds.transpose(-1, -2) @ q[..., r, :] * sc
            else:  # the tile's dS untransposed: only square tiles line up
                dk[..., c, :] += ds[..., : c.stop - j, : r.stop - i] @ q[..., r, :][..., : c.stop - j, :] * sc
    return dq, dk, dv


def test_the_float64_formulas_are_autograd():
    torch.manual_seed(0)
    q, k, v, do = (torch.randn(2, 3, 23, 16, dtype=torch.float64) for _ in range(4))
    for causal in (False, True):
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        ref = torch.autograd.grad(flash_attention_ref(qg, kg, vg, causal)[0], (qg, kg, vg), do)
        for g, r in zip(ex08b._grads64(q, k, v, do, causal), ref):
            assert torch.allclose(g, r, atol=1e-12), causal


def test_right_backwards_pass():
    assert ex08b.check_flash_backward(tiled).ok
    assert ex08b.check_flash_backward(ex08b.check_flash_backward.solution).ok
    assert ex08b.check_flash_backward_kernel(ex08b.check_flash_backward_kernel.solution).ok


@pytest.mark.parametrize(
    ("kw", "named"),
    [
        (dict(delta=False), "delta term"),
        (dict(scaled=False), "carry the factor scale"),
        (dict(masked=False), "not causally masked"),
        (dict(lse_used=False), "subtract the saved logsumexp"),
    ],
)
def test_each_usual_backward_mistake_is_named(kw, named):
    rep = ex08b.check_flash_backward(lambda *a: tiled(*a, **kw))
    assert not rep.ok and named in str(rep), str(rep)


def test_an_untransposed_ds_is_named():
    rep = ex08b.check_flash_backward(lambda *a: tiled(*a, transpose=False, block=512))  # one tile: dS square
    assert not rep.ok and "dS is transposed" in str(rep), str(rep)


def test_an_l_by_l_matrix_is_named():
    def whole(q, k, v, o, lse, do, causal):
        return tiled(q, k, v, o, lse, do, causal, block=q.shape[2])

    rep = ex08b.check_flash_backward(whole)
    assert not rep.ok and "L x L matrix" in str(rep) and len(rep.failures) == 2, str(rep)  # L = TILED_L only


def test_stubs_are_not_attempted_and_hints_come_first():
    def stub(*a):
        raise NotImplementedError

    assert not ex08b.check_flash_backward(stub).attempted
    assert not ex08b.check_flash_backward_kernel(stub).attempted
    for checker in (ex08b.check_flash_backward, ex08b.check_flash_backward_kernel):
        assert len(checker.hints) == 2
        hint(checker)


def _kernels(flip=False, grid_m=None):
    def launch(q, k, v, do, lse, delta, causal, out):
        B, H, L, d = q.shape
        sc = 1 / math.sqrt(d)
        bm = bn = 16
        kw = dict(CAUSAL=causal and not flip, D=d, BLOCK_M=bm, BLOCK_N=bn)
        ex08b_solutions.dkdv_kernel[(triton.cdiv(L, bn), B * H)](q, k, v, do, lse, delta, out[1], out[2], L, sc, **kw)
        g = grid_m(L, bm) if grid_m else triton.cdiv(L, bm)
        ex08b_solutions.dq_kernel[(g, B * H)](q, k, v, do, lse, delta, out[0], L, sc, **kw)

    return launch


def test_the_triton_backward_names_an_unmasked_p_and_a_small_grid():
    rep = ex08b.check_flash_backward_kernel(_kernels(flip=True))  # causal cases rebuild P with no mask
    assert not rep.ok and "not causally masked" in str(rep), str(rep)
    rep = ex08b.check_flash_backward_kernel(_kernels(grid_m=lambda L, b: max(L // b, 1)))
    assert not rep.ok and "never written" in str(rep), str(rep)
