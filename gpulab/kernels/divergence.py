"""Branches in Triton: what maps onto the hardware when elements need different work (notebook 02).

A Triton program works on a *block* of elements, not on one lane: there is no per-lane ``if``. The compiler
spreads the block over the program's warps (``num_warps``, 4 by default), so the choices we can write are:

(a) ``branch_where``: a per-element choice ``tl.where(take_a, path_a(x), path_b(x))``. Both paths are computed
    for every element, whatever the condition: the model predicts t_A + t_B.
(b) ``branch_uniform``: the same choice made once per program (``if`` on a scalar, here a per-block flag):
    each program pays one path. With a fraction f of the blocks taking A, the model predicts
    f * t_A + (1 - f) * t_B.
(c) ``loop_cost``: per-element work of data-dependent cost, ``trips[i]`` iterations of path A's step, as a
    loop to the block's max trip count with a mask per element. A block pays its most expensive element
    (``gpulab.models.simt.loop`` with group = BLOCK), so expensive elements spread over every block (interleaved)
    cost far more than the same elements grouped into a few blocks (sorted, ``gpulab.models.simt.group_by_cost``).

The paths are chains of transcendental steps, meant to make their cost arithmetic rather than memory traffic
(the model's assumption), growing with the chain length: path A repeats ``x = sin(x) * 0.9 + 0.1`` K_A times, path B repeats ``x = cos(x) * 0.9 - 0.1``
K_B times. Each has a torch float64 reference beside it. Source of the idea: the seed lectures (Stanford
CS336 Lecture 5, "keep warp lanes doing useful work"); Triton's programming model (blocks, not threads).
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from ..core import validate
from ..models import simt
from ._checks import check_block, check_tensor

K_A, K_B = 32, 16  # default chain lengths of path A and path B (steps)


def _check_k(name: str, k) -> int:
    return validate.integer(name, k, low=0, high=4096)


def _fraction(name: str, value) -> float:
    v = validate.real(name, value, low=0.0)
    if v > 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {v}")
    return v


@triton.jit
def _step_a(x):
    return tl.sin(x) * 0.9 + 0.1


@triton.jit
def _path_a(x, K: tl.constexpr):
    for _ in range(K):
        x = _step_a(x)
    return x


@triton.jit
def _path_b(x, K: tl.constexpr):
    for _ in range(K):
        x = tl.cos(x) * 0.9 - 0.1
    return x


@triton.jit
def path_kernel(x_ptr, y_ptr, n, K: tl.constexpr, PATH_A: tl.constexpr, BLOCK: tl.constexpr):
    """One path for every element: path A (PATH_A=True) or path B, K steps."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if PATH_A:
        y = _path_a(x, K)
    else:
        y = _path_b(x, K)
    tl.store(y_ptr + offs, y, mask=mask)


@triton.jit
def branch_where_kernel(x_ptr, take_a_ptr, y_ptr, n, K_A: tl.constexpr, K_B: tl.constexpr, BLOCK: tl.constexpr):
    """(a) Per-element choice: both paths are computed for every element, then one is kept."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    take_a = tl.load(take_a_ptr + offs, mask=mask, other=0) != 0
    y = tl.where(take_a, _path_a(x, K_A), _path_b(x, K_B))
    tl.store(y_ptr + offs, y, mask=mask)


@triton.jit
def branch_uniform_kernel(
    x_ptr, block_takes_a_ptr, y_ptr, n, K_A: tl.constexpr, K_B: tl.constexpr, BLOCK: tl.constexpr
):
    """(b) One choice per program: an `if` on a scalar flag, so the program runs only the path it takes."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if tl.load(block_takes_a_ptr + pid) != 0:  # a scalar: the same for every element of the block
        y = _path_a(x, K_A)
    else:
        y = _path_b(x, K_B)
    tl.store(y_ptr + offs, y, mask=mask)


@triton.jit
def loop_cost_kernel(x_ptr, trips_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """(c) Element i applies path A's step trips[i] times: the block loops to its max trip count, each
    element masked off once its own count is done."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    trips = tl.load(trips_ptr + offs, mask=mask, other=0)
    for i in range(0, tl.max(trips, axis=0)):  # the block pays its most expensive element
        x = tl.where(i < trips, _step_a(x), x)
    tl.store(y_ptr + offs, x, mask=mask)


# ---------------------------------------------------------------------------------------------------------
# Launchers: check, allocate, launch.


def _check_x(x) -> None:
    check_tensor("x", x, dtypes=(torch.float32,), ndim=1)


def _check_flags(name: str, t, length: int) -> None:
    check_tensor(name, t, dtypes=(torch.bool,), ndim=1)
    if t.numel() != length:
        raise ValueError(f"{name} must have {length} entries, got {t.numel()}")


def path(x: torch.Tensor, which: str = "A", k: int | None = None, block: int = 1024) -> torch.Tensor:
    """y = path A (``which="A"``, K_A steps by default) or path B (``"B"``, K_B) of every element.
    x: (n,) contiguous float32 on gpulab.DEVICE; returns (n,) float32. Raises naming the bad argument."""
    _check_x(x)
    if which not in ("A", "B"):
        raise ValueError(f"which must be 'A' or 'B', got {which!r}")
    k = _check_k("k", (K_A if which == "A" else K_B) if k is None else k)
    check_block("block", block)
    y = torch.empty_like(x)
    if x.numel():
        path_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), K=k, PATH_A=which == "A", BLOCK=block)
    return y


def branch_where(
    x: torch.Tensor, take_a: torch.Tensor, k_a: int = K_A, k_b: int = K_B, block: int = 1024
) -> torch.Tensor:
    """(a) y[i] = path_a(x[i]) if take_a[i] else path_b(x[i]), written with tl.where (both paths computed).
    x: (n,) float32; take_a: (n,) bool; both contiguous on gpulab.DEVICE. Returns (n,) float32."""
    _check_x(x)
    _check_flags("take_a", take_a, x.numel())
    k_a, k_b = _check_k("k_a", k_a), _check_k("k_b", k_b)
    check_block("block", block)
    y = torch.empty_like(x)
    if x.numel():
        branch_where_kernel[(triton.cdiv(x.numel(), block),)](
            x, take_a.view(torch.uint8), y, x.numel(), K_A=k_a, K_B=k_b, BLOCK=block
        )
    return y


def branch_uniform(
    x: torch.Tensor, block_takes_a: torch.Tensor, k_a: int = K_A, k_b: int = K_B, block: int = 1024
) -> torch.Tensor:
    """(b) Every element of block j (elements j*block .. (j+1)*block - 1) takes path A if block_takes_a[j],
    else path B; one `if` per program. x: (n,) float32; block_takes_a: (ceil(n / block),) bool."""
    _check_x(x)
    check_block("block", block)
    _check_flags("block_takes_a", block_takes_a, triton.cdiv(x.numel(), block))
    k_a, k_b = _check_k("k_a", k_a), _check_k("k_b", k_b)
    y = torch.empty_like(x)
    if x.numel():
        branch_uniform_kernel[(triton.cdiv(x.numel(), block),)](
            x, block_takes_a.view(torch.uint8), y, x.numel(), K_A=k_a, K_B=k_b, BLOCK=block
        )
    return y


def loop_cost(x: torch.Tensor, trips: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """(c) y[i] = path A's step applied trips[i] times to x[i]. x: (n,) float32; trips: (n,) int32 >= 0.
    A block of ``block`` elements pays max(trips) over the block (``gpulab.models.simt.loop(trips, block)``)."""
    _check_x(x)
    check_tensor("trips", trips, dtypes=(torch.int32,), ndim=1)
    if trips.numel() != x.numel():
        raise ValueError(f"trips must have one count per element of x ({x.numel()}), got {trips.numel()}")
    if trips.numel() and int(trips.min()) < 0:
        raise ValueError(f"trips must be >= 0, got {int(trips.min())}")
    check_block("block", block)
    y = torch.empty_like(x)
    if x.numel():
        loop_cost_kernel[(triton.cdiv(x.numel(), block),)](x, trips, y, x.numel(), BLOCK=block)
    return y


# ---------------------------------------------------------------------------------------------------------
# float64 references: the same math.


def path_a_ref(x: torch.Tensor, k: int = K_A) -> torch.Tensor:
    y = x.double()
    for _ in range(k):
        y = torch.sin(y) * 0.9 + 0.1
    return y


def path_b_ref(x: torch.Tensor, k: int = K_B) -> torch.Tensor:
    y = x.double()
    for _ in range(k):
        y = torch.cos(y) * 0.9 - 0.1
    return y


def branch_where_ref(x, take_a, k_a: int = K_A, k_b: int = K_B) -> torch.Tensor:
    return torch.where(take_a, path_a_ref(x, k_a), path_b_ref(x, k_b))


def branch_uniform_ref(x, block_takes_a, k_a: int = K_A, k_b: int = K_B, block: int = 1024) -> torch.Tensor:
    take_a = block_takes_a.repeat_interleave(block)[: x.numel()]
    return branch_where_ref(x, take_a, k_a, k_b)


def loop_cost_ref(x, trips) -> torch.Tensor:
    y = x.double()
    for i in range(int(trips.max()) if trips.numel() else 0):
        y = torch.where(i < trips, torch.sin(y) * 0.9 + 0.1, y)
    return y


# ---------------------------------------------------------------------------------------------------------
# Inputs and the model's predicted times.


def block_flags(n_blocks: int, fraction_a: float, device=None) -> torch.Tensor:
    """(n_blocks,) bool: round(fraction_a * n_blocks) blocks take path A, spread evenly over the grid.
    n_blocks: int >= 0; fraction_a: in [0, 1]. Raises TypeError/ValueError naming the argument."""
    n_blocks, fraction_a = validate.integer("n_blocks", n_blocks), _fraction("fraction_a", fraction_a)
    k = round(fraction_a * n_blocks)
    idx = torch.arange(n_blocks)
    return ((idx * k) % n_blocks < k).to(device or "cpu") if n_blocks else torch.zeros(0, dtype=torch.bool)


def mixed_trips(n: int, frac_expensive: float, cheap: int, expensive: int, seed: int = 0) -> np.ndarray:
    """(n,) int32 trip counts: a random fraction ``frac_expensive`` of elements need ``expensive`` iterations,
    the rest ``cheap``, interleaved at random positions (the expensive ones land in almost every block).
    n: int >= 0; frac_expensive: in [0, 1]; cheap, expensive: ints in [0, 2^31 - 1]; seed: None (fresh) or an
    int >= 0. Raises TypeError/ValueError naming the argument."""
    n, frac_expensive = validate.integer("n", n), _fraction("frac_expensive", frac_expensive)
    cheap = validate.integer("cheap", cheap, high=2**31 - 1)
    expensive = validate.integer("expensive", expensive, high=2**31 - 1)
    seed = None if seed is None else validate.integer("seed", seed)
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < frac_expensive, expensive, cheap).astype(np.int32)


def predict_where_ms(t_a_ms: float, t_b_ms: float) -> float:
    """(a) tl.where computes both paths for every element: t_A + t_B. Assumes each path's time is its
    arithmetic (the loads and stores overlap it), so the traffic counted twice here is not subtracted. Times in
    ms, finite and >= 0. Raises TypeError/ValueError naming the argument."""
    return validate.nonnegative("t_a_ms", t_a_ms) + validate.nonnegative("t_b_ms", t_b_ms)


def predict_uniform_ms(t_a_ms: float, t_b_ms: float, fraction_a: float) -> float:
    """(b) A fraction ``fraction_a`` (in [0, 1]) of the programs run path A, the rest path B. Times in ms, finite
    and >= 0. Raises TypeError/ValueError naming the argument."""
    t_a_ms, t_b_ms = validate.nonnegative("t_a_ms", t_a_ms), validate.nonnegative("t_b_ms", t_b_ms)
    fraction_a = _fraction("fraction_a", fraction_a)
    return fraction_a * t_a_ms + (1.0 - fraction_a) * t_b_ms


def predict_loop_ms(t_zero_ms: float, t_full_ms: float, k_full: int, trips, block: int) -> float:
    """(c) Linear in the steps that blocks pay: ``t_zero_ms`` (every trip count 0: the loads and stores),
    ``t_full_ms`` (every element ``k_full`` trips); a block pays its max trip count
    (``simt.loop(trips, block).steps``) against ``n_blocks * k_full`` in the full run. Times in ms, finite and
    >= 0; k_full, block: ints >= 1; trips: (n,) ints >= 0, n >= 1. Raises TypeError/ValueError naming the
    argument."""
    t_zero_ms, t_full_ms = validate.nonnegative("t_zero_ms", t_zero_ms), validate.nonnegative("t_full_ms", t_full_ms)
    k_full, block = validate.positive_int("k_full", k_full), validate.positive_int("block", block)
    if np.size(trips) == 0:
        raise ValueError("trips must hold at least one trip count, got none")
    cost = simt.loop(np.asarray(trips), block)
    return t_zero_ms + (t_full_ms - t_zero_ms) * cost.steps / (cost.steps_per_group.size * k_full)
