"""The lesson08 suite's shared definitions (shapes, FLOPs) and its autotune report's table, without a GPU."""

import pytest

import gpulab
from gpulab.bench import lesson08
from gpulab.core.timing import NoGPUTimingError


def test_setting_shape_and_flops_by_hand():
    assert lesson08.setting_shape(1024, 128) == (16, 16, 1024, 128)  # B*L = 16384 tokens, H*d = 2048
    assert lesson08.setting_shape(16384, 64) == (1, 32, 16384, 64)
    # 4 * B * H * L^2 * d = 4 * 16 * 16 * 2^20 * 2^7 = 2^37; causal half; backward 2.5x
    assert lesson08.setting_flops(1024, 128, False) == 2.0**37
    assert lesson08.setting_flops(1024, 128, True) == 2.0**36
    assert lesson08.setting_flops(1024, 128, True, backward=True) == 2.5 * 2.0**36


def test_autotune_report_text_on_made_up_rows():
    rows = [
        {
            "d": 128,
            "L": 1024,
            "B": 16,
            "H": 16,
            "causal": True,
            "fixed_tflops": {"128x64 w4 s2": 301.4, "64x64 w4 s3": "OutOfResources: shared memory"},
            "autotuned_tflops": 299.6,
            "autotuned_config": "128x64 w4 s2",
            "sdpa_flash_tflops": 350.2,
        }
    ]
    text = lesson08.autotune_report_text(rows)
    assert (
        "d=128 L= 1024 causal=True : 128x64 w4 s2 301, 64x64 w4 s3 failed; autotuned 300 [128x64 w4 s2]; "
        "SDPA flash 350" in text
    )


@pytest.mark.skipif(gpulab.ON_GPU, reason="interpreter-mode refusal")
def test_autotune_report_refuses_without_a_gpu():
    with pytest.raises(NoGPUTimingError):
        lesson08.autotune_report(progress=False)


def _teaching_rows():
    # 1e12 FLOPs in 4 ms = 250 TFLOP/s; in 2 ms = 500 (2.00x the teaching kernel); causal: half the FLOPs
    return [
        dict(
            d=128,
            L=4096,
            causal=c,
            B=4,
            H=16,
            fwd_flops=1e12 / (1 + c),
            bwd_flops=2.5e12 / (1 + c),
            fwd_ms=dict(teaching=4.0 / (1 + c), fixed=3.2, autotuned=2.5, tma=2.0 * (0.6 if c else 1)),
            bwd_ms=dict(teaching=10.0, fused=8.0, split=5.0, atomic="OutOfResources: shared memory"),
        )
        for c in (False, True)
    ]


def test_teaching_report_by_hand():
    text = lesson08.teaching_report(_teaching_rows())
    lines = text.splitlines()
    assert len(lines) <= 15, text
    assert "d=128 L=4096" in lines[0]
    assert any(ln.split()[-2:] == ["250", "(1.00x)"] and "teaching (64x64" in ln for ln in lines), text
    assert any(ln.split()[-2:] == ["500", "(2.00x)"] and "TMA" in ln for ln in lines), text
    assert any(ln.split()[-2:] == ["500", "(2.00x)"] and "split" in ln for ln in lines), text  # 2.5e12 in 5 ms
    assert any("atomic" in ln and ln.split()[-1] == "failed" for ln in lines), text
    assert "teaching d=128 L=4096: 0.50; tma d=128 L=4096: 0.60" in text  # causal ms / non-causal ms


def test_teaching_report_wraps_the_causal_line():
    rows = [dict(r, L=L) for L in (1024, 4096, 16384) for r in _teaching_rows()]
    text = lesson08.teaching_report(rows)
    assert max(len(ln) for ln in text.splitlines()) <= 110, text
    for L in (1024, 16384):  # causal teaching ms 2.0 / non-causal 4.0; TMA 1.2 / 2.0
        assert f"teaching d=128 L={L}: 0.50" in text and f"tma d=128 L={L}: 0.60" in text


def test_teaching_report_without_a_recording_says_so():
    assert lesson08.teaching_report(None).startswith("no recording yet")


def test_cudnn_leads_counted_by_hand():
    rows = [
        dict(ours=dict(fwd_tflops=400, bwd_tflops=300), cudnn=dict(fwd_tflops=450, bwd_tflops=350)),
        dict(ours=dict(fwd_tflops=470, bwd_tflops=300), cudnn=dict(fwd_tflops=460, bwd_tflops=310)),
        dict(ours=dict(fwd_tflops=470, bwd_tflops=300), cudnn=dict(error="RuntimeError: no cuDNN")),
    ]
    assert lesson08.cudnn_leads(rows) == {"fwd": (1, 2), "bwd": (2, 2)}


def test_report_is_short_and_full_has_every_table():
    from gpulab.core import reference

    rec = reference.load("h200")[lesson08.KEY]
    short, full = lesson08.report(rec), lesson08.report(rec, full=True)
    assert len(short.splitlines()) <= 15, short
    assert short.count("B/token") == 1 and "held" not in short  # the memory table is printed once, in full
    assert "cuDNN ahead of ours" in full and "held" in full and full.count("naive (S, P in HBM)") == 1
    assert "_report" not in short and "full=" not in short  # plain words, no function names


def test_report_memory_line_by_hand():
    rows = [dict(L=1024, peak_bytes=16512 * 1024), dict(L=2048, peak_bytes=16512 * 2048)]
    assert lesson08.report({"memory": {"rows": rows}}) == "memory: peak 16512 B/token at every L"
    rows[0]["peak_bytes"] = 16448 * 1024
    assert lesson08.report({"memory": {"rows": rows}}) == "memory: peak 16448 to 16512 B/token"


@pytest.mark.skipif(gpulab.ON_GPU, reason="interpreter-mode refusal")
def test_teaching_step_refuses_without_a_gpu():
    with pytest.raises(NoGPUTimingError):
        lesson08.teaching(progress=False)


def test_recorded_headline_agrees_with_sdpa_and_its_ratios_are_its_times():
    from gpulab.core import reference

    for r in reference.load("h200")[lesson08.KEY]["headline"]:
        if "diff_vs_flash" in r:
            assert max(r["diff_vs_flash"].values()) < 0.05, r["diff_vs_flash"]
        if "fwd_ratio" in r:
            assert r["fwd_ratio"] == pytest.approx(r["flash"]["fwd_ms"] / r["ours"]["fwd_ms"])
            assert r["bwd_ratio"] == pytest.approx(r["flash"]["bwd_ms"] / r["ours"]["bwd_ms"])


@pytest.mark.parametrize("suite", ["lesson05", "lesson08"])
def test_run_refuses_an_unknown_step(suite, monkeypatch):
    import importlib

    import gpulab.core.timing as timing

    monkeypatch.setattr(timing, "require_gpu", lambda what="": None)
    mod = importlib.import_module(f"gpulab.bench.{suite}")
    assert "teaching" in mod.STEPS
    with pytest.raises(ValueError, match="unknown"):
        mod.run(progress=False, steps=["teachin"])


def test_recorded_teaching_steps_read():
    from gpulab.bench import lesson05, lesson08
    from gpulab.core import reference

    ref = reference.load("h200")
    t5 = lesson05.teaching_report(ref["lesson05"]["teaching"])
    assert "forward" in t5 and "backward" in t5 and "no recording" not in t5
    t8 = lesson08.teaching_report(ref["lesson08"]["teaching"])
    assert "teaching" in t8 and "no recording" not in t8
    assert "no recording" in lesson05.teaching_report(None)


def test_launch_report_by_hand_and_without_graph_times():
    rows = [
        dict(L=1024, method="flash", oom=False, ms=0.192, graph_ms=0.062),
        dict(L=2048, method="flash", oom=False, ms=0.160, graph_ms=0.150),
        dict(L=1024, method="naive", oom=False, ms=0.1, graph_ms=0.09),
    ]
    text = lesson08.launch_report({"rows": rows})
    assert "L =   1024: eager 0.192 ms, graph 0.062 ms, launch +0.130 ms" in text and "naive" not in text
    for r in rows:
        del r["graph_ms"]
    assert "L = 1024, 2048: no graph replay in this record" in lesson08.launch_report({"rows": rows})


def _sweep_rows(lengths, ms):
    return [
        dict(L=L, method=m, oom=False, ms=ms, graph_ms=ms, peak_bytes=2**20, model_peak_bytes=2**20)
        for L in lengths
        for m in ("naive", "flash")
    ]


def test_sweep_shown_adds_the_recorded_lengths_a_live_sweep_lacks_and_marks_them():
    shape = dict(B=1, H=16, d=128, dtype="bf16", causal=False)
    live = {"sweep": {**shape, "rows": _sweep_rows((1024, 4096), 1.0)}}
    rec = {"sweep": {**shape, "rows": _sweep_rows((1024, 2048, 4096, 8192), 2.0)}}
    got = lesson08.sweep_shown(live, rec, "recorded on X")
    assert [(r["L"], r["method"], r["ms"], r.get("recorded", False)) for r in got["rows"]] == [
        (1024, "flash", 1.0, False),
        (1024, "naive", 1.0, False),
        (2048, "flash", 2.0, True),
        (2048, "naive", 2.0, True),
        (4096, "flash", 1.0, False),
        (4096, "naive", 1.0, False),
        (8192, "flash", 2.0, True),
        (8192, "naive", 2.0, True),
    ]
    assert got["recorded_where"] == "recorded on X" and "recorded_where" not in live["sweep"]
    assert lesson08.sweep_shown(rec, rec, "recorded on X") is rec["sweep"]  # the recording itself: as it is
    other = {"sweep": {**shape, "H": 8, "rows": _sweep_rows((1024,), 1.0)}}  # another shape: no mixing
    assert lesson08.sweep_shown(other, rec) is other["sweep"]
    assert lesson08.sweep_shown({"headline": []}, rec) is None and lesson08.sweep_shown(live, None) is live["sweep"]


def test_the_sweep_figure_draws_recorded_lengths_apart_and_says_where():
    from gpulab import figures

    shape = dict(B=1, H=16, d=128, dtype="bf16", causal=False)
    live = {"sweep": {**shape, "rows": _sweep_rows((1024,), 1.0)}}
    rec = {"sweep": {**shape, "rows": _sweep_rows((1024, 2048), 2.0)}}
    sw = lesson08.sweep_shown(live, rec, "recorded on X")
    fig = figures.lesson08.naive_flash_figure(sw, "measured now on Y")
    names = {t.name: t for t in fig.data}
    assert list(names["flash, measured"].x) == [1024] and list(names["flash, recorded"].x) == [2048]
    assert list(names["naive, time, recorded"].y) == [2.0] and "recorded on X" in fig.layout.title.text
    assert "flash, recorded" not in {t.name for t in figures.lesson08.naive_flash_figure(live["sweep"], "Y").data}
    ex = figures.lesson08.NaiveVsFlashExplorer(sw, where="measured now on Y", log2_l=11)
    assert "recorded on X" in ex.live.fig.layout.title.text
    ex.k.value = 10
    assert "measured now on Y" in ex.live.fig.layout.title.text


def test_the_live_sweep_holds_what_notebook_08_reads_and_the_recording_the_rest():
    from gpulab.core import reference

    live = lesson08.LIVE["sweep_lengths"]
    assert 1024 in live and sum(L >= 4096 for L in live) >= 2  # the reveal at 1024; the peak check from 4096
    assert len(live) <= 3 and set(live) < set(lesson08.SWEEP)
    recorded = {r["L"] for r in reference.load("h200")[lesson08.KEY]["sweep"]["rows"]}
    assert set(lesson08.SWEEP) <= recorded  # every length left out live is drawn from the recording
    assert max(lesson08.LIVE["memory_lengths"]) < max(lesson08.MEMORY_LENGTHS)


def test_target_reads_the_headline_of_the_same_run_and_the_report_shows_it(monkeypatch):
    rows = [dict(d=d, L=L, causal=c, tag=(d, L, c)) for d in (64, 128) for L in (1024, 4096) for c in (False, True)]
    monkeypatch.setattr(lesson08, "headline", lambda *a, **k: pytest.fail("measured what the headline holds"))
    assert [r["tag"] for r in lesson08.target(rows)] == [(128, 4096, False), (128, 4096, True)]
    measured = []
    monkeypatch.setattr(lesson08, "headline", lambda *a, **k: measured.append(a) or ["now"])
    assert lesson08.target(rows[:3]) == ["now"] and measured[0][:2] == ((128,), (4096,))
    assert measured[0][5] == (False, True) and lesson08.HEADLINE_STEPS == ("target",)
    row = dict(d=128, L=4096, causal=False, ours={"fwd_tflops": 500.0}, fwd_ratio=1.2, bwd_ratio=0.9)
    text = lesson08.report({"target": [row], "tuning": {"timed now": 2, "recorded on H (f, d)": 1}})
    assert "BELOW TARGET" in text and "128   4096" in text
    assert text.splitlines()[-1] == "autotuner's configs: 2 keys timed now; 1 key recorded on H (f, d)"
    assert lesson08.tuning_line(None) == ""
