"""Lesson 10's figures at both ends of every slider (``check_figure``), from a made-up collectives record whose
model lines are checked against the α-β formula by hand; the link figure says when nothing is recorded."""

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
    assert fig10.NO_MULTI_GPU in e.fig.layout.annotations[0].text and "(made up)" in e.fig.layout.title.text
    nccl = live.Shown(_data().data, "NCCL on 2, 4 GPUs (G); recorded on G", False)
    assert (
        "NCCL: NCCL on 2, 4 GPUs (G); recorded on G"
        in fig10.CollectiveExplorer(_data(), nccl).fig.layout.annotations[0].text
    )
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


def test_link_figures():
    fig = fig10.link_figure(None, fig10.NO_LINK_RECORDING)
    check_figure(fig, "link without a record")
    assert "no recording" in fig.layout.title.text
    rec = dict(link=[dict(direction=d, pinned=p, n_bytes=s, gbps=s / 1e5) for d in ("H2D", "D2H") for p in (1, 0)
                     for s in (1024, 2**20)])  # fmt: skip
    check_figure(fig10.link_figure(rec, "made up"), "link with a record")
    check_figure(fig10.links_figure(), "links across generations")


def test_zero_and_tensor_parallel_explorers():
    z = fig10.ZeroExplorer(n_params=7_500_000_000, p=64)
    assert [round(v, 1) for v in z.fig.data[2].y] == [90.0, 1.4, 1.4, 1.4]  # 12 B a parameter, sharded from stage 1
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
    assert e.fit is None and "no α-β fit" in e.fig.layout.annotations[0].text
    assert e.alpha.value == pytest.approx(10.0) and e.beta.value == pytest.approx(10.0)
