"""Store or recompute: bytes, FLOPs, launches and memory of y = s(s(s(x))) computed three ways.

The three ways (``gpulab.kernels.sigmoid3.WAYS``):

- ``"eager"``: three ``torch.sigmoid`` calls under autograd. Each sigmoid saves its output, so s1, s2 and
  s3 (= y) stay in memory until backward, which reads them back.
- ``"checkpoint"``: the same calls under ``torch.utils.checkpoint(..., use_reentrant=False)``: forward keeps
  only y; backward reruns the three sigmoids (writing s1, s2, s3 again) and then differentiates them.
- ``"fused"``: ``gpulab.kernels.sigmoid3.sigmoid3``, one Triton kernel each way: forward reads x, writes y
  and saves x; backward reads x and dy, rebuilds s1, s2, s3 in registers and writes dx.

Counts are by hand, per element, for n elements of ``itemsize`` bytes, with no cache reuse (the seed
lecture's model: every array a kernel touches goes through HBM). FLOPs count one sigmoid as 4 operations
(negate, exp, add, divide) and one sigmoid backward step g * s * (1 - s) as 3 (subtract, two multiplies).
Idea: Stanford CS336 Lecture 5, "Recompute a cheap value instead of saving it".

Memory is counted in tensors of n elements above the inputs, in two settings: "loss" (training: y feeds a
scalar loss and is not kept) and "held" (the caller keeps y and passes a dense dy): what is held between
forward and backward, and the peak over forward + backward. ``gpulab.bench.lesson05.measure_memory`` measures
the same on a GPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..core import validate

WAYS = ("eager", "checkpoint", "fused")
SIGMOID_FLOPS = 4  # -x, exp, 1 + e, 1 / (...)
SIGMOID_BWD_FLOPS = 3  # 1 - s, s * (1 - s), g * (...)


@dataclass(frozen=True)
class Counts:
    """Hand counts of one way for n elements: element transfers through HBM (reads + writes), bytes,
    FLOPs and kernel launches, for forward and backward separately."""

    way: str
    n: int
    itemsize: int
    fwd_elements: int
    bwd_elements: int
    fwd_flops: int
    bwd_flops: int
    fwd_launches: int
    bwd_launches: int

    @property
    def elements(self) -> int:
        return self.fwd_elements + self.bwd_elements

    @property
    def bytes_moved(self) -> int:
        return self.elements * self.itemsize

    @property
    def flops(self) -> int:
        return self.fwd_flops + self.bwd_flops

    @property
    def launches(self) -> int:
        return self.fwd_launches + self.bwd_launches

    def asdict(self) -> dict:
        return {**asdict(self), "bytes_moved": self.bytes_moved, "flops": self.flops, "launches": self.launches}


def counts(way: str, n: int, itemsize: int) -> Counts:
    """Hand counts for ``way`` (one of ``WAYS``) on n elements of ``itemsize`` bytes (4 for fp32, 2 for
    fp16/bf16). Raises ValueError for an unknown way, TypeError/ValueError naming ``n`` (an int >= 0) or
    ``itemsize`` (an int >= 1).

    - eager: forward, three kernels each read one array and write one (6n); backward, three sigmoid-backward
      kernels each read the upstream gradient and the saved output and write a gradient (9n). 15n in all.
    - checkpoint: forward as eager (6n: s1 and s2 are written, then freed); backward reruns the forward (6n)
      and then the three backward kernels (9n). 21n, and the forward FLOPs twice.
    - fused: forward reads x and writes y (2n); backward reads x and dy and writes dx (3n). 5n, with the
      forward FLOPs twice (recomputed in backward).
    """
    if way not in WAYS:
        raise ValueError(f"way must be one of {WAYS}, got {way!r}")
    n, itemsize = validate.integer("n", n), validate.positive_int("itemsize", itemsize)
    f, b = 3 * SIGMOID_FLOPS * n, 3 * SIGMOID_BWD_FLOPS * n
    if way == "eager":
        return Counts(way, n, itemsize, 6 * n, 9 * n, f, b, 3, 3)
    if way == "checkpoint":
        return Counts(way, n, itemsize, 6 * n, 15 * n, f, f + b, 3, 6)
    return Counts(way, n, itemsize, 2 * n, 3 * n, f, f + b, 1, 1)


def bytes_saved_by_recompute(n: int, itemsize: int) -> int:
    """Bytes the fused way does not move compared with eager: 15n - 5n = 10n elements."""
    return counts("eager", n, itemsize).bytes_moved - counts("fused", n, itemsize).bytes_moved


# Memory above the inputs, in tensors of n elements, in two settings (``SETTINGS``):
#
# "loss": the training pattern. y goes into a scalar loss (loss = y.sum()) and only the loss is kept, so y
#   is freed unless autograd saved it; backward starts from the loss, and autograd hands y's gradient on as
#   one value expanded with stride 0 (no n-element dy exists). Autograd frees a node's saved tensors as soon
#   as that node has run, and a gradient once the next node has consumed it.
#   eager      after forward: s1, s2, s3 (= y), saved by the three sigmoids       -> 3
#              peak: the first backward step writes g2 while s1, s2, s3 are alive;
#              the second writes g1 beside s1, s2, g2 (s3 was freed)              -> 4
#   checkpoint after forward: nothing (y is not saved; x is the input)            -> 0
#              peak: backward reruns s1, s2, s3, then proceeds as eager            -> 4
#   fused      after forward: nothing (it saved only x)                           -> 0
#              peak: y during forward, dx during backward, never both             -> 1
#
# "held": the caller keeps y until backward ends and passes a dense dy (as ``torch.autograd.grad(f(x), x, dy)``
#   does); memory above x and dy. y and dx must then coexist, so no way goes below 2.
#   eager      after forward: s1, s2, y (= s3)                                    -> 3
#              peak: the second step writes g1 while s1, s2, y and g2 are alive   -> 5
#   checkpoint after forward: y                                                  -> 1
#              peak: backward's rerun holds s1, s2, s3 again beside y; then g2, g1
#              as in eager (each recomputed tensor is released once used)         -> 5
#   fused      after forward: y                                                  -> 1
#              peak: y and dx                                                    -> 2
SETTINGS = ("loss", "held")
_HELD = {"loss": {"eager": 3, "checkpoint": 0, "fused": 0}, "held": {"eager": 3, "checkpoint": 1, "fused": 1}}
_PEAK = {"loss": {"eager": 4, "checkpoint": 4, "fused": 1}, "held": {"eager": 5, "checkpoint": 5, "fused": 2}}


def memory_model(way: str, n: int, itemsize: int, setting: str = "loss") -> dict:
    """Predicted extra memory (bytes above the inputs) of ``way`` on n elements of ``itemsize`` bytes:
    ``held_bytes`` between forward and backward and ``peak_bytes`` over forward + backward, with the counts in
    tensors of n elements (``held_tensors``, ``peak_tensors``). ``setting`` (one of ``SETTINGS``): "loss", y
    feeds a scalar loss and is not kept (training); "held", the caller keeps y and passes a dense dy (see the
    table above this function). Raises ValueError for an unknown way or setting, TypeError/ValueError naming
    ``n`` (an int >= 0) or ``itemsize`` (an int >= 1)."""
    if way not in WAYS:
        raise ValueError(f"way must be one of {WAYS}, got {way!r}")
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}, got {setting!r}")
    n, itemsize = validate.integer("n", n), validate.positive_int("itemsize", itemsize)
    h, p = _HELD[setting][way], _PEAK[setting][way]
    return dict(
        way=way,
        n=n,
        itemsize=itemsize,
        setting=setting,
        held_tensors=h,
        peak_tensors=p,
        held_bytes=h * n * itemsize,
        peak_bytes=p * n * itemsize,
    )


def forward_backward(fn, x, dy=None):
    """A function that runs y = fn(x) and returns dx with ``torch.autograd.grad`` (x must require grad; nothing
    accumulates into x.grad, so repeated calls do the same work). With ``dy``: dx = d(y . dy)/dx, the caller
    holding y ("held"); without: dx = d(y.sum())/dx, y dropped once the loss exists ("loss"). Raises
    ValueError if x does not require grad."""
    import torch

    if not x.requires_grad:
        raise ValueError("x must require grad (x.requires_grad_()): without it nothing is differentiated")

    if dy is None:

        def step():
            return torch.autograd.grad(fn(x).sum(), x)[0]
    else:

        def step():
            return torch.autograd.grad(fn(x), x, dy)[0]

    return step
