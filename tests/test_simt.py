"""The SIMT lane-mask model (gpulab.models.simt): the seed lecture's `thread_id < 4` example exactly, uniform
branches, random masks against a brute-force count, the loop model and grouping by cost."""

import itertools
import random

import numpy as np
import pytest

from gpulab import figures
from gpulab.models import simt

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report


def test_seed_example_thread_id_below_4():
    # Stanford CS336 Lecture 5: lanes 0-3 run A while the others idle, then the others run B; the warp pays both.
    t = simt.branch(lambda tid: tid < 4, cost_a=1, cost_b=1)
    assert [s.path for s in t.steps] == ["A", "B"]
    assert t.steps[0].mask == tuple(lane < 4 for lane in range(32))
    assert t.steps[1].mask == tuple(lane >= 4 for lane in range(32))
    assert t.lanes_a == (0, 1, 2, 3) and t.lanes_b == tuple(range(4, 32))
    assert t.divergent and t.steps_paid == 2 and t.useful_lane_steps == 32 and t.efficiency == 0.5
    assert t.grid() == [[1] * 4 + [0] * 28, [0] * 4 + [2] * 28]


def test_seed_example_with_path_costs():
    t = simt.branch(lambda tid: tid < 4, cost_a=5, cost_b=3)
    assert t.steps_paid == 8  # both paths, in sequence
    assert t.useful_lane_steps == 4 * 5 + 28 * 3
    assert t.efficiency == (4 * 5 + 28 * 3) / (8 * 32)
    assert [s.path for s in t.steps] == ["A"] * 5 + ["B"] * 3


@pytest.mark.parametrize("value", [True, False])
def test_uniform_branch_pays_only_its_path(value):
    t = simt.branch([value] * 32, cost_a=5, cost_b=3)
    assert not t.divergent
    assert t.steps_paid == (5 if value else 3)
    assert t.efficiency == 1.0
    assert {s.path for s in t.steps} == {"A" if value else "B"}


def _brute_force(cond, cost_a, cost_b):
    """Simulate instruction by instruction: each path's instructions issue once if any lane needs them."""
    steps = useful = 0
    for path_lanes, cost in ((cond, cost_a), ([not c for c in cond], cost_b)):
        for _ in range(cost):
            if any(path_lanes):
                steps += 1
                useful += sum(path_lanes)
    return steps, useful


def test_random_masks_against_brute_force(seed):
    rng = random.Random(seed)
    for _ in range(300):
        p = rng.random()
        cond = [rng.random() < p for _ in range(32)]
        ca, cb = rng.randrange(0, 7), rng.randrange(0, 7)
        t = simt.branch(cond, ca, cb)
        steps, useful = _brute_force(cond, ca, cb)
        assert (t.steps_paid, t.useful_lane_steps) == (steps, useful), (cond, ca, cb)
        assert t.efficiency == (useful / (32 * steps) if steps else 1.0)
        assert sum(sum(1 for v in row if v) for row in t.grid()) == useful


def test_condition_forms_and_errors():
    assert simt.lane_condition(np.arange(32) < 4) == simt.lane_condition(lambda i: i < 4)
    assert simt.lane_condition([1] * 32) == (True,) * 32
    with pytest.raises(ValueError, match="condition must have one value per lane"):
        simt.branch([True] * 31)
    with pytest.raises(TypeError, match="condition"):
        simt.branch(7)
    with pytest.raises(TypeError, match="lane 3"):
        simt.branch([True, False, True, 2.5] + [True] * 28)
    with pytest.raises(ValueError, match="cost_a"):
        simt.branch([True] * 32, cost_a=-1)
    with pytest.raises(TypeError, match="cost_b"):
        simt.branch([True] * 32, cost_b=1.5)


def test_loop_model_counts():
    trips = [3] * 31 + [10] + [2] * 32 + [7]  # three warps, the last partial
    c = simt.loop(trips)
    assert c.steps_per_group.tolist() == [10, 2, 7]
    assert c.steps == 19 and c.useful == 3 * 31 + 10 + 64 + 7
    assert c.efficiency == c.useful / (19 * 32)
    assert simt.loop([5] * 64).efficiency == 1.0


def test_loop_random_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n, g = int(rng.integers(1, 300)), int(rng.choice([1, 4, 32, 128]))
        trips = rng.integers(0, 20, n)
        groups = [trips[i : i + g] for i in range(0, n, g)]
        c = simt.loop(trips, g)
        assert c.steps == sum(int(x.max()) for x in groups)
        assert c.useful == int(trips.sum())


def test_group_by_cost_is_optimal_on_small_cases(seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        n, g = int(rng.integers(1, 8)), int(rng.integers(1, 4))
        trips = rng.integers(0, 9, n)
        best = min(simt.loop(trips[list(p)], g).steps for p in itertools.permutations(range(n)))
        order = simt.group_by_cost(trips)
        assert sorted(order.tolist()) == list(range(n))
        assert simt.loop(trips[order], g).steps == best


def test_sorting_helps_interleaved_expensive_work():
    trips = np.array(([64] + [4] * 31) * 32)  # one expensive element in every warp
    assert simt.loop(trips).steps == 32 * 64
    assert simt.loop(trips[simt.group_by_cost(trips)]).steps == 1 * 64 + 31 * 4


def test_loop_errors():
    with pytest.raises(ValueError, match="trips must be >= 0"):
        simt.loop([1, -1])
    with pytest.raises(TypeError, match="trips must hold ints"):
        simt.loop([1.5, 2.0])
    with pytest.raises(ValueError, match="trips must be 1-D"):
        simt.loop(np.zeros((2, 2), dtype=int))
    with pytest.raises(ValueError, match="group"):
        simt.loop([1, 2], group=0)
    for big in ([2**63], [2**70], np.array([2**63], dtype=np.uint64)):  # past int64: refused, not wrapped
        with pytest.raises(ValueError, match="trips must be <= 2\\*\\*63 - 1"):
            simt.loop(big)


def test_loop_sums_huge_trip_counts_exactly():
    c = simt.loop([2**62] * 4, group=1)  # 2**64 steps: past int64, where a NumPy sum wraps to 0
    assert c.steps == 2**64 and c.useful == 2**64 and c.efficiency == 1.0
    c = simt.loop(np.array([2**63 - 1, 0, 2**63 - 1], dtype=np.int64), group=2)
    assert c.steps == 2 * (2**63 - 1) and c.useful == 2 * (2**63 - 1) and c.efficiency == 0.5


def test_numpy_ints_are_ints():
    assert simt.branch(lambda t: t < 4, np.int64(3), np.int32(2)).steps_paid == 5
    assert simt.loop(np.array([3, 1, 2], dtype=np.uint8), group=np.int64(2)).steps == 3 + 2
    assert simt.lane_condition([True] * 8, warp_size=np.int64(8)) == (True,) * 8


def test_boundary_explorer_slider_changes_figure():
    e = figures.lesson02.BoundaryExplorer(boundary=4)
    assert "gpulab-widget" in e.widget._dom_classes and "gpulab-slider" in e.boundary._dom_classes
    z0, title0 = list(e.live.fig.data[0].z), e.live.fig.layout.title.text
    assert e.trace.lanes_a == (0, 1, 2, 3)
    e.boundary.value = 20
    assert list(e.live.fig.data[0].z) != z0 and e.live.fig.layout.title.text != title0
    e.boundary.value = 32
    assert not e.trace.divergent and e.trace.steps_paid == e.cost_a


# ---- lesson 02's exercise checkers (gpulab.exercises.ex02)

from gpulab.exercises import ex02  # noqa: E402


def test_exercise_solutions_pass_and_stubs_are_not_attempted():
    for check in (ex02.check_warp_efficiency, ex02.check_group_by_cost):
        rep = check(check.solution)
        assert rep.ok, str(rep)

    def stub(*_):
        raise NotImplementedError

    assert not ex02.check_warp_efficiency(stub).attempted
    assert not ex02.check_group_by_cost(stub).attempted


def test_warp_efficiency_hints():
    def both_always(cond, ca, cb):
        return (sum(cond) * ca + (32 - sum(cond)) * cb) / ((ca + cb) * 32)

    def at_once(cond, ca, cb):
        return (sum(cond) * ca + (32 - sum(cond)) * cb) / (max(ca, cb) * 32)

    def percent(cond, ca, cb):
        return 100 * simt.branch(cond, ca, cb).efficiency

    for fn, hint in [
        (both_always, "a path that no lane takes is skipped"),
        (at_once, "add their steps"),
        (percent, "not a percentage"),
        (lambda c, a, b: sum(c) / 32, "counts only one path"),
    ]:
        rep = ex02.check_warp_efficiency(fn)
        assert not rep.ok and hint in str(rep), str(rep)


def test_group_by_cost_hints():
    rep = ex02.check_group_by_cost(lambda t, g: np.argsort(t, kind="stable"))
    assert not rep.ok and "last, partial group" in str(rep), str(rep)
    rep = ex02.check_group_by_cost(lambda t, g: np.sort(t)[::-1])
    assert not rep.ok and "not the sorted trip counts" in str(rep), str(rep)
    rep = ex02.check_group_by_cost(lambda t, g: np.arange(len(t)))
    assert not rep.ok and "similar cost" in str(rep), str(rep)
