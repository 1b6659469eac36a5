"""The lesson08 suite's shared definitions (shapes, FLOPs) and its autotune report's table, without a GPU."""

import pytest

import gpulab
from gpulab.bench import lesson08
from gpulab.timing import NoGPUTimingError


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
    from gpulab import reference

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
    from gpulab import reference

    for r in reference.load("h200")[lesson08.KEY]["headline"]:
        if "diff_vs_flash" in r:
            assert max(r["diff_vs_flash"].values()) < 0.05, r["diff_vs_flash"]
        if "fwd_ratio" in r:
            assert r["fwd_ratio"] == pytest.approx(r["flash"]["fwd_ms"] / r["ours"]["fwd_ms"])
            assert r["bwd_ratio"] == pytest.approx(r["flash"]["bwd_ms"] / r["ours"]["bwd_ms"])


@pytest.mark.parametrize("suite", ["lesson05", "lesson08"])
def test_run_refuses_an_unknown_step(suite, monkeypatch):
    import importlib

    import gpulab.timing as timing

    monkeypatch.setattr(timing, "require_gpu", lambda what="": None)
    mod = importlib.import_module(f"gpulab.bench.{suite}")
    assert "teaching" in mod.STEPS
    with pytest.raises(ValueError, match="unknown"):
        mod.run(progress=False, steps=["teachin"])


def test_recorded_teaching_steps_read():
    from gpulab import reference
    from gpulab.bench import lesson05, lesson08

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
