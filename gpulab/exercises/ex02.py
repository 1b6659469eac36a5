"""Exercises of lesson 02 (warp divergence): a warp's efficiency for a branch, grouping work by cost, and a
Triton kernel that runs a data-dependent loop over regrouped work."""

from __future__ import annotations

import random

import numpy as np
import torch

import gpulab

from ..kernels import divergence
from ..models import simt
from ..models.waves import cdiv
from . import Report, _short, close, ex02_solutions, is_int, kernelcheck, run_cases
from .cases import Draw
from .kernelcheck import check_kernel
from .kerneldiagnosis import Mistake

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
    path (ints >= 1). Efficiency = useful lane-steps / (issue steps paid x 32), as in ``gpulab.models.simt.branch``.
    Cases: the seed's ``thread_id < 4``, uniform branches both ways, fresh random masks.
    """
    rng = random.Random()
    cases = [
        dict(condition=[lane < 4 for lane in range(32)], cost_a=1, cost_b=1),
        dict(condition=[True] * 32, cost_a=3, cost_b=5),
        dict(condition=[False] * 32, cost_a=3, cost_b=5),
        dict(condition=[lane % 2 == 0 for lane in range(32)], cost_a=4, cost_b=2),
    ]
    for _ in range(30):
        p = rng.choice([0.03, 0.5, 0.97, rng.random()])
        cases.append(
            dict(
                condition=[rng.random() < p for _ in range(32)], cost_a=rng.randrange(1, 9), cost_b=rng.randrange(1, 9)
            )
        )

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
            return head + (
                ": that counts only one path; count the useful lane-steps of both (lanes x steps "
                "of A plus lanes x steps of B)"
            )
        if close(got, useful / trace.steps_paid, 1e-6) or close(got, useful / 32, 1e-6):
            return head + ": divide by the lane-steps paid, steps x 32 lanes (every lane occupies every step)"
        return head

    return run_cases("warp_efficiency", fn, cases, compare)


check_warp_efficiency.solution = _warp_efficiency_solution


def _switch_efficiency_solution(case, costs) -> float:
    """Useful lane-steps / (steps paid x 32) for a switch: lane i runs case ``case[i]`` of ``costs[case[i]]``
    instructions. The warp runs each case that some lane takes, one after another; a case no lane takes is
    skipped."""
    steps = sum(costs[c] for c in set(case))
    return sum(costs[c] for c in case) / (steps * len(case))


def check_switch_efficiency(fn) -> Report:
    """fn(case, costs) -> efficiency in [0, 1] of one warp running ``switch (case[lane])``.

    case: a list of 32 ints, lane i takes case ``case[i]`` (0 <= case[i] < len(costs)); costs: a list of ints
    >= 1, the instructions of each case. Efficiency = useful lane-steps / (issue steps paid x 32), the count
    of ``gpulab.models.simt.branch`` carried from two paths to any number. Cases: the seed's ``thread_id < 4`` as a
    two-way switch, a uniform switch, switches where some cases are taken by no lane, fresh random ones.
    """
    rng = random.Random()
    cases = [
        dict(case=[0] * 4 + [1] * 28, costs=[1, 1]),
        dict(case=[2] * 32, costs=[5, 7, 3]),
        dict(case=[lane % 2 * 2 for lane in range(32)], costs=[4, 9, 2, 6]),
    ]
    for _ in range(30):
        k = rng.randrange(2, 7)
        taken = rng.sample(range(k), rng.randrange(1, k + 1))
        cases.append(dict(case=[rng.choice(taken) for _ in range(32)], costs=[rng.randrange(1, 9) for _ in range(k)]))

    def compare(case, got):
        lanes, costs = case["case"], case["costs"]
        exp = _switch_efficiency_solution(lanes, costs)
        if close(got, exp, 1e-6):
            return None
        if isinstance(got, (str, bytes, bool)) or not isinstance(got, (int, float, np.floating, np.integer)):
            return f"expected a number in [0, 1], got {_short(got)}"
        useful = sum(costs[c] for c in lanes)
        taken = [costs[c] for c in set(lanes)]
        head = f"expected {exp:.6g}, got {float(got):.6g}"
        if close(got, 100 * exp, 1e-6):
            return head + ": return a fraction in [0, 1], not a percentage"
        if close(got, useful / (sum(costs) * 32), 1e-6):
            return head + ": a case that no lane takes is skipped; pay only the cases some lane takes"
        if close(got, useful / (max(taken) * 32), 1e-6):
            return head + ": the cases run one after another, not at once: add the steps of every case taken"
        if close(got, useful / sum(taken), 1e-6):
            return head + ": divide by the lane-steps paid, steps x 32 lanes (every lane occupies every step)"
        return head

    return run_cases("switch_efficiency", fn, cases, compare)


check_switch_efficiency.solution = _switch_efficiency_solution
check_switch_efficiency.hints = [
    "the warp pays every case that at least one lane takes, one after the other; the others cost nothing",
    "two sums: the steps the warp issues (each distinct case once) and the useful lane-steps (each lane its own "
    "case); every issued step occupies all 32 lanes",
]


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
            return head + (
                ": ascending order leaves the most expensive elements in the last, partial group; "
                "put the most expensive first"
            )
        return head + ": put elements of similar cost in the same group (sort by cost)"

    return run_cases("group_by_cost", fn, cases, compare)


check_group_by_cost.solution = _group_by_cost_solution


def _loop_cases(draw: Draw) -> list[dict]:
    """Awkward lengths, ``kernelcheck.LONG_N`` and two drawn in [2, 3000], a few expensive elements (12 trips)
    among cheap ones (2), in the order the lesson uses (``simt.group_by_cost``: most expensive first) or in a
    random order (so that an order which is not read cannot pass); the long case is cost-sorted (its interpreter
    time stays small). Everything drawn by ``draw``."""
    cases = []
    for i, n in enumerate([1, 17, 1000, 1793, kernelcheck.LONG_N] + [draw.size(2, 3000) for _ in range(2)]):
        frac = draw.choice([0.05, 0.25, 0.5])
        trips = torch.from_numpy(divergence.mixed_trips(n, frac, 2, 12, seed=draw.seed_for()))
        order = torch.from_numpy(simt.group_by_cost(trips.numpy())) if i % 2 == 0 else draw.randperm(n, "cpu")
        cases.append(
            dict(
                x=draw.randn(n, scale=3.0),
                trips=trips.to(gpulab.DEVICE),
                order=order.to(torch.int32).to(gpulab.DEVICE),
            )
        )
    return cases


def _loop_mismatch(got, ref64, case):
    got = got.double().cpu()
    x, trips, o = case["x"].cpu(), case["trips"].cpu(), case["order"].long().cpu()
    bad = ~((got - ref64).abs() <= 1e-5)
    if not bad.any():
        return None
    if ((got - divergence.loop_cost_ref(x, trips)).abs() <= 1e-5).all():
        return (
            "out holds each work item at its own index, not in slot order: slot j must hold item "
            "order[j]; load idx = tl.load(order_ptr + offs), read x and trips at idx, store at offs"
        )
    i = int(bad.nonzero()[0])
    head = (
        f"{int(bad.sum())} of {x.numel()} slots differ; first at slot {i} (item {int(o[i])}, "
        f"{int(trips[o[i]])} trips): expected {ref64[i].item():.7g}, got {got[i].item():.7g}"
    )
    named = _loop_block_count(got, x[o], trips[o])
    return Mistake("values:trips", f"values differ: {named}") if named else head


#: Blocks of slots (a power of two each) the loop's diagnosis tries: one program's slots, whatever BLOCK it has.
_LOOP_BLOCKS = tuple(2**k for k in range(18))


def _loop_block_count(got: torch.Tensor, xs: torch.Tensor, ts: torch.Tensor) -> str | None:
    """Where every slot ran one trip count shared by its program's block of slots instead of its own (the block's
    fewest, or its most with no lane kept once its own count is used up), at some power-of-two block of
    ``_LOOP_BLOCKS``: that mistake in words; else None. The fewest of the last, partial block may be 0, the count a
    masked load of trips gives its idle lanes (other=0). got, xs, ts: slot order (the float64 result, x and trips
    of item order[j] in slot j)."""
    n, t = ts.numel(), ts.long()
    steps = [xs.double()]  # steps[k]: each item after k trips
    for _ in range(int(t.max())):
        steps.append(torch.sin(steps[-1]) * 0.9 + 0.1)
    steps = torch.stack(steps)
    fits = lambda counts: bool(((got - steps.gather(0, counts[None, :])[0]).abs() <= 1e-5).all())  # noqa: E731
    for block in _LOOP_BLOCKS:
        pad = cdiv(n, block) * block - n
        per_block = (
            lambda fill, how: how(  # noqa: E731
                torch.nn.functional.pad(t, (0, pad), value=fill).view(-1, block), 1
            ).values.repeat_interleave(block)[:n]
        )
        where = f"blocks of {block} slots" if block < n else "one block here"
        idle = "; idle lanes past n count 0 trips, the masked load's other"
        for counts, said in ((per_block(int(t.max()), torch.min), ""), (per_block(0, torch.min) if pad else t, idle)):
            if not torch.equal(counts, t) and fits(counts):
                return (
                    f"each slot ran its block's fewest trips ({where}{said}): the loop must run to the block's "
                    "largest count, each lane stepping only while its own count lasts"
                )
        most = per_block(0, torch.max)
        if not torch.equal(most, t) and fits(most):
            return (
                f"each slot ran its block's most trips ({where}): a lane whose own count is used up must keep its "
                "value (select, do not branch)"
            )
        if block > n:  # one program's block holds every slot, idle lanes after them
            break
    return None


def check_loop_grouped(fn, seed: int | None = None) -> Report:
    """fn(x, trips, order, out) launches a Triton kernel that fills ``out`` slot by slot: slot j holds work
    item ``order[j]``, path A's step ``x <- sin(x) * 0.9 + 0.1`` applied ``trips[order[j]]`` times to
    ``x[order[j]]``. x, out: (n,) float32; trips, order: (n,) int32 (order a permutation of range(n)); all on
    gpulab.DEVICE, any length. With ``order`` sorted by cost, a program's slots share a trip count and its
    loop runs to that count instead of to the most expensive element of an interleaved block.

    The checker owns every buffer (guarded, see ``kernelcheck``: a load past the end of trips or order is
    named and never run, so it cannot become a wild index or an endless loop), runs awkward lengths with
    cost-sorted and random orders against float64 (``divergence.loop_cost_ref``), and names the mistake: a
    missing mask, too small a grid, an order that is not read, a loop run to each block's fewest or most trips
    (``_loop_block_count``), wrong values. Cases drawn by ``cases.Draw`` from ``seed``, which the report prints.
    """
    draw = Draw(seed)
    return draw.stamp(
        check_kernel(
            "loop_grouped",
            fn,
            _loop_cases(draw),
            out=lambda c: (c["x"].shape, torch.float32),
            reference=lambda c: divergence.loop_cost_ref(
                c["x"].cpu()[c["order"].long().cpu()], c["trips"].cpu()[c["order"].long().cpu()]
            ),
            mismatch=_loop_mismatch,
            notes={
                "unread": "; slot j must hold item order[j]: load idx = tl.load(order_ptr + offs), read x and trips at "
                "idx, store at offs"
            },
        )
    )


check_loop_grouped.solution = ex02_solutions.loop_grouped
check_loop_grouped.solution_module = ex02_solutions
check_loop_grouped.hints = [
    "program p fills slots p * BLOCK ... p * BLOCK + BLOCK - 1 of out; the work item in slot j is order[j]: "
    "load the items first, then x and trips at those items (a gather)",
    "the loop runs as many times as the block's largest trip count; a lane whose own count is used up must "
    "keep its value unchanged (select, do not branch); store into the slots, not at the items",
]


def _order_steps_solution(trips, group: int) -> tuple[int, int]:
    """(fewest, most) issue steps any order of ``trips`` can pay, run by groups of ``group`` lanes (each group pays
    its largest trip count; ceil(n / group) groups, the last partial). Fewest: descending order, so that group k
    pays the ((k - 1) group + 1)-th largest count. Most: the ceil(n / group) largest counts, one in each group,
    each then its group's max: no order pays more, since k group maxima sum to at most the k largest counts."""
    t = np.sort(np.asarray(trips, dtype=np.int64))[::-1]
    k = cdiv(t.size, group)
    return int(t[::group].sum()), int(t[:k].sum())


def check_order_steps(fn) -> Report:
    """fn(trips, group) -> (fewest, most): the fewest and the most issue steps that any order of the elements pays
    for ``for i in range(trips[lane])``, ``group`` consecutive elements stepping together (each group pays its
    max). trips: (n,) NumPy int array (any n); group: 8, 32 or 128. Cases: awkward n (1, 17, 1000, 1793,
    random), a few expensive elements among cheap ones, or random costs."""
    rng = np.random.default_rng()
    cases = [dict(trips=np.array([1, 9, 2, 8, 3]), group=2)]
    for n in AWKWARD + [int(rng.integers(2, 3000)) for _ in range(6)]:
        group = int(rng.choice([8, 32, 128]))
        trips = np.where(rng.random(n) < 0.05, 64, 4) if rng.random() < 0.5 else rng.integers(0, 50, n)
        cases.append(dict(trips=trips, group=group))

    def compare(case, got):
        trips, group = case["trips"], case["group"]
        best, worst = _order_steps_solution(trips, group)
        if not (isinstance(got, (tuple, list)) and len(got) == 2 and all(is_int(v) for v in got)):
            return f"expected a pair of ints (fewest, most), got {_short(got)}"
        gb, gw = int(got[0]), int(got[1])
        msgs = []
        if gb != best:
            hint = ""
            if gb == simt.loop(np.sort(trips), group).steps:
                hint = ": ascending order leaves the most expensive elements in the last, partial group"
            elif gb == simt.loop(trips, group).steps:
                hint = ": that is the order given; the fewest is over every order"
            msgs.append(f"fewest expected {best}, got {gb}{hint}")
        if gw != worst:
            hint = ""
            if gw == simt.loop(np.sort(trips), group).steps or gw == simt.loop(trips, group).steps:
                hint = ": an order can do worse: give each group one of the most expensive elements"
            elif gw == int(np.asarray(trips).max()) * cdiv(trips.size, group):
                hint = ": only one element can hold the largest count; each group's max is a different element"
            msgs.append(f"most expected {worst}, got {gw}{hint}")
        return "; ".join(msgs) or None

    return run_cases("order_steps", fn, cases, compare)


check_order_steps.solution = _order_steps_solution
check_order_steps.hints = [
    "each group pays one number, its largest trip count, and there are ceil(n / group) groups whatever the order: "
    "which elements can be the groups' maxima?",
    "for the fewest, the expensive elements should share groups; for the most, each group should get its own "
    "expensive element. Try both on trips = [1, 9, 2, 8, 3] with group = 2 by hand",
]
