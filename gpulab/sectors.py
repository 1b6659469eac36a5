"""Coalescing, counted: where each element lives, and which 32-byte sectors one warp's request touches
(lesson 06).

Address model (Stanford CS336 Lecture 5, "Arrange neighboring accesses together"): a row-major matrix with N
columns and s bytes per element puts A[i, j] at ``base + s(iN + j)``. Lanes that vary j with i fixed read
neighbouring bytes; lanes that vary i read bytes N*s apart.

Sector model (NVIDIA CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory"): global memory is
served in aligned 32-byte sectors, and a warp's request costs one sector for every distinct sector its 32
lanes' bytes fall in. The guide's case, and the seed lecture's: 32 aligned, consecutive 4-byte loads are
served by four 32-byte transactions. Efficiency = useful bytes / bytes moved (sectors x 32).

Units: addresses, offsets and sizes in bytes; ``stride`` in elements; bandwidths in TB/s (1e12 bytes/s).

What the model leaves out, so that a measurement can depart from it:

- it counts the sectors of one request, as L1 and L2 serve them. HBM sees less when neighbouring requests
  share sectors and L2 still holds them (a misaligned stream; a column walk whose neighbour columns sit in
  the same sectors), and more when L2 fetches more than the sector asked for (CUDA exposes the hint
  ``cudaLimitMaxL2FetchGranularity``, 0 to 128 bytes). ``sector_bytes`` runs the same count with a coarser
  granule, to see which one a measurement follows; ``stream_efficiency`` counts every sector once over a
  whole access stream (perfect reuse).
- DRAM pages, TLB reach and how many requests are in flight: it is a byte count, not a timing model.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import validate
from .simt import WARP_SIZE

SECTOR_BYTES = 32  # CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory"
LINE_BYTES = 128  # an L1/L2 cache line: four sectors (same guide, same section)
ITEMSIZES = (1, 2, 4, 8, 16)  # bytes per lane that a load can move (16: a float4 / 128-bit vector)


def _check_granule(sector_bytes) -> int:
    g = validate.positive_int("sector_bytes", sector_bytes)
    if g & (g - 1):
        raise ValueError(f"sector_bytes must be a power of two (32 is the sector; 64 and 128 model a coarser "
                         f"L2 fetch), got {g}")
    return g


def _check_itemsize(itemsize) -> int:
    itemsize = validate.positive_int("itemsize", itemsize)
    if itemsize not in ITEMSIZES:
        raise ValueError(f"itemsize must be one of {ITEMSIZES} bytes, got {itemsize}")
    return itemsize


def address(i: int, j: int, n_cols: int, itemsize: int, base: int = 0) -> int:
    """Byte address of A[i, j] in a row-major matrix with ``n_cols`` columns of ``itemsize``-byte elements:
    ``base + itemsize * (i * n_cols + j)`` (seed lecture's formula). Raises TypeError/ValueError naming the
    argument (indices and sizes must be non-negative ints, ``j < n_cols``)."""
    i, j, base = validate.integer("i", i), validate.integer("j", j), validate.integer("base", base)
    n_cols, itemsize = validate.positive_int("n_cols", n_cols), validate.positive_int("itemsize", itemsize)
    if j >= n_cols:
        raise ValueError(f"j must be < n_cols ({n_cols}), got {j}")
    return base + itemsize * (i * n_cols + j)


@dataclass(frozen=True)
class WarpRequest:
    """One memory instruction of a warp: lane k reads ``itemsize`` bytes at ``addresses[k]``.

    Properties: ``sectors`` (sorted indices ``address // sector_bytes`` of every granule touched), ``lines``
    (128-byte lines touched), ``useful_bytes`` (distinct bytes the lanes asked for), ``bytes_moved``
    (sectors x sector_bytes) and ``efficiency`` = useful / moved, in (0, 1].
    """

    addresses: tuple
    itemsize: int
    sector_bytes: int = SECTOR_BYTES

    def _spans(self, granule: int):
        return [(a // granule, (a + self.itemsize - 1) // granule) for a in self.addresses]

    def lane_sectors(self) -> list[tuple]:
        """For each lane, the sector indices its bytes fall in (two if an element straddles a boundary)."""
        return [tuple(range(lo, hi + 1)) for lo, hi in self._spans(self.sector_bytes)]

    @property
    def sectors(self) -> tuple:
        return tuple(sorted({s for lo, hi in self._spans(self.sector_bytes) for s in range(lo, hi + 1)}))

    @property
    def lines(self) -> tuple:
        return tuple(sorted({s for lo, hi in self._spans(LINE_BYTES) for s in range(lo, hi + 1)}))

    @property
    def n_sectors(self) -> int:
        return len(self.sectors)

    @property
    def useful_bytes(self) -> int:
        return len({a + b for a in self.addresses for b in range(self.itemsize)})

    @property
    def bytes_moved(self) -> int:
        return self.n_sectors * self.sector_bytes

    @property
    def efficiency(self) -> float:
        return self.useful_bytes / self.bytes_moved

    def used_bytes_per_sector(self) -> dict:
        """{sector index: how many of its bytes the lanes asked for}."""
        g, used = self.sector_bytes, {}
        for b in {a + k for a in self.addresses for k in range(self.itemsize)}:
            used[b // g] = used.get(b // g, 0) + 1
        return dict(sorted(used.items()))

    def __str__(self) -> str:
        return (f"{len(self.addresses)} lanes x {self.itemsize} B: {self.n_sectors} sectors of {self.sector_bytes} B "
                f"({len(self.lines)} line{'' if len(self.lines) == 1 else 's'} of {LINE_BYTES} B), {self.useful_bytes} useful of {self.bytes_moved} B "
                f"moved, efficiency {self.efficiency:.3g}")


def request(addresses, itemsize: int, sector_bytes: int = SECTOR_BYTES) -> WarpRequest:
    """The request of lanes reading ``itemsize`` bytes at the given byte ``addresses`` (one per lane, any
    order, non-negative ints). Raises TypeError/ValueError naming the argument."""
    itemsize, g = validate.positive_int("itemsize", itemsize), _check_granule(sector_bytes)
    addrs = tuple(validate.integer(f"addresses[{k}]", a) for k, a in enumerate(addresses))
    if not addrs:
        raise ValueError("addresses must hold at least one lane's address")
    return WarpRequest(addrs, itemsize, g)


def warp_request(itemsize: int = 4, stride: int = 1, offset: int = 0, lanes: int = WARP_SIZE,
                 sector_bytes: int = SECTOR_BYTES) -> WarpRequest:
    """A warp reading ``x[k * stride]`` in lane k: lane k's address is ``offset + k * stride * itemsize``.

    itemsize: bytes per element (1, 2, 4, 8 or 16); stride: elements between lanes (>= 1); offset: the base's
    byte distance from an aligned 128-byte line, a multiple of itemsize (a GPU load needs its natural
    alignment); lanes: 1..32. Raises TypeError/ValueError naming the argument.

    >>> warp_request(4, 1, 0).n_sectors   # the seed's case: four 32-byte transactions
    4
    """
    itemsize = _check_itemsize(itemsize)
    stride, offset = validate.positive_int("stride", stride), validate.integer("offset", offset)
    if offset % itemsize:
        raise ValueError(f"offset must be a multiple of itemsize ({itemsize} B): a {itemsize}-byte load needs an "
                         f"address aligned to {itemsize} bytes; got {offset}")
    lanes = validate.integer("lanes", lanes, low=1, high=WARP_SIZE)
    return request([offset + k * stride * itemsize for k in range(lanes)], itemsize, sector_bytes)


def matrix_request(n_cols: int, itemsize: int = 4, along: str = "row", i: int = 0, j: int = 0,
                   lanes: int = WARP_SIZE, sector_bytes: int = SECTOR_BYTES) -> WarpRequest:
    """A warp reading a row-major matrix with ``n_cols`` columns from A[i, j]: lanes vary j with i fixed
    (``along="row"``, addresses itemsize apart) or vary i with j fixed (``along="column"``, n_cols * itemsize
    apart). The base is 128-byte aligned. Along a row, lanes past the last column are inactive. itemsize: one
    of ``ITEMSIZES``; lanes: 1..32; i, j: non-negative, ``j < n_cols``. Raises TypeError/ValueError naming the
    argument."""
    along = validate.one_of("along", along, ("row", "column"))
    n_cols, itemsize = validate.positive_int("n_cols", n_cols), _check_itemsize(itemsize)
    i, j = validate.integer("i", i), validate.integer("j", j)
    if j >= n_cols:
        raise ValueError(f"j must be < n_cols ({n_cols}), got {j}")
    lanes = validate.integer("lanes", lanes, low=1, high=WARP_SIZE)
    if along == "row":
        cells = [(i, j + k) for k in range(lanes) if j + k < n_cols]
    else:
        cells = [(i + k, j) for k in range(lanes)]
    return request([address(a, b, n_cols, itemsize) for a, b in cells], itemsize, sector_bytes)


def stream_efficiency(n: int, itemsize: int = 4, stride: int = 1, offset: int = 0,
                      sector_bytes: int = SECTOR_BYTES) -> float:
    """Useful bytes over bytes moved when ``n`` elements ``x[k * stride]`` (k < n) are read and every sector
    is fetched once, however many requests share it: the best L2 reuse can do. Differs from the
    per-request ``warp_request(...).efficiency`` when neighbouring warps share sectors (a misaligned offset)."""
    n, itemsize = validate.positive_int("n", n), validate.positive_int("itemsize", itemsize)
    stride, offset = validate.positive_int("stride", stride), validate.integer("offset", offset)
    g = _check_granule(sector_bytes)
    starts = offset + np.arange(n, dtype=np.int64) * stride * itemsize
    sectors = np.unique(np.concatenate([starts // g, (starts + itemsize - 1) // g]))
    return n * itemsize / (len(sectors) * g)


def copy_efficiency(read_efficiency: float, write_efficiency: float = 1.0) -> float:
    """Useful bytes over bytes moved for a copy that reads n elements at one efficiency and writes n at
    another: 2 / (1/read + 1/write). Efficiencies in (0, 1]. Raises ValueError naming the argument."""
    effs = []
    for name, e in (("read_efficiency", read_efficiency), ("write_efficiency", write_efficiency)):
        e = validate.positive(name, e)
        if e > 1:
            raise ValueError(f"{name} must be a number in (0, 1], got {e!r}")
        effs.append(e)
    return 2.0 / (1.0 / effs[0] + 1.0 / effs[1])


def strided_copy_efficiency(stride: int, itemsize: int = 4, offset: int = 0, sector_bytes: int = SECTOR_BYTES) -> float:
    """Efficiency of ``y[k] = x[k * stride]`` (gpulab.kernels.strided): the read is strided (the sectors of a
    warp request with this stride and offset), the write is dense and aligned."""
    read = warp_request(itemsize, stride, offset, sector_bytes=sector_bytes).efficiency
    write = warp_request(itemsize, 1, 0, sector_bytes=sector_bytes).efficiency
    return copy_efficiency(read, write)


def predicted_tbps(stride: int, itemsize: int, copy_tbps: float, offset: int = 0,
                   sector_bytes: int = SECTOR_BYTES) -> float:
    """The model's effective bandwidth of the strided copy, in TB/s of useful bytes (n read + n written):
    the measured copy bandwidth times ``strided_copy_efficiency``. At stride 1 it is the copy bandwidth; once
    stride * itemsize >= sector_bytes each element costs a whole granule, and it levels off at
    copy_tbps * 2 / (1 + sector_bytes / itemsize). Raises TypeError/ValueError naming the argument (copy_tbps
    must be positive and finite)."""
    copy_tbps = validate.positive("copy_tbps", copy_tbps)
    return copy_tbps * strided_copy_efficiency(stride, itemsize, offset, sector_bytes)


def effective_tbps(n: int, itemsize: int, time_ms: float, transfers: int = 2) -> float:
    """Useful bytes per second, in TB/s: ``transfers`` arrays of n elements (2: one read, one write) over
    ``time_ms``. Bytes the hardware moved but nobody used do not count. n: int >= 0; itemsize, transfers: ints
    >= 1; time_ms: positive and finite. Raises TypeError/ValueError naming the argument."""
    n, itemsize = validate.integer("n", n), validate.positive_int("itemsize", itemsize)
    transfers, time_ms = validate.positive_int("transfers", transfers), validate.positive("time_ms", time_ms)
    return transfers * n * itemsize / (time_ms * 1e-3) / 1e12


# ---- the picture: lanes -> addresses -> sectors ----------------------------------------------------------

def _picture(req: WarpRequest) -> dict:
    """Trace data (plain lists) for ``request_figure``."""
    g = req.sector_bytes
    used = req.used_bytes_per_sector()
    lo = min(min(req.addresses) // LINE_BYTES * LINE_BYTES, req.sectors[0] * g)
    hi = max(req.sectors[-1] * g + g, max(req.addresses) + req.itemsize)
    hi = -(-hi // LINE_BYTES) * LINE_BYTES
    lanes = len(req.addresses)
    lane_x = [lo + (hi - lo) * (k + 0.5) / lanes for k in range(lanes)]
    centres = [a + req.itemsize / 2 for a in req.addresses]
    lx, ly = [], []
    for xl, xa in zip(lane_x, centres):
        lx += [xl, xa, None]
        ly += [0.92, 0.12, None]
    return dict(lo=lo, hi=hi, sector_base=[s * g for s in req.sectors], sector_len=[g] * req.n_sectors,
                sector_text=[f"sector {s}: {used.get(s, 0)} of {g} B used" for s in req.sectors],
                sector_color=[used.get(s, 0) / g for s in req.sectors],
                useful_base=list(req.addresses), useful_len=[req.itemsize] * lanes,
                link_x=lx, link_y=ly, lane_x=lane_x, lane_text=[f"lane {k} -> byte {a}" for k, a in
                                                               enumerate(req.addresses)])


def _title(req: WarpRequest, label: str) -> str:
    return (f"{label}: {len(req.addresses)} lanes touch {req.n_sectors} sectors of {req.sector_bytes} B<br>"
            f"<sup>{req.useful_bytes} useful bytes of {req.bytes_moved} moved: efficiency "
            f"{req.efficiency:.1%}</sup>")


def _apply_picture(fig, req: WarpRequest, label: str) -> None:
    p = _picture(req)
    fig.data[0].base, fig.data[0].x, fig.data[0].y = p["sector_base"], p["sector_len"], [0.0] * req.n_sectors
    fig.data[0].text, fig.data[0].marker.color = p["sector_text"], p["sector_color"]
    fig.data[1].base, fig.data[1].x = p["useful_base"], p["useful_len"]
    fig.data[1].y = [0.0] * len(p["useful_base"])
    fig.data[2].x, fig.data[2].y = p["link_x"], p["link_y"]
    fig.data[3].x, fig.data[3].y, fig.data[3].text = p["lane_x"], [1.0] * len(p["lane_x"]), p["lane_text"]
    fig.layout.xaxis.range = [p["lo"], p["hi"]]
    span = p["hi"] - p["lo"]
    fig.layout.xaxis.dtick = req.sector_bytes if span <= 16 * req.sector_bytes else (
        LINE_BYTES if span <= 16 * LINE_BYTES else None)
    fig.layout.title.text = _title(req, label)


def request_figure(req: WarpRequest, label: str = "warp request", height: int = 340):
    """A plotly figure of one warp request: lanes on top, a line from each lane to the bytes it reads, and the
    sectors those bytes fall in below (shaded by the fraction of their bytes used). Plain lists only."""
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.add_bar(orientation="h", name="sector moved", width=0.34, base=[0], x=[1], y=[0.0], text=[""],
                hovertemplate="%{text}<extra></extra>", textposition="none",
                marker=dict(color=[1.0], colorscale=[[0, "#fde0c5"], [1, "#f28e2b"]], cmin=0, cmax=1,
                            line=dict(color="#8c4a00", width=1)))
    fig.add_bar(orientation="h", name="bytes a lane asked for", width=0.16, base=[0], x=[1], y=[0.0],
                marker=dict(color="#1f3b73"), hoverinfo="skip")
    fig.add_scatter(x=[0], y=[0], mode="lines", name="lane -> address", line=dict(color="#7f7f7f", width=1),
                    hoverinfo="skip")
    fig.add_scatter(x=[0], y=[1.0], mode="markers", name="lane", text=[""], hovertemplate="%{text}<extra></extra>",
                    marker=dict(size=8, color="#1f77b4"))
    fig.update_layout(barmode="overlay", template="plotly_white", height=height, margin=dict(t=80, l=70),
                      xaxis=dict(title="byte address (from a 128-byte-aligned line)", showgrid=True),
                      yaxis=dict(tickvals=[0, 1], ticktext=["memory", "lanes"], range=[-0.4, 1.3]),
                      legend=dict(orientation="h", y=-0.3), title=dict(text="", font_size=13))
    _apply_picture(fig, req, label)
    return fig


class SectorExplorer:
    """Lanes -> sectors for ``x[k * stride]``, with sliders for the stride (elements) and the offset
    (elements from a 128-byte-aligned base) and a choice of element size.

    ``.widget`` is the container to display (class ``gpulab-widget``; the stride slider is its first
    ``gpulab-slider``); ``.request`` is the current ``WarpRequest``; ``.live.fig`` the figure.
    """

    def __init__(self, stride: int = 1, offset: int = 0, itemsize: int = 4, copy_tbps: float | None = None):
        import ipywidgets as W

        from . import widgets

        req = warp_request(itemsize, stride, offset * itemsize)  # validates the arguments
        self.copy_tbps = copy_tbps
        self.stride = widgets.slider(W.IntSlider, value=stride, min=1, max=64, step=1,
                                     description="stride (elements between lanes)")
        self.offset = widgets.slider(W.IntSlider, value=offset, min=0, max=31, step=1,
                                     description="offset (elements from an aligned line)")
        self.itemsize = W.Dropdown(options=list(ITEMSIZES), value=itemsize, description="bytes per element")
        self.readout = W.HTML()
        fig = request_figure(req, self._label())
        self.live = widgets.LiveFigure(fig)
        for w in (self.stride, self.offset, self.itemsize):
            w.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.stride, self.offset, self.itemsize, self.readout, self.live.widget)
        self._update_readout()

    @property
    def request(self) -> WarpRequest:
        return warp_request(self.itemsize.value, self.stride.value, self.offset.value * self.itemsize.value)

    def _label(self) -> str:
        return (f"stride {self.stride.value} x {self.itemsize.value} B, offset {self.offset.value * self.itemsize.value} B")

    def _update_readout(self) -> None:
        req, s = self.request, self.itemsize.value
        e = strided_copy_efficiency(self.stride.value, s, self.offset.value * s)
        text = (f"{req}. A copy <code>y[k] = x[k*stride]</code> (strided read, dense write) moves useful bytes at "
                f"{e:.1%} of what it moves")
        if self.copy_tbps:
            text += f": model {self.copy_tbps * e:.3g} TB/s effective at {self.copy_tbps:.3g} TB/s copy bandwidth"
        self.readout.value = text + "."

    def refresh(self) -> None:
        req, label = self.request, self._label()
        self.live.update(lambda fig: _apply_picture(fig, req, label))
        self._update_readout()
