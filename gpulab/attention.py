"""Naive attention against FlashAttention: FLOPs, HBM bytes and memory as the sequence grows.

Attention for ``q: (B, H, Lq, d)``, ``k, v: (B, H, Lk, d)``: ``S = scale * q k^T``, ``P = softmax_row(S)``,
``O = P v``. The naive way (``naive_attention``) materialises ``S`` and ``P``, each ``B*H*Lq*Lk`` elements,
in HBM; FlashAttention (``gpulab.kernels.flash_attention``) keeps each score tile on chip and writes only
``O`` and the row logsumexp. Both do the same ``O(L^2 d)`` arithmetic; only the traffic and the memory differ
(the seed lecture, Stanford CS336 Lecture 5, "FlashAttention brings the ideas together"; Dao et al.,
FlashAttention, 2022, Section 3.2 for the IO analysis).

Counts are by hand:

- FLOPs (``attention_flops``): forward ``4*B*H*Lq*Lk*d`` (two matmuls of 2 FLOPs per multiply-add), halved
  when causal (for Lq = Lk; for Lq != Lk the pairs the top-left mask keeps), backward 2.5x the forward (five matmuls: the rebuilt S, dV, dP, dQ, dK). This is the
  convention of the FlashAttention papers' and Triton's benchmarks; softmax's exponentials are not counted.
- HBM bytes of the naive forward (``naive_bytes``): each torch op reads its inputs and writes its output.
- HBM bytes of the flash forward (``flash_bytes``): Q read once, K and V once per query block that visits
  them (causal blocks skip the tiles right of the diagonal), O and the fp32 logsumexp written once.
- Extra memory (``memory_model``): naive holds S and P at once (``2*B*H*Lq*Lk`` elements): O(L^2); flash holds
  O and lse: O(L). For training, flash keeps O and lse for backward, which adds delta (one fp32 per row).

``measure`` times a forward on the GPU and records its peak memory; when it runs out of memory it returns
``oom=True`` instead of raising, so a sweep can show where naive attention stops.
"""
from __future__ import annotations

import math

from . import dtypes, validate

#: Bytes per element of the lesson's attention dtypes (read from the one table, ``gpulab.dtypes``).
ITEMSIZE = {name: dtypes.itemsize(name) for name in dtypes.ELEMENTWISE}


def _ints(**kw) -> tuple[int, ...]:
    """The keywords' values as Python ints >= 0 (NumPy ints too), in order; TypeError/ValueError naming one
    that is not."""
    return tuple(validate.integer(name, v) for name, v in kw.items())


def _flag(name: str, v) -> bool:
    """``v`` if it is a bool; ValueError naming it otherwise (``causal="no"`` is not False)."""
    return validate.one_of(name, v, (False, True))


def attention_flops(B: int, H: int, Lq: int, Lk: int, d: int, causal: bool = False, backward: bool = False) -> float:
    """FLOPs of attention by the usual convention: forward 4*B*H*Lq*Lk*d, halved if causal; backward 2.5x
    the forward (2 of the 5 matmuls' worth is the recomputation of S and the extra matmul for dP).

    Causal counts the (query, key) pairs the top-left mask keeps, its diagonal counted half: Lq^2 / 2 if
    Lq <= Lk, else Lq*Lk - Lk^2 / 2. For Lq = Lk that is the convention's half; for Lq != Lk it is not (one query
    over 1000 keys sees one key, not 500). Raises TypeError/ValueError naming the argument (sizes ints >= 0;
    ``causal`` and ``backward`` bools)."""
    B, H, Lq, Lk, d = _ints(B=B, H=H, Lq=Lq, Lk=Lk, d=d)
    causal, backward = _flag("causal", causal), _flag("backward", backward)
    pairs = (Lq * Lq / 2 if Lq <= Lk else Lq * Lk - Lk * Lk / 2) if causal else Lq * Lk
    f = 4.0 * B * H * pairs * d
    return 2.5 * f if backward else f


def naive_bytes(B: int, H: int, L: int, d: int, itemsize: int, causal: bool = False) -> int:
    """HBM bytes of ``naive_attention``'s forward for Lq = Lk = L, counting every tensor each op reads or
    writes (no cache reuse):

    - q * scale: read q, write q' (2 BHLd);  S = q' k^T: read q', k, write S (2 BHLd + BHL^2);
    - causal: masked_fill_ reads and writes S (2 BHL^2);  softmax: read S, write P (2 BHL^2);
    - O = P v: read P and v, write O (BHL^2 + 2 BHLd).

    In all 6 BHLd + 4 BHL^2 elements (+ 2 BHL^2 causal), times ``itemsize``."""
    B, H, L, d, itemsize = _ints(B=B, H=H, L=L, d=d, itemsize=itemsize)
    causal = _flag("causal", causal)
    bh = B * H
    return (6 * bh * L * d + (6 if causal else 4) * bh * L * L) * itemsize


def tiles_visited(L: int, block_m: int, block_n: int, causal: bool) -> int:
    """(query block, key tile) pairs a forward program grid visits for Lq = Lk = L: every pair when not
    causal; when causal, query block i (rows [i*block_m, min((i+1)*block_m, L))) visits the key tiles up to
    its last row, ceil(min((i+1)*block_m, L) / block_n) of them, and skips the rest (fully masked)."""
    L, block_m, block_n = _ints(L=L, block_m=block_m, block_n=block_n)
    if block_m < 1 or block_n < 1:
        raise ValueError(f"block_m and block_n must be >= 1, got {block_m}, {block_n}")
    causal = _flag("causal", causal)
    n_m, n_n = -(-L // block_m), -(-L // block_n)
    if not causal:
        return n_m * n_n
    return sum(-(-min((i + 1) * block_m, L) // block_n) for i in range(n_m))


def flash_bytes(B: int, H: int, L: int, d: int, itemsize: int, causal: bool = False, block_m: int = 128) -> int:
    """HBM bytes of the FlashAttention forward for Lq = Lk = L: Q read once and O written once (2 BHLd); K and
    V read once per query block, L keys each (causal: query block i reads only keys below min((i+1)*block_m,
    L)); the fp32 logsumexp (4 bytes a row). The K/V re-reads are what a larger ``block_m`` buys down (Dao et
    al. 2022, Theorem 2: Theta(L^2 d^2 / M) HBM accesses for on-chip memory M)."""
    B, H, L, d, itemsize, block_m = _ints(B=B, H=H, L=L, d=d, itemsize=itemsize, block_m=block_m)
    if block_m < 1:
        raise ValueError(f"block_m must be >= 1, got {block_m}")
    causal = _flag("causal", causal)
    n_m = -(-L // block_m)
    keys = sum(min((i + 1) * block_m, L) for i in range(n_m)) if causal else n_m * L
    return B * H * ((2 * L * d + 2 * keys * d) * itemsize + 4 * L)


def memory_model(B: int, H: int, L: int, d: int, itemsize: int, method: str) -> dict:
    """Extra memory of one forward above the inputs q, k, v (bytes), for Lq = Lk = L:

    - ``"naive"``: at the softmax, S and P are both alive (2 BHL^2 elements); at the end O (BHLd) is kept;
      the peak is max(S + P, P + O) and O remains: ``peak_bytes``, ``kept_bytes``.
    - ``"flash"``: O and the fp32 logsumexp (BHL(d*itemsize + 4)), peak and kept alike.

    Also ``order``: "L^2" or "L". Raises ValueError for another method."""
    B, H, L, d, itemsize = _ints(B=B, H=H, L=L, d=d, itemsize=itemsize)
    bh = B * H
    out = bh * L * d * itemsize
    if method == "naive":
        sp = bh * L * L * itemsize
        return dict(method=method, peak_bytes=max(2 * sp, sp + out), kept_bytes=out, order="L^2")
    if method == "flash":
        return dict(method=method, peak_bytes=out + 4 * bh * L, kept_bytes=out + 4 * bh * L, order="L")
    raise ValueError(f"method must be 'naive' or 'flash', got {method!r}")


def flash_training_memory(B: int, H: int, L: int, d: int, itemsize: int, mode: str = "fused") -> dict:
    """Memory of FlashAttention through autograd above q, k, v and dO (bytes), Lq = Lk = L: ``held_bytes``
    between forward and backward (O and the fp32 lse) and ``peak_bytes`` over the backward, which adds the
    fp32 delta and dq, dk, dv; with ``mode="atomic"`` also the fp32 dQ buffer (alive while dq is cast from it).
    All O(L)."""
    B, H, L, d, itemsize = _ints(B=B, H=H, L=L, d=d, itemsize=itemsize)
    if mode not in ("fused", "split", "atomic"):  # gpulab.kernels.flash_attention.BWD_MODES (no Triton import here)
        raise ValueError(f"mode must be one of ('fused', 'split', 'atomic'), got {mode!r}")
    rows, elems = B * H * L, B * H * L * d
    held = elems * itemsize + 4 * rows
    peak = held + 4 * rows + 3 * elems * itemsize + (4 * elems if mode == "atomic" else 0)
    return dict(held_bytes=held, peak_bytes=peak, mode=mode)


def naive_attention(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """softmax(scale * q k^T [causal]) v in plain torch, materialising S and P (each (B, H, Lq, Lk) in q's
    dtype). q: (B, H, Lq, d), k, v: (B, H, Lk, d); causal: the top-left mask (SDPA's ``is_causal``)."""
    import torch

    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    s = (q * scale) @ k.transpose(-1, -2)                                   # S: (B, H, Lq, Lk)
    if causal:
        keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril()
        s.masked_fill_(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1)                                            # P: (B, H, Lq, Lk)
    del s
    return p @ v


def is_oom(e: BaseException) -> bool:
    """True for torch's out-of-memory error (``torch.OutOfMemoryError``, also raised as
    ``torch.cuda.OutOfMemoryError``)."""
    import torch

    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    return isinstance(e, oom)


def run_catching_oom(fn):
    """Call ``fn()``; return ``(result, False)``, or ``(None, True)`` if it ran out of GPU memory (the cache is
    emptied so the next call starts clean). Any other error propagates."""
    import torch

    try:
        return fn(), False
    except Exception as e:  # noqa: BLE001  (only OOM is caught; the rest is re-raised)
        if not is_oom(e):
            raise
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return None, True


def measure(fn, warmup_ms: float = 10, rep_ms: float = 60) -> dict:
    """Peak memory above what is allocated before the call (bytes) and time (ms, ``gpulab.timing.time_ms``) of
    ``fn()`` on the GPU. Out of memory gives ``{"oom": True, "ms": None, "peak_bytes": None}``, not an error.
    Raises NoGPUTimingError in interpreter mode."""
    import torch

    from .timing import require_gpu, time_ms

    require_gpu("an attention measurement")

    def once():
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        del out
        return peak

    peak, oom = run_catching_oom(once)
    if oom:
        return {"oom": True, "ms": None, "peak_bytes": None}
    t, oom = run_catching_oom(lambda: time_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms))
    if oom:
        return {"oom": True, "ms": None, "peak_bytes": int(peak)}
    return {"oom": False, "ms": t.median_ms, "peak_bytes": int(peak)}


def gib(b) -> float | None:
    return None if b is None else b / 2**30


class NaiveVsFlashExplorer:
    """Lesson 08's sweep slider: pick L = 2**k; see the extra memory of naive and flash attention (the model,
    and the measurement where ``data`` has one) and their forward times (measured or recorded only), for the
    suite's sweep shape. ``data``: the ``sweep`` record of ``gpulab.bench.lesson08.run`` (None: model only).
    ``.widget`` is the container, ``.live.fig`` the figure, ``.k`` the slider."""

    METHODS = ("naive", "flash")

    def __init__(self, data: dict | None, where: str = "", log2_l: int = 12, B: int = 1, H: int = 16, d: int = 128,
                 itemsize: int = 2):
        import ipywidgets as W
        from plotly.subplots import make_subplots

        from . import widgets

        self.data, self.where = data, where
        if data:
            B, H, d, itemsize = data["B"], data["H"], data["d"], ITEMSIZE[data["dtype"]]
        self.B, self.H, self.d, self.itemsize = B, H, d, itemsize
        self.k = widgets.slider(W.IntSlider, value=log2_l, min=8, max=17, step=1, description="L = 2**k, k")
        fig = make_subplots(rows=1, cols=2, subplot_titles=("extra memory above q, k, v (GiB)", "forward time (ms)"))
        fig.add_bar(x=list(self.METHODS), y=[0.0, 0.0], name="model (by hand)", marker_color="#9e9e9e", row=1, col=1)
        fig.add_bar(x=list(self.METHODS), y=[0.0, 0.0], name="measured peak", marker_color="#1f77b4", row=1, col=1)
        fig.add_bar(x=list(self.METHODS), y=[0.0, 0.0], name="measured time", marker_color="#d62728", row=1, col=2)
        fig.update_layout(height=420, template="plotly_white", barmode="group", margin=dict(t=100), title_font_size=12)
        self._change()(fig)
        self.live = widgets.LiveFigure(fig)
        self.k.observe(lambda _: self.live.update(self._change()), names="value")
        self.widget = widgets.container(self.k, self.live.widget)

    def rows_at(self, L: int) -> dict:
        """The measured rows of ``data`` at length L, by method ({} if none)."""
        if not self.data:
            return {}
        return {r["method"]: r for r in self.data["rows"] if r["L"] == L}

    def _change(self):
        L = 2**self.k.value
        model = [gib(memory_model(self.B, self.H, L, self.d, self.itemsize, m)["peak_bytes"]) for m in self.METHODS]
        rows = self.rows_at(L)
        peak = [gib(rows[m]["peak_bytes"]) if m in rows else None for m in self.METHODS]
        ms = [rows[m]["ms"] if m in rows else None for m in self.METHODS]
        ooms = [m for m in self.METHODS if rows.get(m, {}).get("oom")]
        if ooms:
            note = f"{', '.join(ooms)}: out of memory at this L (caught, not a crash); {self.where}"
        elif rows:
            note = self.where
        else:
            note = "no measurement at this L; model only"

        def change(fig):
            fig.data[0].y, fig.data[1].y, fig.data[2].y = model, peak, ms
            fig.layout.title = (f"L = 2**{self.k.value} = {L:,}; B={self.B}, H={self.H}, d={self.d}, "
                                f"{self.itemsize}-byte elements<br><sup>{note}</sup>")

        return change
