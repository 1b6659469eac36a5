"""Checking a learner's Triton kernel without letting it crash the notebook, and saying what went wrong.

The learner writes a launcher ``fn(*inputs, out)`` that launches their kernel and writes into ``out``. The
checker owns every buffer: each input and ``out`` is a view into the middle of a larger buffer whose guard
regions (1 MiB before and after) hold a poison bit pattern. After the launch the checker reads the guards
and the output and names the mistake:

- a store past the end (no mask, or a wrong one): the guard after ``out`` changed -> "mask the store";
- a store before the start: the guard before ``out`` changed -> "check the offsets";
- a grid too small: the tail of ``out`` still holds poison -> "launch cdiv(n, BLOCK) programs";
- a load past the end feeding a stored value: NaN from the input's guard in ``out`` -> "mask the load";
- wrong values: how many elements differ, the first index, expected against got.

A store far beyond the guards (a grid hundreds of times too large) can still corrupt memory in the
interpreter; the guards make every usual mistake land inside memory the checker owns. The idea is
Triton-Puzzles' (github.com/srush/Triton-Puzzles) and CS336's (stanford-cs336.github.io): a spec, a stub, a
checker with awkward sizes.
"""

from __future__ import annotations

import math

import torch

from ..tolerances import elementwise_mismatch
from . import Report, run_cases

GUARD_BYTES = 1 << 20
#: Poison bit patterns per element size: a quiet NaN with a payload for floats, a marker for integers.
#: Outputs and inputs get different patterns: NaN arithmetic keeps a payload, so a value computed from an
#: input's guard and stored past the end of out must not look like out's own untouched guard.
_POISON_BITS = {8: 0x7FF8_DEAD_BEEF_0001, 4: 0x7FC0_DEAD, 2: 0x7FDA, 1: 0x7F}  # NaN in fp64/32/16, bf16, e4m3
_INPUT_POISON_BITS = {8: 0x7FF8_0BAD_F00D_0002, 4: 0x7FC0_0BAD, 2: 0x7FCB, 1: 0x7E}
_INT_VIEW = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}


class Guarded:
    """A tensor of ``shape`` and ``dtype`` on ``device`` (``.view``), set in the middle of a buffer whose
    guard regions, ``GUARD_BYTES`` before and after, hold poison. ``fill`` is None to poison the view too
    (an output), or a tensor to copy into it (an input)."""

    def __init__(self, shape, dtype, device, fill: torch.Tensor | None = None):
        self.itemsize = torch.empty((), dtype=dtype).element_size()
        self.n = math.prod(shape)
        self.g = GUARD_BYTES // self.itemsize
        self.poison = (_POISON_BITS if fill is None else _INPUT_POISON_BITS)[self.itemsize]
        ints = _INT_VIEW[self.itemsize]
        self.bits = torch.full((self.g + self.n + self.g,), self.poison, dtype=ints, device=device)
        self.buf = self.bits.view(dtype)
        self.view = self.buf[self.g : self.g + self.n].view(shape)
        if fill is not None:
            self.view.copy_(fill)

    def _poisoned(self, part: torch.Tensor) -> torch.Tensor:
        return part == self.poison

    def written_before(self) -> int:
        """How many guard elements before the view were overwritten."""
        return int((~self._poisoned(self.bits[: self.g])).sum())

    def written_after(self) -> int:
        """How many guard elements after the view were overwritten."""
        return int((~self._poisoned(self.bits[self.g + self.n :])).sum())

    def unwritten(self) -> torch.Tensor:
        """A bool mask over the view's elements (flat) still holding poison."""
        return self._poisoned(self.bits[self.g : self.g + self.n]).cpu()


def diagnose(out: Guarded, ref64: torch.Tensor, inputs: list[Guarded], mismatch=None) -> str | None:
    """None if ``out`` matches ``ref64`` and nothing outside it was written; else one message naming the
    mistake (see the module docstring). ``mismatch(got, ref64)`` returns None or a message comparing the
    values (default: one ulp of out's dtype, ``tolerances.elementwise_mismatch``)."""
    after, before = out.written_after(), out.written_before()
    if after:
        return (
            f"wrote {after} element{'s' * (after > 1)} past the end of out (n={out.n}): mask the store, "
            "e.g. tl.store(out_ptr + offs, result, mask=offs < n)"
        )
    if before:
        return (
            f"wrote {before} element(s) before the start of out: check the offsets (pid * BLOCK + tl.arange(0, BLOCK))"
        )
    for inp in inputs:
        if inp.written_after() or inp.written_before():
            return "wrote into memory next to an input: a store goes through the wrong pointer or offset"
    unwritten = out.unwritten()
    if unwritten.any():
        first = int(unwritten.nonzero()[0])
        count = int(unwritten.sum())
        if count == out.n - first:
            return (
                f"elements {first} to {out.n - 1} of out were never written (n={out.n}): the grid is too "
                "small; launch triton.cdiv(n, BLOCK) programs"
            )
        return f"{count} of {out.n} elements of out were never written, the first at flat index {first}"
    got = out.view.detach().double().cpu()
    ref = ref64.double().cpu().reshape(got.shape)
    nan_in = torch.isnan(got) & ~torch.isnan(ref)
    if nan_in.any() and inputs:
        i = int(nan_in.flatten().nonzero()[0])
        return (
            f"out[{i}] (flat) is NaN where the reference is {ref.flatten()[i].item():.6g}: a load read past "
            "the end of an input (its guard holds NaN); mask the load too"
        )
    msg = (mismatch or (lambda g, r: elementwise_mismatch(g, r, out.view.dtype)))(out.view, ref)
    return None if msg is None else f"values differ: {msg}"


def check_kernel(name: str, fn, cases: list[dict], *, out, reference, mismatch=None) -> Report:
    """Run the learner's launcher on each case and diagnose each result; returns a ``Report``.

    cases: dicts of named arguments in call order; tensors are placed in guarded buffers, other values are
    passed as they are. out(case) -> (shape, dtype) of the output; reference(case) -> the float64 answer;
    mismatch(got, ref64, case) -> None or a message comparing the values (default: ``diagnose``'s one ulp).
    The call is ``fn(*case.values(), out)``. NotImplementedError on the first case means "not attempted";
    any other exception is reported for that case, never raised.
    """

    def launch(fn, case):
        guarded_in = {
            k: Guarded(v.shape, v.dtype, v.device, fill=v) for k, v in case.items() if isinstance(v, torch.Tensor)
        }
        args = [guarded_in[k].view if k in guarded_in else v for k, v in case.items()]
        shape, dtype = out(case)
        device = next((v.device for v in case.values() if isinstance(v, torch.Tensor)), "cpu")
        o = Guarded(shape, dtype, device)
        fn(*args, o.view)
        if torch.cuda.is_available() and o.view.is_cuda:
            torch.cuda.synchronize()
        return o, list(guarded_in.values())

    def compare(case, got):
        o, guarded_in = got
        values = None if mismatch is None else (lambda g, ref: mismatch(g, ref, case))
        return diagnose(o, reference(case), guarded_in, values)

    return run_cases(name, fn, cases, compare, call=launch)
