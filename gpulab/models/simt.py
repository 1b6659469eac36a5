"""A small SIMT warp model: lane masks per issue step, for the warp-divergence lesson (notebook 02).

A warp is ``WARP_SIZE = 32`` lanes (threads) that issue one instruction at a time. When the lanes of a
warp disagree on a branch, the warp runs one path with the lanes that took it active and the others
masked off, then the other path with the mask flipped: it pays for both. A branch that every lane takes
the same way (uniform across the warp) costs only its own path. Source: Stanford CS336 Lecture 5 (the
seed lectures' ``if thread_id < 4: A else: B`` example); NVIDIA CUDA C++ Best Practices Guide, "Branching
and Divergence".

Units: an *issue step* is one instruction issued by the warp (all 32 lanes occupy the SIMT unit, active or
not); a *useful lane-step* is one active lane in one issue step. Efficiency = useful / (steps x 32).

- ``branch(condition, cost_a, cost_b)`` traces one two-way branch: the steps, their masks, the cost.
- ``loop(trips, group)`` models a data-dependent loop: every group of lanes that steps together (a warp, or
  a Triton program's block) runs until its longest-running lane is done.
- ``group_by_cost(trips)`` reorders work so that expensive elements share groups.
- ``gpulab.figures.lesson02`` draws the lanes x steps picture (``branch_figure``, ``BoundaryExplorer``).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

import numpy as np

from ..core import validate
from .waves import cdiv

WARP_SIZE = 32  # lanes per warp on every NVIDIA GPU so far (CUDA C++ Programming Guide, "SIMT Architecture")
IDLE, PATH_A, PATH_B = 0, 1, 2  # cell values of BranchTrace.grid()


def _steps(k: int) -> str:
    return f"{k} step" + ("" if k == 1 else "s")


def lane_condition(condition, warp_size: int = WARP_SIZE) -> tuple[bool, ...]:
    """Normalise a per-lane condition to a tuple of ``warp_size`` bools.

    condition: a sequence of ``warp_size`` bools (or 0/1 ints, or a NumPy bool array of shape (warp_size,)),
    or a callable ``lane -> bool`` evaluated at lanes 0..warp_size-1 (e.g. ``lambda tid: tid < 4``).
    Raises ``TypeError``/``ValueError`` naming ``condition`` if it is neither.
    """
    warp_size = validate.positive_int("warp_size", warp_size)
    if callable(condition):
        values = [condition(lane) for lane in range(warp_size)]
    elif isinstance(condition, (str, bytes)) or not hasattr(condition, "__len__"):
        raise TypeError(
            f"condition must be a sequence of {warp_size} bools or a callable lane -> bool, "
            f"got {type(condition).__name__}"
        )
    else:
        values = list(np.asarray(condition).reshape(-1)) if isinstance(condition, np.ndarray) else list(condition)
        if len(values) != warp_size:
            raise ValueError(f"condition must have one value per lane ({warp_size}), got {len(values)}")
    out = []
    for lane, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or (isinstance(v, Integral) and v in (0, 1)):
            out.append(bool(v))
        else:
            raise TypeError(f"condition must give a bool for every lane; lane {lane} gave {v!r}")
    return tuple(out)


@dataclass(frozen=True)
class IssueStep:
    """One instruction issued by the warp: which path, and the active mask (one bool per lane)."""

    path: str  # "A" or "B"
    mask: tuple[bool, ...]

    @property
    def active(self) -> int:
        """Number of active lanes in this step."""
        return sum(self.mask)


class IssueSteps(Sequence):
    """The issue steps of one branch, made on demand: ``n_a`` steps of path A, then ``n_b`` of path B. Nothing is
    stored per step, so a path of 10^18 instructions costs nothing until it is iterated; ``len()`` works up to
    ``sys.maxsize`` steps (Python's limit; ``BranchTrace.steps_paid`` has none)."""

    def __init__(self, condition: tuple[bool, ...], n_a: int, n_b: int):
        self._a = IssueStep("A", condition)
        self._b = IssueStep("B", tuple(not c for c in condition))
        self._n_a, self._n = n_a, n_a + n_b

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[j] for j in range(self._n)[i])
        i = operator.index(i)
        j = i + self._n if i < 0 else i
        if not 0 <= j < self._n:
            raise IndexError(f"step {i} out of range for {self._n} steps")
        return self._a if j < self._n_a else self._b

    def __iter__(self):
        yield from itertools.repeat(self._a, self._n_a)
        yield from itertools.repeat(self._b, self._n - self._n_a)


@dataclass(frozen=True)
class BranchTrace:
    """The execution of ``if condition[lane]: A (cost_a steps) else: B (cost_b steps)`` by one warp. Every count
    is an exact Python int in closed form, for any costs; ``steps`` makes the steps on demand."""

    condition: tuple[bool, ...]
    cost_a: int
    cost_b: int

    @property
    def steps(self) -> IssueSteps:
        """Path A's ``cost_a`` steps (if any lane takes A), then path B's ``cost_b`` (if any lane takes B)."""
        return IssueSteps(self.condition, self._steps_a, self._steps_b)

    @property
    def _steps_a(self) -> int:
        return self.cost_a if self.lanes_a else 0

    @property
    def _steps_b(self) -> int:
        return self.cost_b if self.lanes_b else 0

    @property
    def warp_size(self) -> int:
        return len(self.condition)

    @property
    def lanes_a(self) -> tuple[int, ...]:
        """Lanes that take path A."""
        return tuple(i for i, c in enumerate(self.condition) if c)

    @property
    def lanes_b(self) -> tuple[int, ...]:
        """Lanes that take path B."""
        return tuple(i for i, c in enumerate(self.condition) if not c)

    @property
    def divergent(self) -> bool:
        """True if the lanes disagree, so the warp runs both paths."""
        return 0 < len(self.lanes_a) < self.warp_size

    @property
    def steps_paid(self) -> int:
        """Issue steps the warp spends on the branch (each occupies all ``warp_size`` lanes)."""
        return self._steps_a + self._steps_b

    @property
    def useful_lane_steps(self) -> int:
        """Active lanes summed over the steps: len(lanes_a) * cost_a + len(lanes_b) * cost_b."""
        return len(self.lanes_a) * self.cost_a + len(self.lanes_b) * self.cost_b

    @property
    def efficiency(self) -> float:
        """useful_lane_steps / (steps_paid * warp_size), in [0, 1]; 1.0 when no step is paid."""
        paid = self.steps_paid
        return self.useful_lane_steps / (paid * self.warp_size) if paid else 1.0

    def grid(self) -> list[list[int]]:
        """The lanes x steps picture as a list of ``steps_paid`` rows of ``warp_size`` cells:
        ``PATH_A`` (1) or ``PATH_B`` (2) where the lane is active in that step, ``IDLE`` (0) where masked."""
        code = {"A": PATH_A, "B": PATH_B}
        return [[code[s.path] if m else IDLE for m in s.mask] for s in self.steps]

    def __str__(self) -> str:
        return (
            f"{'divergent' if self.divergent else 'uniform'} branch: {len(self.lanes_a)} lanes take A "
            f"({_steps(self.cost_a)}), {len(self.lanes_b)} take B ({_steps(self.cost_b)}); the warp pays "
            f"{self.steps_paid} steps, {self.useful_lane_steps} of {self.steps_paid * self.warp_size} "
            f"lane-steps useful, efficiency {self.efficiency:.1%}"
        )


def branch(condition, cost_a: int = 1, cost_b: int = 1, warp_size: int = WARP_SIZE) -> BranchTrace:
    """Trace ``if condition: A else: B`` through one warp under SIMT.

    condition: per-lane bools, shape (warp_size,), or a callable lane -> bool (``lambda tid: tid < 4``).
    cost_a, cost_b: issue steps (instructions) of path A and of path B, ints >= 0.
    Returns a ``BranchTrace``: path A's ``cost_a`` steps with the lanes that take A active, then path B's
    ``cost_b`` steps with the others active. A path that no lane takes is skipped (a uniform branch pays
    only its own path); a divergent warp pays ``cost_a + cost_b`` steps. Costs of any size are counted exactly
    (the steps are made on demand, ``IssueSteps``).
    Raises ``TypeError``/``ValueError`` naming the bad argument.
    Source: the seed lectures (Stanford CS336 Lecture 5): "threads 0 to 3 run A while the others stay idle,
    then the others run B; the warp runs both paths in sequence and pays the time of both".
    """
    cond = lane_condition(condition, warp_size)
    cost_a, cost_b = validate.integer("cost_a", cost_a), validate.integer("cost_b", cost_b)
    return BranchTrace(cond, cost_a, cost_b)


def boundary_sweep(cost_a: int, cost_b: int, boundaries=None, warp_size: int = WARP_SIZE) -> list[dict]:
    """``if (lane < b) A else B`` for each boundary b (default 0..warp_size): what one warp pays against b.

    cost_a, cost_b: issue steps of path A and B, ints with cost_b >= 1 (the b = 0 warp, path B alone, is the unit
    of time). Returns one dict per b: ``b``, ``divergent``, ``steps_paid``, ``efficiency`` (average active lanes per
    issued step / warp_size, what Nsight Compute's threads per warp instruction / 32 reads for the branch) and
    ``time_ratio`` = steps_paid / cost_b, the time against the b = 0 warp when the warp's time is its issue steps.
    At b = 0 and b = warp_size the branch is uniform (one path); in between the warp pays both, whatever b is.
    Raises ``TypeError``/``ValueError`` naming the bad argument. Source: as ``branch``; the CUDA kernel that
    measures it is ``gpulab.kernels.lane_branch``."""
    warp_size = validate.positive_int("warp_size", warp_size)
    cost_a, cost_b = validate.integer("cost_a", cost_a), validate.integer("cost_b", cost_b, low=1)
    bs = range(warp_size + 1) if boundaries is None else boundaries
    rows = []
    for b in bs:
        b = validate.integer("boundary", b, low=0, high=warp_size)
        t = branch(lambda lane, b=b: lane < b, cost_a, cost_b, warp_size)
        rows.append(
            dict(
                b=b,
                divergent=t.divergent,
                steps_paid=t.steps_paid,
                efficiency=t.efficiency,
                time_ratio=t.steps_paid / cost_b,
            )
        )
    return rows


# ---------------------------------------------------------------------------------------------------------
# Data-dependent loops: a group of lanes that steps together runs until its slowest lane is done.


_INT64_MAX = np.iinfo(np.int64).max


def _check_trips(trips) -> np.ndarray:
    """trips as int64, shape (n,): ints in [0, 2**63 - 1] (Python ints beyond int64 arrive as dtype object)."""
    if isinstance(trips, (str, bytes)) or not hasattr(trips, "__len__"):
        raise TypeError(f"trips must be a 1-D sequence of ints, got {type(trips).__name__}")
    a = np.asarray(trips)
    if a.ndim != 1:
        raise ValueError(f"trips must be 1-D (one trip count per element), got shape {a.shape}")
    if a.size == 0:
        raise ValueError("trips must not be empty")
    whole = a.dtype == object and all(isinstance(v, Integral) and not isinstance(v, bool) for v in a)
    if a.dtype == bool or not (np.issubdtype(a.dtype, np.integer) or whole):
        raise TypeError(f"trips must hold ints, got dtype {a.dtype}")
    if (a < 0).any():
        raise ValueError(f"trips must be >= 0, got {a.min()} at index {int(np.argmin(a))}")
    if (a > _INT64_MAX).any():
        raise ValueError(f"trips must be <= 2**63 - 1 (int64), got {a.max()} at index {int(np.argmax(a))}")
    return a.astype(np.int64)


def _exact_sum(a: np.ndarray) -> int:
    """The sum of a non-negative int64 array as a Python int, exact where int64 would overflow."""
    if a.size == 0 or int(a.max()) <= _INT64_MAX // a.size:
        return int(a.sum())
    return int(a.sum(dtype=object))


@dataclass(frozen=True)
class LoopCost:
    """The cost of a loop whose trip count varies per element, run by groups of ``group`` lanes.

    ``steps_per_group``: shape (ceil(n / group),), the max trip count of each group (the last group may be
    partial; its missing lanes are idle). ``useful``: the sum of the trip counts (lane-steps doing work).
    """

    trips: np.ndarray  # (n,) int64, loop iterations each element needs
    group: int
    steps_per_group: np.ndarray  # (n_groups,) int64

    @property
    def steps(self) -> int:
        """Issue steps summed over groups (one iteration of one group = one step); an exact Python int."""
        return _exact_sum(self.steps_per_group)

    @property
    def useful(self) -> int:
        """Trip counts summed: lane-steps doing work; an exact Python int."""
        return _exact_sum(self.trips)

    @property
    def efficiency(self) -> float:
        """useful / (steps * group), in [0, 1]; 1.0 when no step is paid."""
        return self.useful / (self.steps * self.group) if self.steps else 1.0

    def __str__(self) -> str:
        return (
            f"{self.trips.size} elements in {self.steps_per_group.size} groups of {self.group}: "
            f"{self.steps} steps paid, {self.useful} useful lane-steps of {self.steps * self.group}, "
            f"efficiency {self.efficiency:.1%}"
        )


def loop(trips, group: int = WARP_SIZE) -> LoopCost:
    """Model ``for i in range(trips[lane]): work`` for many elements, ``group`` consecutive elements per warp.

    trips: (n,) ints >= 0, the iterations element i needs (lane i % group of group i // group).
    group: lanes that step together: 32 for a CUDA warp; the block size BLOCK for a Triton program whose
    loop runs to the block's max trip count (gpulab.kernels.divergence.loop_cost_kernel).
    Each group pays max(trips) over its lanes; useful work is sum(trips).
    Raises ``TypeError``/``ValueError`` naming the bad argument.
    """
    t = _check_trips(trips)
    group = validate.positive_int("group", group)
    n_groups = cdiv(t.size, group)
    padded = np.zeros(n_groups * group, dtype=np.int64)
    padded[: t.size] = t
    return LoopCost(t, group, padded.reshape(n_groups, group).max(axis=1))


def group_by_cost(trips) -> np.ndarray:
    """A permutation (shape (n,), int64) that orders elements by trip count, most expensive first.

    ``loop(trips[order], group)`` then pays the least total steps of any order for every ``group``: the
    k-th group's max can be no smaller than the ((k-1) * group + 1)-th largest trip count, and descending
    order meets that bound. (Ascending order can be worse when n is not a multiple of group: the largest
    elements then fill the last, partial group.) Stable, so equal costs keep their order.
    """
    t = _check_trips(trips)
    return np.argsort(-t, kind="stable")


# ---- a measured record beside the model ---------------------------------------------------------------------


def measured_rows(data: dict) -> list[dict]:
    """Every measured variant of a lesson02 record (``gpulab.bench.lesson02.run``: ``path_a``, ``path_b``,
    ``where``, ``uniform``, ``loop``) as ``dict(name, measured_ms, p20_ms, p80_ms, predicted_ms)`` (predicted_ms is
    None for the paths alone, which calibrate the model)."""
    out = [
        dict(
            name=f"path {w} alone",
            predicted_ms=None,
            **{k: data[f"path_{w.lower()}"][k] for k in ("median_ms", "p20_ms", "p80_ms")},
        )
        for w in "AB"
    ]
    for r in out:
        r["measured_ms"] = r.pop("median_ms")
    out += [dict(r, name=f"(a) where, {r['fraction_a']:.0%} A") for r in data["where"]]
    out += [dict(r, name=f"(b) uniform if, {r['fraction_a']:.0%} blocks A") for r in data["uniform"]]
    out += [dict(r, name=f"(c) loop, {r['frac_expensive']:.1%} exp., {r['layout']}") for r in data["loop"]["rows"]]
    return out


def lane_branch_points(lane: dict) -> dict:
    """The measured points of a lesson02 ``lane_branch`` record (``gpulab.bench.lesson02.lane_branch_step``):
    ``{"b": [...], "time_ratio": [...], "efficiency": {b: active threads per warp instruction / 32}}``; the
    efficiencies come from the record's counters (empty when ncu did not read them)."""
    rows = lane["rows"]
    counted = (lane.get("counters") or {}).get("comparison", [])
    eff = {
        int(r["label"][1:]): r["counter"] / WARP_SIZE
        for r in counted
        if r["quantity"] == "threads/inst" and r["counter"] is not None
    }
    return {"b": [r["b"] for r in rows], "time_ratio": [r["time_ratio"] for r in rows], "efficiency": eff}
