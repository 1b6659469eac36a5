"""gpulab.models.precision: ReLU byte counts (seed), matmul error per dtype, TF32/fp8 emulation, hardware gating with a
faked compute capability, the lesson03 suite's report, and the exercises' checkers."""

import gpulab  # first: it sets TRITON_INTERPRET=1 before triton is imported  # isort: skip
import math

import numpy as np
import pytest
import torch

from gpulab.bench import lesson03
from gpulab.core import dtypes, tolerances
from gpulab.core.timing import NoGPUTimingError
from gpulab.exercises import ex03 as ex
from gpulab.models import precision as P

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report


# ---- seed numbers ------------------------------------------------------------------------------------


def test_relu_bytes_seed():
    n = 1000
    assert P.relu_bytes(n, "fp32") == 8 * n  # seed: 8n bytes in FP32
    assert P.relu_bytes(n, "fp16") == 4 * n  # seed: 4n bytes in FP16
    assert P.relu_bytes(n, "bf16") == 4 * n
    with pytest.raises(ValueError, match="dtype must be one of"):
        P.relu_bytes(n, "fp8")
    assert P.relu_bytes(np.int64(2**40), "bf16") == 4 * 2**40  # NumPy ints are ints
    with pytest.raises((TypeError, ValueError), match="n must"):
        P.relu_bytes(-1, "fp32")


def test_dtypes_come_from_the_one_table():
    assert P.MATMUL_DTYPES == dtypes.MATMUL
    assert {d: t.itemsize for d, t in P.RELU_DTYPES.items()} == {"fp32": 4, "fp16": 2, "bf16": 2}


# ---- hardware gating -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cc,name,has,lacks",
    [
        ((7, 5), "T4", {"fp32", "fp16"}, {"bf16", "tf32", "fp8", "mx_native"}),
        ((8, 0), "A100", {"bf16", "tf32", "fp16"}, {"fp8", "mx_native"}),
        ((8, 6), "A10", {"bf16"}, {"fp8", "mx_native"}),
        ((8, 9), "L4", {"bf16", "fp8"}, {"mx_native"}),
        ((9, 0), "H200", {"bf16", "fp8"}, {"mx_native"}),
        ((10, 0), "B200", {"bf16", "fp8", "mx_native"}, set()),
        ((12, 0), "RTX 5090", {"fp8", "mx_native"}, set()),
    ],
)
def test_features_by_compute_capability(cc, name, has, lacks):
    f = P.features(cc, name)
    assert all(f.has(x) for x in has) and not any(f.has(x) for x in lacks), f
    for x in lacks:
        assert f"{cc[0]}.{cc[1]}" in f.missing[x] and name in f.missing[x]
        assert P.gate(x, f).startswith(f"skipped {x}")
    assert all(P.gate(x, f) is None for x in has)


def test_features_rejects_bad_input():
    for bad in [(9,), "9.0", (9.0, 0), (True, 0), (-1, 0)]:
        with pytest.raises(ValueError, match="cc must be"):
            P.features(bad)
    with pytest.raises(ValueError, match="feature must be one of"):
        P.features((9, 0)).has("fp4")
    assert P.features((np.int64(9), np.int32(0))) == P.features((9, 0))  # NumPy ints are ints


def test_interpreter_has_no_tensor_cores():
    f = P.features(None)
    assert not any(f.available.values()) and "interpreter" in f.missing["bf16"]


def test_this_gpu_reads_the_faked_capability(monkeypatch):
    monkeypatch.setattr(gpulab, "ON_GPU", True)
    monkeypatch.setattr(gpulab, "compute_capability", lambda: (7, 5))
    monkeypatch.setattr(gpulab, "mode_info", gpulab.Mode("gpu", "cuda", "Tesla T4", "faked"))
    f = P.this_gpu()
    assert f.cc == (7, 5) and not f.has("bf16") and not f.has("fp8") and f.has("fp16")
    assert "Tesla T4" in P.gate("bf16")


@pytest.mark.parametrize("cc,skipped", [((7, 5), {"tf32", "bf16", "fp8"}), ((8, 6), {"fp8"}), ((9, 0), set())])
def test_lesson_paths_skip_missing_dtypes_gracefully(cc, skipped):
    feats = P.features(cc, "fake")
    errs = P.matmul_errors(64, emulate=True, feats=feats)  # the lesson's code path, with a faked GPU
    assert {d for d in P.MATMUL_DTYPES if errs[d] is None} == skipped
    rates = {d: (1.0 if feats.has(d) else None) for d in P.MATMUL_DTYPES}
    table = P.matmul_table(errs, rates, feats)
    for d in P.MATMUL_DTYPES:
        line = next(t for t in table.splitlines() if t.startswith(d))
        assert ("skipped" in line) == (d in skipped), line
    assert P.fastest_within(1.0, errs, rates) not in skipped


# ---- matmul error per dtype -------------------------------------------------------------------------


def test_round_to_tf32():
    one = torch.tensor([1.0, 1 + 2**-10, 1 + 2**-11, 1 + 2**-12, -(1 + 2**-11), 3.0, float("inf"), 0.0])
    got = P.round_to_tf32(one)
    want = torch.tensor([1.0, 1 + 2**-10, 1 + 2**-10, 1.0, -(1 + 2**-10), 3.0, float("inf"), 0.0])
    assert torch.equal(got, want), got  # ties away from zero, as cvt.rna.tf32.f32
    x = torch.randn(10000)
    rel = ((P.round_to_tf32(x) - x).abs() / x.abs()).max().item()
    assert 2**-13 < rel <= 2**-11, rel
    bits = P.round_to_tf32(x).view(torch.int32)
    assert torch.all(bits & 0x1FFF == 0), "TF32 keeps 10 mantissa bits"


def test_fp8_quantize_per_tensor_scale():
    x = (torch.randn(1000, dtype=torch.float64) * 7).clamp(-100, 100)
    x[17] = -896.0  # the amax: scale = 896 / 448 = 2
    q, s = P.fp8_quantize(x)
    assert q.dtype == torch.float8_e4m3fn and q.float().abs().max().item() == 448.0
    assert s.item() == 2.0
    big = x.abs() > x.abs().max() / 64  # normal range of e4m3 after scaling
    rel = ((q.double()[big] * s.double() - x[big]).abs() / x[big].abs()).max().item()
    assert rel <= 2**-4 * 1.0001, rel


def test_emulated_errors_rank_by_mantissa_bits(seed):
    e = P.matmul_errors(128, seed=seed, emulate=True)
    assert "emulated" in e["how"]
    assert e["fp32"] < 1e-5 < e["tf32"] < 2e-3
    assert e["fp16"] < e["bf16"] < e["fp8"] < 0.1
    assert e["bf16"] > 3 * e["fp16"]  # 7 vs 10 mantissa bits


def test_same_inputs_give_same_errors(seed):
    assert P.matmul_errors(32, seed=seed, emulate=True) == P.matmul_errors(32, seed=seed, emulate=True)


def test_relative_error_is_the_tolerances_one_reference_first():
    assert not hasattr(P, "relative_error")  # one relative_error: gpulab.core.tolerances (ref, approx, kind)
    ref = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    approx = ref + torch.tensor([[0.0, 0.5]])
    assert tolerances.relative_error(ref, ref, "norm") == 0.0
    assert math.isclose(tolerances.relative_error(ref, approx, "norm"), 0.5 / 5)  # ||(0, .5)|| / ||(3, 4)||
    assert math.isclose(tolerances.relative_error(approx, ref, "norm"), 0.5 / math.hypot(3, 4.5))  # order matters


def test_fastest_within():
    errors = dict(fp32=1e-7, tf32=3e-4, bf16=3e-3, fp16=4e-4, fp8=4e-2)
    rates = dict(fp32=50.0, tf32=340.0, bf16=670.0, fp16=650.0, fp8=1200.0)
    assert P.fastest_within(1e-3, errors, rates) == "fp16"
    assert P.fastest_within(1e-2, errors, rates) == "bf16"
    assert P.fastest_within(1e-9, errors, rates) is None


def test_accumulation_errors_shape_and_growth():
    r = lesson03.accumulation_errors([16, 1024], m=16)
    assert r["k"] == [16, 1024] and len(r["fp16"]) == len(r["fp32"]) == 2
    assert r["fp16"][1] > r["fp16"][0] and r["fp16"][1] > 100 * r["fp32"][1]


def test_triton_matmul_errors_interpreter_or_gpu():
    e = lesson03.triton_matmul_errors(48)
    assert e["tf32"] > 20 * e["ieee"] and e["ieee"] < 1e-5  # the interpreter cuts TF32 inputs too (triton_compat)


@pytest.mark.skipif(gpulab.ON_GPU, reason="interpreter behaviour")
def test_gpu_only_functions_refuse_in_the_interpreter():
    for fn in (
        lambda: lesson03.relu_rates(1024),
        lambda: lesson03.matmul_rates(256),
        lambda: lesson03.run(progress=False),
    ):
        with pytest.raises(NoGPUTimingError):
            fn()
    with pytest.raises(RuntimeError, match="needs a GPU"):
        P.matmul_errors(16, emulate=False)


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a GPU")
def test_gpu_matmul_errors_and_rates():
    e = P.matmul_errors(1024)
    assert "cuBLAS" in e["how"] and e["fp32"] < 1e-5 < e["tf32"] < 2e-3 and e["fp16"] < e["bf16"]
    if P.this_gpu().has("fp8"):
        assert e["bf16"] < e["fp8"] < 0.1
    rates = lesson03.matmul_rates(1024)
    assert all(r is None or r > 0 for r in rates.values())


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a GPU")
def test_suite_runs_small_on_gpu():
    data = lesson03.run(
        progress=False,
        relu_n=2**20,
        relu_sweep=(2**12, 2**16),
        matmul_n=512,
        error_n=256,
        triton_n=256,
        acc_ks=(16, 256),
        acc_m=32,
    )
    text = lesson03.report(data)
    assert "ratio" in text and "fp32" in text and len(data["relu_sweep"]) == 6


# ---- the suite's report, from a synthetic record ---------------------------------------------------------


def _fake_record():
    relu = [
        dict(dtype=d, n=2**28, bytes=2**29 * s, gpulab_ms=1.0, torch_ms=r, gpulab_gbps=1.0, torch_gbps=1.0, ratio=r)
        for d, s, r in (("fp32", 4, 1.0), ("fp16", 2, 0.9), ("bf16", 2, 1.02))
    ]
    return dict(
        relu=relu,
        relu_sweep=relu,
        matmul=dict(
            n_rate=8192,
            tflops=dict(fp32=1.0, tf32=2.0, bf16=3.0, fp16=3.0, fp8=None),
            n_error=4096,
            error=dict(fp32=1e-7, tf32=1e-4, bf16=1e-3, fp16=1e-4, fp8=None, how="x"),
        ),
        triton_matmul=dict(
            n=4096, tf32=dict(ms=1.0, tflops=2.0, error=1e-4), ieee=dict(ms=2.0, tflops=1.0, error=1e-7)
        ),
        accumulation=dict(k=[16, 1024], fp16=[1e-4, 1e-3], fp32=[1e-8, 1e-7], m=16, inputs="N(0,1)"),
    )


def test_report_flags_ratios_below_target():
    text = lesson03.report(_fake_record())
    fp16 = next(line for line in text.splitlines() if line.strip().startswith("fp16") and "0.900" in line)
    assert "BELOW TARGET" in fp16
    assert "BELOW TARGET" not in next(line for line in text.splitlines() if "1.020" in line)
    assert "not on this GPU" in text and lesson03.KEY == "lesson03"


# ---- exercises ------------------------------------------------------------------------------------------


def test_exercise_solutions_pass_and_mistakes_get_hints():
    for check in (ex.check_relu_bytes, ex.check_relative_error, ex.check_fastest_within):
        assert check(check.solution).ok, str(check(check.solution))
        assert not check(lambda *a: (_ for _ in ()).throw(NotImplementedError)).attempted
    assert "reads x AND writes y" in str(ex.check_relu_bytes(lambda n, d: n * d.itemsize))
    assert "bytes, not bits" in str(ex.check_relu_bytes(lambda n, d: 16 * n * d.itemsize))
    assert "depend on the dtype" in str(ex.check_relu_bytes(lambda n, d: 8 * n))
    assert "absolute error" in str(ex.check_relative_error(lambda c, r: (c.double() - r).norm().item()))
    assert ".item()" in str(ex.check_relative_error(lambda c, r: (c.double() - r).norm() / r.norm()))
    assert "max-norm" in str(
        ex.check_relative_error(lambda c, r: ((c.double() - r).abs().max() / r.abs().max()).item())
    )
    most_accurate = lambda b, e, r: min(
        (d for d in e if e[d] is not None and e[d] <= b), key=lambda d: e[d], default=None
    )  # noqa: E731
    assert "fastest that fits" in str(ex.check_fastest_within(most_accurate))
    fastest = lambda b, e, r: max((d for d in r if r[d]), key=lambda d: r[d])  # noqa: E731
    assert "over the budget" in str(ex.check_fastest_within(fastest))
