"""Exercises of lesson 08 (FlashAttention)."""

from __future__ import annotations

import math
import random

import torch

import gpulab

from ..core import tolerances
from ..kernels.flash_attention import HEAD_DIMS, flash_attention_ref
from ..models.waves import cdiv
from . import Report, _short, close, ex08_solutions, is_int, run_cases
from .cases import Draw
from .kernelcheck import check_kernel

NEG_INF = float("-inf")


def _merge_solution(m_a: float, l_a: float, u_a: float, m_b: float, l_b: float, u_b: float):
    """Merge two online-softmax states of one row (scalar values): m' = max(m_a, m_b), alpha = exp(m_a - m'),
    beta = exp(m_b - m'), l' = alpha l_a + beta l_b, u' = alpha u_a + beta u_b. An empty state (m = -inf,
    l = u = 0) contributes nothing; two empty states give the empty state, not NaN."""
    m = max(m_a, m_b)
    if m == NEG_INF:
        return NEG_INF, 0.0, 0.0
    alpha = 0.0 if m_a == NEG_INF else math.exp(m_a - m)
    beta = 0.0 if m_b == NEG_INF else math.exp(m_b - m)
    return m, alpha * l_a + beta * l_b, alpha * u_a + beta * u_b


def _state(rng: random.Random):
    """A random nonempty state of k keys with scores around 0 (spread 3) and values in [-5, 5]."""
    s = [rng.gauss(0, 3) for _ in range(rng.randint(1, 6))]
    v = [rng.uniform(-5, 5) for _ in s]
    m = max(s)
    w = [math.exp(x - m) for x in s]
    return m, sum(w), sum(a * b for a, b in zip(w, v))


def check_merge(fn) -> Report:
    """fn(m_a, l_a, u_a, m_b, l_b, u_b) -> (m, l, u): the state of the union of two sets of keys of one query
    row, each given by its running max m, sum l = sum exp(s - m) and weighted sum u = sum exp(s - m) v
    (scalar values). The empty state is (-inf, 0.0, 0.0)."""
    rng = random.Random()
    ln2, ln3 = math.log(2), math.log(3)
    cases = [dict(m_a=ln2, l_a=1.5, u_a=4.5, m_b=ln3, l_b=1.0, u_b=2.0)]  # the seed's tiles A and B
    for _ in range(10):
        a, b = _state(rng), _state(rng)
        cases.append(dict(m_a=a[0], l_a=a[1], u_a=a[2], m_b=b[0], l_b=b[1], u_b=b[2]))
    a = _state(rng)
    cases += [
        dict(m_a=NEG_INF, l_a=0.0, u_a=0.0, m_b=a[0], l_b=a[1], u_b=a[2], _empty=True),
        dict(m_a=a[0], l_a=a[1], u_a=a[2], m_b=NEG_INF, l_b=0.0, u_b=0.0, _empty=True),
        dict(m_a=NEG_INF, l_a=0.0, u_a=0.0, m_b=NEG_INF, l_b=0.0, u_b=0.0, _empty=True),
    ]

    def compare(case, got):
        args = [case[k] for k in ("m_a", "l_a", "u_a", "m_b", "l_b", "u_b")]
        exp = _merge_solution(*args)
        try:
            m, l, u = got
        except (TypeError, ValueError):
            return f"expected a tuple (m, l, u), got {_short(got)}"
        vals = [float(x) for x in (m, l, u)]
        if any(math.isnan(x) for x in vals):
            return (
                "NaN: an empty state (m = -inf) gives exp(-inf - (-inf)); give it factor 0 (skip it)"
                if case.get("_empty")
                else "NaN in the result"
            )
        ok = (vals[0] == exp[0] if exp[0] == NEG_INF else close(vals[0], exp[0], 1e-9)) and all(
            abs(g - e) <= 1e-9 * max(1.0, abs(e)) for g, e in zip(vals[1:], exp[1:])
        )
        if ok:
            return None
        msg = f"expected (m, l, u) = ({exp[0]:.6g}, {exp[1]:.6g}, {exp[2]:.6g}), got ({vals[0]:.6g}, {vals[1]:.6g}, {vals[2]:.6g})"
        m_a, l_a, u_a, m_b, l_b, u_b = args
        if vals[0] != exp[0] and vals[0] == max(0.0, m_a, m_b):
            return (
                msg + f": m = {vals[0]:.6g} is max(0, m_a, m_b), the running max started at 0; an empty state's m is "
                "-inf, so start the max at float('-inf'): it stays -inf when both states are empty"
            )
        if abs(vals[1] - (l_a + l_b)) < 1e-9 * max(1, l_a + l_b) and abs(exp[1] - (l_a + l_b)) > 1e-9:
            return (
                msg + ": rescale each state to the shared maximum first (alpha = exp(m_a - m'), beta = exp(m_b - m'))"
            )
        if exp[1] and close(vals[2], exp[2] / exp[1]):
            return msg + ": u is the unnormalised weighted sum; do not divide by l inside the merge"
        return msg

    return run_cases("merge", fn, cases, compare)


check_merge.solution = _merge_solution


def _causal_tiles_solution(L: int, block_m: int, block_n: int) -> int:
    """(query block, key tile) pairs a causal forward visits for Lq = Lk = L: query block i holds rows
    [i*block_m, min((i+1)*block_m, L)); its last row sees keys up to that bound, so it visits
    ceil(min((i+1)*block_m, L) / block_n) tiles and skips the rest (fully masked)."""
    return sum(cdiv(min((i + 1) * block_m, L), block_n) for i in range(cdiv(L, block_m)))


def check_causal_tiles(fn) -> Report:
    """fn(L, block_m, block_n) -> int: how many (query block, key tile) pairs a causal FlashAttention forward
    visits for a sequence of L tokens (Lq = Lk = L, top-left mask), query blocks of block_m rows, key tiles of
    block_n keys, skipping every tile with no valid score. block_m is a multiple of block_n."""
    rng = random.Random()
    shapes = [(128, 64), (64, 64), (128, 128), (64, 32), (128, 32)]
    cases = [dict(L=L, block_m=bm, block_n=bn) for L in (1, 17, 1000, 1793, 4096, 4097) for bm, bn in shapes[:2]]
    cases += [
        dict(L=rng.randint(1, 20000), block_m=bm, block_n=bn) for bm, bn in (rng.choice(shapes) for _ in range(8))
    ]

    def compare(case, got):
        L, bm, bn = case["L"], case["block_m"], case["block_n"]
        exp = _causal_tiles_solution(L, bm, bn)
        if not is_int(got):
            return f"expected an int count of tiles, got {_short(got)}"
        if got == exp:
            return None
        n_m, n_n = cdiv(L, bm), cdiv(L, bn)
        hints = {
            n_m * n_n: "that is every tile: skip the tiles right of the diagonal (fully masked)",
            sum(
                cdiv((i + 1) * bm, bn) for i in range(n_m)
            ): "the last query block ends at row L, not at (i+1)*block_m: it visits fewer tiles",
            (n_m * n_n) // 2: "not exactly half: the diagonal band's tiles are visited too",
        }
        hint = hints.get(got)
        return f"L={L}, block_m={bm}, block_n={bn}: expected {exp}, got {got}" + (f": {hint}" if hint else "")

    return run_cases("causal_tiles", fn, cases, compare)


check_causal_tiles.solution = _causal_tiles_solution


# ---- the kernel exercise: the FlashAttention forward -------------------------------------------------------------

#: (B, H, L) of the forward's cases: B and H above 1 and unequal (a wrong batch or head stride, or B and H
#: swapped, lands on another head's rows), L = 1, lengths that are multiples of no tile of 16 or more, one
#: that is, and 531 = 2 * 256 + 19: three key tiles of 256, so that a forward without the online-softmax rescale
#: fails whatever tile up to 256 it picks (with one tile, no rescale is ever needed).
FLASH_CASES = ((1, 1, 1), (2, 3, 17), (3, 2, 45), (1, 2, 64), (1, 1, 531))
#: The head dimensions the cases are drawn from (``flash_attention.HEAD_DIMS``, 16 to 128), every one of them used
#: (``cases.Draw.spread``), so that a launcher that fixes D = 16 fails.
FLASH_HEAD_DIMS = HEAD_DIMS
#: Cases longer than this run causal only, at the smallest head dimension: the long case (three key tiles of 256).
LONG_L = 256
#: The tile widths the diagnosis tries for the mistakes whose answer depends on the tile (``_signatures``).
TILES = (16, 32, 64, 128, 256)


def _tiled64(q, k, v, causal, block_n, *, rescale_l=True, rescale_acc=True, divide=True, mask_tail=True,
             scaled=True, offset=0, key_local=False, query_block=None, skip_block=None):  # fmt: skip
    """The flash forward's loop over key tiles of ``block_n``, in float64, with each usual mistake as a switch:
    (B, H, L, d) in, (B, H, L, d) out. ``rescale_l``/``rescale_acc``: multiply l/acc by alpha; ``divide``: out =
    acc / l (else acc); ``mask_tail``: keys past L score -inf (else 0, as a load with other=0.0 gives);
    ``scaled``: scores times 1/sqrt(d); causal: key n is seen by row m when n <= m + ``offset``, with n the key's
    index in its tile when ``key_local`` and m the row's index in its query block of ``query_block`` rows when
    that is set; ``skip_block``: the causal tile skip of query blocks of that many rows (the loop stops at the
    first key tile past the block's last row, so a key beyond it is never seen whatever the mask). Rows with no key
    seen give NaN, as the kernel would."""
    q, k, v = (t.detach().double().cpu() for t in (q, k, v))
    L, d = q.shape[2], q.shape[3]
    tiles = cdiv(L, block_n)
    pad = tiles * block_n - L
    k = torch.nn.functional.pad(k, (0, 0, 0, pad))
    v = torch.nn.functional.pad(v, (0, 0, 0, pad))
    s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(d) if scaled else 1.0)  # (B, H, L, tiles * block_n)
    n = torch.arange(tiles * block_n)[None, :]
    m_row = torch.arange(L)[:, None]
    valid = n < L if mask_tail else torch.ones(1, tiles * block_n, dtype=torch.bool)
    if causal:
        key = n % block_n if key_local else n
        row = m_row % query_block if query_block else m_row
        valid = valid & (key <= row + offset)
        if skip_block:  # keys of the tiles the loop visits: up to the block's last row, rounded up to a tile
            hi = torch.clamp((m_row // skip_block + 1) * skip_block, max=L)
            valid = valid & (n < -(-hi // block_n) * block_n)
    s = s.masked_fill(~valid, NEG_INF)
    m = torch.full(s.shape[:-1], NEG_INF, dtype=torch.float64)
    l = torch.zeros_like(m)
    acc = torch.zeros(*s.shape[:-1], v.shape[-1], dtype=torch.float64)
    for t in range(tiles):
        st = s[..., t * block_n : (t + 1) * block_n]
        m_new = torch.maximum(m, st.amax(-1))
        alpha = torch.exp(m - m_new)
        p = torch.exp(st - m_new[..., None])
        l = (alpha * l if rescale_l else l) + p.sum(-1)
        acc = (acc * alpha[..., None] if rescale_acc else acc) + p @ v[..., t * block_n : (t + 1) * block_n, :]
        m = m_new
    return acc / l[..., None] if divide else acc


def _signatures(case):
    """(message, float64 answer) of each usual mistake of a flash forward on ``case``, the answer computed the
    wrong way (``_tiled64``); the tile-dependent ones at every width of ``TILES`` below L."""
    q, k, v, causal = case["q"], case["k"], case["v"], case["causal"]
    L = q.shape[2]
    multi = [t for t in TILES if t < L]  # with one tile, no rescale changes nothing
    f = lambda **kw: lambda bn: _tiled64(q, k, v, causal, bn, **kw)  # noqa: E731
    rescale = "; it passes while all keys fit in one tile, and fails as soon as a later tile raises the row maximum"
    yield from (
        ("the running state is never rescaled: when a tile raises the maximum, multiply l and acc by alpha = "
         "exp(m - m_new) before adding the tile's terms" + rescale, f(rescale_l=False, rescale_acc=False), multi),
        ("acc is not rescaled (l is): multiply acc by alpha[:, None] before adding p @ v" + rescale,
         f(rescale_acc=False), multi),
        ("l is not rescaled (acc is): l = alpha * l + sum(p)" + rescale, f(rescale_l=False), multi),
        ("the output is acc, not acc / l: divide by l once, after the loop", f(divide=False), TILES[:1]),
        ("the scores are not scaled: s = q k^T * scale with scale = 1/sqrt(d)", f(scaled=False), TILES[:1]),
    )  # fmt: skip
    if not causal:
        yield (
            "keys past L are not masked in the scores: a masked load gives k = 0, a score of 0, which still "
            "counts in l; set s to -inf where offs_n >= L",
            f(mask_tail=False),
            [t for t in TILES if L % t],
        )
        return
    yield from _offset_signatures(q, k, v, L)
    yield from (
        ("the causal mask compares the key's index within its tile (tl.arange(0, BLOCK_N)) with the row: use the "
         "key's position offs_n = start + tl.arange(0, BLOCK_N)", f(key_local=True), multi),
    )  # fmt: skip
    for bm in (t for t in TILES if t < L):
        yield (
            "the causal mask compares keys with the row's index within its query block (tl.arange(0, BLOCK_M)): "
            "use the row's position offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
            lambda bn, bm=bm: _tiled64(q, k, v, causal, bn, query_block=bm),
            TILES[:1],
        )


def _offset_signatures(q, k, v, L):
    """The causal mask shifted by a small offset o (query i sees keys up to i + o: o = +-1, +-2, and +-t for the
    tiles t of ``TILES`` below L), without and (o > 0) with the causal tile skip at every query block below L (its
    loop stops at the first key tile of ``block_n`` past the block's last row, as ``_tiled64``'s ``skip_block``).
    Each answer is the float64 softmax over the keys the mask shows, in one pass (the tile loop's answer to
    float64 rounding; NaN where a row sees no key, as the kernel's would be), computed once per distinct mask."""
    small = [t for t in TILES if t < L]
    n, m = torch.arange(L)[None, :], torch.arange(L)[:, None]
    q, k, v = (t.detach().double().cpu() for t in (q, k, v))
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (B, H, L, L)
    seen = {}

    def shifted(o, bm=None):
        def answer(bn):
            visible = n <= m + o
            if bm:
                hi = torch.clamp((m // bm + 1) * bm, max=L)
                visible = visible & (n < -(-hi // bn) * bn)
            key = visible.numpy().tobytes()
            if key not in seen:
                seen[key] = torch.softmax(s.masked_fill(~visible, NEG_INF), -1) @ v
            return seen[key]

        return answer

    for o in (1, -1, 2, -2, *(s * t for t in small for s in (1, -1))):
        if o > 0:
            msg = f"the causal mask lets query i see key{'s up to' if o > 1 else ''} i + {o}: keep offs_n <= offs_m"
        else:
            msg = (
                f"the causal mask hides key{'s' if o < -1 else ''} i{f' - {-o - 1} to i' if o < -1 else ''} from "
                "query i: keep offs_n <= offs_m (query i sees key i)"
            )
        yield msg + f" (a causal offset of {o:+d})", shifted(o), TILES[:1]
        for bm in small if o > 0 else ():
            yield (
                msg + f" (a causal offset of {o:+d}; with the tile skip, only rows whose key i + {o} is in a tile the "
                "loop visits see it)",
                shifted(o, bm),
                [TILES[0], *(t for t in small if t > bm)],  # at key tiles up to BLOCK_M the skip ends at the block
            )


def _matches(g: torch.Tensor, wrong: torch.Tensor, rel: float) -> bool:
    """True when ``g`` is ``wrong`` within ``rel`` of its largest finite entry, non-finite exactly where it is."""
    bad = ~torch.isfinite(wrong)
    if bool((~torch.isfinite(g) != bad).any()) or bool(bad.all()):
        return False
    scale = max(wrong[~bad].abs().max().item(), 1e-3)
    return (g[~bad] - wrong[~bad]).abs().max().item() <= rel * scale


def _diagnose(g, case, rel) -> str | None:
    """The first usual mistake whose answer ``g`` is (``_signatures``), else None."""
    for msg, fn, tiles in _signatures(case):
        if any(_matches(g, fn(bn), rel) for bn in tiles):
            return msg
    return None


def _flash_mismatch(got, ref, case):
    """None if got is within ``tolerances.attention_rel`` of the float64 reference (max |error| / max |ref|; the
    bound of the learner's dots, Triton's default: TF32 for fp32 inputs), else a message: which usual mistake
    gives this answer (``_signatures``), the other causal flag's answer, NaN from a row that saw no key, or where
    the values differ."""
    rel = tolerances.attention_rel(case["q"].dtype)
    g = got.double().cpu()
    err = tolerances.max_rel_error(g, ref)
    if err <= rel:
        return None
    B, H, L, _ = case["q"].shape
    other, _ = flash_attention_ref(case["q"], case["k"], case["v"], not case["causal"])
    if L > 1 and tolerances.max_rel_error(g, other.cpu()) <= rel:
        return (
            "this is the non-causal answer; mask keys n > m (and skip the tiles right of the diagonal)"
            if case["causal"]
            else "this is the causal answer; mask only when CAUSAL"
        )
    named = _diagnose(g, case, 4 * rel)
    if named:
        return named
    if not torch.isfinite(g).all():
        i = int((~torch.isfinite(g)).flatten().nonzero()[0])
        return (
            f"out[{i}] (flat) is {g.flatten()[i].item()} where the reference is {ref.flatten()[i].item():.6g}: "
            "a row whose scores are all -inf gives exp(-inf - (-inf)) = NaN; start every row's loop at key 0 "
            "and divide by l only after the loop"
        )
    i = int((g - ref).abs().flatten().argmax())
    b, h, r, c = (int(x) for x in torch.unravel_index(torch.tensor(i), g.shape))
    where = f"out[{b}, {h}, {r}, {c}]"
    heads = ""
    per_head = (g - ref).abs().amax(dim=(2, 3)) > rel * max(ref.abs().max().item(), 1e-3)
    if B * H > 1 and not bool(per_head.flatten()[0]) and bool(per_head.any()):
        heads = (
            ": head (0, 0) is right and another is not: the offset of program (pid_m, bh) is bh * L * D "
            "(bh = b * H + h on grid axis 1)"
        )
    return (
        f"max |error| / max |reference| = {err:.2e} > {rel:.1e}; worst at {where}: expected "
        f"{ref.flatten()[i].item():.6g}, got {g.flatten()[i].item():.6g}{heads}"
    )


def _head_runs(counts, B: int, H: int, L: int) -> str:
    """The heads whose entry of ``counts`` (B * H,) rows is nonzero, consecutive ones of one count together:
    "(0, 1)-(1, 2)" where each has all L rows, "(0, 0): 5 rows" otherwise."""
    runs, heads = [], [(b, h) for b in range(B) for h in range(H)]
    for i, c in enumerate(counts):
        if c and runs and runs[-1][2] == c and runs[-1][1] == i - 1:
            runs[-1][1] = i
        elif c:
            runs.append([i, i, c])
    name = lambda a, b: f"{heads[a]}" if a == b else f"{heads[a]}-{heads[b]}"  # noqa: E731
    return ", ".join(name(a, b) + ("" if c == L else f": {c} rows") for a, b, c in runs)


def _flash_unwritten(case, unwritten, stores, launches) -> str | None:
    """For an out with elements never written by one launch on the grid the exercise prescribes,
    (cdiv(L, BLOCK_M), B * H) with the launch's own ``BLOCK_M``: the programs covered every row, so the rows they
    missed are a head offset's mistake, named with the heads whose rows were never written and written more than
    once (``stores``, the pre-flight's count per element). None for any other grid (the generic messages say it)."""
    B, H, L, D = case["q"].shape
    if len(launches) != 1 or launches[0]["grid"] is None:
        return None
    grid = tuple((list(launches[0]["grid"]) + [1, 1])[:3])
    bm = next((v for k, v in launches[0].get("ints", {}).items() if k.upper() == "BLOCK_M" and v > 0), None)
    if bm is None or grid != (cdiv(L, bm), B * H, 1):
        return None
    never = unwritten.reshape(B * H, L, D).any(-1).sum(-1).tolist()  # rows of each head with an element never stored
    head = (
        f"out has rows never written (heads {_head_runs(never, B, H, L)}) although the grid {grid[:2]} is the "
        "prescribed (cdiv(L, BLOCK_M), B * H)"
    )
    fix = "program (pid_m, bh) starts at bh * L * D in q, k, v and out"
    if stores is not None:
        twice = stores.reshape(B * H, L, D).max(-1)
        if (twice > 1).any():
            again = _head_runs((twice > 1).sum(-1).tolist(), B, H, L)
            return (
                f"heads overlap, so the head offset is wrong ({fix}): {head}, and rows written by several programs "
                f"(heads {again}; up to {int(twice.max())} times)"
            )
    return f"check the head offset ({fix}) and the store mask: {head}"


#: Said beside NaN from the kernel's arithmetic: in a flash forward it comes from a row that saw no key.
NAN_NOTE = (
    "; here: a causal mask that drops the diagonal (keep offs_n <= offs_m), or a loop that starts after key 0, "
    "leaves a row with no key (m stays -inf, exp(-inf - (-inf)) is NaN)"
)


#: Said beside an input element never loaded: with B and H above 1, most often a wrong head offset.
UNREAD_NOTE = "; program (pid_m, bh) reads head bh of q, k and v, which starts at bh * L * D"


def check_flash_forward(fn, seed: int | None = None) -> Report:
    """fn(q, k, v, causal, out) launches a Triton kernel that writes out = softmax(q k^T / sqrt(d) [causal]) v.
    q, k, v, out: contiguous (B, H, L, d), fp32 in the interpreter and fp16 on a GPU, on gpulab.DEVICE;
    ``causal``: query i sees keys 0..i. The checker owns every buffer (guard regions, ``kernelcheck``), runs
    (B, H, L) in ``FLASH_CASES`` and a drawn one, each with a head dimension d of ``FLASH_HEAD_DIMS`` (every one used),
    both causal flags, on fresh random inputs (all drawn by ``cases.Draw`` from ``seed``, which the report prints),
    and compares with
    float64 (``flash_attention_ref``) within ``tolerances.ATTENTION_REL``. Beside the checker's own diagnoses
    (a missing mask, too small a grid, ...), it names a usual FlashAttention mistake by its answer: the output
    is compared in float64 with the answers of each mistake (no rescale, a causal mask one key too wide or in tile
    coordinates, no division by l, unmasked keys past L, no scale: ``_signatures``) at every tile up to 256,
    and with the other causal flag's answer; a causal mask shifted by +-1, +-2 or +-a tile, with or without the
    causal tile skip (``_offset_signatures``). Rows never written on the prescribed grid are named as a head
    offset's mistake (``_flash_unwritten``), not as too small a grid."""
    draw = Draw(seed)
    dtype = torch.float16 if gpulab.ON_GPU else torch.float32
    shapes = [*FLASH_CASES, (draw.size(1, 3), draw.size(2, 3), draw.size(2, 79))]
    # the long case tests the rescale over three key tiles, which neither d nor the causal flag changes: it runs
    # causal (the last rows still see all three tiles, half the tiles are skipped) at the smallest d, so that a
    # kernel of 16 x 16 tiles checks in seconds in the interpreter; the other shapes hold every d and both flags
    dims = iter(draw.spread(FLASH_HEAD_DIMS, sum(s[2] <= LONG_L for s in shapes)))
    shapes = [(*s, next(dims) if s[2] <= LONG_L else min(FLASH_HEAD_DIMS)) for s in shapes]
    cases = [
        dict(zip("qkv", (draw.randn(*s, dtype=dtype) for _ in range(3))), causal=c)
        for s in shapes
        for c in ((True,) if s[2] > LONG_L else (False, True))
    ]
    grid = (
        "; either the grid is too small (launch triton.cdiv(L, BLOCK_M) programs on axis 0 and B * H on axis 1), "
        "head bh does not start at bh * L * D (B and H above 1 show it), or the store mask is too strict"
    )
    return draw.stamp(
        check_kernel(
            "flash_forward",
            fn,
            cases,
            out=lambda c: (c["q"].shape, c["q"].dtype),
            reference=lambda c: flash_attention_ref(c["q"], c["k"], c["v"], c["causal"])[0].cpu(),
            mismatch=_flash_mismatch,
            notes={"grid_small": grid, "partial": grid, "nan_arith": NAN_NOTE, "unread": UNREAD_NOTE},
            unwritten=_flash_unwritten,
        )
    )


check_flash_forward.solution = ex08_solutions.flash_forward
check_flash_forward.solution_module = ex08_solutions
check_flash_forward.hints = [
    "one program per (block of BLOCK_M queries, one batch and head): blocks of queries on the grid's first "
    "axis, batch-heads on its second; "
    "program (pid_m, bh) starts at bh * L * D in q, k, v and out. Keep q and the block's state m, l, acc in "
    "registers and loop over the keys BLOCK_N at a time; mask every load and the store with row < L",
    "the state is section 3's (m, l, u) with one entry per row: each tile gives scores s (-inf where masked), "
    "a new maximum per row, the factor alpha that moves the old l and acc to it, and its own terms exp(s - m_new); "
    "the division by l comes once, after the loop. Causal: stop the loop after the block's last row",
    "the body of the loop has three jobs, in this order: score the tile and mask it (-inf where a key is past L "
    "or, causal, after the row); move the state to the tile's new maximum (m_new, then alpha rescales the old l "
    "and acc, and the tile's exp(s - m_new) is added to both); keep m_new as m for the next tile. After the loop, "
    "out = acc / l, stored under the row mask",
]
