"""Lesson 08b's checkers: the FlashAttention backward in torch and in Triton, right, with each usual mistake
(named by its float64 answer), unattempted; the float64 formulas against autograd. What the launcher did: the
gradients taken from torch's autograd or attention, or the memory of an L x L matrix per head, are named (the
class of answers computed elsewhere, ``work``); every head dimension of the lesson is among the cases."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import math

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from gpulab.exercises import ex08b, ex08b_solutions, hint, work
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
    text = str(rep)
    assert not rep.ok and rep.failed == 1 and work.OVER_MEMORY in text and "L x L matrix" in text, text


# ---- answers computed elsewhere: the two, and new members of the class -----------------------------------


def sdpa_and_autograd(q, k, v, o, lse, do, causal):
    """torch's attention differentiated by torch.autograd.grad: right gradients, no formula of the backward."""
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    return torch.autograd.grad(F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal), (qg, kg, vg), do)


def per_head_whole(q, k, v, o, lse, do, causal):
    """A loop over heads, each head's whole L x L matrix at once: below B*H*L*L elements in every tensor."""
    parts = [
        tiled(*(t[:, h : h + 1] for t in (q, k, v, o, lse, do)), causal, block=q.shape[2]) for h in range(q.shape[1])
    ]
    return tuple(torch.cat([p[i] for p in parts], dim=1) for i in range(3))


def vjp_of_own_attention(q, k, v, o, lse, do, causal):
    """New member: the learner's own forward differentiated by torch.func.vjp (autograd by another door)."""

    def attention(a, b, c):
        s = a @ b.transpose(-1, -2) / math.sqrt(a.shape[-1])
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        return torch.softmax(s, -1) @ c

    return torch.func.vjp(attention, q, k, v)[1](do)


def aten_attention_backward(q, k, v, o, lse, do, causal):
    """New member: torch's own attention backward called straight from torch.ops (no autograd at all)."""
    out, lse2 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=causal)[:2]
    grads = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(do, q, k, v, out, lse2, 0.0, causal)
    return tuple(grads[:3])


def every_tile_kept(q, k, v, o, lse, do, causal, block=32):
    """New member: S is never one tensor, but a first pass keeps every tile of P (a dict of tiles) for a second:
    L x L per head again, in pieces."""
    L, sc = q.shape[2], 1 / math.sqrt(q.shape[3])
    delta = (do * o).sum(-1)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    tiles = {}
    for i in range(0, L, block):
        for j in range(0, L, block):
            s = q[..., i : i + block, :] @ k[..., j : j + block, :].transpose(-1, -2) * sc
            p = torch.exp(s - lse[..., i : i + block, None])
            if causal:
                p = torch.where(
                    torch.arange(j, j + p.shape[-1])[None, :] <= torch.arange(i, i + p.shape[-2])[:, None], p, 0.0
                )
            tiles[i, j] = p
    for (i, j), p in tiles.items():
        r, c = slice(i, i + block), slice(j, j + block)
        dv[..., c, :] += p.transpose(-1, -2) @ do[..., r, :]
        ds = p * (do[..., r, :] @ v[..., c, :].transpose(-1, -2) - delta[..., r, None])
        dq[..., r, :] += ds @ k[..., c, :] * sc
        dk[..., c, :] += ds.transpose(-1, -2) @ q[..., r, :] * sc
    return dq, dk, dv


@pytest.mark.parametrize(
    "fn, named, only_memory_case",
    [
        (sdpa_and_autograd, "from torch's autograd", False),
        (per_head_whole, work.OVER_MEMORY, True),
        (vjp_of_own_attention, "from torch's autograd", False),
        (aten_attention_backward, "torch's attention computed it", False),
        (every_tile_kept, work.OVER_MEMORY, True),
    ],
    ids=["sdpa-autograd", "per-head-whole", "func-vjp", "aten-backward", "every-tile-kept"],
)
def test_an_answer_computed_elsewhere_is_named(fn, named, only_memory_case):
    """Every one gives right gradients (the first two passed the checker before); what the launcher did names it."""
    rep = ex08b.check_flash_backward(fn)
    text = str(rep)
    assert not rep.ok and named in text and "wrong" not in text, text
    assert rep.failed == (1 if only_memory_case else rep.cases), text


def test_every_head_dimension_is_checked():
    """A launcher of the right kernels that fixes D = 16 (the only d the cases had) fails: d is drawn from every
    head dimension of the lesson, each among the cases."""
    shapes = ex08b._shapes(ex08b.Draw(11), ex08b.BACKWARD_CASES)
    assert {d for *_, d in shapes} == set(ex08b.BACKWARD_HEAD_DIMS) == {16, 32, 64, 128}

    def d_16(q, k, v, do, lse, delta, causal, out):
        B, H, L, _ = q.shape
        kw = dict(CAUSAL=causal, D=16, BLOCK_M=16, BLOCK_N=16)
        sc = 1 / math.sqrt(16)
        ex08b_solutions.dkdv_kernel[(triton.cdiv(L, 16), B * H)](q, k, v, do, lse, delta, out[1], out[2], L, sc, **kw)
        ex08b_solutions.dq_kernel[(triton.cdiv(L, 16), B * H)](q, k, v, do, lse, delta, out[0], L, sc, **kw)

    rep = ex08b.check_flash_backward_kernel(d_16)
    assert not rep.ok and 0 < rep.failed < rep.cases, str(rep)  # the cases with d = 16 pass


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def test_a_kernel_launcher_that_takes_autograd_s_answer_is_named():
    """The launcher runs the right kernels into scratch (so every input is loaded), takes the gradients from
    torch's attention and autograd, and copies them into out with a Triton kernel of its own."""

    def launch(q, k, v, do, lse, delta, causal, out):
        ex08b_solutions.flash_backward_kernel(q, k, v, do, lse, delta, causal, torch.empty_like(out))
        grads = sdpa_and_autograd(q, k, v, None, lse, do, causal)
        tmp = torch.stack(grads).to(out.dtype).contiguous()
        _copy_kernel[(triton.cdiv(out.numel(), 1024),)](tmp, out, out.numel(), BLOCK=1024)

    rep = ex08b.check_flash_backward_kernel(launch)
    text = str(rep)
    # named by what the launcher ran, or earlier by kernelcheck's own rule on a launcher-made tensor loaded
    assert not rep.ok and (work.SHORTCUT in text or "computed outside the kernel" in text), text


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
