"""Lesson 10's figures at both ends of every slider (``check_figure``), from a made-up collectives record whose
model lines are checked against the α-β formula by hand; the link figure says when nothing is recorded, where
its two directions coincide, and names each PCIe line on the plot; the collectives explorer says which model
lines are one and nests its markers and lines so that each shows; the ZeRO bars read across; notebook 10's
cell after the explorer runs whether or not the times give a fit."""

import json
import pathlib

import pytest

import gpulab  # noqa: F401  (first: it picks the mode)
from gpulab.figures import lesson10 as fig10
from gpulab.measure import live
from tests.figure_checks import check_figure

SIZES = (1024, 65536, 4194304)


def _data():
    alpha, beta = 1e-4, 1e9
    rows = []
    for p in (2, 4):
        for c in ("all_reduce", "reduce_scatter", "all_gather", "broadcast"):
            for s in SIZES:
                steps = 2 * (p - 1) if c == "all_reduce" else p - 1
                share = {"all_reduce": 2 * (p - 1) / p, "broadcast": 1.0}.get(c, (p - 1) / p)
                rows.append(dict(collective=c, p=p, n_bytes=s, t_s=steps * alpha + share * s / beta))
    return live.Shown(dict(backend="gloo", ps=[2, 4], device="CPU processes", rows=rows), "made up", True)


def test_collective_explorer_fits_and_follows_its_sliders():
    e = fig10.CollectiveExplorer(_data())
    assert e.fit[0] == pytest.approx(1e-4, rel=1e-6) and e.fit[1] == pytest.approx(1e9, rel=1e-6)
    title = e.fig.layout.title.text.replace("</sup><br><sup>", " ")  # the subtitle's lines, rejoined
    assert fig10.NO_MULTI_GPU in title and "made up" in title and not e.fig.layout.annotations  # nothing on ticks
    assert fig10.SAME_MODEL in title  # the two model lines that are one are named
    nccl = live.Shown(_data().data, "NCCL on 2, 4 GPUs (G); recorded on G", False)
    title = fig10.CollectiveExplorer(_data(), nccl).fig.layout.title.text.replace("</sup><br><sup>", " ")
    assert "NCCL: NCCL on 2, 4 GPUs (G); recorded on G" in title
    model = e.fig.data[1]  # all-reduce model at p = 2, α = 100 µs, β = 1 GB/s
    assert model.y[-1] == pytest.approx(2 * 1e-4 + 4194304 / 1e9)
    for w in (e.p, e.alpha, e.beta):
        start = w.value
        for end in (w.min, w.max):
            w.value = w.base**end if hasattr(w, "base") else end
            check_figure(e.fig, f"collectives at {w.description} = {w.value}")
        w.value = start
    e.p.value = 8
    assert "no measurement at p = 8" in e.fig.layout.title.text
    rs, ag = e.fig.data[3], e.fig.data[5]  # reduce_scatter's and all_gather's models: one line, both shown
    assert list(rs.y) == list(ag.y) and rs.line.width - ag.line.width >= 2  # the one under is wider
    widths = [tr.line.width for tr in e.fig.data[1::2]]
    assert widths == sorted(widths, reverse=True)  # every model line narrower than the one drawn before it
    sizes = [tr.marker.size for tr in e.fig.data[0::2]]
    opens = ["open" in tr.marker.symbol for tr in e.fig.data[0::2]]
    assert sizes == sorted(sizes, reverse=True) and all(opens[:-1])  # rings around rings around a dot
    e.p.value = 7  # few decades: 1-2-5 ticks, never plotly's minor digits
    ticks = e.fig.layout.yaxis.tickvals
    assert e.fig.layout.yaxis.tickmode == "array" and {f"{t:.0e}"[0] for t in ticks} <= {"1", "2", "5"}


def test_link_figures():
    fig = fig10.link_figure(None, fig10.NO_LINK_RECORDING)
    check_figure(fig, "link without a record")
    assert "no recording" in fig.layout.title.text
    pcie = [tr for tr in fig.data if tr.name.startswith("PCIe")]
    assert len({tr.line.dash for tr in pcie}) == 3 and not any(tr.showlegend for tr in pcie)  # each its own line
    assert [a.text for a in fig.layout.annotations] == [tr.name for tr in pcie]  # named on the plot
    rec = dict(link=[dict(direction=d, pinned=p, n_bytes=s, gbps=s / 1e5) for d in ("H2D", "D2H") for p in (1, 0)
                     for s in (1024, 2**20)])  # fmt: skip
    check_figure(fig10.link_figure(rec, "made up"), "link with a record")
    check_figure(fig10.links_figure(), "links across generations")
    # the H200: pinned copies the same speed both ways from 64 KiB on, pageable ones from 4 to 64 MiB
    shown = live.recall("lesson10")
    title = fig10.link_figure(shown.data, shown.where).layout.title.text
    assert "H2D and D2H pinned coincide from 64 KiB up" in title
    assert "H2D and D2H pageable coincide from 4 MiB to 64 MiB" in title
    apart = dict(link=[dict(direction=d, pinned=p, n_bytes=s, gbps=s / (1e5 if d == "H2D" else 2e5))
                       for d in ("H2D", "D2H") for p in (1, 0) for s in (1024, 2**20, 2**24)])  # fmt: skip
    assert "coincide" not in fig10.link_figure(apart, "made up").layout.title.text  # 2x apart: nothing to say


def test_zero_and_tensor_parallel_explorers():
    z = fig10.ZeroExplorer(n_params=7_500_000_000, p=64)
    assert [round(v, 1) for v in z.fig.data[2].x] == [90.0, 1.4, 1.4, 1.4]  # 12 B a parameter, sharded from stage 1
    assert z.fig.data[2].orientation == "h" and list(z.fig.data[2].y)[1] == "ZeRO-1<br>(optimizer states)"
    t = fig10.TensorParallelExplorer(t=8)
    assert t.fig.data[0].y[0] == pytest.approx(8 * 256 / (7 * 2))
    for e, w in ((z, z.p), (t, t.t)):
        for end in (w.min, w.max):
            w.value = end
            check_figure(e.fig, f"{type(e).__name__} at {end}")


def test_collective_explorer_without_a_fit_says_so():
    shown = _data()
    for r in shown.data["rows"]:
        r["t_s"] = 1e-3  # times that do not grow with the size: comm.fit_alpha_beta refuses them
    e = fig10.CollectiveExplorer(shown)
    assert e.fit is None and "no α-β fit" in e.fig.layout.title.text
    assert e.alpha.value == pytest.approx(10.0) and e.beta.value == pytest.approx(10.0)


def _fit_cell() -> str:
    """Notebook 10's cell after the collectives explorer: it reads ``explorer.fit``."""
    nb = json.loads((pathlib.Path(__file__).resolve().parents[1] / "notebooks/10_beyond_one_gpu.ipynb").read_text())
    return next(c["source"] for c in nb["cells"] if c.get("id") == "l10-21")


@pytest.mark.parametrize("grows", [True, False])
def test_notebook_fit_cell_runs_with_and_without_a_fit(grows, capsys):
    from gpulab.bench import lesson10
    from gpulab.models import comm

    rows = [
        dict(collective=c, p=p, n_bytes=s, t_s=1e-4 + (s / 1e9 if grows else 0.0))  # flat times: no fit
        for p in (2, 4)
        for c in comm.COLLECTIVES
        for s in lesson10.LIVE_COLLECTIVES["sizes"]
    ]
    coll = live.Shown(dict(backend="gloo", ps=[2, 4], device="CPU processes", rows=rows), "made up", True)
    explorer = fig10.CollectiveExplorer(coll)
    assert (explorer.fit is not None) == grows
    exec(_fit_cell(), dict(explorer=explorer, coll=coll, comm=comm, lesson10=lesson10))
    said = capsys.readouterr().out
    if grows:
        assert said == ""
    else:
        assert said.startswith("No α-β fit:") and "α = 10 µs" in said and "β = 10 GB/s" in said
