"""Naming the mistake of one case of a learner's kernel from what ``kernelwatch`` saw (a ``Seen``) and the buffers
it left: an ordered list of small rules (``RULES``), each naming one mistake or passing, the first that names
one wins. Each message is true for what was seen: a loop or a kernel too slow for the interpreter, a process
that died or ended without its record, an exception, a store or load outside its buffer (given no mask: "mask
the store", "mask the load"; through its mask: offsets shifted by a constant, the constant named, or a mask that
does not bound the offsets, or a mask one element too wide), offsets shifted by a constant that stay inside the
buffers, an input written, no Triton launch, a launch count or shape other than the exercise prescribes, out read
while it held the poison (an accumulation into out), ``out`` never written or written by something other than the
kernel, programs that stored nothing into a partly written out (their blocks do not cover it), blocks that
overlap, a grid too small, two programs storing one element of out (or one loading what another stored), data the
launcher made loaded by a kernel, an input element never loaded, NaN from the kernel's own arithmetic, wrong
values (how many, the first index, expected against got; the answer with two arguments swapped; arithmetic in a
narrower float format), out filled before the first launch, more memory than the exercise allows, one program
doing all the work.
"""

from __future__ import annotations

import math
import signal
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
import torch

from ..core.tolerances import elementwise_mismatch
from . import MATH_FP32_ONLY
from .kernelwatch import Guarded, Limits, Seen, Stop, Violation

#: An out of at least this many elements written by a single program (every launch on grid (1,)) is named: on a
#: GPU one program runs on one SM.
ONE_PROGRAM_MIN_ELEMENTS = 1 << 16


class Finding(NamedTuple):
    """A mistake: ``kind`` (cases of one kind share a report line; its part before ":" selects the exercise's
    note) and the ``message`` for the learner."""

    kind: str
    message: str


class Mistake(str):
    """A ``mismatch`` hook's message that says what kind of mistake it is: ``check_kernel`` files it under ``kind``
    (its part before ":" selects the exercise's note) and says it as it is, where a plain str is a difference of
    values, filed under "values" as "values differ: ...". A str, so a checker that reads a hook's answer as its
    message (``run_cases``) takes it as one; text added to it (``+``) keeps the kind."""

    kind: str

    def __new__(cls, kind: str, message: str):
        self = super().__new__(cls, message)
        self.kind = kind
        return self

    def __add__(self, more: str) -> Mistake:
        return Mistake(self.kind, str(self) + more)


@dataclass
class Case:
    """One case's buffers, what was seen, and what the exercise asks. ``inputs`` and ``out``: the buffers the
    verdict reads (on a GPU, the device run's); ``checked``: whether ``seen`` holds the pre-flight's address
    checks; ``preflight_out``: on a GPU, the pre-flight's out (its poison differs from out's); ``limits``: the
    pre-flight's. Of the exercise: ``ref64`` the float64 answer, ``mismatch(got, ref64) -> None or message``
    (None: within one ulp of out's dtype), ``expect_launches`` and ``expect_grid`` (None: any), ``must_read``
    (inputs every element of which must be loaded; None: all), ``unwritten_hint(mask, stores, launches) -> None or
    message`` for a partly written out, ``memory_bound`` (bytes the launcher's process may grow by; None: any),
    ``swaps() -> iterable of (a, b, ref64, mismatch)``: for two arguments of one shape and dtype (or two floats),
    the float64 answer with them swapped and the ``mismatch`` that judges it (None: one ulp of out's dtype);
    ``out_name``: the exercise's name of out (``check_kernel`` says it in out's place)."""

    inputs: dict[str, Guarded]
    out: Guarded
    seen: Seen
    checked: bool
    preflight_out: Guarded | None = None
    limits: Limits | None = None
    ref64: torch.Tensor | None = None
    mismatch: Callable | None = None
    expect_launches: int | None = None
    expect_grid: tuple | list | None = None
    must_read: tuple | list | None = None
    unwritten_hint: Callable | None = None
    memory_bound: int | None = None
    swaps: Callable | None = None
    out_name: str = "out"

    @cached_property
    def unwritten(self) -> torch.Tensor:
        """Elements of out holding poison after the run, and after the pre-flight too where there was one, and
        never stored into where the pre-flight counted the stores: a kernel that stores a NaN equal to one run's
        poison (an e4m3 NaN is 0x7F or 0xFF) is seen storing it."""
        mask = self.out.unwritten()
        if self.preflight_out is not None:
            mask = mask & self.preflight_out.unwritten()
        stores = self.seen.stores if self.checked else None
        if stores is not None and stores.size == mask.numel():
            mask = mask & torch.from_numpy(stores == 0)
        return mask

    @property
    def launches(self) -> list[dict]:
        return self.seen.launches

    @cached_property
    def grids(self) -> list[tuple]:
        """The grids seen, in launch order."""
        return [tuple(rec["grid"]) for rec in self.launches if rec["grid"] is not None]

    @cached_property
    def got(self) -> torch.Tensor:
        return self.out.view.detach().double().cpu()

    @cached_property
    def ref(self) -> torch.Tensor:
        return self.ref64.double().cpu().reshape(self.got.shape)

    def compare(self, got: torch.Tensor, ref: torch.Tensor) -> str | None:
        if self.mismatch is not None:
            return self.mismatch(got, ref)
        return elementwise_mismatch(got, ref, self.out.view.dtype)


# ---- the messages ---------------------------------------------------------------------------------------------


def _span(lo: int, hi: int) -> str:
    if max(abs(lo), abs(hi)) >= 2**31:  # no offset of this buffer: another pointer, or an offset that overflowed
        return "more than 2^31 elements away: an offset that overflowed, or a pointer from elsewhere?"
    return f"index {lo}" if lo == hi else f"indices {lo} to {hi}"


#: What a kernel whose offsets are shifted must do instead (``shifted``).
SHIFT_FIX = "drop the constant: offs = pid * BLOCK + tl.arange(0, BLOCK), the offsets the mask offs < n bounds"


def _elements(k: int) -> str:
    return f"{k} element{'s' * (k != 1)}"


def shifted(shifts: dict, inputs, n: int) -> str | None:
    """What offsets shifted by a constant did, in the learner's words, from ``Seen.shifts`` (the constant between
    the element each lane of a 1-D access addressed and its place pid * BLOCK + lane): None where neither the
    store into out nor a load of one of ``inputs`` (names) was shifted. ``n``: out's elements. Offsets shifted
    alike in every access: each program's block starts s elements late (out[0] to out[s - 1] never written) or
    early; shifted unlike: out[i] computed from x[i + d], d the load's shift less the store's."""
    s_out = shifts.get("store:out")
    loads = {x: shifts.get(f"load:{x}") for x in inputs}
    loads = {x: s for x, s in loads.items() if s is not None}
    if not s_out and not any(loads.values()):
        return None
    if s_out and loads and all(s == s_out for s in loads.values()):
        if s_out > 0:
            last = min(s_out, n) - 1
            tail = "late, so out[0] is" if last == 0 else f"late, so out[0] to out[{last}] are"
            tail += " never written"
        else:
            tail = "early, so program 0's reaches before out[0]"
        return f"the offsets are shifted by {s_out:+d}: every block starts {_elements(abs(s_out))} {tail}"
    by = {}  # shift -> the accesses shifted by it
    if s_out:
        by.setdefault(s_out, []).append("the store into out")
    for x, s in loads.items():
        if s:
            by.setdefault(s, []).append(f"the load of {x}")
    head = "; ".join(f"the offsets of {' and '.join(w)} are shifted by {s:+d}" for s, w in by.items())
    if s_out is None or not loads:
        return head
    base = s_out or 0
    said = [f"{x}[i{s - base:+d}]" if s != base else f"{x}[i]" for x, s in loads.items()]
    return f"{head} (out[i] was computed from {' and '.join(said)})"


def _where(v: Violation) -> str:
    """Where accesses ``v`` went: "past the end of x (index 1000; n=1000)", "into x, an input (...)"."""
    n, span = v.n, _span(v.lo, v.hi)
    name = f"{v.name}, a tensor of the launcher's own," if v.own else v.name
    if v.width > v.itemsize > 0:
        span += f", an access {v.width} bytes wide where the elements of {v.name} are {v.itemsize} bytes"
    return {
        "after": f"past the end of {name} ({span}; n={n})",
        "before": f"before the start of {name} ({span})",
        "after_far": f"far past the end of {name} ({span}; n={n}), beyond its guard region",
        "before_far": f"far before the start of {name} ({span}), beyond its guard region",
        "into": f"into {name}, an input ({span})",
    }[v.side]


def violation_message(v: Violation, shift: int | None = None) -> str:
    """The learner's message for accesses outside their buffer. ``shift``: the constant ``Seen.shifts`` holds for
    this kind of access (None: none found); read only where the access was masked."""
    where, fix = violation_parts(v, shift)
    return where + fix


def violation_parts(v: Violation, shift: int | None = None, out_name: str = "out") -> tuple[str, str]:
    """``violation_message`` in two parts: where the accesses went ("stored past the end of out (...)") and what
    to do, from its separator on (": mask the store ...", ", through the mask: ..."). Accesses through the mask
    with the block's own offsets that reach only index n, one past the last element, are a mask one element too
    wide (offs <= n). ``out_name``: the exercise's name of out; a store past the end of a buffer named otherwise
    (the second output of an exercise with two) is told to mask by that buffer's length."""
    where, wide = _where(v), v.width > v.itemsize > 0
    verb = "stored" if v.op == "store" else "loaded"
    fix = {
        ("store", "after"): "mask the store, e.g. tl.store(out_ptr + offs, result, mask=offs < n)",
        ("load", "after"): "mask the load too, e.g. tl.load(x_ptr + offs, mask=offs < n)",
        ("store", "before"): "check the offsets (pid * BLOCK + tl.arange(0, BLOCK))",
        ("load", "before"): "check the offsets (pid * BLOCK + tl.arange(0, BLOCK))",
        ("store", "into"): "an input must stay as it is; write only into out",
    }.get((v.op, v.side.replace("_far", "")), "check the grid, the offsets and the mask")
    label = out_name if v.name == "out" else v.name
    if (v.op, v.side) == ("store", "after") and label != "out" and not v.masked:
        fix = f"mask the store into {label} by its own length ({v.n} element{'s' * (v.n != 1)} here)"
    if wide:
        fix = f"access {v.name} through a pointer of its own dtype, one element a lane"
    elif v.masked and v.side != "into":  # the mask let these lanes through: the offsets, or the mask, are wrong
        if shift == 0 and v.side == "after" and v.lo == v.hi == v.n:
            fix = (
                f"the mask let index n = {v.n} through, one past the last element, with the block's own offsets: "
                "offs <= n? bound them with offs < n"
            )
        elif shift == 0:
            fix = (
                f"the offsets are the block's own, so the mask let lanes outside {v.name} through: bound the offsets "
                f"by {v.name}'s elements (offs < n, n = {v.n} here)"
            )
        else:
            fix = (
                "the mask does not bound these offsets: check the offsets (pid * BLOCK + tl.arange(0, BLOCK)) and "
                "what the mask compares them with"
            )
    through = ", through the mask" if v.masked and v.side != "into" and not wide else ""
    return f"{verb} {where}", f"{through}: {fix}"


def stop_message(stop: Stop, limits: Limits) -> str:
    """The learner's message for a case the time limit stopped (``Stop``): a loop, or a kernel too slow for the
    interpreter, each said as what the interpreter's progress showed."""
    grid = f" in a launch with grid {tuple(stop.grid)}" if stop.grid else ""
    slow_fix = (
        "the interpreter runs a grid's programs one after another, so many small programs are slow there: give "
        "each program more work (a BLOCK of a few hundred elements or more)"
    )
    if stop.kind == "loop":
        head = f"did not finish within {limits.seconds:g} s in Triton's interpreter (stopped): "
        if stop.program < 0:
            what = f"no kernel ran for {stop.stalled:.3g} s (the launcher's own Python?)"
        else:
            what = f"program {_pid(stop.program, stop.grid)} ran {stop.stalled:.3g} s without finishing{grid}"
            if stop.finished:
                pace = (stop.elapsed - stop.stalled) / stop.finished
                what += f", where the {stop.finished} program(s) before it took {pace:.2g} s each"
        return f"{head}{what}: an endless loop? check each loop's bounds and step"
    if stop.ended:
        return (
            f"took {stop.elapsed:.3g} s in Triton's interpreter, past the {limits.slow_seconds:g} s a case may take "
            f"(its programs kept finishing: slow, not stuck){grid}: {slow_fix}"
        )
    done = (
        f"{stop.started} of {math.prod(stop.grid)} programs{grid} started" if stop.grid else "programs kept finishing"
    )
    need = f", so it needs about {stop.need:.3g} s" if stop.need else ""
    return (
        f"too slow for Triton's interpreter (stopped after {stop.elapsed:.3g} s): {done}, {stop.finished} finished "
        f"in all{need}, past the {limits.slow_seconds:g} s a case may take (programs keep finishing: slow, not "
        f"stuck): {slow_fix}"
    )


# ---- the rules, in the order they are tried ---------------------------------------------------------------------


def timed_out(c: Case) -> Finding | None:
    stop = c.seen.stop
    if not c.seen.timeout or stop is None:
        return None
    return Finding("timeout" if stop.kind == "loop" else "slow", stop_message(stop, c.limits))


def died(c: Case) -> Finding | None:
    sig = c.seen.died
    if sig is None:
        return None
    if sig == getattr(signal, "SIGXCPU", None):
        return Finding("died", (
            f"the process running the kernel used its {c.limits.cpu_s:g} CPU seconds and was stopped: an "
            "endless loop? check each loop's bounds and step; the notebook is unharmed"
        ))  # fmt: skip
    sname = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
    return Finding("died", f"the process running the kernel died ({sname}); the notebook is unharmed")


def record_lost(c: Case) -> Finding | None:
    if not c.seen.lost:
        return None
    return Finding("lost", (
        f"the process running your launcher ended before it could report ({c.seen.lost}: os._exit? a crash "
        "outside Python?): nothing it did could be checked; the notebook is unharmed"
    ))  # fmt: skip


def raised(c: Case) -> Finding | None:
    """An exception; kind "math_fp32" where it is a 16-bit input to one of Triton's math functions
    (``describe_error``'s ``MATH_FP32_ONLY``), else "raised"."""
    r = c.seen.raised
    if not r:
        return None
    if AUTOGRAD_IN_FORK in r:  # only a backward pass of autograd's engine raises this in the pre-flight's child
        return Finding("shortcut:autograd", (
            "not computed by your own code: your launcher ran a backward pass of torch's autograd (.backward() or "
            "torch.autograd.grad); the gradients must come from your kernel"
        ))  # fmt: skip
    if INTERPRETER_MASK in r:
        return Finding("raised:interpreter_mask", f"raised {r}: {INTERPRETER_MASK_FIX}")
    return Finding(("math_fp32:" if MATH_FP32_ONLY in r else "raised:") + r[:40], f"raised {r}")


#: Triton's interpreter's words (3.6) for a mask that is not a block of booleans: a scalar condition (row < M, from
#: a program id) combined with a block's comparison makes one, which a GPU compiles.
INTERPRETER_MASK = "mask has unsupported dtype"
#: What ``raised`` adds to ``INTERPRETER_MASK``.
INTERPRETER_MASK_FIX = (
    "the interpreter refuses a scalar test (row < M) joined to a block's mask, which a GPU compiles: "
    "write it over the block, cols * 0 + row < M"
)


#: What torch raises when a forked child (the pre-flight's) runs autograd's engine after its parent used it on a GPU
#: (https://github.com/pytorch/pytorch/wiki/Autograd-and-Fork).
AUTOGRAD_IN_FORK = "Autograd-and-Fork"


def outside_its_buffer(c: Case) -> Finding | None:
    """Accesses outside their buffer; where a mask let them through and their offsets were shifted by a constant
    (``shifted``), one message names the shift for them all, and only an access given no mask is told to mask."""
    if not c.seen.violations:
        return None
    viol = sorted(c.seen.violations, key=lambda v: (v.op != "store", v.name, v.side))
    shifts = c.seen.shifts
    moved = [v for v in viol if v.masked and v.side != "into" and v.width <= v.itemsize and shifts.get(_key(v))]
    said = shifted(shifts, list(c.inputs), c.out.n) if moved else None
    rest = [v for v in viol if not said or v not in moved]
    by_fix: dict[str, list[str]] = {}  # one fix, said once for every access it applies to
    for v in rest[:3]:
        where, fix = violation_parts(v, shifts.get(_key(v)), c.out_name)
        by_fix.setdefault(fix, []).append(where)
    msgs = [" and ".join(wheres) + fix for fix, wheres in by_fix.items()]
    kind = "bounds:" + ",".join(f"{v.op}:{v.name}:{v.side}" for v in viol)
    if said:
        where = " and ".join(f"{'stored' if v.op == 'store' else 'loaded'} {_where(v)}" for v in moved[:2])
        msgs.insert(0, f"{where}, through the mask: {said}: {SHIFT_FIX}")
        kind = "shifted:" + kind
    return Finding(kind, "; ".join(msgs[:3]))


def _key(v: Violation) -> str:
    return f"{v.op}:{v.name}"


def offsets_shifted(c: Case) -> Finding | None:
    """Offsets shifted by a constant that stayed inside the buffers (the mask bounds the shifted offsets): named
    where the case shows it, elements of out never written, elements of an input never loaded, or wrong values."""
    if not c.checked:
        return None
    said = shifted(c.seen.shifts, list(c.inputs), c.out.n)
    if said is None:
        return None
    unread = any(
        (r := c.seen.read.get(x)) is not None and not r.all()
        for x in (c.must_read if c.must_read is not None else c.inputs)
    )
    if not (c.unwritten.any() or unread or c.compare(c.out.view, c.ref) is not None):
        return None
    return Finding("shifted", f"{said}: {SHIFT_FIX}")


def input_changed(c: Case) -> Finding | None:
    for name, g in c.inputs.items():
        changed = g.changed()
        if changed.any() or g.written_after() or g.written_before():
            if changed.any():
                k, first = int(changed.sum()), int(changed.nonzero()[0])
                what = f"{k} of {g.n} elements of {name} changed (the first at flat index {first})"
            else:
                what = f"the memory next to {name} was written"
            return Finding(f"input:{name}", f"{what}: an input must stay as it is; write only into out")
    return None


def out_guard_written(c: Case) -> Finding | None:
    out = c.out
    after, before = out.written_after(), out.written_before()
    if after:
        return Finding("bounds:store:out:after", (
            f"wrote {after} element{'s' * (after > 1)} past the end of out (n={out.n}): mask the store, "
            "e.g. tl.store(out_ptr + offs, result, mask=offs < n)"
        ))  # fmt: skip
    if before:
        return Finding("bounds:store:out:before", (
            f"wrote {before} element(s) before the start of out: check the offsets (pid * BLOCK + tl.arange(0, BLOCK))"
        ))  # fmt: skip
    return None


def no_launch(c: Case) -> Finding | None:
    if c.launches:
        return None
    return Finding("no_launch", (
        "launched no Triton kernel: the exercise is to write one (@triton.jit) and launch it, kernel[grid](...)"
        + ("; out was written another way (torch?)" if not c.unwritten.all() else "")
    ))  # fmt: skip


def launch_count(c: Case) -> Finding | None:
    want = c.expect_launches
    if want is None or len(c.launches) == want:
        return None
    names = ", ".join(sorted({rec["kernel"] for rec in c.launches}))
    return Finding("launch_count", (
        f"launched {len(c.launches)} kernels ({names}); the exercise asks for exactly {want}: do every step in "
        "one kernel"
    ))  # fmt: skip


def grid_shape(c: Case) -> Finding | None:
    if c.expect_grid is None:
        return None
    want = list(c.expect_grid)
    got = [rec["grid"] for rec in c.launches]
    if any(g is not None and (g + [1] * 3)[:3] != (want + [1] * 3)[:3] for g in got):
        return Finding("grid_shape", f"launched with grid {tuple(got[0])}; the exercise prescribes grid {tuple(want)}")
    return None


def accumulated_into_out(c: Case) -> Finding | None:
    read = c.seen.poison_read
    if not c.checked or not read:
        return None
    if not (c.out.unwritten().any() or torch.isnan(c.got).any()):  # the poison read did not reach out
        return None
    how, first, count = read
    return Finding("poison_read", (
        f"your kernel {how} out[{first}] while it held the checker's poison (NaN), before anything stored there "
        f"({count} element(s) in all): out does not start as zeros (torch.empty gives whatever memory held); "
        "accumulate in registers and store once, or zero out in the launcher (out.zero_()) before the launch"
    ))  # fmt: skip


def never_written(c: Case) -> Finding | None:
    if not c.unwritten.all():
        return None
    if not c.checked:
        return Finding("never_written", (
            "out was never written: store into the out the launcher is given (a tensor the launcher returns or "
            "allocates is not read)"
        ))  # fmt: skip
    into = sorted({b for rec in c.launches for b in rec["stored"]} - {"out"})
    did = f"stored into {', '.join(into)}" if into else "stored nothing into the checker's buffers"
    empty = [g for g in c.grids if 0 in g]
    if empty and not into:
        return Finding("never_written", (
            f"out was never written: your kernel was launched with grid {empty[0]}, which runs no program; "
            "launch triton.cdiv(n, BLOCK) programs (at least one)"
        ))  # fmt: skip
    return Finding("never_written", (
        f"out was never written: your kernel {did}; store into the out the launcher is given (a tensor "
        "the launcher returns or allocates is not read)"
    ))  # fmt: skip


def out_not_by_kernel(c: Case) -> Finding | None:
    if c.checked and not any("out" in rec["stored"] for rec in c.launches):
        return Finding("not_by_kernel", (
            "out was written, but not by a tl.store of your kernel (torch code in the launcher?): the kernel "
            "must write out"
        ))  # fmt: skip
    return None


def out_changed_after(c: Case) -> Finding | None:
    if c.checked and c.seen.changed_after:
        return Finding("changed_after", (
            "out changed after your kernel's last launch (torch code in the launcher?): out must hold what the "
            "kernel stored"
        ))  # fmt: skip
    return None


def _pid(number: int, grid: list[int] | None) -> str:
    """The program id of the ``number``-th program the interpreter ran of a launch of ``grid`` (its loops: the
    first axis outermost), as the learner's tl.program_id values."""
    dims = list(grid or [number + 1])
    ids = []
    for d in reversed(dims):
        number, i = divmod(number, max(d, 1))
        ids.append(i)
    return str(tuple(reversed(ids)))


def programs_race(c: Case) -> Finding | None:
    r = c.seen.race
    if r is None or not c.checked:
        return None
    grid = c.launches[r.launch]["grid"] if r.launch < len(c.launches) else None
    a, b = _pid(r.first, grid), _pid(r.second, grid)
    order = "on a GPU the programs of a launch run in no fixed order"
    if r.op == "store":
        return Finding("race:store", (
            f"programs {a} and {b} both stored into out[{r.index}] ({r.elements} element(s) stored by more than "
            f"one program): right here only because the interpreter runs programs in order; {order}, so which "
            "store lands is chance, and work done more than once is wasted: each program must store only its own "
            "block"
        ))  # fmt: skip
    return Finding("race:load", (
        f"program {b} loaded out[{r.index}], which program {a} stored: right here only because Triton's "
        f"interpreter runs the programs one after another; {order}, so the load may come before the store: a "
        "program must compute from the inputs, not from what another program wrote"
    ))  # fmt: skip


def partly_written(c: Case) -> Finding | None:
    unwritten, out = c.unwritten, c.out
    if not unwritten.any():
        return None
    if c.unwritten_hint is not None:
        named = c.unwritten_hint(unwritten, c.seen.stores if c.checked else None, c.launches)
        if named:
            return Finding("unwritten", named)
    first = int(unwritten.nonzero()[0])
    count = int(unwritten.sum())
    idle = idle_programs(c)
    if idle:
        return Finding("idle_programs", (
            f"{idle} stored nothing into out, and {count} of its {out.n} elements were never written (the first at "
            f"flat index {first}): the grid is large enough; check how each program finds its block or tile from its "
            "program ids"
        ))  # fmt: skip
    grids = c.grids
    grid = f" (the grid was {grids[-1]})" if grids else ""
    tail = count == out.n - first  # every element from the first unwritten one on
    if tail and c.expect_grid is not None:
        # the grid is the one prescribed (checked before): the programs stopped short, the grid did not
        return Finding("partial", (
            f"elements {first} to {out.n - 1} of out were never written (n={out.n}) by the grid the exercise "
            f"prescribes{grid}"
        ))  # fmt: skip
    lanes = [rec.get("lanes") for rec in c.launches]  # the most lanes a store into out had: the block
    one_d = len(grids) == len(c.launches) and all(len(g) == 1 for g in grids)
    if tail and grids and one_d and all(lanes):
        covered = max(g[0] * b for g, b in zip(grids, lanes))
        if covered >= out.n:  # the programs' blocks reach past n: the store stopped short, not the grid
            r = c.seen.race if c.checked else None
            overlap = ""
            if r is not None and r.op == "store":
                grid = c.launches[r.launch]["grid"] if r.launch < len(c.launches) else None
                overlap = (
                    f"; programs {_pid(r.first, grid)} and {_pid(r.second, grid)} both stored out[{r.index}]: the "
                    "programs' blocks overlap, where each must start at its own pid * BLOCK"
                )
            return Finding("store_short", (
                f"elements {first} to {out.n - 1} of out were never written (n={out.n}), though the grid "
                f"{grids[-1]} of programs storing {lanes[-1]} elements each covers them{overlap}: check the store's "
                "mask (offs < n) and its offsets"
            ))  # fmt: skip
    if tail:
        return Finding("grid_small", (
            f"elements {first} to {out.n - 1} of out were never written (n={out.n}): the grid is too small"
            f"{grid}; launch triton.cdiv(n, BLOCK) programs"
        ))  # fmt: skip
    return Finding("partial", f"{count} of {out.n} elements of out were never written, the first at flat index {first}")


def idle_programs(c: Case) -> str | None:
    """Where a launch that stored into out had programs that stored nothing into it (``out_programs`` below its
    grid's size): "k of the P programs of the launch with grid G"; else None. Needs the pre-flight's record."""
    if not c.checked:
        return None
    for rec in c.launches:
        grid, stored = rec.get("grid"), rec.get("out_programs")
        if grid and stored is not None and "out" in rec["stored"] and stored < math.prod(grid):
            return f"{math.prod(grid) - stored} of the {math.prod(grid)} programs of the launch with grid {tuple(grid)}"
    return None


def computed_elsewhere(c: Case) -> Finding | None:
    made = c.seen.outside_data
    if not c.checked or not made:
        return None
    name, lanes = made
    return Finding("outside_data", (
        f"your kernel loaded {name}, a tensor the launcher made, in {lanes} lane(s) where no kernel had stored: "
        "its data was computed outside the kernel (torch?); out must be computed by your kernel, from the "
        "inputs it loads itself"
    ))  # fmt: skip


def input_unread(c: Case) -> Finding | None:
    if not c.checked:
        return None
    for name in c.must_read if c.must_read is not None else c.inputs:
        read = c.seen.read.get(name)
        missed = np.flatnonzero(~read) if read is not None else ()
        if len(missed):
            named = c.compare(c.out.view, c.ref)
            if isinstance(named, Mistake):  # the exercise names what the values show: that explains the reads too
                return Finding(
                    named.kind, f"{named} ({len(missed)} of {c.inputs[name].n} elements of {name} were never loaded)"
                )
            return Finding(f"unread:{name}", (
                f"{len(missed)} of {c.inputs[name].n} elements of {name} were never loaded (the first at flat "
                f"index {int(missed[0])}): out must be computed from every element of {name}"
            ))  # fmt: skip
    return None


def nan_in_out(c: Case) -> Finding | None:
    got, ref = c.got, c.ref
    nan_in = torch.isnan(got) & ~torch.isnan(ref)
    if not nan_in.any():
        return None
    i = int(nan_in.flatten().nonzero()[0])
    head = f"out[{i}] (flat) is NaN where the reference is {ref.flatten()[i].item():.6g}"
    if c.checked:
        return Finding("nan_arith", (
            f"{head}: no load left its input, so the kernel's arithmetic made it (0/0, inf - inf, log of a "
            "negative)"
        ))  # fmt: skip
    return Finding("nan", f"{head}: a load past the end of an input (its guard holds NaN), or the kernel's arithmetic")


#: The largest difference, as a fraction of the largest |answer|, at which ``swapped_pair`` asks the exercise's
#: mismatch whether out is the answer with two arguments swapped; farther, it is not.
SWAP_NEAR = 0.05


def swapped_pair(c: Case) -> tuple[str, str] | None:
    """The two arguments (names) with which swapped out holds the exercise's answer (``Case.swaps``), or None."""
    if c.swaps is None:
        return None
    got = c.out.view
    for a, b, ref64, mismatch in c.swaps():
        ref = ref64.double().cpu().reshape(got.shape)
        if torch.equal(ref, c.ref):  # the answer does not change when these two swap (x + y)
            continue
        far = (c.got - ref).abs().nan_to_num(float("inf")).max() > SWAP_NEAR * ref.abs().max() + 1e-6
        if bool(far):  # plainly another answer: the exercise's mismatch, which may cost much, is not asked
            continue
        if (mismatch(got, ref) if mismatch else elementwise_mismatch(got, ref, got.dtype)) is None:
            return a, b
    return None


#: Narrower float formats whose rounding a wrong result may show: (dtype, its unit roundoff, its name).
NARROWER = ((torch.float16, 2.0**-11, "float16"), (torch.bfloat16, 2.0**-8, "bfloat16"))
#: How many unit roundoffs of a narrower format, of the magnitude of the answer, a value may be off and still be
#: named as computed in that format (``narrower_precision``): a few roundings of a short chain of arithmetic.
NARROWER_ROUNDINGS = 8


def narrower_precision(c: Case) -> str | None:
    """Where every value of out is one that a format narrower than out's dtype holds (float16 first, then
    bfloat16), within ``NARROWER_ROUNDINGS`` of its unit roundoffs of the answer's magnitude (|ref| plus the mean
    |ref|, so that a value that cancels to near zero is judged by its terms' size): that format's name and the
    largest relative error, said as a message; else None."""
    dtype = c.out.view.dtype
    if not dtype.is_floating_point or dtype.itemsize < 4:
        return None
    got, ref = c.got.flatten(), c.ref.flatten()
    if not (torch.isfinite(got).all() and torch.isfinite(ref).all()) or not len(ref):
        return None
    err, size = (got - ref).abs(), ref.abs() + ref.abs().mean()
    for narrow, u, name in NARROWER:
        if not torch.equal(got.to(narrow).double(), got):  # a value this format cannot hold: not computed in it
            continue
        if bool((err <= NARROWER_ROUNDINGS * u * size).all()):
            worst = float((err / size.clamp_min(1e-300)).max())
            return (
                f"every value is one {name} holds, within a few {name} roundings of the answer (the largest error "
                f"{worst:.2g} of its magnitude, {name} rounds at {u:.2g}): arithmetic or a cast in {name}? compute "
                "in fp32 and round once, into out's dtype"
            )
    return None


def wrong_values(c: Case) -> Finding | None:
    """The values against the reference (the exercise's ``mismatch`` hook): a ``Mistake`` under its own kind, any
    other message as "values differ", with what the values show where it is one of: two arguments swapped
    (``swapped_pair``), arithmetic in a narrower float format (``narrower_precision``)."""
    msg = c.compare(c.out.view, c.ref)
    if msg is None:
        return None
    if isinstance(msg, Mistake):
        return Finding(msg.kind, str(msg))
    pair = swapped_pair(c)
    if pair and f"{pair[0]} and {pair[1]} swapped" not in msg:
        a, b = pair
        return Finding("swapped", (
            f"values differ: out is the answer with {a} and {b} swapped, each used where the other belongs: check "
            f"the order in which the launcher passes them and where the kernel uses each ({msg})"
        ))  # fmt: skip
    narrow = narrower_precision(c)
    if narrow:
        return Finding("precision", f"values differ: {narrow} ({msg})")
    return Finding("values", f"values differ: {msg}")


def prefilled(c: Case) -> Finding | None:
    host = c.preflight_out if c.preflight_out is not None else c.out
    shadow = getattr(host, "shadow", None)
    if not (c.checked and shadow is not None and c.launches[0].get("out_full_before") and bool(c.ref.ne(0).any())):
        return None
    if c.compare(shadow.view, c.ref) is None:
        return Finding("prefilled", (
            "out already held the answer before your kernel's first launch (computed in the launcher: torch?): "
            "the kernel must compute out, and the launcher only launch it"
        ))  # fmt: skip
    return None


def memory_past_bound(c: Case) -> Finding | None:
    peak, bound = c.seen.peak_bytes, c.memory_bound
    if bound is None or peak is None or peak <= bound:
        return None
    return Finding("memory", (
        f"the process running your launcher grew by {peak / 2**20:.0f} MB at its peak, more than the "
        f"{bound / 2**20:.0f} MB the exercise allows for this case: the work needs no tensor that large (a whole "
        "matrix where a block at a time would do?)"
    ))  # fmt: skip


def one_program(c: Case) -> Finding | None:
    grids, out = c.grids, c.out
    alone = len(grids) == len(c.launches) and all(math.prod(g) == 1 for g in grids)
    if c.expect_grid is None and out.n >= ONE_PROGRAM_MIN_ELEMENTS and alone:
        return Finding("one_program", (
            f"one program did all the work (every launch had grid (1,) for the {out.n} elements of out): on a GPU a "
            "program runs on one SM while the others idle, and a block this large does not fit in its registers; "
            "keep the block fixed (1024 elements, or a 64 x 64 tile) and launch one program per block, "
            "triton.cdiv(n, BLOCK) of them"
        ))  # fmt: skip
    return None


#: The rules, in order: what ends a run first (a time-out, a death, an exception, an access outside the buffers),
#: then what was written where, then the values, then how the work was spread.
RULES = (
    timed_out,
    died,
    record_lost,
    raised,
    outside_its_buffer,
    input_changed,
    out_guard_written,
    no_launch,
    launch_count,
    grid_shape,
    accumulated_into_out,
    offsets_shifted,
    never_written,
    out_not_by_kernel,
    out_changed_after,
    partly_written,
    programs_race,
    computed_elsewhere,
    input_unread,
    nan_in_out,
    wrong_values,
    prefilled,
    memory_past_bound,
    one_program,
)


def diagnose(c: Case) -> Finding | None:
    """The first of ``RULES`` that names a mistake in case ``c``, or None when it passed."""
    for rule in RULES:
        hit = rule(c)
        if hit is not None:
            return hit
    return None
