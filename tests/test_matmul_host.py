"""gpulab.kernels.matmul's host side: the launch plans kept per call shape (``matmul.PLANS``, rules in
``kernels._call_cache``). Results with the cache equal those without it, bit for bit, on awkward sizes (seeded
random inputs, fresh data on every call, outputs and scratch poisoned with NaN, float64 references); the second
call of a shape reuses its plan; strides, dtypes, alignment, stream, config, plan and autotune mode each get their
own plan; the bounds hold; nothing is kept or reused under CUDA graph capture; no result is a cached buffer."""

import gpulab  # first: it sets TRITON_INTERPRET=1 before triton is imported  # isort: skip
import pytest
import torch

from gpulab.core import plan, settings
from gpulab.core.tolerances import matmul_mismatch
from gpulab.kernels import _autotune, _call_cache
from gpulab.kernels import matmul as mm

pytestmark = pytest.mark.usefixtures("seed")

SMALL = mm.MatmulConfig(16, 32, 16, GROUP_M=2, num_warps=4, num_stages=2)
# (M, K, N): every TMA case of the launch plan. 16-bit rows of 33, 7 or 9 elements are not 16-byte aligned
# (A or B copied into scratch), N = 7, 9, 40 not a multiple of 16 (the output through scratch), 48 and 64 aligned.
AWKWARD = [(37, 33, 7), (20, 48, 9), (17, 33, 48), (40, 64, 40), (5, 16, 64)]


def _rand(*shape, dtype=torch.float16):
    return torch.randn(*shape, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)


def _close(c, a, b):
    assert c.shape == (a.shape[0], b.shape[1]) and c.dtype == a.dtype
    msg = matmul_mismatch(c, a, b, mm.matmul_ref(a, b).cpu(), False)
    assert msg is None, msg


@pytest.fixture(autouse=True)
def plans(monkeypatch):
    """A fresh, empty plan cache for each test (the module's own, swapped)."""
    cache = _call_cache.PlanCache("matmul")
    monkeypatch.setattr(mm, "PLANS", cache)
    return cache


def _paths(dtype):
    return ["pointer"] + (["tma"] if dtype in mm.TMA_DTYPES and mm.tma_available() else [])


def _scratch(cache) -> list:
    return [t for p in cache.plans() for t in (p.a_pad, p.b_pad, p.c_pad) if t is not None]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("M,K,N", AWKWARD)
def test_cached_results_equal_uncached(M, K, N, dtype, plans, poisoned):
    """Three calls of one shape with new data each (a miss, then hits): each equals the uncached launch of the
    same data bit for bit and float64 within the bound; a plan reused with stale scratch or a stale
    descriptor would give the previous call's product."""
    for path in _paths(dtype):
        for i in range(3):
            a, b = _rand(M, K, dtype=dtype), _rand(K, N, dtype=dtype)
            with plans.disabled():
                fresh = mm.matmul(a, b, path=path, config=SMALL, input_precision="ieee")
            cached = mm.matmul(a, b, path=path, config=SMALL, input_precision="ieee")
            _close(cached, a, b)
            assert torch.equal(cached, fresh), (path, i)
        assert plans.hits >= 2


@pytest.mark.parametrize("path", ["pointer", "tma"])
def test_second_call_of_a_shape_reuses_its_plan(path, plans):
    if path == "tma" and not mm.tma_available():
        pytest.skip("no TMA path here")
    a, b = _rand(37, 33), _rand(33, 7)
    mm.matmul(a, b, path=path)
    assert (len(plans), plans.hits, plans.misses) == (1, 0, 1)
    first = plans.plans()[0]
    a2, b2 = _rand(37, 33), _rand(33, 7)  # new tensors, the same shape
    _close(mm.matmul(a2, b2, path=path), a2, b2)
    assert (len(plans), plans.hits, plans.misses) == (1, 1, 1) and plans.plans()[0] is first
    if path == "tma":  # unaligned A and B and output: all three through scratch, descriptors built once
        assert first.a_pad is not None and first.b_pad is not None and first.c_pad is not None
        assert first.a_desc is not None and first.b_desc is not None


def _misaligned(M, K, dtype):
    """(M, K) with the strides of a contiguous tensor, its data 2 bytes past a 16-byte boundary."""
    buf = _rand(M * K + 8, dtype=dtype)
    return buf[1 : 1 + M * K].view(M, K)


def test_strides_dtypes_alignment_and_context_get_their_own_plans(plans, monkeypatch):
    """Each variant changes one thing of the key and must miss (a new plan), and compute right: a plan shared
    across alignments would hand TMA a misaligned base, across strides read a transposed A as row-major."""
    M, K, N = 24, 48, 40  # A's rows 96 bytes: aligned; read by TMA as they are
    a, b = _rand(M, K), _rand(K, N)
    variants = [
        ("base", lambda: (a, b), {}),
        ("transposed A", lambda: (_rand(K, M).t(), b), {}),
        ("bf16", lambda: (a.to(torch.bfloat16), b.to(torch.bfloat16)), {}),
        ("misaligned A", lambda: (_misaligned(M, K, torch.float16), b), {}),
        ("misaligned B", lambda: (a, _misaligned(K, N, torch.float16)), {}),
        ("config", lambda: (a, b), {"config": "heuristic"}),
        ("pointer", lambda: (a, b), {"path": "pointer"}),
    ]
    for name, make, kw in variants:
        x, y = make()
        kw = {"path": "tma", "config": SMALL} | kw
        before = plans.misses
        _close(mm.matmul(x, y, **kw), x, y)
        assert plans.misses == before + 1, f"{name} shared a plan"
    n = len(plans)
    assert n == len(variants)
    for _, make, kw in variants:  # each again: a hit on its own plan
        x, y = make()
        _close(mm.matmul(x, y, **({"path": "tma", "config": SMALL} | kw)), x, y)
    assert len(plans) == n and plans.hits == n
    other_plan = plan.for_gpu(plan.current().gpu)  # the same GPU's choices, another plan object
    other_mode = {"full": "first", "first": "full"}[settings.SETTINGS.autotune]  # whichever this run is not in
    for name, target, attr, value in [
        ("stream", _call_cache, "launch_context", lambda device: (12345, 0)),
        ("autotune mode", settings, "SETTINGS", settings.read({"GPULAB_AUTOTUNE": other_mode})),
        ("GPU plan", plan, "current", lambda: other_plan),
    ]:
        monkeypatch.setattr(target, attr, value)
        before = plans.misses
        _close(mm.matmul(a, b, path="tma", config=SMALL), a, b)
        assert plans.misses == before + 1, f"{name} shared a plan"


def test_fp32_precisions_get_their_own_plans(plans):
    a, b = _rand(17, 33, dtype=torch.float32), _rand(33, 9, dtype=torch.float32)
    mm.matmul(a, b, input_precision="ieee")
    mm.matmul(a, b, input_precision="tf32")
    assert plans.misses == 2 and {p.input_precision for p in plans.plans()} == {"ieee", "tf32"}


class _Plan:
    def __init__(self, scratch_bytes):
        self.scratch_bytes = scratch_bytes


def test_plan_cache_drops_the_least_recently_used_within_both_bounds():
    cache = _call_cache.PlanCache("t", max_entries=3, max_scratch_bytes=100)
    for k in "abc":
        cache.get(k, lambda: _Plan(10))
    cache.get("a", lambda: _Plan(10))  # a is now the most recently used: b goes first
    cache.get("d", lambda: _Plan(10))
    assert [p.scratch_bytes for p in cache.plans()] == [10] * 3 and len(cache) == 3
    assert (cache.hits, cache.misses) == (1, 4)
    cache.get("b", lambda: _Plan(10))  # dropped: built again
    assert cache.misses == 5
    big = cache.get("e", lambda: _Plan(85))  # fits only with all but one of the others gone
    assert cache.scratch_bytes <= 100 and len(cache) == 2 and cache.plans()[-1] is big
    huge = _Plan(101)  # larger than the bound alone: used, not kept
    assert cache.get("f", lambda: huge) is huge and "f" not in cache._plans and cache.scratch_bytes <= 100
    stale = cache.get("e", lambda: _Plan(1), valid=lambda p: p.scratch_bytes != 85)
    assert stale.scratch_bytes == 1 and cache.scratch_bytes <= 100  # an invalid plan is replaced


def test_matmul_scratch_stays_within_the_bound(plans, poisoned):
    """Real TMA plans: with a bound of two plans' scratch, five shapes keep at most that many bytes, and a plan
    larger than the bound is used, not kept."""
    if not mm.tma_available():
        pytest.skip("no TMA path here")
    a, b = _rand(37, 33), _rand(33, 7)
    mm.matmul(a, b, path="tma", config=SMALL)
    one = plans.scratch_bytes
    assert one > 0
    plans.max_scratch_bytes = 2 * one
    plans.max_entries = 32
    for M in (38, 39, 40, 41):
        x = _rand(M, 33)
        _close(mm.matmul(x, b, path="tma", config=SMALL), x, b)
        assert plans.scratch_bytes <= 2 * one
    assert len(plans) <= 2
    plans.max_scratch_bytes = one // 2
    plans.clear()
    _close(mm.matmul(a, b, path="tma", config=SMALL), a, b)
    assert len(plans) == 0 and plans.misses == 1


def test_nothing_is_kept_or_reused_under_graph_capture(plans, monkeypatch, poisoned):
    """Capture simulated (``_call_cache.capturing`` True): no plan is kept, and a plan kept before the capture is
    not used: its scratch, poisoned after the eager call, is untouched by the captured call."""
    if not mm.tma_available():
        pytest.skip("no TMA path here")
    a, b = _rand(37, 33), _rand(33, 7)
    mm.matmul(a, b, path="tma", config=SMALL)
    kept = plans.plans()[0]
    for t in (kept.a_pad, kept.b_pad, kept.c_pad):
        t.fill_(float("nan"))
    monkeypatch.setattr(_call_cache, "capturing", lambda: True)
    for _ in range(2):
        x, y = _rand(37, 33), _rand(33, 7)
        _close(mm.matmul(x, y, path="tma", config=SMALL), x, y)
        x2 = _rand(11, 33)
        _close(mm.matmul(x2, y, path="tma", config=SMALL), x2, y)
    assert (len(plans), plans.hits, plans.misses) == (1, 0, 1)
    for t in (kept.a_pad, kept.b_pad, kept.c_pad):
        assert t.isnan().all()


def test_a_result_is_never_a_cached_buffer(plans):
    """A hit's result is new memory: not any plan's scratch, not the previous result, which keeps its values."""
    for path in _paths(torch.float16):
        a, b = _rand(40, 33), _rand(33, 9)
        c1 = mm.matmul(a, b, path=path, config=SMALL)
        kept = c1.clone()
        a2, b2 = _rand(40, 33), _rand(33, 9)
        c2 = mm.matmul(a2, b2, path=path, config=SMALL)
        assert plans.hits >= 1
        _close(c2, a2, b2)
        assert torch.equal(c1, kept), "the first result changed: it shared memory with the second call"
        scratch = {t.untyped_storage().data_ptr() for t in _scratch(plans)}
        for c in (c1, c2):
            assert c.untyped_storage().data_ptr() not in scratch
        assert c1.untyped_storage().data_ptr() != c2.untyped_storage().data_ptr()


def test_an_autotuned_plan_holds_while_the_autotuner_keeps_its_choice(plans, monkeypatch):
    """On a GPU (pretended: the interpreter runs the kernel) ``config=None`` asks the autotuner; a kept plan is
    reused while ``_autotune`` still holds that choice and made again once it forgets (``_autotune.clear()``)."""
    monkeypatch.setattr(_autotune, "_CACHE", {})
    monkeypatch.setattr(gpulab, "ON_GPU", True)
    monkeypatch.setattr(_call_cache, "capturing", lambda: False)
    asked = []

    def tuned_config(a, b, path, input_precision="tf32"):
        asked.append(path)
        key = mm._tune_key(a, b, path, input_precision)
        _autotune._CACHE.setdefault(key, SMALL)
        return _autotune._CACHE[key]

    monkeypatch.setattr(mm, "tuned_config", tuned_config)
    a, b = _rand(20, 33), _rand(33, 9)
    for _ in range(2):
        _close(mm.matmul(a, b, path="pointer"), a, b)
    assert len(asked) == 1 and plans.hits == 1
    _autotune.clear()
    _close(mm.matmul(a, b, path="pointer"), a, b)
    assert len(asked) == 2 and plans.misses == 2 and len(plans) == 1


def test_errors_are_raised_before_any_plan(plans):
    """Bad arguments raise the launcher's own messages (tests/test_matmul.py checks them) and keep nothing."""
    a, b = _rand(5, 16), _rand(16, 7)
    with pytest.raises(ValueError, match="config must be None, 'heuristic' or a MatmulConfig"):
        mm.matmul(a, b, config=[16])
    with pytest.raises(ValueError, match="config: BLOCK_M must be a power of two"):
        mm.matmul(a, b, config=mm.MatmulConfig(24, 32, 16))
    with pytest.raises(ValueError, match="must agree on K"):
        mm.matmul(a, _rand(15, 7))
    assert len(plans) == 0 and plans.misses == 0
