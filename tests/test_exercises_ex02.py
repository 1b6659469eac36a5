"""Lesson 02's kernel exercise (ex02.check_loop_grouped) on real Triton kernels, right and wrong: each usual
mistake gets the message that names it, and none crashes the process (the guards take the stray accesses;
the int32 inputs' guards hold -1, so an unmasked load of an index or a trip count stays in owned memory)."""

import gpulab  # noqa: F401  # first: it sets TRITON_INTERPRET=1 before triton is imported  # isort: skip
import pytest
import triton
import triton.language as tl

from gpulab.exercises import ex02, kernelcheck
from tests.exercise_checks import check_hints_then_solution


@pytest.fixture(autouse=True)
def _short_long_case(monkeypatch):
    """The long case (``kernelcheck.LONG_N``) costs interpreter time; tests/test_kernelcheck_hostile.py runs it."""
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)


@triton.jit
def _loop(
    x_ptr,
    trips_ptr,
    order_ptr,
    y_ptr,
    n,
    BLOCK: tl.constexpr,
    MASK: tl.constexpr,
    USE_ORDER: tl.constexpr,
    SCATTER: tl.constexpr,
    STEP: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if MASK:
        idx = tl.load(order_ptr + offs, mask=mask, other=0) if USE_ORDER else offs
        x = tl.load(x_ptr + idx, mask=mask, other=0.0)
        trips = tl.load(trips_ptr + idx, mask=mask, other=0)
    else:
        idx = tl.load(order_ptr + offs) if USE_ORDER else offs
        x = tl.load(x_ptr + idx)
        trips = tl.load(trips_ptr + idx)
    for i in range(tl.max(trips, axis=0)):
        x = tl.where(i < trips, tl.sin(x) * STEP + 0.1, x)
    dst = idx if SCATTER else offs
    if MASK:
        tl.store(y_ptr + dst, x, mask=mask)
    else:
        tl.store(y_ptr + dst, x)


def launcher(block=128, mask=True, use_order=True, scatter=False, step=0.9, grid=None):
    def loop_grouped(x, trips, order, out):
        n = x.numel()
        g = grid(n, block) if grid else triton.cdiv(n, block)
        _loop[(g,)](x, trips, order, out, n, BLOCK=block, MASK=mask, USE_ORDER=use_order, SCATTER=scatter, STEP=step)

    return loop_grouped


def test_right_kernels_pass():
    assert ex02.check_loop_grouped(launcher()).ok
    rep = ex02.check_loop_grouped(ex02.check_loop_grouped.solution)
    assert rep.ok and rep.cases == 7, str(rep)


def test_unmasked_kernel_is_named_and_does_not_crash():
    rep = ex02.check_loop_grouped(launcher(mask=False))
    assert not rep.ok and "past the end of out" in str(rep) and "mask the store" in str(rep), str(rep)


def test_an_order_that_is_not_read_is_named():
    for wrong in (launcher(use_order=False), launcher(scatter=True)):  # ignores order; stores at the item's index
        rep = ex02.check_loop_grouped(wrong)
        assert not rep.ok and "slot j must hold item order[j]" in str(rep), str(rep)


def test_wrong_values_name_slot_item_expected_and_got():
    rep = ex02.check_loop_grouped(launcher(step=0.8))
    text = str(rep)
    assert not rep.ok and "values differ" in text and "first at slot" in text and "expected" in text, text


def test_grid_too_small_is_named():
    rep = ex02.check_loop_grouped(launcher(grid=lambda n, b: n // b))
    assert not rep.ok and "grid is too" in str(rep), str(rep)


def test_stub_and_python_errors():
    def stub(x, trips, order, out):
        raise NotImplementedError

    assert not ex02.check_loop_grouped(stub).attempted

    def broken(x, trips, order, out):
        raise ValueError("oops")

    rep = ex02.check_loop_grouped(broken)
    assert not rep.ok and "ValueError: oops" in str(rep)


def test_unmasked_index_loads_are_named_before_they_become_wild_indices():
    @triton.jit
    def gather_unmasked(x_ptr, trips_ptr, order_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        idx = tl.load(order_ptr + offs)  # past n: the guard's poison would be an index anywhere
        tl.store(y_ptr + offs, tl.load(x_ptr + idx), mask=offs < n)

    def launch(x, trips, order, out):
        gather_unmasked[(triton.cdiv(x.numel(), 128),)](x, trips, order, out, x.numel(), BLOCK=128)

    text = str(ex02.check_loop_grouped(launch))
    assert "loaded past the end of order" in text and "mask the load" in text, text


def test_hints_then_solution(capsys):
    check_hints_then_solution(ex02.check_loop_grouped, capsys)


def test_switch_efficiency_by_hand_and_its_mistakes():
    check = ex02.check_switch_efficiency
    sol = check.solution
    # lanes 0-3 case 0 (1 instr), the rest case 1 (1 instr): 2 steps, 32 useful lane-steps of 64
    assert sol([0] * 4 + [1] * 28, [1, 1]) == 0.5
    # cases 0 and 2 taken (4 and 2 instrs), case 1 (9) by no lane: 6 steps, 16 x 4 + 16 x 2 = 96 useful of 192
    assert sol([lane % 2 * 2 for lane in range(32)], [4, 9, 2]) == 0.5
    assert check(sol).ok

    def pays_every_case(case, costs):
        return sum(costs[c] for c in case) / (sum(costs) * 32)

    def overlaps_cases(case, costs):
        return sum(costs[c] for c in case) / (max(costs[c] for c in set(case)) * 32)

    for wrong, said in (
        (pays_every_case, "no lane takes is skipped"),
        (overlaps_cases, "one after another"),
        (lambda case, costs: 100 * sol(case, costs), "not a percentage"),
    ):
        rep = check(wrong)
        assert not rep.ok and said in str(rep), str(rep)
    assert not check(lambda case, costs: (_ for _ in ()).throw(NotImplementedError)).attempted


# ---- the transfer exercise: the fewest and the most steps any order pays ---------------------------------------


def test_order_steps_matches_every_order_of_small_cases():
    import itertools

    import numpy as np

    from gpulab.models import simt

    rng = np.random.default_rng(0)
    for n, group in ((5, 2), (7, 3), (6, 4), (1, 8)):
        trips = rng.integers(0, 20, n)
        steps = [simt.loop(trips[list(p)], group).steps for p in itertools.permutations(range(n))]
        assert ex02.check_order_steps.solution(trips, group) == (min(steps), max(steps)), (trips, group)


def test_order_steps_mistakes_are_named():
    import numpy as np

    from gpulab.models import simt

    check, sol = ex02.check_order_steps, ex02.check_order_steps.solution
    assert check(sol).ok
    for wrong, said in (
        (lambda t, g: (simt.loop(np.sort(t), g).steps, sol(t, g)[1]), "last, partial group"),
        (lambda t, g: (sol(t, g)[0], simt.loop(np.sort(t), g).steps), "an order can do worse"),
        (lambda t, g: (sol(t, g)[0], int(t.max()) * -(-t.size // g)), "only one element"),
        (lambda t, g: list(map(float, sol(t, g))), "pair of ints"),
    ):
        rep = check(wrong)
        assert not rep.ok and said in str(rep), str(rep)
