"""Lesson 05's hand counts and memory model, its measurement helpers, its suite report and its checkers."""

import contextlib
import gc

import numpy as np
import pytest
import torch

import gpulab  # first: it picks the mode before triton is imported
from gpulab.bench import lesson05
from gpulab.core.timing import NoGPUTimingError
from gpulab.exercises import ex05 as ex
from gpulab.kernels import sigmoid3 as S
from gpulab.models import recompute

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report


@pytest.mark.parametrize("n", [1, 17, 1793, 2**28])
def test_counts_by_hand_fp32(n):
    eager, ckpt, fused = (recompute.counts(w, n, 4) for w in recompute.WAYS)
    assert (eager.fwd_elements, eager.bwd_elements, eager.bytes_moved) == (6 * n, 9 * n, 60 * n)
    assert (ckpt.fwd_elements, ckpt.bwd_elements, ckpt.bytes_moved) == (6 * n, 15 * n, 84 * n)
    assert (fused.fwd_elements, fused.bwd_elements, fused.bytes_moved) == (2 * n, 3 * n, 20 * n)
    assert (eager.launches, ckpt.launches, fused.launches) == (6, 9, 2)
    # recomputation costs FLOPs: the forward's 12n FLOPs happen twice
    assert eager.flops == 21 * n and ckpt.flops == fused.flops == 33 * n
    assert recompute.bytes_saved_by_recompute(n, 4) == 40 * n


@pytest.mark.parametrize("itemsize", [2, 4, 8])
def test_counts_are_generic_in_dtype(itemsize):
    # elements moved (forward + backward, test_counts_by_hand_fp32): eager 6n + 9n, checkpoint 6n + 15n, fused 2n + 3n;
    # tensors of n at the peak (test_memory_model): held 5, 5, 2; loss 4, 4, 1
    elements = {"eager": 15, "checkpoint": 21, "fused": 5}
    peak = {"held": {"eager": 5, "checkpoint": 5, "fused": 2}, "loss": {"eager": 4, "checkpoint": 4, "fused": 1}}
    for w in recompute.WAYS:
        c = recompute.counts(w, 1000, itemsize)
        assert c.bytes_moved == elements[w] * 1000 * itemsize and c.asdict()["bytes_moved"] == c.bytes_moved
        for setting in recompute.SETTINGS:
            assert (
                recompute.memory_model(w, 1000, itemsize, setting)["peak_bytes"] == peak[setting][w] * 1000 * itemsize
            )
    assert recompute.bytes_saved_by_recompute(1000, itemsize) == 10 * 1000 * itemsize


def test_memory_model():
    m = {w: recompute.memory_model(w, 10, 4, "held") for w in recompute.WAYS}
    assert [m[w]["held_tensors"] for w in recompute.WAYS] == [3, 1, 1]  # s1, s2, y | y | y
    assert [m[w]["peak_tensors"] for w in recompute.WAYS] == [5, 5, 2]
    assert (m["eager"]["held_bytes"], m["fused"]["held_bytes"]) == (120, 40)  # 3 and 1 tensors of 10 x 4 bytes
    m = {w: recompute.memory_model(w, 10, 4, "loss") for w in recompute.WAYS}
    assert m == {w: recompute.memory_model(w, 10, 4) for w in recompute.WAYS}, "loss is the default setting"
    assert [m[w]["held_tensors"] for w in recompute.WAYS] == [3, 0, 0]  # s1, s2, s3 | nothing | nothing
    assert [m[w]["peak_tensors"] for w in recompute.WAYS] == [4, 4, 1]
    with pytest.raises(ValueError, match="setting must be one of"):
        recompute.memory_model("fused", 10, 4, "kept")


def test_unknown_way_raises():
    with pytest.raises(ValueError, match="way must be one of"):
        recompute.counts("compiled", 10, 4)
    with pytest.raises(ValueError, match="way must be one of"):
        recompute.memory_model("compiled", 10, 4)


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: recompute.counts("fused", -1, 4), "n"),
        (lambda: recompute.memory_model("fused", -1, 4), "n"),
        (lambda: recompute.counts("eager", 10.0, 4), "n"),
        (lambda: recompute.counts("eager", 10, 0), "itemsize"),
        (lambda: recompute.memory_model("eager", 10, -4, "held"), "itemsize"),
    ],
)
def test_bad_sizes_name_the_argument(call, word):
    with pytest.raises((TypeError, ValueError), match=word):
        call()


def test_numpy_ints_are_ints():
    n = np.int64(2**40)
    assert recompute.counts("eager", n, np.int64(4)).bytes_moved == 15 * 2**40 * 4  # 15n elements, exact
    assert recompute.memory_model("fused", n, np.int32(2))["peak_bytes"] == 1 * 2**40 * 2


def test_forward_backward_needs_requires_grad_and_returns_the_gradient():
    x = torch.randn(1000, device=gpulab.DEVICE)
    dy = torch.randn(1000, device=gpulab.DEVICE)
    with pytest.raises(ValueError, match="x must require grad"):
        recompute.forward_backward(S.sigmoid3, x, dy)
    x.requires_grad_()
    for w, fn in S.WAYS.items():
        dx = recompute.forward_backward(fn, x, dy)()
        assert x.grad is None, "nothing accumulates into x.grad"
        assert torch.allclose(dx.double().cpu(), S.sigmoid3_grad_ref(x.detach(), dy).cpu(), rtol=1e-5, atol=1e-7), w
        # without dy: d(y.sum())/dx, whose upstream gradient is one value broadcast with stride 0
        dx = recompute.forward_backward(fn, x)()
        ones = torch.ones_like(dy)
        assert torch.allclose(dx.double().cpu(), S.sigmoid3_grad_ref(x.detach(), ones).cpu(), rtol=1e-5, atol=1e-7), w


@pytest.mark.skipif(gpulab.ON_GPU, reason="interpreter behaviour")
def test_no_memory_or_time_measurement_in_the_interpreter():
    x = torch.randn(8, requires_grad=True)
    with pytest.raises(NoGPUTimingError):
        lesson05.measure_memory(S.sigmoid3, x, torch.randn(8))
    with pytest.raises(NoGPUTimingError):
        lesson05.run(progress=False, sizes=(1024,))


def _fake_rows(n):
    rows = []
    for w, ms in (("eager", 4.0), ("checkpoint", 5.0), ("fused", 1.3)):
        c, m = recompute.counts(w, n, 4), recompute.memory_model(w, n, 4)
        mh = recompute.memory_model(w, n, 4, "held")
        rows.append(
            dict(
                way=w,
                n=n,
                dtype="fp32",
                ms=ms,
                p20_ms=ms,
                p80_ms=ms,
                held_bytes=m["held_bytes"],
                peak_bytes=m["peak_bytes"],
                model_held_bytes=m["held_bytes"],
                model_peak_bytes=m["peak_bytes"],
                held_setting=dict(
                    held_bytes=mh["held_bytes"],
                    peak_bytes=mh["peak_bytes"],
                    model_held_bytes=mh["held_bytes"],
                    model_peak_bytes=mh["peak_bytes"],
                ),
                bytes_moved=c.bytes_moved,
                flops=c.flops,
                launches=c.launches,
                gbps=c.bytes_moved / ms / 1e6,
            )
        )
    return rows


def test_report_prints_times_memory_and_ratios():
    rows = _fake_rows(2**16) + _fake_rows(2**28)
    data = {
        "dtype": "fp32",
        "sizes": [2**16, 2**28],
        "rows": rows,
        "grad_vs_eager": {"checkpoint": 0.0, "fused": 1e-7},
        **lesson05.ratios(rows, 2**28),
    }
    assert data["speedup_eager_over_fused"] == 4.0 / 1.3 and data["peak_ratio_fused_over_eager"] == 0.25
    assert data["peak_ratio_fused_over_eager_held"] == 0.4
    text = lesson05.report(data)
    assert "eager ms / fused ms = 3.08" in text and "y.sum() = 0.250 (target <= 1/3)" in text
    assert "dense dy: extra peak fused / eager = 0.400" in text
    assert "held between forward and backward fused / eager = 0.333" in text
    assert "BELOW TARGET" not in text and "ABOVE 1/3" not in text
    for r in rows:  # a fused peak above a third of eager's is flagged
        if r["way"] == "fused":
            r["peak_bytes"] = 2 * r["peak_bytes"]
    assert "ABOVE 1/3" in lesson05.report({**data, **lesson05.ratios(rows, 2**28)})


def _memory_table(setting: str, got: dict, slack: int) -> str:
    """Every number of one setting's comparison, one line per way and quantity: measured and model bytes, their
    difference against the slack, and the model's tensor counts (its parts: n * itemsize bytes each)."""
    lines = [f"setting {setting!r}, slack {slack} bytes (n * itemsize = {2**24 * 4} bytes a tensor):"]
    for w, measured in got.items():
        m = recompute.memory_model(w, 2**24, 4, setting)
        for q in ("held", "peak"):
            diff = measured[f"{q}_bytes"] - m[f"{q}_bytes"]
            lines.append(
                f"  {w:10} {q:4}: measured {measured[f'{q}_bytes']:>11} model {m[f'{q}_bytes']:>11} "
                f"({m[f'{q}_tensors']} tensors) diff {diff:>+11} = {diff / (2**24 * 4):+.3f} tensors "
                f"{'ok' if abs(diff) <= slack else 'OVER'}"
            )
    return "\n".join(lines)


def test_memory_table_prints_every_number():
    # the GPU test's failure message: measured, model, difference, slack and the model's parts, per way
    got = {w: recompute.memory_model(w, 2**24, 4, "held") for w in S.WAYS}
    got = {w: {"held_bytes": m["held_bytes"] + 3, "peak_bytes": m["peak_bytes"] + 2**26} for w, m in got.items()}
    text = _memory_table("held", got, 2**20)
    assert "slack 1048576 bytes" in text and text.count("OVER") == len(S.WAYS) == text.count(" ok")
    m = recompute.memory_model("eager", 2**24, 4, "held")
    assert f"measured {m['peak_bytes'] + 2**26:>11} model {m['peak_bytes']:>11} ({m['peak_tensors']} tensors)" in text
    assert "diff   +67108864 = +1.000 tensors OVER" in text


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a CUDA GPU")
def test_measured_memory_matches_the_model_on_the_gpu():
    n = 2**24
    g = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(n, device="cuda", generator=g).requires_grad_()
    dy = torch.randn(n, device="cuda", generator=g)
    slack = 2**20  # allocator rounding and small autograd buffers
    loss = {w: lesson05.measure_memory(fn, x) for w, fn in S.WAYS.items()}  # loss = y.sum(), y not kept
    why = _memory_table("loss", loss, slack)
    for w in S.WAYS:
        m = recompute.memory_model(w, n, 4, "loss")
        assert abs(loss[w]["held_bytes"] - m["held_bytes"]) <= slack, f"{w} held\n{why}"
        assert abs(loss[w]["peak_bytes"] - m["peak_bytes"]) <= slack, f"{w} peak\n{why}"
    assert 3 * loss["fused"]["peak_bytes"] <= loss["eager"]["peak_bytes"], why
    got = {w: lesson05.measure_memory(fn, x, dy) for w, fn in S.WAYS.items()}
    why = _memory_table("held", got, slack)
    model = {w: recompute.memory_model(w, n, 4, "held") for w in S.WAYS}
    assert abs(got["fused"]["held_bytes"] - model["fused"]["held_bytes"]) <= slack, why
    assert abs(got["fused"]["peak_bytes"] - model["fused"]["peak_bytes"]) <= slack, why
    assert abs(got["eager"]["held_bytes"] - model["eager"]["held_bytes"]) <= slack, why
    assert got["fused"]["peak_bytes"] < got["eager"]["peak_bytes"], why
    assert got["checkpoint"]["held_bytes"] < got["eager"]["held_bytes"], why


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a CUDA GPU")
def test_suite_runs_small_on_the_gpu():
    data = lesson05.run(progress=False, sizes=(2**16, 2**20))
    assert {r["way"] for r in data["rows"]} == set(S.WAYS) and len(data["rows"]) == 6
    assert all(e < 1e-5 for e in data["grad_vs_eager"].values()), data["grad_vs_eager"]
    assert "speed-up" in lesson05.report(data)


def test_bytes_saved_solution_passes_and_mistakes_fail_with_hints():
    """The exercise asks for any depth of stacked sigmoids, a count the lesson prints only for depth 3."""
    assert ex.check_bytes_saved(ex.check_bytes_saved.solution).ok
    assert ex.check_bytes_saved.solution(7, 4, 3) == recompute.bytes_saved_by_recompute(7, 4)
    assert ex.check_bytes_saved.solution(7, 4, 1) == 0  # one sigmoid: eager already moves 5n
    printed = ex.check_bytes_saved(lambda n, itemsize, depth: recompute.bytes_saved_by_recompute(n, itemsize))
    assert not printed.ok and "count per sigmoid" in str(printed), str(printed)
    rep = ex.check_bytes_saved(lambda n, itemsize, depth: (5 * depth - 5) * n)
    assert not rep.ok and "itemsize" in str(rep)
    rep = ex.check_bytes_saved(lambda n, itemsize, depth: 5 * depth * n * itemsize)
    assert not rep.ok and "subtract" in str(rep)
    rep = ex.check_bytes_saved(lambda n, itemsize, depth: (2 * depth - 2) * n * itemsize)
    assert not rep.ok and "count the backward too" in str(rep)
    rep = ex.check_bytes_saved(lambda n, itemsize, depth: float((5 * depth - 5) * n * itemsize))
    assert not rep.ok and "expected an int" in str(rep)
    assert not ex.check_bytes_saved(lambda *a: (_ for _ in ()).throw(NotImplementedError)).attempted


def test_memory_window_is_closed_to_the_garbage_collector(monkeypatch):
    """Between the baseline and the peak reading nothing may be freed by Python's garbage collector (on the GPU a
    collected cycle lowered the measured peak by one tensor in 2 of 3 parallel runs): it runs before the window
    and is off inside it, and on again after."""
    from gpulab.core import timing

    seen = {}
    collected = []
    monkeypatch.setattr(lesson05.gc, "collect", lambda *a: collected.append(1) or 0)
    real_reset, real_peak = timing.reset_peak_memory, timing.max_memory_allocated
    monkeypatch.setattr(
        timing, "reset_peak_memory", lambda: (seen.setdefault("at_base", gc.isenabled()), real_reset())[1]
    )
    monkeypatch.setattr(
        timing, "max_memory_allocated", lambda: (seen.setdefault("at_peak", gc.isenabled()), real_peak())[1]
    )
    x = torch.randn(64, generator=torch.Generator().manual_seed(3)).requires_grad_()
    # on a GPU the real clock and allocator run; elsewhere the labelled test clock stands in for them
    with contextlib.nullcontext() if gpulab.ON_GPU else timing.test_clock():
        lesson05.measure_memory(S.WAYS["fused"], x.to(timing.device()).detach().requires_grad_())
    assert collected and seen == {"at_base": False, "at_peak": False}, (collected, seen)
    assert gc.isenabled()
