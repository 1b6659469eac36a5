"""Coalescing, counted: where each element lives, and which 32-byte sectors one warp's request touches
(lesson 06); the sectors each row of a matmul tile takes at the burst boundaries (lesson 07b).

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
- which elements one instruction reads: ``warp_request`` defaults to the textbook warp, lane k reading
  ``x[k * stride]``. A compiler may give each lane several consecutive elements (Triton's blocked layout,
  ``sizePerThread``) and issue one load per element; ``elements_per_lane`` models that, lanes then
  ``elements_per_lane * stride * itemsize`` bytes apart in each instruction.
- DRAM pages, TLB reach and how many requests are in flight: it is a byte count, not a timing model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core import validate
from . import waves
from .simt import WARP_SIZE

SECTOR_BYTES = 32  # CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory"
LINE_BYTES = 128  # an L1/L2 cache line: four sectors (same guide, same section)
ITEMSIZES = (1, 2, 4, 8, 16)  # bytes per lane that a load can move (16: a float4 / 128-bit vector)


def _check_granule(sector_bytes) -> int:
    g = validate.positive_int("sector_bytes", sector_bytes)
    if g & (g - 1):
        raise ValueError(
            f"sector_bytes must be a power of two (32 is the sector; 64 and 128 model a coarser L2 fetch), got {g}"
        )
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
        return (
            f"{len(self.addresses)} lanes x {self.itemsize} B: {self.n_sectors} sectors of {self.sector_bytes} B "
            f"({len(self.lines)} line{'' if len(self.lines) == 1 else 's'} of {LINE_BYTES} B), {self.useful_bytes} useful of {self.bytes_moved} B "
            f"moved, efficiency {self.efficiency:.3g}"
        )


def request(addresses, itemsize: int, sector_bytes: int = SECTOR_BYTES) -> WarpRequest:
    """The request of lanes reading ``itemsize`` bytes at the given byte ``addresses`` (one per lane, any
    order, non-negative ints). Raises TypeError/ValueError naming the argument."""
    itemsize, g = validate.positive_int("itemsize", itemsize), _check_granule(sector_bytes)
    addrs = tuple(validate.integer(f"addresses[{k}]", a) for k, a in enumerate(addresses))
    if not addrs:
        raise ValueError("addresses must hold at least one lane's address")
    return WarpRequest(addrs, itemsize, g)


def warp_request(
    itemsize: int = 4,
    stride: int = 1,
    offset: int = 0,
    lanes: int = WARP_SIZE,
    sector_bytes: int = SECTOR_BYTES,
    elements_per_lane: int = 1,
    load: int = 0,
) -> WarpRequest:
    """A warp's load instruction over ``x[i * stride]``: lane k reads element ``i = k * v + load`` with
    ``v = elements_per_lane``, at byte address ``offset + (k * v + load) * stride * itemsize``.

    With the default ``v = 1`` this is the textbook request (NVIDIA CUDA C++ Best Practices Guide, "Coalesced
    Access to Global Memory"): lane k reads ``x[k * stride]``, neighbouring lanes ``stride * itemsize`` bytes
    apart. Triton's blocked layout gives each lane ``sizePerThread`` consecutive elements of a 1-D block
    (``#ttg.blocked<{sizePerThread = [v], ...}>`` in the TTGIR; ``gpulab.kernels.strided.elements_per_lane``);
    when the addresses are not provably contiguous (stride > 1) it issues one scalar load per element, ``v``
    requests (``load = 0 .. v-1``), and neighbouring lanes of each are ``v * stride * itemsize`` bytes apart.
    ``sum(warp_request(..., elements_per_lane=v, load=j).n_sectors for j in range(v))`` over ``32 * v`` elements
    is what the L1 counts; L2 and DRAM see the shared sectors once (``stream_efficiency``).

    itemsize: bytes per element (1, 2, 4, 8 or 16); stride: elements between neighbouring elements of the
    array read (>= 1); offset: the base's byte distance from an aligned 128-byte line, a multiple of itemsize
    (a GPU load needs its natural alignment); lanes: 1..32; elements_per_lane: v >= 1; load: which of the
    lane's v elements this instruction reads, 0 <= load < v. Raises TypeError/ValueError naming the argument.

    >>> warp_request(4, 1, 0).n_sectors   # the seed's case: four 32-byte transactions
    4
    >>> warp_request(4, 2).n_sectors, warp_request(4, 2, elements_per_lane=4).n_sectors   # lanes 8 B / 32 B apart
    (8, 32)
    """
    itemsize = _check_itemsize(itemsize)
    stride, offset = validate.positive_int("stride", stride), validate.integer("offset", offset)
    if offset % itemsize:
        raise ValueError(
            f"offset must be a multiple of itemsize ({itemsize} B): a {itemsize}-byte load needs an "
            f"address aligned to {itemsize} bytes; got {offset}"
        )
    lanes = validate.integer("lanes", lanes, low=1, high=WARP_SIZE)
    v = validate.positive_int("elements_per_lane", elements_per_lane)
    load = validate.integer("load", load, low=0, high=v - 1)
    return request([offset + (k * v + load) * stride * itemsize for k in range(lanes)], itemsize, sector_bytes)


def matrix_request(
    n_cols: int,
    itemsize: int = 4,
    along: str = "row",
    i: int = 0,
    j: int = 0,
    lanes: int = WARP_SIZE,
    sector_bytes: int = SECTOR_BYTES,
) -> WarpRequest:
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


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """sum(floor((a * k + b) / m) for k in range(n)) for ints n >= 0, m >= 1 and any a, b, in O(log m) steps
    (the Euclid-like reduction of the AtCoder Library's ``floor_sum``)."""
    total = 0
    while True:
        if not 0 <= a < m:  # floor division and modulo of Python ints: right for negative a and b too
            total += n * (n - 1) // 2 * (a // m)
            a %= m
        if not 0 <= b < m:
            total += n * (b // m)
            b %= m
        y_max = a * n + b
        if y_max < m:
            return total
        n, b, m, a = y_max // m, y_max % m, a, m


def stream_sectors(
    n: int, itemsize: int = 4, stride: int = 1, offset: int = 0, sector_bytes: int = SECTOR_BYTES
) -> int:
    """How many distinct ``sector_bytes`` granules the ``n`` elements ``x[k * stride]`` (k < n, ``itemsize`` bytes
    each, the first at byte ``offset``) touch. Counted in closed form, without listing addresses: element k spans
    granules ``floor(a_k / g)`` to ``floor((a_k + s - 1) / g)`` with ``a_k = offset + k S``, ``S = stride * itemsize
    >= s``, so the elements' spans are in order and two neighbours share at most one granule, the one where
    element k - 1 ends and element k begins. Distinct = sum of the spans' lengths - the shared ones, each sum a
    sum of floors of a line (``_floor_sum``). Same arguments and errors as ``stream_efficiency``."""
    n, s = validate.positive_int("n", n), validate.positive_int("itemsize", itemsize)
    stride, offset = validate.positive_int("stride", stride), validate.integer("offset", offset)
    g = _check_granule(sector_bytes)
    S = stride * s
    # granules per element: 1 + floor((a_k + s - 1) / g) - floor(a_k / g)
    spans = n + _floor_sum(n, g, S, offset + s - 1) - _floor_sum(n, g, S, offset)
    # elements k - 1 and k share a granule iff u mod g < g - d, u = a_{k-1} + s - 1 (where k - 1 ends) and
    # d = S - s + 1 (the bytes from there to where k begins); for x = u mod g in [0, g) and 1 <= d < g,
    # [x < g - d] is floor((2g - 1 - d - x) / g), and x = u - g floor(u / g)
    d, pairs = S - s + 1, n - 1
    shared = 0
    if d < g and pairs:
        u0 = offset + s - 1  # u for k = 1
        shared = _floor_sum(pairs, g, -S, 2 * g - 1 - d - u0) + _floor_sum(pairs, g, S, u0)
    return spans - shared


def stream_efficiency(
    n: int, itemsize: int = 4, stride: int = 1, offset: int = 0, sector_bytes: int = SECTOR_BYTES
) -> float:
    """Useful bytes over bytes moved when ``n`` elements ``x[k * stride]`` (k < n) are read and every sector
    is fetched once, however many requests share it: the best L2 reuse can do. Differs from the
    per-request ``warp_request(...).efficiency`` when neighbouring warps share sectors (a misaligned offset).
    The sectors are counted in closed form (``stream_sectors``): any n at the cost of a few divisions. n, itemsize,
    stride: ints >= 1; offset: an int >= 0 (bytes); sector_bytes: a power of two. Raises TypeError/ValueError naming the
    argument."""
    n, itemsize = validate.positive_int("n", n), validate.positive_int("itemsize", itemsize)
    g = _check_granule(sector_bytes)
    return n * itemsize / (stream_sectors(n, itemsize, stride, offset, g) * g)


def tile_row_sectors(
    n_cols: int, width: int, itemsize: int = 4, col: int = 0, sector_bytes: int = SECTOR_BYTES
) -> list[int]:
    """Sectors each row of a tile touches: the tile reads ``width`` neighbouring elements from column ``col`` of every
    row of a row-major matrix with ``n_cols`` columns of ``itemsize`` bytes (the base sector-aligned), so row i's run
    starts at byte ``itemsize * (i * n_cols + col)``. Returns the count of rows 0 .. p - 1, where
    ``p = sector_bytes / gcd(n_cols * itemsize, sector_bytes)`` rows bring the starts back to the same place in a
    sector (p = 1 where a row is a whole number of sectors long); each count is ``stream_sectors`` of the run.

    The seed lecture's burst boundaries (CS336 Lecture 5 notes, "Matmul speed looks wavy"): with rows a whole number
    of sectors long, a run of ``k`` sectors from a sector boundary takes ``k``; one more column shifts row i's start
    by ``i * itemsize`` bytes, and a run that starts inside a sector ends inside another, ``k + 1``: a run of one
    sector takes two. A request count, as L1 and L2 serve the runs; DRAM sees a sector that neighbouring runs share
    once while L2 holds it (the module docstring).

    n_cols, width: ints >= 1 with ``col + width <= n_cols``; itemsize: one of ``ITEMSIZES``; col: an int >= 0;
    sector_bytes: a power of two. Raises TypeError/ValueError naming the argument.

    >>> tile_row_sectors(2048, 16, itemsize=2), tile_row_sectors(2049, 16, itemsize=2).count(2)  # 16 rows repeat
    ([1], 15)
    """
    n_cols, width = validate.positive_int("n_cols", n_cols), validate.positive_int("width", width)
    itemsize, col, g = _check_itemsize(itemsize), validate.integer("col", col), _check_granule(sector_bytes)
    if col + width > n_cols:
        raise ValueError(f"col + width must be <= n_cols ({n_cols}): the run stays in its row, got {col} + {width}")
    period = g // math.gcd(n_cols * itemsize, g)
    return [stream_sectors(width, itemsize, 1, (i * n_cols + col) * itemsize % g, g) for i in range(period)]


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


def predicted_tbps(
    stride: int, itemsize: int, copy_tbps: float, offset: int = 0, sector_bytes: int = SECTOR_BYTES
) -> float:
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


# ---- a measured record beside the model ---------------------------------------------------------------------


def stride_model_rows(data: dict, sector_bytes=(32, 64, 128)) -> list[dict]:
    """Per measured stride of a lesson06 record (``gpulab.bench.lesson06.run``: ``copy_tbps`` and ``stride``
    with ``itemsize`` and rows of stride, ours_tbps): the sector model's effective TB/s at each granule
    (``sector_bytes``, bytes; ``predicted_tbps`` from the record's copy bandwidth), and measured / model at the
    first granule."""
    rows = []
    for r in data["stride"]["rows"]:
        m = {
            g: predicted_tbps(r["stride"], data["stride"]["itemsize"], data["copy_tbps"], sector_bytes=g)
            for g in sector_bytes
        }
        rows.append({"stride": r["stride"], "model_tbps": m, "ours_over_model": r["ours_tbps"] / m[sector_bytes[0]]})
    return rows


def sector_offset_pairs(
    measured: dict, method: str, itemsize: int = 2, row_offset: int = SECTOR_BYTES // 2
) -> list[dict]:
    """The burst test of a measured matmul sweep (lesson07's ``sweep``: ``ns``, ``tile``, ``<method>_ms``): for each N
    whose rows end ``row_offset`` bytes past a sector boundary (``N * itemsize % SECTOR_BYTES == row_offset``),
    ``method``'s rate at N over its rate at the next N whose rows are whole sectors, ``N + (SECTOR_BYTES - row_offset)
    / itemsize`` (``tile_row_sectors`` counts the difference). The default, half a sector: rows 16-byte aligned, so the
    wide loads stay, and every other row starts inside a sector. ``row_offset=0``, the control: N and the next N of
    whole-sector rows, where only the size changes. Pairs that the sweep's ``tile`` covers with different numbers of
    tiles (so their waves differ) or where a point failed are left out. Returns dicts ``n``, ``partner``, ``ratio``,
    in N's order. itemsize: 2 or 4 bytes; row_offset: a multiple of itemsize in [0, SECTOR_BYTES). Raises ValueError
    naming the argument."""
    itemsize = validate.one_of("itemsize", itemsize, (2, 4))
    row_offset = validate.integer("row_offset", row_offset, low=0, high=SECTOR_BYTES - 1)
    if row_offset % itemsize:
        raise ValueError(
            f"row_offset must be a multiple of itemsize ({itemsize}): a row is whole elements, got {row_offset}"
        )
    step = (SECTOR_BYTES - row_offset) // itemsize
    rates = dict(zip(measured["ns"], waves.sweep_rates(measured, method)))
    tm, tn = measured["tile"]
    pairs = []
    for n, rate in rates.items():
        partner = n + step
        if n * itemsize % SECTOR_BYTES != row_offset or rate is None or rates.get(partner) is None:
            continue
        if waves.tile_grid(n, n, tm, tn) == waves.tile_grid(partner, partner, tm, tn):
            pairs.append(dict(n=n, partner=partner, ratio=rate / rates[partner]))
    return pairs
