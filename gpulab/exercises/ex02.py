"""Exercises of lesson 02 (warp divergence): a warp's efficiency for a branch, and grouping work by cost."""
from __future__ import annotations

import random

import numpy as np

from .. import simt
from . import Report, _short, close, is_int, run_cases

AWKWARD = [1, 17, 1000, 1793]


def _warp_efficiency_solution(condition, cost_a: int, cost_b: int) -> float:
    """Useful lane-steps / (steps paid x 32) for ``if condition[lane]: A (cost_a steps) else: B (cost_b)``."""
    n_a = sum(bool(c) for c in condition)
    n_b = len(condition) - n_a
    steps = (cost_a if n_a else 0) + (cost_b if n_b else 0)  # a path no lane takes is skipped
    return (n_a * cost_a + n_b * cost_b) / (steps * len(condition))


def check_warp_efficiency(fn) -> Report:
    """fn(condition, cost_a, cost_b) -> efficiency in [0, 1].

    condition: a list of 32 bools (lane i takes path A if condition[i]); cost_a, cost_b: issue steps of each
    path (ints >= 1). Efficiency = useful lane-steps / (issue steps paid x 32), as in ``gpulab.simt.branch``.
    Cases: the seed's ``thread_id < 4``, uniform branches both ways, fresh random masks.
    """
    rng = random.Random()
    cases = [dict(condition=[lane < 4 for lane in range(32)], cost_a=1, cost_b=1),
             dict(condition=[True] * 32, cost_a=3, cost_b=5), dict(condition=[False] * 32, cost_a=3, cost_b=5),
             dict(condition=[lane % 2 == 0 for lane in range(32)], cost_a=4, cost_b=2)]
    for _ in range(30):
        p = rng.choice([0.03, 0.5, 0.97, rng.random()])
        cases.append(dict(condition=[rng.random() < p for _ in range(32)], cost_a=rng.randrange(1, 9),
                          cost_b=rng.randrange(1, 9)))

    def compare(case, got):
        trace = simt.branch(case["condition"], case["cost_a"], case["cost_b"])
        exp = trace.efficiency
        if close(got, exp, 1e-6):
            return None
        if isinstance(got, (str, bytes, bool)) or not isinstance(got, (int, float, np.floating, np.integer)):
            return f"expected a number in [0, 1], got {_short(got)}"
        ca, cb, n_a = case["cost_a"], case["cost_b"], len(trace.lanes_a)
        useful = trace.useful_lane_steps
        head = f"expected {exp:.6g}, got {float(got):.6g}"
        if close(got, 100 * exp, 1e-6):
            return head + ": return a fraction in [0, 1], not a percentage"
        if close(got, useful / ((ca + cb) * 32), 1e-6):
            return head + ": a path that no lane takes is skipped; a uniform branch pays only its own path"
        if close(got, useful / (max(ca, cb) * 32), 1e-6):
            return head + ": the two paths run one after the other, not at once: add their steps"
        if close(got, n_a / 32, 1e-6) or close(got, (32 - n_a) / 32, 1e-6):
            return head + (": that counts only one path; count the useful lane-steps of both (lanes x steps "
                           "of A plus lanes x steps of B)")
        if close(got, useful / trace.steps_paid, 1e-6) or close(got, useful / 32, 1e-6):
            return head + ": divide by the lane-steps paid, steps x 32 lanes (every lane occupies every step)"
        return head
    return run_cases("warp_efficiency", fn, cases, compare)


check_warp_efficiency.solution = _warp_efficiency_solution


def _group_by_cost_solution(trips, group: int):
    """Indices of ``trips`` in descending order of cost: the expensive elements share groups."""
    return np.argsort(-np.asarray(trips), kind="stable")


def check_group_by_cost(fn) -> Report:
    """fn(trips, group) -> order, a permutation of range(n) (list or 1-D int array).

    trips: (n,) NumPy int array, the loop trip count of each element; group: lanes that step together
    (32 for a warp, a Triton block size). ``simt.loop(trips[order], group)`` must pay the fewest steps any
    order can (group k's max trip count is what it pays). Awkward n (1, 17, 1000, 1793 and random), fresh
    random costs, a few expensive elements interleaved among cheap ones.
    """
    rng = np.random.default_rng()
    cases = []
    for n in AWKWARD + [int(rng.integers(2, 3000)) for _ in range(4)]:
        group = int(rng.choice([8, 32, 128]))
        if rng.random() < 0.5:
            trips = np.where(rng.random(n) < 0.05, 64, 4)
        else:
            trips = rng.integers(0, 50, n)
        cases.append(dict(trips=trips, group=group, _trips=trips.copy()))

    def compare(case, got):
        trips, group = case["_trips"], case["group"]
        n = trips.size
        try:
            order = np.asarray(got)
        except Exception:
            return f"expected a permutation of range({n}), got {_short(got)}"
        if order.ndim != 1 or order.size != n or not all(is_int(v) for v in order.tolist()):
            return f"expected {n} int indices (a permutation of range({n})), got {_short(got)}"
        if sorted(order.tolist()) != list(range(n)):
            if np.array_equal(np.sort(order), np.sort(trips)):
                return "return the order (indices into trips), not the sorted trip counts"
            return f"expected each index 0..{n - 1} exactly once"
        best = simt.loop(trips[_group_by_cost_solution(trips, group)], group).steps
        steps = simt.loop(trips[order], group).steps
        if steps == best:
            return None
        head = f"n={n}, group={group}: your order pays {steps} steps, the best pays {best}"
        if steps == simt.loop(np.sort(trips), group).steps:
            return head + (": ascending order leaves the most expensive elements in the last, partial group; "
                           "put the most expensive first")
        return head + ": put elements of similar cost in the same group (sort by cost)"
    return run_cases("group_by_cost", fn, cases, compare)


check_group_by_cost.solution = _group_by_cost_solution
