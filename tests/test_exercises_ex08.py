"""Lesson 08's checkers: the FlashAttention forward exercise with a right kernel and with each usual mistake
(no rescale, no causal mask, unmasked loads and stores, too small a grid), each named, none crashing; and the
online-softmax exercises' solutions against wrong answers."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import math

import triton
import triton.language as tl

from gpulab.exercises import ex08, hint


@triton.jit
def _flash(
    Q,
    K,
    V,
    O,
    L,
    scale,
    CAUSAL: tl.constexpr,
    D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,
    RESCALE: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,
):
    pid_m, bh = tl.program_id(0), tl.program_id(1)
    Q, K, V, O = Q + bh * L * D, K + bh * L * D, V + bh * L * D, O + bh * L * D
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    rows = offs_m[:, None] * D + offs_d[None, :]
    q = tl.load(Q + rows, mask=offs_m[:, None] < L, other=0.0) if MASK else tl.load(Q + rows)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, L, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        keys = offs_n[:, None] * D + offs_d[None, :]
        if MASK:
            k = tl.load(K + keys, mask=offs_n[:, None] < L, other=0.0)
            v = tl.load(V + keys, mask=offs_n[:, None] < L, other=0.0)
        else:
            k = tl.load(K + keys)
            v = tl.load(V + keys)
        s = tl.dot(q, tl.trans(k)) * scale
        valid = offs_n[None, :] < L
        if CAUSAL and CAUSAL_MASK:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp(m - m_new) if RESCALE else tl.full([BLOCK_M], 1.0, tl.float32)
        p = tl.exp(s - m_new[:, None])
        l = alpha * l + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    y = (acc / l[:, None]).to(O.dtype.element_ty)
    if MASK:
        tl.store(O + rows, y, mask=offs_m[:, None] < L)
    else:
        tl.store(O + rows, y)


def launcher(mask=True, rescale=True, causal_mask=True, grid=None, block=16):
    def flash_forward(q, k, v, causal, out):
        B, H, L, d = q.shape
        g = grid(L, block) if grid else triton.cdiv(L, block)
        _flash[(g, B * H)](
            q,
            k,
            v,
            out,
            L,
            1 / math.sqrt(d),
            CAUSAL=causal,
            D=d,
            BLOCK_M=block,
            BLOCK_N=block,
            MASK=mask,
            RESCALE=rescale,
            CAUSAL_MASK=causal_mask,
        )

    return flash_forward


def test_right_kernels_pass():
    rep = ex08.check_flash_forward(launcher())  # no causal tile skipping: slower, still right
    assert rep.ok and rep.cases == 2 * (len(ex08.FLASH_LENGTHS) + 1), str(rep)
    assert ex08.check_flash_forward(ex08.check_flash_forward.solution).ok


def test_a_forgotten_rescale_is_a_value_error_with_index_expected_and_got():
    rep = ex08.check_flash_forward(launcher(rescale=False))
    text = str(rep)
    assert not rep.ok and "values differ" in text and "expected" in text and "got" in text, text


def test_a_forgotten_causal_mask_is_named():
    rep = ex08.check_flash_forward(launcher(causal_mask=False))
    assert not rep.ok and "this is the non-causal answer" in str(rep), str(rep)
    assert all("causal=True" in f for f in rep.failures), str(rep)  # the non-causal cases pass


def test_unmasked_kernel_is_named_and_does_not_crash():
    rep = ex08.check_flash_forward(launcher(mask=False))
    assert not rep.ok and "past the end of out" in str(rep) and "mask the store" in str(rep), str(rep)


def test_grid_too_small_is_named():
    rep = ex08.check_flash_forward(launcher(grid=lambda L, b: max(L // b, 1)))
    assert not rep.ok and "grid is too" in str(rep), str(rep)


def test_stub_reports_not_attempted_and_hints_come_first():
    def stub(q, k, v, causal, out):
        raise NotImplementedError

    assert not ex08.check_flash_forward(stub).attempted
    assert len(ex08.check_flash_forward.hints) == 2 and "show_solution" not in ex08.check_flash_forward.hints[0]
    hint(ex08.check_flash_forward)


def test_merge_and_causal_tiles_solutions_pass_and_wrong_answers_fail():
    assert ex08.check_merge(ex08.check_merge.solution).ok
    assert not ex08.check_merge(lambda ma, la, ua, mb, lb, ub: (max(ma, mb), la + lb, ua + ub)).ok
    assert ex08.check_causal_tiles(ex08.check_causal_tiles.solution).ok
    assert not ex08.check_causal_tiles(lambda L, bm, bn: -(-L // bm) * -(-L // bn)).ok
