"""Checking a learner's Triton kernel without letting it crash or hang the notebook, and saying what went wrong.

The learner writes a launcher ``fn(*inputs, out)`` that launches their kernel and writes into ``out``. The
checker owns every buffer: each input and ``out`` is a view into the middle of a larger buffer whose guard
regions (1 MiB before and after) hold a poison bit pattern. Each case runs in two steps:

1. **Pre-flight**, in Triton's interpreter, in a forked child process with a time limit (``CASE_TIME_LIMIT_S``
   seconds on ``CLOCK``, the wall clock; a test puts in a clock that counts the child's programs instead), on
   guarded CPU buffers in shared memory. Every Triton launch is recorded (kernel, grid), and every load and
   store address is checked against the buffers before it happens: an access outside them is named (which
   buffer, which side, which indices) and masked off, so a far store never lands and never crashes the
   process. The record also says which buffers each launch stored into and which input elements were
   loaded. The child never touches CUDA (its buffers are CPU ones), dies with the process that forked it, and
   has a CPU limit (``CHILD_CPU_LIMIT_S``); where ``os.fork`` is missing (macOS, Windows) the pre-flight runs
   in this process, with the same address checks but no time limit, and the report says so.
2. **The run**: without a GPU the pre-flight was the run, and its shared buffers are read. On a GPU, only a
   case whose pre-flight was clean runs again on guarded GPU buffers (its launches recorded), and those are
   read.

Then the checker names the mistake, each message true for what it saw: a store or load outside its buffer
("mask the store", "mask the load"), an input written, no Triton launch, ``out`` written by something other
than the kernel, ``out`` never written, a grid too small, an input element never loaded, NaN from the
kernel's own arithmetic, a launch shape other than the exercise prescribes, wrong values (how many, the
first index, expected against got), an exception, a time-out. The report has one line per distinct mistake
with the number of cases it hit (``Report``).

Cases reach past one program of any block a learner may pick (``LONG_N``: above 2^17 elements). The idea is
Triton-Puzzles' (github.com/srush/Triton-Puzzles) and CS336's (stanford-cs336.github.io): a spec, a stub, a
checker with awkward sizes; the address checks are what compute-sanitizer does on a GPU, done in the
interpreter (triton/runtime/interpreter.py, whose loads and stores all go through ``InterpreterBuilder``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import inspect
import io
import json
import math
import mmap
import os
import select
import signal
import sys
import time

import numpy as np
import torch

from ..core.tolerances import elementwise_mismatch
from . import Report, _short, clip, describe_error

GUARD_BYTES = 1 << 20
#: Guard regions of the pre-flight's buffers: smaller, since there every access is checked before it happens.
PREFLIGHT_GUARD_BYTES = 1 << 16
#: Seconds one case may take in the pre-flight (Triton's interpreter, a child process) before it is stopped
#: and reported as a time-out ("an endless loop?"), read on ``CLOCK``. The slowest right kernel of the collection
#: takes a few seconds on its longest case.
CASE_TIME_LIMIT_S = 60.0
#: How often (seconds) the parent of a pre-flight's child reads ``CLOCK`` while it waits for the child's record.
POLL_S = 0.05
#: CPU seconds a pre-flight's child may use (``RLIMIT_CPU``; then SIGXCPU): a backstop for a child its parent can no
#: longer stop. Far above ``CASE_TIME_LIMIT_S``: the child runs one torch thread, so its CPU seconds seldom pass its
#: wall seconds. Linux also kills the child when the process that forked it ends (``PR_SET_PDEATHSIG``).
CHILD_CPU_LIMIT_S = 600
#: Length of the long case of the 1-D exercises: above 2^17, so that no single program of a power-of-two
#: BLOCK up to 2^17 covers it, odd, so that the last block is partial.
LONG_N = 2**17 + 4099
#: Poison bit patterns per element size: a quiet NaN with a payload for floats, a marker for integers.
#: Outputs and inputs get different patterns: NaN arithmetic keeps a payload, so a value computed from an
#: input's guard and stored past the end of out must not look like out's own untouched guard.
_POISON_BITS = {8: 0x7FF8_DEAD_BEEF_0001, 4: 0x7FC0_DEAD, 2: 0x7FDA, 1: 0x7F}  # NaN in fp64/32/16, bf16, e4m3
_INPUT_POISON_BITS = {8: 0x7FF8_0BAD_F00D_0002, 4: 0x7FC0_0BAD, 2: 0x7FCB, 1: 0x7E}
_INT_VIEW = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}
_CAN_FORK = hasattr(os, "fork") and sys.platform.startswith("linux")
#: In a pre-flight's child: the ``Progress`` it publishes to its parent (None elsewhere).
_PROGRESS: Progress | None = None
#: A launch of at least this many programs that takes the time limit is named as a grid too fine for the
#: interpreter (it runs a grid's programs one after another) as well as a possible endless loop.
FINE_GRID_PROGRAMS = 1 << 14
#: An out of at least this many elements written by a single program (every launch on grid (1,)) is named: on a
#: GPU one program runs on one SM.
ONE_PROGRAM_MIN_ELEMENTS = 1 << 16


_INHERITED = object()  # an attribute a patch shadows on a class that only inherits it


class Progress:
    """What a pre-flight's child has done so far, in int64s of memory it shares with its parent: ``programs``, the
    programs it started in this case (every launch together, counted as the interpreter starts each one), and
    ``grid``, the grid of the launch now running (None before the first). The child writes it; the parent reads it
    to name the launch a time-out stopped, and hands it to ``CLOCK``."""

    def __init__(self):
        self._mm = mmap.mmap(-1, 8 * 8)  # anonymous, MAP_SHARED: seen by a child forked after this
        self.words = np.frombuffer(self._mm, dtype=np.int64)  # [programs, number of dims, dims...]
        self.words[:] = 0

    @property
    def programs(self) -> int:
        return int(self.words[0])

    @property
    def grid(self) -> list[int] | None:
        dims = int(self.words[1])
        return [int(v) for v in self.words[2 : 2 + dims]] if dims else None

    def launch(self, grid: list[int]) -> None:
        """The child is about to run a launch of ``grid``."""
        if 0 < len(grid) <= len(self.words) - 2:
            self.words[2 : 2 + len(grid)] = grid
            self.words[1] = len(grid)

    def program(self) -> None:
        """The child is about to run one more program."""
        self.words[0] += 1


def wall_clock(progress: Progress) -> float:
    """The time limit's clock for a learner: seconds on ``time.monotonic`` (``progress`` is not read)."""
    return time.monotonic()


#: The clock the pre-flight's time limit reads: ``CLOCK(progress) -> seconds`` (``Progress``), read when the child
#: starts, every ``POLL_S`` while it runs, and once more when it has finished (a case whose reading passed
#: ``CASE_TIME_LIMIT_S`` by then is a time-out too). A test puts in a clock that counts ``progress.programs``, so that
#: a time-out is decided by what the kernel did, not by this machine's speed.
CLOCK = wall_clock


class Guarded:
    """A tensor of ``shape`` and ``dtype`` on ``device`` (``.view``), set in the middle of a buffer whose
    guard regions, ``GUARD_BYTES`` before and after, hold poison. ``fill`` is None to poison the view too
    (an output), or a tensor to copy into it (an input; its bits are kept to see later writes). ``shared``
    puts a CPU buffer in shared memory, so that a forked child's writes are seen here; ``guard_bytes`` is the
    size of each guard region; ``sign_flipped`` uses the poison with its sign bit set (an output's second run:
    ``unwritten`` of the two runs together cannot mistake a stored NaN that equals one poison for no store)."""

    def __init__(
        self,
        shape,
        dtype,
        device,
        fill: torch.Tensor | None = None,
        shared: bool = False,
        guard_bytes: int = GUARD_BYTES,
        sign_flipped: bool = False,
    ):
        self.itemsize = torch.empty((), dtype=dtype).element_size()
        self.n = math.prod(shape)
        self.g = guard_bytes // self.itemsize
        self.poison = (_POISON_BITS if fill is None else _INPUT_POISON_BITS)[self.itemsize]
        if sign_flipped:  # the same pattern with the sign bit set, as the signed integer the view holds
            self.poison -= 1 << (8 * self.itemsize - 1)
        ints = _INT_VIEW[self.itemsize]
        total = self.g + self.n + self.g
        if shared and torch.device(device).type == "cpu":
            self._mm = mmap.mmap(-1, total * self.itemsize)  # anonymous, MAP_SHARED: a forked child writes here
            self.bits = torch.frombuffer(self._mm, dtype=ints, count=total)
            self.bits.fill_(self.poison)
        else:
            self.bits = torch.full((total,), self.poison, dtype=ints, device=device)
        self.buf = self.bits.view(dtype)
        self.view = self.buf[self.g : self.g + self.n].view(shape)
        self.original = None
        if fill is not None:
            self.view.copy_(fill)
            self.original = self.bits[self.g : self.g + self.n].clone()

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

    def changed(self) -> torch.Tensor:
        """For an input: a bool mask over the view's elements (flat) whose bits differ from what was filled."""
        return (self.bits[self.g : self.g + self.n] != self.original).cpu()

    def digest(self) -> str:
        """A hash of the view's bits (to see whether it changed between two moments)."""
        return hashlib.blake2b(self.bits[self.g : self.g + self.n].cpu().numpy().tobytes(), digest_size=16).hexdigest()

    def region(self, name: str, role: str) -> tuple:
        """(name, role, view start, view end, buffer start, buffer end, itemsize, n): addresses in bytes."""
        lo, blo = self.view.data_ptr(), self.bits.data_ptr()
        return (
            name,
            role,
            lo,
            lo + self.n * self.itemsize,
            blo,
            blo + self.bits.numel() * self.itemsize,
            self.itemsize,
            self.n,
        )


# ---- watching launches, loads and stores -------------------------------------------------------------------


class _Abort(Exception):
    """Raised inside a launch at its first stray store: the store was not run, and the launch stops."""


class _Watch:
    """For the duration of a ``with`` block: records every Triton launch (kernel name, grid, the buffers it
    stored into) by wrapping ``run`` of ``JITFunction`` and ``InterpretedFunction`` (``kernel[grid](...)``
    and autotuners both go through it, Triton 3.6 to 3.9). With ``check``, the launches run in Triton's
    interpreter (a ``JITFunction`` is interpreted through ``InterpretedFunction(jit_fn.fn)``), and every
    load and store address is checked against ``regions`` before it happens: an access outside them is
    recorded in ``violations`` and masked off; the input elements loaded are marked in ``read``, and the stores
    into each element of ``out_name`` are counted in ``stores``. Each launch's record holds its integer arguments
    by parameter name (``ints``: ``BLOCK_M`` and the like)."""

    def __init__(self, regions: list[tuple], out_name: str, check: bool, out: Guarded | None = None):
        self.regions, self.out_name, self.check, self.out = regions, out_name, check, out
        n_out = next((r[7] for r in regions if r[0] == out_name), 0)
        self.stores = np.zeros(n_out, dtype=np.int64) if check else None
        self.launches: list[dict] = []
        self.violations: dict[tuple, list] = {}  # (op, name, side) -> [lanes, lowest index, highest index]
        self.read = {r[0]: np.zeros(r[7], dtype=bool) for r in regions if r[1] == "in"} if check else {}
        self.allowed: list[tuple[int, int]] = []  # storages of the learner's own tensors passed to a kernel
        self.last_digest = None
        self._interpreted: dict = {}
        self._current = None
        self.aborted = False

    # launches
    def _begin(self, kernel, args, kwargs) -> dict:
        fn = getattr(kernel, "fn", kernel)
        rec = dict(
            kernel=getattr(fn, "__name__", type(kernel).__name__), grid=None, stored=[], ints=_ints(fn, args, kwargs)
        )
        shadow = getattr(self.out, "shadow", None)
        if self.check and shadow is not None and not self.launches and not self.out.unwritten().any():
            shadow.view.copy_(self.out.view)  # out was whole before the first launch: keep it to compare
            rec["out_full_before"] = True
        ours = [(r[4], r[5]) for r in self.regions]
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, torch.Tensor) and a.device.type == "cpu":
                lo = a.untyped_storage().data_ptr()
                if not any(b0 <= lo < b1 for b0, b1 in ours):
                    self.allowed.append((lo, lo + a.untyped_storage().nbytes()))
        self.launches.append(rec)
        self._current = rec
        return rec

    def _grid(self, grid, rec):
        if callable(grid):

            def spy(meta, grid=grid):
                g = grid(meta)
                rec["grid"] = [int(v) for v in g]
                _show_progress(rec["grid"])
                return g

            return spy
        rec["grid"] = [int(v) for v in grid]
        _show_progress(rec["grid"])
        return grid

    def _end(self, rec):
        if self.check and self.out is not None:
            self.last_digest = self.out.digest()
        self._current = None

    def _as_interpreted(self, kernel):
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        key = id(kernel)
        if key not in self._interpreted:
            self._interpreted[key] = InterpretedFunction(kernel.fn)
            g = kernel.fn.__globals__
            for name, v in list(g.items()):  # @triton.jit helpers the kernel calls must be interpreted too
                if isinstance(v, JITFunction):
                    self._swaps.append((g, name, v))
                    g[name] = InterpretedFunction(v.fn)
        return self._interpreted[key]

    def _interpreted_helper(self, fn):
        from triton.runtime.interpreter import InterpretedFunction

        key = ("helper", id(fn))
        if key not in self._interpreted:
            self._interpreted[key] = InterpretedFunction(fn.fn)
        return self._interpreted[key]

    # loads and stores, in the interpreter
    def _access(self, op: str, ptrs, mask):
        from triton.runtime.interpreter import TensorHandle

        addr = np.asarray(ptrs.data).astype(np.int64)
        m = np.ones(addr.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool), addr.shape)
        try:
            ty = ptrs.get_element_ty() if hasattr(ptrs, "get_element_ty") else ptrs.dtype.element_ty
            size = max(1, ty.primitive_bitwidth // 8)
        except Exception:
            size = 1
        ok = ~m
        bad_into = np.zeros(addr.shape, bool)
        for name, role, lo, hi, _, _, item, _ in self.regions:
            inside = m & (addr >= lo) & (addr + size <= hi)
            if not inside.any():
                continue
            if op == "store" and role == "in":
                bad_into |= inside
                continue
            ok |= inside
            if op == "load" and role == "in":
                self.read[name][(addr[inside] - lo) // item] = True
            if op == "store" and self._current is not None and name not in self._current["stored"]:
                self._current["stored"].append(name)
            if op == "store" and name == self.out_name and self.stores is not None:
                np.add.at(self.stores, (addr[inside] - lo) // item, 1)
        for lo, hi in self.allowed:
            ok |= m & (addr >= lo) & (addr + size <= hi)
        bad = m & ~ok
        if not bad.any():
            return mask
        self._classify(op, addr[bad & ~bad_into], addr[bad_into], addr[m & ok])
        return TensorHandle(np.ascontiguousarray(m & ~bad), mask.dtype if mask is not None else _int1())

    def _classify(self, op, stray, into, valid):
        regions = self.regions
        for name, _, lo, hi, _, _, item, _ in regions:
            sel = (into >= lo) & (into < hi)
            if sel.any():
                self._note((op, name, "into"), (into[sel] - lo) // item)
        if not stray.size:
            return
        # a stray lane is named by the buffer the access's other lanes hit (the pointer it offsets from);
        # where no lane hit one, by the nearest buffer starting below it (offsets are most often positive)
        hit = [k for k, r in enumerate(regions) if ((valid >= r[2]) & (valid < r[3])).any()]
        if len(hit) == 1:
            k = hit[0]
        else:
            below = [(int(stray.min()) - r[2], k) for k, r in enumerate(regions) if r[2] <= int(stray.min())]
            k = min(below)[1] if below else min((r[2] - int(stray.min()), k) for k, r in enumerate(regions))[1]
        name, _, lo, hi, blo, bhi, item, _ = regions[k]
        for after in (True, False):
            for far in (False, True):
                side_sel = (stray >= hi) if after else (stray < lo)
                sel = side_sel & (((stray < blo) | (stray >= bhi)) == far)
                if sel.any():
                    side = ("after" if after else "before") + ("_far" if far else "")
                    self._note((op, name, side), (stray[sel] - lo) // item)

    def _note(self, key, index):
        index = np.atleast_1d(index)
        lo, hi = int(index.min()), int(index.max())
        v = self.violations.setdefault(key, [0, lo, hi])
        v[0] += int(index.size)
        v[1], v[2] = min(v[1], lo), max(v[2], hi)
        if key[0] == "store":  # the message is known: stop the launch before it spends the time limit
            self.aborted = True
            raise _Abort(key)

    def __enter__(self):
        from triton.runtime import interpreter

        from ..core.triton_compat import patch_interpreter

        patch_interpreter()  # the pre-flight runs in the interpreter on a GPU machine too
        from triton.runtime.jit import JITFunction

        self._patches, self._swaps = [], []
        orig_jit, orig_interp = JITFunction.run, interpreter.InterpretedFunction.run
        watch = self

        def wrap(orig, interpret_jit):
            def run(kernel, *args, grid, warmup, **kwargs):
                if warmup:
                    return orig(kernel, *args, grid=grid, warmup=warmup, **kwargs)
                rec = watch._begin(kernel, args, kwargs)
                grid = watch._grid(grid, rec)
                try:
                    if interpret_jit:
                        return orig_interp(watch._as_interpreted(kernel), *args, grid=grid, warmup=False, **kwargs)
                    return orig(kernel, *args, grid=grid, warmup=warmup, **kwargs)
                finally:
                    watch._end(rec)

            return run

        self._patch(JITFunction, "run", wrap(orig_jit, self.check))
        self._patch(interpreter.InterpretedFunction, "run", wrap(orig_interp, False))
        if self.check:
            # every @triton.jit function a kernel reaches (its helpers however named, their helpers, and
            # triton.language's own: tl.cdiv, tl.max, tl.sum are @jit functions too) runs interpreted: where
            # @triton.jit gave a JITFunction (a GPU), calling one raises "Cannot call @triton.jit'd outside of
            # the scope of a kernel"
            def call_interpreted(fn, *args, **kwargs):
                return watch._interpreted_helper(fn)(*args, **kwargs)

            self._patch(JITFunction, "__call__", call_interpreted)
            b = interpreter.InterpreterBuilder
            load, store = b.create_masked_load, b.create_masked_store
            rmw, cas = b.create_atomic_rmw, b.create_atomic_cas
            self._patch(
                b, "create_masked_load", lambda s, p, m, *r, **k: load(s, p, watch._access("load", p, m), *r, **k)
            )
            self._patch(
                b,
                "create_masked_store",
                lambda s, p, v, m, *r, **k: store(s, p, v, watch._access("store", p, m), *r, **k),
            )
            self._patch(
                b,
                "create_atomic_rmw",
                lambda s, o, p, v, m, *r, **k: rmw(s, o, p, v, watch._access("store", p, m), *r, **k),
            )

            def atomic_cas(s, p, *r, **k):
                if watch._access("store", p, None) is not None:
                    raise RuntimeError("an atomic_cas outside the checker's buffers (not run)")
                return cas(s, p, *r, **k)

            self._patch(b, "create_atomic_cas", atomic_cas)
            set_grid_idx = b.set_grid_idx  # called once before each program (Triton 3.6 to 3.9)

            def count_program(s, *idx, **k):
                _count_program()
                return set_grid_idx(s, *idx, **k)

            self._patch(b, "set_grid_idx", count_program)
        return self

    def _patch(self, owner, name, new):
        self._patches.append((owner, name, owner.__dict__.get(name, _INHERITED)))
        setattr(owner, name, new)

    def __exit__(self, *exc):
        for owner, name, old in reversed(self._patches):
            if old is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
        for g, name, v in reversed(self._swaps):
            g[name] = v
        return False

    def record(self) -> dict:
        """What was seen, as plain data (it crosses from the child process in JSON)."""
        unread = {}
        for name, r in self.read.items():
            missed = np.flatnonzero(~r)
            if missed.size:
                unread[name] = [int(missed.size), int(missed[0])]
        viol = [[*k, *v] for k, v in self.violations.items()]
        rec = dict(launches=self.launches, violations=viol, unread=unread, last_digest=self.last_digest)
        if self.stores is not None:  # one byte an element, at most 255
            rec["stores"] = base64.b64encode(np.minimum(self.stores, 255).astype(np.uint8).tobytes()).decode()
        return rec


def _show_progress(grid: list[int]) -> None:
    """In a pre-flight's child, publish the grid of the launch about to run (``_PROGRESS``)."""
    if _PROGRESS is not None:
        _PROGRESS.launch(grid)


def _count_program() -> None:
    """In a pre-flight's child, count one more program started (``_PROGRESS``)."""
    if _PROGRESS is not None:
        _PROGRESS.program()


def _ints(fn, args, kwargs) -> dict:
    """The integer arguments of a launch of the kernel whose Python function is ``fn``, by parameter name."""
    try:
        params = inspect.signature(fn).parameters
        bound = inspect.signature(fn).bind_partial(*args, **{k: v for k, v in kwargs.items() if k in params})
    except (TypeError, ValueError):
        return {}
    return {k: int(v) for k, v in bound.arguments.items() if isinstance(v, int) and not isinstance(v, bool)}


def stores_of(seen: dict) -> np.ndarray | None:
    """How many times the pre-flight stored into each element of out (flat, at most 255), or None unseen."""
    s = seen.get("stores")
    return None if s is None else np.frombuffer(base64.b64decode(s), dtype=np.uint8)


def _int1():
    import triton.language as tl

    return tl.int1


# ---- one case: pre-flight in a child, then (on a GPU) the run --------------------------------------------------


def _run_unguarded(seen: dict, device_type: str) -> bool:
    """Whether a case whose pre-flight ended as ``seen`` runs on the GPU without the address checks: on a GPU,
    when the interpreter raised and nothing else went wrong (no time-out, no crash, no access outside the
    buffers): the interpreter does not run every kernel the GPU compiles, and the GPU's own error, if any, is
    the true one. Only an error raised inside the interpreter's run of a kernel counts (``interpreter_error``);
    what the launcher's own Python raises (SystemExit, a ValueError, NotImplementedError) is the learner's, and is
    reported without a run on the GPU."""
    return (
        device_type != "cpu"
        and bool(seen.get("interpreter_error"))
        and not any(seen.get(k) for k in ("timeout", "died", "violations"))
    )


def _call(fn, args) -> dict:
    """Run the learner's launcher; an exception it raises (SystemExit too) becomes a message. KeyboardInterrupt
    is passed on: the learner stops the check."""
    try:
        fn(*args)
    except NotImplementedError:
        return dict(raised="NotImplementedError", not_implemented=True)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # the learner's bug (SystemExit included), reported rather than raised
        return dict(raised=clip(describe_error(e), 300), interpreter_error=_is_interpreter_error(e))
    return {}


def _is_interpreter_error(e: BaseException) -> bool:
    """Whether ``e`` was raised inside Triton's interpreter while it ran a kernel (``InterpreterError``)."""
    try:
        from triton.runtime.errors import InterpreterError
    except ImportError:  # pragma: no cover - a Triton without the interpreter's error class
        return False
    return isinstance(e, InterpreterError)


def _warm_interpreter(fn) -> None:
    """Rewrite, here, the interpreted kernels the launcher names (its globals and closure), so that each forked
    child finds them in ``InterpretedFunction``'s cache instead of rewriting them again. Best effort: a kernel
    it misses is rewritten in the child. GPU kernels (``JITFunction``) are left alone: rewriting adds names to
    their module."""
    try:
        from triton.runtime.interpreter import InterpretedFunction

        names = getattr(getattr(fn, "__code__", None), "co_names", ())
        found = [getattr(fn, "__globals__", {}).get(k) for k in names]
        found += [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if c.cell_contents is not None]
        for k in found:
            if isinstance(k, InterpretedFunction):
                k.rewrite()
    except Exception:
        pass


def _preflight_here(fn, args, regions, out_name, out: Guarded) -> dict:
    with _Watch(regions, out_name, check=True, out=out) as w:
        res = _call(fn, args)
    if w.aborted:  # the launch was stopped at a stray store: that, not the exception, is the news
        res = {}
    return {**w.record(), **res}


def _preflight(fn, args, regions, out_name, out: Guarded, limit_s: float, clock=None) -> dict:
    """Run ``fn(*args)`` (CPU tensors in shared memory) under a checking ``_Watch`` in a forked child, stopped
    once ``clock`` (default ``CLOCK``) has moved more than ``limit_s`` since the child started; returns its record,
    or dict(timeout=True, grid=the grid of the launch it stopped or None) / dict(died=signal number)."""
    if not _CAN_FORK:
        return {**_preflight_here(fn, args, regions, out_name, out), "no_fork": True}
    clock = clock or CLOCK
    r, w = os.pipe()
    progress = Progress()
    sys.stdout.flush()
    sys.stderr.flush()
    start = clock(progress)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: CPU buffers only, never CUDA; it leaves by os._exit, running no cleanup of ours
        try:
            _tie_to_parent(parent)
            global _PROGRESS
            _PROGRESS = progress
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # an interrupt stops the child at once
            sys.stdout = sys.stderr = io.StringIO()  # the learner's prints stay out of the parent's streams
            torch.set_num_threads(1)
            os.environ["TRITON_INTERPRET"] = "1"
            with contextlib.suppress(Exception):
                import triton

                triton.knobs.runtime.interpret = True
            try:
                res = _preflight_here(fn, args, regions, out_name, out)
            except KeyboardInterrupt:
                res = dict(interrupted=True)
            except BaseException as e:
                res = dict(raised=clip(describe_error(e), 300))
            data = json.dumps(res).encode()
            while data:
                data = data[os.write(w, data) :]
        finally:
            os._exit(0)
    os.close(w)
    chunks, done, timed_out = [], False, False
    try:
        while not done:
            if select.select([r], [], [], POLL_S)[0]:
                chunk = os.read(r, 1 << 16)
                done = not chunk  # the child closed its end: its record is whole
                chunks.append(chunk)
            if clock(progress) - start > limit_s:  # read once more after the record: a late finish is a time-out
                timed_out = True
                break
    finally:
        os.close(r)
        if timed_out or sys.exc_info()[0] is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if timed_out:
        return dict(timeout=True, grid=progress.grid)
    if os.WIFSIGNALED(status):
        return dict(died=os.WTERMSIG(status))
    res = json.loads(b"".join(chunks) or b"{}")
    if res.get("interrupted"):
        raise KeyboardInterrupt
    return res


def _tie_to_parent(parent: int) -> None:
    """In a pre-flight's child: die with the process ``parent`` that forked it (Linux's PR_SET_PDEATHSIG; a
    notebook kernel killed mid-check leaves no child spinning), and use at most ``CHILD_CPU_LIMIT_S`` CPU seconds
    (RLIMIT_CPU). Source: prctl(2), getrlimit(2)."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1  # <linux/prctl.h>
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the parent ended before the signal was asked for
        os._exit(0)
    with contextlib.suppress(Exception):
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (CHILD_CPU_LIMIT_S, CHILD_CPU_LIMIT_S + 5))


def _run_on_device(fn, args, out: Guarded) -> dict:
    """The run on a GPU (after a clean pre-flight): launches recorded, nothing checked per address."""
    with _Watch([], "out", check=False) as w:
        res = _call(fn, args)
    if not res and out.view.is_cuda:
        try:
            torch.cuda.synchronize()
        except Exception as e:
            res = dict(raised=clip(describe_error(e), 300))
    return {"launches": w.launches, **res}


# ---- the messages --------------------------------------------------------------------------------------------


def _span(lo: int, hi: int) -> str:
    return f"index {lo}" if lo == hi else f"indices {lo} to {hi}"


def _violation_message(op, name, side, lanes, lo, hi, sizes) -> str:
    n = sizes[name]
    where = {
        "after": f"past the end of {name} ({_span(lo, hi)}; n={n})",
        "before": f"before the start of {name} ({_span(lo, hi)})",
        "after_far": f"far past the end of {name} ({_span(lo, hi)}; n={n}), beyond its guard region",
        "before_far": f"far before the start of {name} ({_span(lo, hi)}), beyond its guard region",
        "into": f"into {name}, an input ({_span(lo, hi)})",
    }[side]
    verb = "stored" if op == "store" else "loaded"
    fix = {
        ("store", "after"): "mask the store, e.g. tl.store(out_ptr + offs, result, mask=offs < n)",
        ("load", "after"): "mask the load too, e.g. tl.load(x_ptr + offs, mask=offs < n)",
        ("store", "before"): "check the offsets (pid * BLOCK + tl.arange(0, BLOCK))",
        ("load", "before"): "check the offsets (pid * BLOCK + tl.arange(0, BLOCK))",
        ("store", "into"): "an input must stay as it is; write only into out",
    }.get((op, side.replace("_far", "")), "check the grid, the offsets and the mask")
    return f"{verb} {where}: {fix}"


class _Case:
    """One case's buffers and what was seen: ``diagnose`` turns it into (kind, message) or None."""

    def __init__(
        self, inputs: dict[str, Guarded], out: Guarded, seen: dict, checked: bool, preflight_out: Guarded | None = None
    ):
        self.inputs, self.out, self.seen, self.checked = inputs, out, seen, checked
        self.preflight_out = preflight_out  # on a GPU, the pre-flight's out (its poison differs from out's)

    def unwritten(self) -> torch.Tensor:
        """Elements of out holding poison after the run, and after the pre-flight too where there was one: a
        kernel that stores a NaN equal to one run's poison (an e4m3 NaN is 0x7F or 0xFF) is seen storing it."""
        mask = self.out.unwritten()
        return mask & self.preflight_out.unwritten() if self.preflight_out is not None else mask


def _timeout_message(grid: list[int] | None) -> str:
    head = f"did not finish within {CASE_TIME_LIMIT_S:g} s in Triton's interpreter (stopped)"
    if not grid:
        return f"{head}: an endless loop? check each loop's bounds and step"
    programs = math.prod(grid)
    if programs >= FINE_GRID_PROGRAMS:
        return (
            f"{head} in a launch of {programs} programs (grid {tuple(grid)}): the interpreter runs a grid's programs "
            "one after another, so a grid this fine is slow there; give each program more work (a BLOCK of a few "
            "hundred elements or more), and check each loop's bounds and step in case one never ends"
        )
    return f"{head} in a launch with grid {tuple(grid)}: an endless loop? check each loop's bounds and step"


def _diagnose_case(
    c: _Case, ref64, mismatch, expect_launches, expect_grid, must_read, unwritten_hint=None
) -> tuple[str, str] | None:
    s, out = c.seen, c.out
    if s.get("timeout"):
        return "timeout", _timeout_message(s.get("grid"))
    if "died" in s:
        sig = s["died"]
        if sig == getattr(signal, "SIGXCPU", None):
            return "died", (
                f"the process running the kernel used its {CHILD_CPU_LIMIT_S:g} CPU seconds and was stopped: an "
                "endless loop? check each loop's bounds and step; the notebook is unharmed"
            )
        sname = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return "died", f"the process running the kernel died ({sname}); the notebook is unharmed"
    if s.get("raised"):
        return "raised:" + s["raised"][:40], f"raised {s['raised']}"
    if s.get("violations"):
        sizes = {**{k: g.n for k, g in c.inputs.items()}, "out": out.n}
        viol = sorted(s["violations"], key=lambda v: (v[0] != "store", v[1], v[2]))
        msgs = [_violation_message(*v, sizes) for v in viol[:3]]
        return "bounds:" + ",".join(f"{v[0]}:{v[1]}:{v[2]}" for v in viol), "; ".join(msgs)
    for name, g in c.inputs.items():
        changed = g.changed()
        if changed.any() or g.written_after() or g.written_before():
            if changed.any():
                k, first = int(changed.sum()), int(changed.nonzero()[0])
                what = f"{k} of {g.n} elements of {name} changed (the first at flat index {first})"
            else:
                what = f"the memory next to {name} was written"
            return f"input:{name}", f"{what}: an input must stay as it is; write only into out"
    after, before = out.written_after(), out.written_before()
    if after:
        return "bounds:store:out:after", (
            f"wrote {after} element{'s' * (after > 1)} past the end of out (n={out.n}): mask the store, "
            "e.g. tl.store(out_ptr + offs, result, mask=offs < n)"
        )
    if before:
        return "bounds:store:out:before", (
            f"wrote {before} element(s) before the start of out: check the offsets (pid * BLOCK + tl.arange(0, BLOCK))"
        )
    launches = s.get("launches", [])
    grids = [tuple(rec["grid"]) for rec in launches if rec["grid"] is not None]  # grids seen, in launch order
    unwritten = c.unwritten()
    if not launches:
        return "no_launch", (
            "launched no Triton kernel: the exercise is to write one (@triton.jit) and launch it, kernel[grid](...)"
            + ("; out was written another way (torch?)" if not unwritten.all() else "")
        )
    if expect_launches is not None and len(launches) != expect_launches:
        names = ", ".join(sorted({rec["kernel"] for rec in launches}))
        return "launch_count", (
            f"launched {len(launches)} kernels ({names}); the exercise asks for exactly {expect_launches}: "
            "do every step in one kernel"
        )
    if expect_grid is not None:
        want = list(expect_grid)
        got = [rec["grid"] for rec in launches]
        if any(g is not None and (g + [1] * 3)[:3] != (want + [1] * 3)[:3] for g in got):
            return "grid_shape", f"launched with grid {tuple(got[0])}; the exercise prescribes grid {tuple(want)}"
    stored_out = any("out" in rec["stored"] for rec in launches)
    if unwritten.all():
        if c.checked:
            into = sorted({b for rec in launches for b in rec["stored"]} - {"out"})
            did = f"stored into {', '.join(into)}" if into else "stored nothing into the checker's buffers"
            empty = [g for g in grids if 0 in g]
            if empty and not into:
                return "never_written", (
                    f"out was never written: your kernel was launched with grid {empty[0]}, which runs no program; "
                    "launch triton.cdiv(n, BLOCK) programs (at least one)"
                )
            return "never_written", (
                f"out was never written: your kernel {did}; store into the out the launcher is given (a tensor "
                "the launcher returns or allocates is not read)"
            )
        return "never_written", (
            "out was never written: store into the out the launcher is given (a tensor the launcher returns or "
            "allocates is not read)"
        )
    if c.checked and not stored_out:
        return "not_by_kernel", (
            "out was written, but not by a tl.store of your kernel (torch code in the launcher?): the kernel "
            "must write out"
        )
    if c.checked and s.get("changed_after"):
        return "changed_after", (
            "out changed after your kernel's last launch (torch code in the launcher?): out must hold what the "
            "kernel stored"
        )
    if unwritten.any():
        named = unwritten_hint and unwritten_hint(unwritten, stores_of(s) if c.checked else None, launches)
        if named:
            return "unwritten", named
        first = int(unwritten.nonzero()[0])
        count = int(unwritten.sum())
        grid = f" (the grid was {grids[-1]})" if grids else ""
        if count == out.n - first and expect_grid is not None:
            # the grid is the one prescribed (checked above): the programs stopped short, the grid did not
            return "partial", (
                f"elements {first} to {out.n - 1} of out were never written (n={out.n}) by the grid the exercise "
                f"prescribes{grid}"
            )
        blocks = [rec["ints"].get("BLOCK") for rec in launches]
        one_d = len(grids) == len(launches) and all(len(g) == 1 for g in grids)
        if count == out.n - first and grids and one_d and all(blocks):
            covered = max(g[0] * b for g, b in zip(grids, blocks))
            if covered >= out.n:  # the programs' blocks reach past n: the store stopped short, not the grid
                return "store_short", (
                    f"elements {first} to {out.n - 1} of out were never written (n={out.n}), though the grid "
                    f"{grids[-1]} of BLOCK={blocks[-1]} covers them: check the "
                    "store's mask (offs < n) and its offsets"
                )
        if count == out.n - first:
            return "grid_small", (
                f"elements {first} to {out.n - 1} of out were never written (n={out.n}): the grid is too small"
                f"{grid}; launch triton.cdiv(n, BLOCK) programs"
            )
        return "partial", f"{count} of {out.n} elements of out were never written, the first at flat index {first}"
    if c.checked:
        for name in must_read if must_read is not None else c.inputs:
            miss = s.get("unread", {}).get(name)
            if miss:
                return f"unread:{name}", (
                    f"{miss[0]} of {c.inputs[name].n} elements of {name} were never loaded (the first at flat "
                    f"index {miss[1]}): out must be computed from every element of {name}"
                )
    got = out.view.detach().double().cpu()
    ref = ref64.double().cpu().reshape(got.shape)
    nan_in = torch.isnan(got) & ~torch.isnan(ref)
    if nan_in.any():
        i = int(nan_in.flatten().nonzero()[0])
        head = f"out[{i}] (flat) is NaN where the reference is {ref.flatten()[i].item():.6g}"
        if c.checked:
            return "nan_arith", (
                f"{head}: every load stayed inside its input, so the NaN comes from the kernel's arithmetic "
                "(0/0, inf - inf, sqrt or log of a negative, ...)"
            )
        return "nan", f"{head}: a load past the end of an input (its guard holds NaN), or the kernel's arithmetic"
    compare = mismatch or (lambda g, r: elementwise_mismatch(g, r, out.view.dtype))
    msg = compare(out.view, ref)
    if msg is not None:
        return "values", f"values differ: {msg}"
    host = c.preflight_out if c.preflight_out is not None else out
    shadow = getattr(host, "shadow", None)
    if c.checked and shadow is not None and launches[0].get("out_full_before") and bool(ref.ne(0).any()):
        if compare(shadow.view, ref) is None:
            return "prefilled", (
                "out already held the answer before your kernel's first launch (computed in the launcher: torch?): "
                "the kernel must compute out, and the launcher only launch it"
            )
    one_program = len(grids) == len(launches) and all(math.prod(g) == 1 for g in grids)
    if expect_grid is None and out.n >= ONE_PROGRAM_MIN_ELEMENTS and one_program:
        return "one_program", (
            f"one program did all the work (every launch had grid (1,) for the {out.n} elements of out): on a GPU a "
            "program runs on one SM while the others idle, and a block this large does not fit in its registers; "
            "keep the block fixed (1024 elements, or a 64 x 64 tile) and launch one program per block, "
            "triton.cdiv(n, BLOCK) of them"
        )
    return None


# ---- the checker ---------------------------------------------------------------------------------------------------


def check_kernel(
    name: str,
    fn,
    cases: list[dict],
    *,
    out,
    reference,
    mismatch=None,
    launches: int | None = None,
    grid=None,
    must_read=None,
    notes: dict | None = None,
    unwritten=None,
) -> Report:
    """Run the learner's launcher on each case (the module docstring says how) and name each mistake; returns a
    ``Report`` with one line per distinct mistake and the number of cases it hit.

    cases: dicts of named arguments in call order; tensors are placed in guarded buffers, other values are
    passed as they are. out(case) -> (shape, dtype) of the output; reference(case) -> the float64 answer;
    mismatch(got, ref64, case) -> None or a message comparing the values (default: one ulp of out's dtype).
    launches: the number of kernel launches the exercise prescribes (None: any, at least one); grid(case) ->
    the grid it prescribes (None: any); must_read: the inputs every element of which must be loaded (default
    all; ``()`` for none); notes: extra text per kind of mistake ("grid_small", "partial", "never_written",
    "values", ...), appended to its line; unwritten(case, mask, stores, launches) -> None or the message for a
    partly written out, said before the generic ones (mask: bool, flat, True where out was never written;
    stores: uint8 counts of the pre-flight's stores into each element of out, None where unseen; launches: the
    records, with ``grid`` and ``ints``). The call is ``fn(*case.values(), out)``. NotImplementedError on the
    first case means "not attempted"; whatever else the launcher raises is reported, never raised
    (KeyboardInterrupt excepted: it stops the check).
    """
    rep = Report(name, failed=0)
    found: dict[str, list] = {}  # kind -> [message, cases hit, first case's arguments]
    no_fork = False
    unguarded: list[str] = []  # the interpreter's errors of cases that ran on the GPU without the pre-flight
    for i, case in enumerate(cases):
        rep.cases += 1
        desc = ", ".join(f"{k}={_short(v)}" for k, v in case.items() if not k.startswith("_"))
        shape, dtype = out(case)
        tensors = {k: v for k, v in case.items() if isinstance(v, torch.Tensor)}
        device = next((v.device for v in tensors.values()), torch.device("cpu"))
        host = dict(device="cpu", shared=True, guard_bytes=PREFLIGHT_GUARD_BYTES)
        host_in = {k: Guarded(v.shape, v.dtype, fill=v.cpu(), **host) for k, v in tensors.items()}
        host_out = Guarded(shape, dtype, **host)
        host_out.shadow = Guarded(shape, dtype, **host)  # out as it was at the first launch, if already whole
        _warm_interpreter(fn)
        regions = [g.region(k, "in") for k, g in host_in.items()] + [host_out.region("out", "out")]
        args = [host_in[k].view if k in host_in else v for k, v in case.items()] + [host_out.view]
        seen = _preflight(fn, args, regions, "out", host_out, CASE_TIME_LIMIT_S)
        seen["changed_after"] = seen.get("last_digest") not in (None, host_out.digest())
        no_fork |= bool(seen.get("no_fork"))
        if seen.get("not_implemented"):
            if i == 0:
                return Report(name, attempted=False)
            seen = dict(raised="NotImplementedError")
        c = _Case(host_in, host_out, seen, checked=True)
        clean = not any(seen.get(k) for k in ("timeout", "died", "raised", "violations"))
        interpreter_failed = _run_unguarded(seen, device.type)
        if device.type != "cpu" and (clean or interpreter_failed):  # on a GPU: the case again, on device buffers
            dev_in = {k: Guarded(v.shape, v.dtype, device, fill=v) for k, v in tensors.items()}
            dev_out = Guarded(shape, dtype, device, sign_flipped=True)
            args = [dev_in[k].view if k in dev_in else v for k, v in case.items()] + [dev_out.view]
            ran = _run_on_device(fn, args, dev_out)
            if ran.get("not_implemented"):
                ran = dict(raised="NotImplementedError")
            if interpreter_failed:
                # Triton's interpreter cannot run every kernel the GPU compiles (Triton 3.6 on a GPU: reductions,
                # loops over loaded bounds): this run has no address checks, and the GPU's own error, if any, is
                # the one reported
                unguarded.append(seen["raised"])
                seen = dict(ran)
            else:
                seen = {**seen, **{k: v for k, v in ran.items() if k != "launches"}}
                if not ran.get("launches"):  # the stores' record is the pre-flight's; the launches must happen here too
                    seen["launches"] = []
            c = _Case(
                dev_in,
                dev_out,
                seen,
                checked=not interpreter_failed,
                preflight_out=None if interpreter_failed else host_out,
            )
        try:
            hit = _diagnose_case(
                c,
                reference(case),
                mismatch and (lambda g, r, case=case: mismatch(g, r, case)),
                launches,
                grid and grid(case),
                must_read,
                unwritten and (lambda u, st, ln, case=case: unwritten(case, u, st, ln)),
            )
        except Exception as e:  # a result the comparison cannot read
            hit = ("unreadable", f"could not read the result ({type(e).__name__}: {clip(str(e), 120)})")
        if hit is not None:
            rep.failed += 1
            kind, msg = hit
            entry = found.setdefault(kind, [msg, 0, desc])
            entry[1] += 1
        out_of_cpu = "died" in seen and seen["died"] == getattr(signal, "SIGXCPU", None)
        if seen.get("timeout") or out_of_cpu:  # an endless loop would take the limit again on every case: stop here
            rep.cases = len(cases)
            if i + 1 < len(cases) and hit is not None:
                found[hit[0]][0] += f" (the remaining {len(cases) - i - 1} cases were not run)"
            break
    base = notes or {}
    for kind, (msg, hits, desc) in found.items():
        note = base.get(kind.split(":")[0], "")
        rep.failures.append(clip(f"{msg}{note} [{hits} of {rep.cases} cases, e.g. {name}({desc})]", 400))
    if no_fork:
        rep.note = "no time limit here (this platform has no os.fork): an endless loop would hang the check"
    if unguarded:
        rep.note = clip(
            f"Triton's interpreter could not pre-flight {len(unguarded)} case(s) ({unguarded[0]}): they ran on the "
            "GPU without the address checks, so a store past the end there is not caught before it runs",
            400,
        )
    return rep
