"""Tile and wave quantization: how many output tiles a matmul makes, and how many waves they take on a GPU.

A tiled matmul writes its ``M x N`` output as tiles of ``tile_m x tile_n``; each tile is one program (a
thread block) that runs on one SM. With ``sms`` SMs and ``blocks_per_sm`` resident tiles per SM, the GPU
runs at most ``slots = sms * blocks_per_sm`` tiles at once: a *wave*. The model (the seed lecture's
"intentionally simplified scheduling model", CS336 Lecture 5, "Why a slightly larger matrix can be awkward")
assumes every tile takes the same time, so the run lasts ``waves = ceil(tiles / slots)`` tile-times.

Two losses follow, both in this module:

- **tile quantization**: edge tiles are partial; a tile past the edge of the matrix still costs a whole
  tile-time. ``tile_efficiency = M * N / (tiles * tile_m * tile_n)``, the useful share of the tiles' area.
- **wave quantization**: the last wave may leave SMs idle. ``wave_efficiency = tiles / (waves * slots)``;
  ``last_wave_occupancy = last_wave_tiles / slots``.

``efficiency = tile_efficiency * wave_efficiency`` is the share of the GPU's tile-times that produce output;
with every tile taking the same time it is the predicted rate divided by the rate of a full, aligned run.

The seed example (256 x 128 tiles, 108 SMs of an A100): ``1792^2`` makes ``7 x 14 = 98`` tiles, one wave;
``1793^2`` makes ``8 x 15 = 120``, two waves, the second with 12 busy SMs. Real kernels can hold several
tiles per SM, use other tile shapes and pay less for a partial tile: the model explains a discontinuity, it
does not predict the time.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from . import hardware, validate

SEED_TILE = (256, 128)  # the seed lecture's output tile, rows x columns
SEED_SMS = 108  # the seed lecture's A100


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints: the number of size-``b`` pieces that cover ``a``."""
    return -(-a // b)


def tile_grid(M: int, N: int, tile_m: int, tile_n: int) -> tuple[int, int]:
    """(tiles along M, tiles along N) that cover an ``M x N`` output with ``tile_m x tile_n`` tiles.

    Raises ``TypeError``/``ValueError`` naming the argument unless all four are positive ints.
    """
    M, N, tile_m, tile_n = (validate.positive_int(name, v) for name, v in
                            (("M", M), ("N", N), ("tile_m", tile_m), ("tile_n", tile_n)))
    return cdiv(M, tile_m), cdiv(N, tile_n)


def sms_of(gpu) -> int:
    """The SM count of ``gpu``: a name that ``gpulab.hardware.get`` knows, or a ``GPUSpec``.

    Raises ``KeyError`` for an unknown name and ``ValueError`` for a GPU whose SM count the table lacks
    (the seed's imaginary accelerator).
    """
    spec = gpu if isinstance(gpu, hardware.GPUSpec) else hardware.get(gpu)
    if spec.sms is None:
        raise ValueError(f"gpu: {spec.name} has no SM count in gpulab.hardware")
    return spec.sms


@dataclass(frozen=True)
class WavePlan:
    """Tiles and waves of one ``M x N`` output on ``sms`` SMs (see the module docstring for the model)."""

    M: int
    N: int
    tile_m: int
    tile_n: int
    sms: int
    blocks_per_sm: int
    tiles_m: int
    tiles_n: int

    @property
    def tiles(self) -> int:
        return self.tiles_m * self.tiles_n

    @property
    def slots(self) -> int:
        """Tiles that run at once: one wave."""
        return self.sms * self.blocks_per_sm

    @property
    def waves(self) -> int:
        return cdiv(self.tiles, self.slots)

    @property
    def last_wave_tiles(self) -> int:
        """Busy slots (SMs, with one block per SM) in the last wave."""
        return self.tiles - (self.waves - 1) * self.slots

    @property
    def last_wave_occupancy(self) -> float:
        """Share of the slots busy in the last wave, in (0, 1]."""
        return self.last_wave_tiles / self.slots

    @property
    def wave_efficiency(self) -> float:
        """Busy slot-waves over all slot-waves: ``tiles / (waves * slots)``."""
        return self.tiles / (self.waves * self.slots)

    @property
    def tile_efficiency(self) -> float:
        """Useful share of the tiles' area: ``M * N / (tiles * tile_m * tile_n)``."""
        return self.M * self.N / (self.tiles * self.tile_m * self.tile_n)

    @property
    def efficiency(self) -> float:
        """``tile_efficiency * wave_efficiency``: predicted rate / rate of a full, aligned run."""
        return self.tile_efficiency * self.wave_efficiency

    def busy_per_wave(self) -> list[int]:
        """Busy slots in each wave, first to last."""
        return [self.slots] * (self.waves - 1) + [self.last_wave_tiles]

    def summary(self) -> str:
        return (f"{self.M} x {self.N} in {self.tile_m} x {self.tile_n} tiles: {self.tiles_m} x {self.tiles_n} = "
                f"{self.tiles} tiles on {self.slots} slots -> {self.waves} wave(s), last wave "
                f"{self.last_wave_tiles}/{self.slots} busy; wave efficiency {self.wave_efficiency:.1%}, "
                f"tile efficiency {self.tile_efficiency:.1%}")


def plan(M: int, N: int | None = None, tile=SEED_TILE, *, sms: int | None = None, gpu=None,
         blocks_per_sm: int = 1) -> WavePlan:
    """The ``WavePlan`` of an ``M x N`` output (``N`` defaults to ``M``) in ``tile = (tile_m, tile_n)`` tiles.

    Give the machine as ``sms`` (an SM count) or ``gpu`` (a name ``gpulab.hardware`` knows, or a
    ``GPUSpec``), not both. ``blocks_per_sm``: tiles resident on one SM at once (the seed's model: 1).
    Raises ``ValueError`` naming the argument for non-positive sizes, a bad tile, or a missing or doubled
    machine, ``TypeError`` for a size that is not an int (NumPy ints are ints); ``KeyError`` for an unknown GPU
    name.
    """
    N = M if N is None else N
    if not (isinstance(tile, (tuple, list)) and len(tile) == 2):
        raise ValueError(f"tile must be a pair (tile_m, tile_n), got {tile!r}")
    if (sms is None) == (gpu is None):
        raise ValueError("give exactly one of sms (an SM count) or gpu (a GPU name or GPUSpec)")
    sms = validate.positive_int("sms", sms) if gpu is None else sms_of(gpu)
    blocks_per_sm = validate.positive_int("blocks_per_sm", blocks_per_sm)
    M, N = validate.positive_int("M", M), validate.positive_int("N", N)
    tile_m, tile_n = validate.positive_int("tile_m", tile[0]), validate.positive_int("tile_n", tile[1])
    tm, tn = tile_grid(M, N, tile_m, tile_n)
    return WavePlan(M, N, tile_m, tile_n, sms, blocks_per_sm, tm, tn)


#: What ``sweep`` can read off a ``WavePlan``: its fields and properties (numbers), not its methods.
QUANTITIES = tuple(f.name for f in fields(WavePlan)) + tuple(
    name for name, v in vars(WavePlan).items() if isinstance(v, property))


def sweep(ns, tile=SEED_TILE, *, sms: int | None = None, gpu=None, blocks_per_sm: int = 1,
          what: str = "efficiency") -> list[float]:
    """``what`` (one of ``QUANTITIES``: "efficiency", "wave_efficiency", "tiles", "waves", ...) for square
    outputs ``n x n``, one per ``n`` in ``ns``, as a plain list (for plotly). Raises ValueError naming ``what``
    for anything else (a method such as "summary" too)."""
    validate.one_of("what", what, QUANTITIES)
    return [getattr(plan(n, n, tile, sms=sms, gpu=gpu, blocks_per_sm=blocks_per_sm), what) for n in ns]


def predicted_tflops(M: int, N: int, K: int, full_rate_tflops: float, tile, *, sms: int | None = None, gpu=None,
                     blocks_per_sm: int = 1) -> float:
    """The model's rate in TFLOP/s for ``2 M N K`` FLOPs: ``full_rate_tflops * efficiency``.

    ``full_rate_tflops`` is the rate of a full, aligned run of the same kernel (measured, e.g. at a large
    aligned size), positive and finite. ``K`` does not change the efficiency; it is here so the call reads like
    the matmul. Raises as ``plan``, and ValueError naming ``full_rate_tflops`` or ``K``.
    """
    validate.positive_int("K", K)
    full_rate_tflops = validate.positive("full_rate_tflops", full_rate_tflops)
    return full_rate_tflops * plan(M, N, tile, sms=sms, gpu=gpu, blocks_per_sm=blocks_per_sm).efficiency


# ---- the first widget of lesson 07: tiles and waves against N ----------------------------------------------

class WaveExplorer:
    """Wave efficiency against N, with the slider's N marked, and the busy SMs of each of its waves.

    Sliders: N (the square output's side; moves the marker, the bars and the title), tile rows and columns
    (log2), SMs. ``.widget`` is the container to display; ``.plan`` is the current ``WavePlan``.
    """

    def __init__(self, n: int = 1793, tile=SEED_TILE, sms: int = SEED_SMS, n_range=(1024, 4352), title: str = ""):
        import ipywidgets as W
        from plotly.subplots import make_subplots

        from . import widgets

        self.title = title
        self.n = widgets.slider(W.IntSlider, value=n, min=n_range[0], max=n_range[1], step=1, description="N")
        self.tile_m = widgets.slider(W.IntSlider, value=tile[0].bit_length() - 1, min=4, max=9,
                                     description="log2 tile rows")
        self.tile_n = widgets.slider(W.IntSlider, value=tile[1].bit_length() - 1, min=4, max=9,
                                     description="log2 tile columns")
        self.sms = widgets.slider(W.IntSlider, value=sms, min=1, max=200, description="SMs")
        self.readout = W.HTML()
        self.ns = list(range(n_range[0], n_range[1] + 1, 1))
        fig = make_subplots(rows=1, cols=2, column_widths=[0.65, 0.35],
                            subplot_titles=("model efficiency against N", "busy SMs in each wave"))
        fig.add_scatter(x=self.ns, y=[0.0] * len(self.ns), mode="lines", name="wave efficiency", row=1, col=1)
        fig.add_scatter(x=self.ns, y=[0.0] * len(self.ns), mode="lines", name="tile x wave efficiency",
                        line=dict(dash="dot"), row=1, col=1)
        fig.add_scatter(x=[0], y=[0], mode="markers", name="slider N", marker=dict(size=12, color="black"),
                        row=1, col=1)
        fig.add_bar(x=[1], y=[0], name="busy SMs", marker_color="#1f77b4", row=1, col=2)
        fig.add_bar(x=[1], y=[0], name="idle SMs", marker_color="#dddddd", row=1, col=2)
        fig.update_layout(barmode="stack", template="plotly_white", height=440, margin=dict(t=100))
        fig.update_xaxes(title_text="N (output is N x N)", row=1, col=1)
        fig.update_yaxes(title_text="efficiency", range=[0, 1.05], row=1, col=1)
        fig.update_xaxes(title_text="wave", dtick=1, row=1, col=2)
        fig.update_yaxes(title_text="SMs", row=1, col=2)
        self._apply(fig)  # the first state goes into the figure before it becomes a widget
        self.live = widgets.LiveFigure(fig)
        for w in (self.n, self.tile_m, self.tile_n, self.sms):
            w.observe(lambda _: self.refresh(), names="value")
        self.widget = widgets.container(self.n, self.tile_m, self.tile_n, self.sms, self.readout, self.live.widget)

    @property
    def tile(self) -> tuple[int, int]:
        return 2**self.tile_m.value, 2**self.tile_n.value

    @property
    def plan(self) -> WavePlan:
        return plan(self.n.value, self.n.value, self.tile, sms=self.sms.value)

    def _apply(self, fig) -> None:
        p, tile, sms = self.plan, self.tile, self.sms.value
        fig.data[0].y = sweep(self.ns, tile, sms=sms, what="wave_efficiency")
        fig.data[1].y = sweep(self.ns, tile, sms=sms)
        fig.data[2].x, fig.data[2].y = [p.M], [p.wave_efficiency]
        waves = list(range(1, p.waves + 1))
        busy = p.busy_per_wave()
        fig.data[3].x, fig.data[3].y = waves, busy
        fig.data[4].x, fig.data[4].y = waves, [p.slots - b for b in busy]
        fig.update_layout(title=dict(text=f"{self.title}<br><sup>N = {p.M}, {tile[0]} x {tile[1]} tiles: "
                                          f"{p.tiles_m} x {p.tiles_n} = {p.tiles} tiles on {sms} SMs, {p.waves} "
                                          f"wave(s), last {p.last_wave_tiles} busy</sup>", font_size=13))
        self.readout.value = (f"wave efficiency {p.wave_efficiency:.1%}, tile efficiency {p.tile_efficiency:.1%}, "
                              f"both {p.efficiency:.1%}; last-wave occupancy {p.last_wave_occupancy:.1%}")

    def refresh(self) -> None:
        self.live.update(self._apply)
