"""Lesson 08's checkers: the FlashAttention forward exercise with a right kernel and with each usual mistake
(no rescale, no causal mask, unmasked loads and stores, too small a grid), each named, none crashing; and the
online-softmax exercises' solutions against wrong answers."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import math

import pytest
import torch
import triton
import triton.language as tl

from gpulab.exercises import ex08, hint
from gpulab.kernels.flash_attention import flash_attention_ref


@triton.jit
def _flash(
    Q,
    K,
    V,
    O,
    L,
    H,
    scale,
    CAUSAL: tl.constexpr,
    D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,
    RESCALE: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,
    OFFSET: tl.constexpr,
    DIVIDE: tl.constexpr,
    TAIL: tl.constexpr,
    STRIDE: tl.constexpr,
    SKIP: tl.constexpr,
):
    pid_m, bh = tl.program_id(0), tl.program_id(1)
    base = bh * (L - 1) * D if STRIDE == 1 else bh * L * D  # 1: heads L - 1 rows apart
    if STRIDE == 3:  # 3: heads one row apart (bh * D)
        base = bh * D
    if STRIDE == 4:  # 4: no head offset
        base = bh * 0
    kv = (bh // H) * H * L * D if STRIDE == 2 else base  # 2: k and v of head 0 of the batch
    Q, K, V, O = Q + base, K + kv, V + kv, O + base
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    rows = offs_m[:, None] * D + offs_d[None, :]
    q = tl.load(Q + rows, mask=offs_m[:, None] < L, other=0.0) if MASK else tl.load(Q + rows)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    hi = L
    if CAUSAL and SKIP:  # the solution's causal tile skip: no key tile past the block's last row
        hi = tl.minimum((pid_m + 1) * BLOCK_M, L)
    for start in range(0, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        keys = offs_n[:, None] * D + offs_d[None, :]
        if MASK:
            k = tl.load(K + keys, mask=offs_n[:, None] < L, other=0.0)
            v = tl.load(V + keys, mask=offs_n[:, None] < L, other=0.0)
        else:
            k = tl.load(K + keys)
            v = tl.load(V + keys)
        s = tl.dot(q, tl.trans(k)) * scale
        valid = offs_n[None, :] < L if TAIL else offs_n[None, :] >= 0
        if CAUSAL and CAUSAL_MASK:
            valid = valid & (offs_n[None, :] <= offs_m[:, None] + OFFSET)
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp(m - m_new) if RESCALE else tl.full([BLOCK_M], 1.0, tl.float32)
        p = tl.exp(s - m_new[:, None])
        l = alpha * l + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    y = (acc / l[:, None]).to(O.dtype.element_ty) if DIVIDE else acc.to(O.dtype.element_ty)
    if MASK:
        tl.store(O + rows, y, mask=offs_m[:, None] < L)
    else:
        tl.store(O + rows, y)


def launcher(
    mask=True, rescale=True, causal_mask=True, grid=None, block=32, offset=0, divide=True, tail=True, stride=0,
    skip=False, block_n=None, fixed_d=None,
):  # fmt: skip
    """A flash forward launcher with each usual mistake as a switch; ``stride``: 1 heads L - 1 rows apart, 2 k and v
    read from head 0 of each batch, 3 heads one row apart (bh * D), 4 every head at head 0; ``skip``: the solution's
    causal tile skip; ``block_n``: the key tile (default ``block``); ``fixed_d``: D hard-coded, whatever q's d."""

    def flash_forward(q, k, v, causal, out):
        B, H, L, d = q.shape
        d = fixed_d or d
        g = grid(L, block) if grid else triton.cdiv(L, block)
        _flash[(g, B * H)](
            q, k, v, out, L, H, 1 / math.sqrt(d),
            CAUSAL=causal, D=d, BLOCK_M=block, BLOCK_N=block_n or block,
            MASK=mask, RESCALE=rescale, CAUSAL_MASK=causal_mask, OFFSET=offset, DIVIDE=divide, TAIL=tail,
            STRIDE=stride, SKIP=skip,
        )  # fmt: skip

    return flash_forward


def test_right_kernels_pass():
    rep = ex08.check_flash_forward(launcher(block=64))  # no causal tile skipping: slower, still right
    long_cases = sum(L > ex08.LONG_L for _, _, L in ex08.FLASH_CASES)  # causal only
    assert rep.ok and rep.cases == 2 * (len(ex08.FLASH_CASES) + 1) - long_cases, str(rep)
    assert ex08.check_flash_forward(ex08.check_flash_forward.solution).ok


@pytest.fixture
def short_cases(monkeypatch):
    """The forward's cases without the long one: for the mistakes that show at any length (quicker)."""
    monkeypatch.setattr(ex08, "FLASH_CASES", tuple(c for c in ex08.FLASH_CASES if c[2] < 100))


def test_a_launcher_that_fixes_the_head_dimension_fails():
    """Every case had d = 16, so a launcher that hard-coded D = 16 passed; d is now drawn from the lesson's head
    dimensions (16 to 128), each among the cases: the cases of d = 16 pass, the others fail."""
    rep = ex08.check_flash_forward(launcher(fixed_d=16))
    assert not rep.ok and 0 < rep.failed < rep.cases, str(rep)
    assert f"(seed {rep.seed})" in str(rep)


def test_the_cases_cross_several_tiles_of_256_and_have_several_heads():
    assert max(L for _, _, L in ex08.FLASH_CASES) > 2 * max(ex08.TILES) and max(ex08.TILES) == 256
    assert any(B > 1 and H > 1 and B != H for B, H, _ in ex08.FLASH_CASES)


@pytest.mark.parametrize("block", [32, 128])
def test_a_forgotten_rescale_is_named_at_any_tile(block):
    rep = ex08.check_flash_forward(launcher(rescale=False, block=block))
    assert not rep.ok and "never rescaled" in str(rep), str(rep)


@pytest.mark.parametrize(
    ("kw", "named"),
    [
        (dict(offset=-1), "drops the diagonal"),
        (dict(offset=1), "see key i + 1"),
        (dict(divide=False), "not acc / l"),
        (dict(tail=False), "keys past L are not masked"),
    ],
)
def test_each_usual_mistake_is_named(kw, named, short_cases):
    rep = ex08.check_flash_forward(launcher(**kw))
    assert not rep.ok and named in str(rep), str(rep)


@pytest.mark.parametrize("stride", [1, 2])
def test_a_wrong_head_stride_is_named(stride, short_cases):
    rep = ex08.check_flash_forward(launcher(stride=stride))
    assert not rep.ok and "bh * L * D" in str(rep), str(rep)


@pytest.mark.cpu_same  # float64 on CPU tensors, no kernel: the same on any machine
def test_the_diagnosis_names_each_signature_and_nothing_for_the_right_answer():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 70, 16, dtype=torch.float64) for _ in range(3))
    for causal in (False, True):
        case = dict(q=q, k=k, v=v, causal=causal)
        assert ex08._diagnose(flash_attention_ref(q, k, v, causal)[0], case, 1e-9) is None
        for msg, fn, tiles in ex08._signatures(case):
            assert ex08._diagnose(fn(tiles[-1]), case, 1e-9) is not None, msg


def test_a_forgotten_causal_mask_is_named(short_cases):
    rep = ex08.check_flash_forward(launcher(causal_mask=False))
    assert not rep.ok and "this is the non-causal answer" in str(rep), str(rep)
    assert all("causal=True" in f for f in rep.failures), str(rep)  # the non-causal cases pass


def test_unmasked_kernel_is_named_and_does_not_crash(short_cases):
    rep = ex08.check_flash_forward(launcher(mask=False))
    assert not rep.ok and "past the end of out" in str(rep) and "mask the store" in str(rep), str(rep)


def test_grid_too_small_is_named(short_cases):
    rep = ex08.check_flash_forward(launcher(grid=lambda L, b: max(L // b, 1)))
    assert not rep.ok and "grid is too" in str(rep), str(rep)


def test_stub_reports_not_attempted_and_hints_come_first():
    def stub(q, k, v, causal, out):
        raise NotImplementedError

    assert not ex08.check_flash_forward(stub).attempted
    hints = ex08.check_flash_forward.hints
    assert len(hints) == 3 and not any("tl.exp(m - m_new)" in h or "show_solution" in h for h in hints)
    hint(ex08.check_flash_forward)


def test_merge_and_causal_tiles_solutions_pass_and_wrong_answers_fail():
    assert ex08.check_merge(ex08.check_merge.solution).ok
    assert not ex08.check_merge(lambda ma, la, ua, mb, lb, ub: (max(ma, mb), la + lb, ua + ub)).ok
    assert ex08.check_causal_tiles(ex08.check_causal_tiles.solution).ok
    assert not ex08.check_causal_tiles(lambda L, bm, bn: -(-L // bm) * -(-L // bn)).ok


@pytest.mark.parametrize("stride", [3, 4])
def test_a_wrong_head_offset_on_the_prescribed_grid_is_not_blamed_on_the_grid(stride, short_cases):
    # 3: heads one row apart (bh * D); 4: every head at head 0 (no offset): the grid is right, the rows overlap
    rep = ex08.check_flash_forward(launcher(stride=stride))
    text = str(rep)
    assert not rep.ok and "grid is too small" not in text and "is the prescribed" in text, text
    assert "rows written by several programs" in text and "bh * L * D" in text, text


def test_the_head_offset_message_is_kept_for_the_prescribed_grid():
    # a grid of one block too few is not the prescribed one: the generic grid message stays
    case = dict(q=torch.zeros(2, 3, 17, 16))
    unwritten = torch.zeros(2 * 3 * 17 * 16, dtype=torch.bool)
    unwritten[16 * 16 :] = True
    launch = dict(grid=[1, 6], ints=dict(BLOCK_M=16))
    assert ex08._flash_unwritten(case, unwritten, None, [launch]) is None  # cdiv(17, 16) = 2 blocks
    launch["ints"]["BLOCK_M"] = 32
    assert "store mask" in ex08._flash_unwritten(case, unwritten, None, [launch])


@pytest.fixture
def hundred_rows(monkeypatch):
    """One case of L = 100: several query blocks of 32 and 64 (the causal tile skip shows), quicker than L = 531."""
    monkeypatch.setattr(ex08, "FLASH_CASES", ((2, 3, 100),))


@pytest.mark.parametrize(
    "kw",
    [
        dict(offset=1, skip=True),
        dict(offset=1, skip=True, block=64, block_n=32),
        dict(offset=2, skip=True),
        dict(offset=32, skip=True, block=64, block_n=16),
    ],
)
def test_a_shifted_causal_mask_with_the_tile_skip_is_named(kw, hundred_rows):
    rep = ex08.check_flash_forward(launcher(**kw))
    text = str(rep)
    assert not rep.ok and f"causal offset of +{kw['offset']}" in text and "max |error|" not in text, text


@pytest.mark.cpu_same  # float64 on CPU tensors, no kernel: the same on any machine
def test_the_offset_signatures_tell_the_offset():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 100, 16, dtype=torch.float64) for _ in range(3))
    case = dict(q=q, k=k, v=v, causal=True)
    for o in (1, 2, 32, -32):
        for skip in (None, 32) if o > 0 else (None,):
            g = ex08._tiled64(q, k, v, True, 16, offset=o, skip_block=skip)
            assert f"causal offset of {o:+d}" in ex08._diagnose(g, case, 1e-9), (o, skip)
