"""Counts and models of lesson 08 (FLOPs, naive and flash bytes, memory O(L^2) against O(L), causal tiles), the
naive reference, the out-of-memory catch, the sweep slider, the suite's report and the exercises."""

import math
import random

import numpy as np
import pytest
import torch

import gpulab  # first: it picks the mode before triton is imported
from gpulab import figures
from gpulab.bench import lesson08
from gpulab.core.timing import NoGPUTimingError
from gpulab.exercises import ex08 as ex
from gpulab.kernels import flash_attention as F
from gpulab.models import attention as A

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report


def test_flop_convention():
    B, H, L, d = 16, 32, 1024, 64
    f = A.attention_flops(B, H, L, L, d)
    assert f == 4 * B * H * L * L * d
    assert A.attention_flops(B, H, L, L, d, causal=True) == f / 2
    assert A.attention_flops(B, H, L, L, d, backward=True) == 2.5 * f
    assert A.attention_flops(1, 1, 3, 5, 16) == 4 * 3 * 5 * 16


def test_causal_flops_for_lq_not_lk():
    # "halved if causal" is only right for Lq = Lk: with the top-left mask one query row over 1000 keys sees one
    # key, not 500. Visible pairs, the diagonal counted half (so Lq = Lk keeps the usual L^2 / 2):
    # Lq^2 / 2 if Lq <= Lk, else Lq * Lk - Lk^2 / 2.
    d = 16
    for lq, lk in ((1, 1000), (1000, 1), (300, 700), (700, 300), (64, 64)):
        kept = torch.ones(lq, lk).tril().sum().item() - min(lq, lk) / 2
        assert A.attention_flops(2, 3, lq, lk, d, causal=True) == 4 * 2 * 3 * kept * d, (lq, lk)
    assert A.attention_flops(1, 1, 1, 1000, d, causal=True, backward=True) == 2.5 * 4 * 0.5 * d
    with pytest.raises(ValueError, match="mode"):
        A.flash_training_memory(1, 1, 16, 16, 2, mode="nonsense")


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: A.attention_flops(1, 1, 16, 16, 16, causal="no"), "causal"),  # a string is not False
        (lambda: A.attention_flops(1, 1, 16, 16, 16, causal=None), "causal"),
        (lambda: A.attention_flops(1, 1, 16, 16, 16, backward="yes"), "backward"),
        (lambda: A.naive_bytes(1, 1, 16, 16, 2, causal=1), "causal"),
        (lambda: A.flash_bytes(1, 1, 16, 16, 2, causal="no"), "causal"),
        (lambda: A.tiles_visited(16, 16, 16, causal="no"), "causal"),
        (lambda: A.attention_flops(1, 1, -16, 16, 16), "Lq"),
        (lambda: A.attention_flops(1, 1, 16, 16.0, 16), "Lk"),
        (lambda: A.memory_model(1, 1, 16, 16, -2, "flash"), "itemsize"),
    ],
)
def test_bad_input_names_the_argument(call, word):
    with pytest.raises((TypeError, ValueError), match=word):
        call()


def test_numpy_ints_are_ints_and_never_wrap():
    B, H, L, d = (np.int64(v) for v in (2**20, 2**10, 2**20, 2**10))  # 4 B H L^2 d = 2**72: past int64
    assert A.naive_bytes(B, H, L, d, np.int64(2)) == (6 * 2**50 + 4 * 2**60) * 2**10 * 2
    assert A.attention_flops(np.int64(1), 1, np.int32(3), 5, np.int64(16)) == 4 * 3 * 5 * 16


def test_naive_bytes_by_hand():
    B, H, L, d = 2, 3, 100, 16
    assert A.naive_bytes(B, H, L, d, 2) == 2 * B * H * (6 * L * d + 4 * L * L)
    assert A.naive_bytes(B, H, L, d, 2, causal=True) - A.naive_bytes(B, H, L, d, 2) == 2 * B * H * 2 * L * L


def test_flash_bytes_and_tiles():
    B, H, L, d = 1, 1, 1000, 64
    # not causal: Q and O once, K and V once per query block of 128 (8 blocks), lse 4 bytes a row
    assert A.flash_bytes(B, H, L, d, 2) == (2 * L * d + 2 * 8 * L * d) * 2 + 4 * L
    # causal: block i reads keys below min((i+1)*128, L)
    # keys read by the 8 blocks: 128, 256, ..., 896, then 1000 (not 1024): 128 x 28 + 1000 = 4584; so
    # (2 x 1000 x 64 + 2 x 4584 x 64) x 2 + 4 x 1000 = 1,433,504 bytes
    assert A.flash_bytes(B, H, L, d, 2, causal=True) == 1_433_504
    assert A.tiles_visited(4096, 128, 64, False) == 32 * 64
    assert A.tiles_visited(4096, 128, 64, True) == 1056  # row block i visits 2(i + 1) tiles: 2 x 528, a bit over half
    # 10 row blocks of 32 over tiles of 16: 2, 4, ..., 18 for the first 9 (90), and ceil(300 / 16) = 19 for the last
    assert A.tiles_visited(300, 32, 16, True) == 109
    with pytest.raises(ValueError, match="block_m and block_n must be >= 1"):
        A.tiles_visited(10, 0, 16, True)


def test_memory_model_orders():
    B, H, d = 1, 16, 128
    n1, n2 = (A.memory_model(B, H, L, d, 2, "naive")["peak_bytes"] for L in (4096, 8192))
    f1, f2 = (A.memory_model(B, H, L, d, 2, "flash")["peak_bytes"] for L in (4096, 8192))
    assert n2 == 4 * n1 and f2 == 2 * f1  # O(L^2) against O(L)
    assert n1 == 2 * B * H * 4096**2 * 2
    assert f1 == B * H * 4096 * (d * 2 + 4)
    with pytest.raises(ValueError, match="method must be"):
        A.memory_model(1, 1, 1, 16, 2, "nope")


@pytest.mark.parametrize("causal", [False, True])
def test_naive_attention_matches_the_reference(causal):
    q, k, v = (torch.randn(2, 3, 37, 16, dtype=torch.float64) for _ in range(3))
    ref, _ = F.flash_attention_ref(q, k, v, causal)
    assert torch.allclose(A.naive_attention(q, k, v, causal), ref, atol=1e-12)


def test_out_of_memory_is_caught_and_other_errors_are_not():
    def oom():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 256.00 GiB")

    assert lesson08.run_catching_oom(oom) == (None, True)
    assert lesson08.run_catching_oom(lambda: 3) == (3, False)
    with pytest.raises(ValueError):
        lesson08.run_catching_oom(lambda: (_ for _ in ()).throw(ValueError("not an OOM")))


@pytest.mark.skipif(gpulab.ON_GPU, reason="the test clock is for the CPU")
def test_measured_peak_is_of_a_call_after_the_first(monkeypatch):
    """A new shape's first call autotunes, and its trial buffers are not the method's memory: the peak recorded
    is a later call's. The allocator is played by counters (the test clock reads no device memory)."""
    from gpulab.core import timing

    state = {"calls": 0, "peak": 0}

    def fn():
        state["calls"] += 1
        state["peak"] = max(state["peak"], 1000 if state["calls"] == 1 else 10)

    monkeypatch.setattr(timing, "reset_peak_memory", lambda: state.update(peak=0))
    monkeypatch.setattr(timing, "max_memory_allocated", lambda: state["peak"])
    monkeypatch.setattr(timing, "memory_allocated", lambda: 0)
    with timing.test_clock():
        m = lesson08.measure(fn)
    assert m["peak_bytes"] == 10 and state["calls"] >= 2 and m["oom"] is False


@pytest.mark.skipif(gpulab.ON_GPU, reason="interpreter behaviour")
def test_no_measurement_in_the_interpreter():
    with pytest.raises(NoGPUTimingError):
        lesson08.measure(lambda: None)
    with pytest.raises(NoGPUTimingError):
        lesson08.run(progress=False)


def test_sweep_explorer_model_only_and_with_data():
    e = figures.lesson08.NaiveVsFlashExplorer(None, log2_l=12)
    title = e.live.fig.layout.title.text
    assert "model only" in title and list(e.live.fig.data[0].y) == [
        A.memory_model(1, 16, 4096, 128, 2, m)["peak_bytes"] / 2**30 for m in ("naive", "flash")
    ]
    e.k.value = 14
    assert e.live.fig.layout.title.text != title
    data = _fake_data()["sweep"]
    e = figures.lesson08.NaiveVsFlashExplorer(data, where="recorded", log2_l=16)
    assert "out of memory" in e.live.fig.layout.title.text and list(e.live.fig.data[1].y)[0] is None


def _fake_data():
    head = []
    for d in (64, 128):
        for L in (1024, 4096, 16384):
            for c in (False, True):
                r = {
                    "d": d,
                    "L": L,
                    "causal": c,
                    "B": 16384 // L,
                    "H": 2048 // d,
                    "fwd_flops": A.attention_flops(16384 // L, 2048 // d, L, L, d, c),
                    "bwd_flops": A.attention_flops(16384 // L, 2048 // d, L, L, d, c, backward=True),
                }
                for name, f, b in (("ours", 360.0, 310.0), ("flash", 352.0, 305.0), ("cudnn", 616.0, 544.0)):
                    r[name] = {"fwd_ms": 1.0 / f, "bwd_ms": 1.0 / b, "fwd_tflops": f, "bwd_tflops": b}
                r["fwd_ratio"], r["bwd_ratio"] = 360 / 352, 310 / 305 if d == 64 else 0.9
                r["diff_vs_flash"] = {"out": 1e-3, "dq": 2e-3, "dk": 2e-3, "dv": 1e-3}
                head.append(r)
    sweep = {"B": 1, "H": 16, "d": 128, "dtype": "bf16", "causal": False, "rows": []}
    for L in (2**10, 2**16):
        for m in ("naive", "flash"):
            oom = m == "naive" and L == 2**16
            sweep["rows"].append(
                {
                    "L": L,
                    "method": m,
                    "oom": oom,
                    "ms": None if oom else 1.0,
                    "peak_bytes": None if oom else 2**20,
                    "model_peak_bytes": A.memory_model(1, 16, L, 128, 2, m)["peak_bytes"],
                }
            )
    mem = {
        "B": 1,
        "H": 16,
        "d": 128,
        "dtype": "bf16",
        "bwd_mode": "fused",
        "rows": [
            {
                "L": L,
                "held_bytes": 4128 * L,
                "peak_bytes": 16448 * L,
                "model_held_bytes": 4160 * L,
                "model_peak_bytes": 16448 * L,
            }
            for L in (1024, 2048)
        ],
    }
    return {"dtype": "bf16", "headline": head, "sweep": sweep, "memory": mem}


def test_report_prints_ratios_oom_and_memory():
    text = lesson08.report(_fake_data(), full=True)
    assert "BELOW TARGET" in text and "out of memory" in text and "B/token" in text
    assert "ratio" in text and "cuDNN" in text
    short = lesson08.report(_fake_data())
    assert "6 ratios BELOW TARGET" in short and len(short.splitlines()) <= 15, short  # d=128: bwd 0.9


# ---- exercises ----------------------------------------------------------------------------------------------


def test_merge_exercise():
    assert ex.check_merge(ex.check_merge.solution).ok
    rep = ex.check_merge(lambda ma, la, ua, mb, lb, ub: (max(ma, mb), la + lb, ua + ub))
    assert not rep.ok and "rescale" in str(rep)

    def nan_on_empty(ma, la, ua, mb, lb, ub):
        m = max(ma, mb)
        a, b = math.exp(ma - m), math.exp(mb - m)
        return m, a * la + b * lb, a * ua + b * ub

    rep = ex.check_merge(nan_on_empty)
    assert not rep.ok and "empty" in str(rep)
    assert not ex.check_merge(lambda *a: (_ for _ in ()).throw(NotImplementedError())).attempted


def test_causal_tiles_exercise():
    assert ex.check_causal_tiles(ex.check_causal_tiles.solution).ok
    rep = ex.check_causal_tiles(lambda L, bm, bn: math.ceil(L / bm) * math.ceil(L / bn) // 2)
    assert not rep.ok
    rep = ex.check_causal_tiles(lambda L, bm, bn: sum(math.ceil((i + 1) * bm / bn) for i in range(math.ceil(L / bm))))
    assert not rep.ok and "last" in str(rep)
    L = random.randint(1, 5000)
    assert ex.check_causal_tiles.solution(L, 128, 64) == A.tiles_visited(L, 128, 64, True)


def test_training_memory_model_is_linear_in_L():
    a, b = (A.flash_training_memory(2, 4, L, 64, 2) for L in (1000, 2000))
    assert b["held_bytes"] == 2 * a["held_bytes"] and b["peak_bytes"] == 2 * a["peak_bytes"]
    assert a["held_bytes"] == 2 * 4 * 1000 * (64 * 2 + 4)
    at = A.flash_training_memory(2, 4, 1000, 64, 2, "atomic")
    assert at["peak_bytes"] - a["peak_bytes"] == 2 * 4 * 1000 * 64 * 4  # the fp32 dQ buffer


def test_flash_bytes_at_two_boundaries_by_hand():
    # B = H = 1, L = 1024, d = 64, 2 bytes: Q and O 2 * 1024 * 64 * 2 = 262144; lse 4096
    # L2: 8 query blocks of 128 rows each read all of K and V: 8 * 2 * 1024 * 64 * 2 = 2097152
    assert A.flash_l2_bytes(1, 1, 1024, 64, 2) == 262144 + 2097152 + 4096
    # DRAM, K and V (256 KiB) fit in a 50 MB L2: each tensor once
    assert A.flash_dram_bytes(1, 1, 1024, 64, 2, l2_bytes=50 * 10**6) == 262144 + 262144 + 4096
    # K and V larger than L2: DRAM sees the L2 requests
    assert A.flash_dram_bytes(1, 1, 1024, 64, 2, l2_bytes=2**17) == A.flash_l2_bytes(1, 1, 1024, 64, 2)
    # doubling L: the L2 requests grow about 4x (L^2), DRAM exactly 2x (L)
    l2 = [A.flash_l2_bytes(1, 16, L, 128, 2) for L in (4096, 8192)]
    dram = [A.flash_dram_bytes(1, 16, L, 128, 2) for L in (4096, 8192)]
    assert 3.7 < l2[1] / l2[0] < 4 and dram[1] == 2 * dram[0]
    with pytest.raises(ValueError, match="l2_bytes"):
        A.flash_dram_bytes(1, 1, 16, 16, 2, l2_bytes=-1)
