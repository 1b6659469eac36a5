"""How every kernel exercise draws its cases (``gpulab.exercises.cases``): shapes from the lesson's ranges and past
every constant a learner might hard-code, all from one seed that the report prints and that draws the same cases
again. Checked for the whole class at once: each kernel checker's cases are captured (``check_kernel`` replaced by a
recorder, nothing launched), so this file costs no interpreter time."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import importlib
import inspect

import pytest
import torch

from gpulab.exercises import Report, cases, kernelcheck
from gpulab.kernels.flash_attention import HEAD_DIMS

pytestmark = pytest.mark.usefixtures("seed")

MODULES = ["ex00", "ex01", "ex02", "ex03", "ex04", "ex05", "ex06", "ex07", "ex08", "ex08b", "ex09"]


def _kernel_checkers():
    """Every checker of a kernel exercise (its solution is a kernel module), and the torch FlashAttention backward,
    whose cases have shapes too."""
    found = []
    for name in MODULES:
        mod = importlib.import_module(f"gpulab.exercises.{name}")
        for attr, obj in vars(mod).items():
            if attr.startswith("check_") and callable(obj) and obj.__module__ == mod.__name__:
                if getattr(obj, "solution_module", None) is not None or obj.__name__ == "check_flash_backward":
                    found.append(pytest.param(mod, obj, id=f"{name}.{attr}"))
    return found


CHECKERS = _kernel_checkers()


def _capture(monkeypatch, mod) -> list:
    """Replace the module's ``check_kernel``, ``run_cases`` and ``run_cases_once`` by recorders of the cases they
    are given."""
    seen: list = []

    def check_kernel(name, fn, cases, **kw):
        seen.extend(cases)
        return Report(name, cases=len(cases), failed=0)

    def run_cases(name, fn, cases, compare, **kw):
        seen.extend(cases)
        return Report(name, cases=len(cases))

    monkeypatch.setattr(mod, "check_kernel", check_kernel, raising=False)
    monkeypatch.setattr(mod, "run_cases", run_cases, raising=False)
    monkeypatch.setattr(mod, "run_cases_once", run_cases, raising=False)
    return seen


def _tensors(case: dict) -> list[torch.Tensor]:
    return [v for v in case.values() if isinstance(v, torch.Tensor)]


def _launcher(*args):
    raise AssertionError("nothing is launched here")


def test_the_class_is_every_kernel_exercise():
    names = {p.id for p in CHECKERS}
    assert len(names) >= 18 and {"ex07.check_tiled_matmul", "ex08.check_flash_forward", "ex09.check_bias_gelu"} <= names


@pytest.mark.parametrize("mod, checker", CHECKERS)
def test_a_seed_draws_the_same_cases_and_the_report_names_it(monkeypatch, mod, checker, seed):
    assert "seed" in inspect.signature(checker).parameters, f"{checker.__name__} takes no seed"
    runs = []
    for s in (seed, seed, seed + 1):
        seen = _capture(monkeypatch, mod)
        rep = checker(_launcher, seed=s)
        assert rep.seed == s and f"(seed {s})" in str(rep), str(rep)
        runs.append(seen)
    first, again, other = runs
    assert len(first) == len(again) and len(first) >= 4
    for a, b in zip(first, again):
        assert a.keys() == b.keys()
        for x, y in zip(_tensors(a), _tensors(b)):
            assert x.shape == y.shape and torch.equal(x, y)  # shapes and inputs both come from the seed
    assert any(
        [x.shape for x in _tensors(a)] != [y.shape for y in _tensors(b)]
        or not torch.equal(_tensors(a)[0], _tensors(b)[0])
        for a, b in zip(first, other)
    )  # another seed, other cases


def _longest(seen) -> int:
    return max(t.numel() for c in seen for t in _tensors(c))


#: checker -> what "past every constant" means for its cases, as a test of the captured cases.
PAST = {
    "check_transpose": lambda seen: {i for c in seen for i in (0, 1) if c["a"].shape[i] > cases.TILE_LIMIT} == {0, 1},
    "check_tiled_matmul": lambda seen: _matmul_dims_past(seen) == {"M", "N", "K"},
    "check_persistent_matmul": lambda seen: _matmul_dims_past(seen) == {"M", "N", "K"},
    "check_flash_forward": lambda seen: {c["q"].shape[-1] for c in seen} == set(HEAD_DIMS),
    "check_flash_backward": lambda seen: {c["q"].shape[-1] for c in seen} == set(HEAD_DIMS),
    "check_flash_backward_kernel": lambda seen: {c["q"].shape[-1] for c in seen} == set(HEAD_DIMS),
    "check_bias_gelu": lambda seen: (
        max(c["x"].shape[1] for c in seen) > cases.ROW_LIMIT and _longest(seen) > kernelcheck.LONG_N // 2
    ),
}


def _matmul_dims_past(seen) -> set:
    dims = set()
    for c in seen:
        (M, K), N = c["a"].shape, c["b"].shape[1]
        dims |= {d for d, v in (("M", M), ("N", N), ("K", K)) if v > cases.TILE_LIMIT}
    return dims


@pytest.mark.parametrize("mod, checker", CHECKERS)
def test_a_case_lies_past_every_constant_a_learner_might_fix(monkeypatch, mod, checker, seed):
    """1-D exercises: a length above 2^17 (``kernelcheck.LONG_N``: past one program of any block); 2-D ones: each
    dimension past ``cases.TILE_LIMIT`` in some case; rows past ``cases.ROW_LIMIT``; attention: every head
    dimension of the lesson."""
    seen = _capture(monkeypatch, mod)
    checker(_launcher, seed=seed)
    past = PAST.get(checker.__name__, lambda seen: _longest(seen) > 2**17)
    assert past(seen), [[tuple(t.shape) for t in _tensors(c)] for c in seen]


def test_draw_past_spread_and_seeds(seed):
    d = cases.Draw(seed)
    for limit in (16, 1024, 2**14):
        for _ in range(50):
            v = d.past(limit)
            assert limit < v <= limit + limit // 8 + 1 and v % 2 == 1
    for k in (4, 6, 9):
        got = d.spread(HEAD_DIMS, k)
        assert len(got) == k and set(got) == set(HEAD_DIMS)
    assert cases.Draw(seed).randn(5).tolist() == cases.Draw(seed).randn(5).tolist()
    assert cases.Draw(seed).size(2, 5000) == cases.Draw(seed).size(2, 5000)
    assert 0 <= cases.Draw().seed < 2**31
    with pytest.raises(ValueError, match="seed must be >= 0"):
        cases.Draw(-1)
    with pytest.raises(TypeError, match="seed must be an integer"):
        cases.Draw(1.5)


def test_the_report_prints_the_seed_on_a_pass_and_on_a_failure():
    assert str(Report("add", cases=3, seed=42)) == "[pass] add: all 3 cases pass (seed 42)"
    failed = str(Report("add", cases=3, failures=["x"], seed=42))
    assert failed.startswith("[FAIL] add: 1 of 3 cases fail (seed 42)") and "seed=42" in failed
    assert "seed" not in str(Report("ridge", cases=3))  # fixed cases: no seed to print
