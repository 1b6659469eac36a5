"""Watching a learner's Triton launches: guarded buffers, every load and store checked before it happens, and the
pre-flight child that runs the launcher under a time limit. What is seen comes back as a ``Seen``;
``kerneldiagnosis`` names the mistake from it and ``kernelcheck.check_kernel`` runs the cases.

- ``Guarded``: a tensor set in the middle of a larger buffer whose guard regions hold a poison bit pattern;
  ``Region``: the addresses of one such buffer, as the checks see them.
- ``Watch``: while it is entered, every Triton launch is recorded (kernel, grid, the buffers it stored into, its
  integer arguments), and with ``check`` the launches run in Triton's interpreter, whose loads and stores all go
  through ``InterpreterBuilder`` (triton/runtime/interpreter.py): each address is checked against the buffers
  before it happens, and an access outside them is named (which buffer, which side, which indices) and masked
  off, so a far store never lands and never crashes the process. It also records which program stored each
  element of out (a ``Race``), reads of out's poison, and loads of data the launcher made itself.
- ``preflight``: the launcher under a checking ``Watch`` in a forked child process on guarded CPU buffers in
  shared memory, under a time limit read on the interpreter's progress (``Limits``, ``judge_progress``): a case
  where nothing starts or ends in a kernel for ``Limits.seconds`` loops, one whose programs keep finishing may
  run on, and is stopped as slow only where its pace says it would take too long. The child never touches CUDA,
  dies with the process that forked it (PR_SET_PDEATHSIG), has a CPU limit of its own (RLIMIT_CPU), and leads a
  process group that is killed when the case ends (what the launcher forks goes with it); without ``os.fork``
  it runs in this process, with the same address checks and no time limit.
- ``run_on_device``: the launcher on a GPU's buffers, its launches recorded, nothing checked per address.

The address checks are what compute-sanitizer does on a GPU, done in the interpreter.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
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
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

import gpulab

from ..core.patches import Patches
from . import clip, describe_error

GUARD_BYTES = 1 << 20
#: Guard regions of the pre-flight's buffers: smaller, since there every access is checked before it happens.
PREFLIGHT_GUARD_BYTES = 1 << 16
#: Poison bit patterns per element size: a quiet NaN with a payload for floats, a marker for integers.
#: Outputs and inputs get different patterns: NaN arithmetic keeps a payload, so a value computed from an
#: input's guard and stored past the end of out must not look like out's own untouched guard.
_POISON_BITS = {8: 0x7FF8_DEAD_BEEF_0001, 4: 0x7FC0_DEAD, 2: 0x7FDA, 1: 0x7F}  # NaN in fp64/32/16, bf16, e4m3
_INPUT_POISON_BITS = {8: 0x7FF8_0BAD_F00D_0002, 4: 0x7FC0_0BAD, 2: 0x7FCB, 1: 0x7E}
_INT_VIEW = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}
#: In a pre-flight's child: the ``Progress`` it publishes to its parent (None elsewhere), and the time limit's clock.
_PROGRESS: Progress | None = None
_CLOCK = None

_BASE = "_gpulab_buffer"  # the attribute of an interpreter's pointer that names the buffer it was offset from


@dataclass(frozen=True)
class Region:
    """One guarded buffer as the address checks see it: ``name`` (the launcher's argument), ``role`` ("in" or
    "out"), the view's bytes [``lo``, ``hi``), the whole buffer's bytes [``buf_lo``, ``buf_hi``) (its guard
    regions included), ``itemsize`` (bytes) and ``n`` (elements of the view). Addresses in bytes."""

    name: str
    role: str
    lo: int
    hi: int
    buf_lo: int
    buf_hi: int
    itemsize: int
    n: int

    def index(self, addr):
        """The view's element index of byte address ``addr`` (an int or an int64 array; negative before it)."""
        return (addr - self.lo) // self.itemsize


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

    def region(self, name: str, role: str) -> Region:
        """This buffer's ``Region``, named ``name``, of ``role`` ("in" or "out")."""
        lo, blo = self.view.data_ptr(), self.bits.data_ptr()
        return Region(name, role, lo, lo + self.n * self.itemsize, blo, blo + self.bits.numel() * self.itemsize,
                      self.itemsize, self.n)  # fmt: skip


class Progress:
    """What a pre-flight's child has done so far, in memory it shares with its parent: ``programs``, the programs
    it started in this case (every launch together, counted as the interpreter starts each one), ``finished``
    (those that ended), ``running`` (whether one runs now), ``grid`` (the launch now running; None before the
    first), ``in_launch`` (the programs it started of that launch), ``last_event`` (the time-limit clock's reading
    when a program last started or ended, or a launch ended). The child writes it; the parent reads it to tell a
    kernel that loops from one that is slow, and hands it to the clock."""

    _PROGRAMS, _FINISHED, _RUNNING, _IN_LAUNCH, _DIMS, _GRID, _LAST = 0, 1, 2, 3, 4, 5, 8  # word offsets

    def __init__(self):
        self._mm = mmap.mmap(-1, 16 * 8)  # anonymous, MAP_SHARED: seen by a child forked after this
        self.words = np.frombuffer(self._mm, dtype=np.int64)
        self.times = np.frombuffer(self._mm, dtype=np.float64)  # the same memory; only _LAST is read as a time
        self.words[:] = 0

    @property
    def programs(self) -> int:
        return int(self.words[self._PROGRAMS])

    @property
    def finished(self) -> int:
        return int(self.words[self._FINISHED])

    @property
    def running(self) -> bool:
        return bool(self.words[self._RUNNING])

    @property
    def in_launch(self) -> int:
        return int(self.words[self._IN_LAUNCH])

    @property
    def last_event(self) -> float:
        return float(self.times[self._LAST])

    @property
    def grid(self) -> list[int] | None:
        dims = int(self.words[self._DIMS])
        return [int(v) for v in self.words[self._GRID : self._GRID + dims]] if dims else None

    def launch(self, grid: list[int]) -> None:
        """The child is about to run a launch of ``grid``."""
        if 0 < len(grid) <= 3:
            self.words[self._GRID : self._GRID + len(grid)] = grid
            self.words[self._DIMS] = len(grid)
        self.words[self._IN_LAUNCH] = 0

    def program(self, clock) -> None:
        """The child is about to run one more program; ``clock`` is read before it is counted, so a clock that
        charges each program as it starts leaves this one's time out of ``last_event``."""
        self._end_program()
        self.times[self._LAST] = clock(self)
        self.words[self._PROGRAMS] += 1
        self.words[self._IN_LAUNCH] += 1
        self.words[self._RUNNING] = 1

    def end_launch(self, clock) -> None:
        """The launch now running has ended (its last program with it)."""
        if self.running:
            self._end_program()
            self.times[self._LAST] = clock(self)

    def _end_program(self) -> None:
        if self.words[self._RUNNING]:
            self.words[self._FINISHED] += 1
            self.words[self._RUNNING] = 0


@dataclass(frozen=True)
class Limits:
    """How a pre-flight runs, on ``clock(progress) -> seconds`` (read every ``poll_s`` seconds while the child
    runs, once more when it has finished, and by the child as each program starts). Once a case has taken
    ``seconds``, the interpreter's progress decides: where nothing started or ended in a kernel for ``seconds``
    (one program running all that while), it loops and is stopped; where programs keep finishing, it runs on
    while it would end within ``slow_factor`` times ``seconds`` at its pace, and is stopped as slow otherwise.
    ``cpu_s``: the child's own CPU limit (RLIMIT_CPU); ``fork``: whether to run in a forked child (else here,
    with no time limit)."""

    seconds: float
    clock: Callable[[Progress], float]
    poll_s: float
    cpu_s: int
    fork: bool
    slow_factor: float = 5.0

    @property
    def slow_seconds(self) -> float:
        return self.seconds * self.slow_factor


@dataclass
class Stop:
    """Why the pre-flight stopped a case, or judged it after it ended: ``kind`` "loop" (nothing started or
    ended in a kernel for ``stalled`` seconds) or "slow" (programs kept finishing, too slowly: ``need`` seconds
    in all at their pace; ``ended`` when it did end, past the limit). ``elapsed``: seconds on the clock; ``grid``:
    the launch running (None: the launcher's own code); ``program``: the number of the program running in it (in
    the interpreter's order; -1: none); ``started``: the programs of that launch started; ``finished``: the
    programs the case finished, all launches together."""

    kind: str
    elapsed: float
    grid: list[int] | None = None
    program: int = -1
    started: int = 0
    finished: int = 0
    stalled: float = 0.0
    need: float = 0.0
    ended: bool = False


def judge_progress(progress: Progress, elapsed: float, now: float, limits: Limits, ended: bool) -> Stop | None:
    """The time limit, read on the interpreter's progress: None to go on (or, ``ended``, to take the case as it
    is), else why to stop. ``elapsed``: seconds since the child started; ``now``: the clock's reading."""
    if elapsed <= limits.seconds:
        return None
    grid, started, finished = progress.grid, progress.in_launch, progress.finished
    if ended:
        if elapsed <= limits.slow_seconds:
            return None
        return Stop("slow", elapsed, grid, -1, started, finished, need=elapsed, ended=True)
    stalled = now - progress.last_event if progress.last_event or finished or progress.running else elapsed
    running = progress.running
    if stalled > limits.seconds:
        return Stop("loop", elapsed, grid if running else None, started - 1 if running else -1, started, finished,
                    stalled)  # fmt: skip
    if finished == 0:  # a first program under way: no pace yet
        return Stop("slow", elapsed, grid, started - 1, started, finished) if elapsed > limits.slow_seconds else None
    pace = elapsed / finished
    left = (math.prod(grid) - started + running) if grid and running else 0
    need = elapsed + pace * left
    if need > limits.slow_seconds or elapsed > limits.slow_seconds:
        return Stop("slow", elapsed, grid, started - 1 if running else -1, started, finished, stalled, need)
    return None


@dataclass
class Violation:
    """Accesses outside their buffer of one kind: ``op`` ("load" or "store") ``side`` of buffer ``name``
    ("after", "before", "after_far", "before_far" beyond the guard region, or "into" an input), on ``lanes``
    lanes in all, at element indices ``lo`` to ``hi`` of that buffer. An access ``after`` may start inside the
    buffer and run past its end (``width``, its bytes, above ``itemsize``, the buffer's). ``n``: the buffer's
    elements; ``own``: the buffer is a tensor of the launcher's own (a kernel parameter's name, no guard; a tensor
    the checker made for the launcher, ``checker_made``, is not, and has the exercise's name);
    ``masked``: every access of this kind that strayed was given a mask, and these lanes passed it (False: one at
    least had none, ``tl.load(p)`` or ``tl.store(p, v)``; atomics count as unmasked)."""

    op: str
    name: str
    side: str
    lanes: int
    lo: int
    hi: int
    n: int = 0
    width: int = 0
    itemsize: int = 0
    own: bool = False
    masked: bool = False


@dataclass
class Race:
    """Two programs of one launch that touched one element of out, the first seen: program number ``second``
    (in the interpreter's order: the last grid axis fastest) did ``op`` ("store" or "load") on flat element
    ``index`` of out, which program ``first`` had stored; in launch ``launch`` (its index). ``elements``: how
    many elements of out such a pair touched in all."""

    op: str
    index: int
    first: int
    second: int
    launch: int
    elements: int


@dataclass
class Seen:
    """What one case's run showed. Of the launcher: ``launches`` (one record a launch: ``kernel``, ``grid``,
    ``stored`` the buffers it stored into, ``ints`` its integer arguments by parameter name, ``lanes`` the most
    lanes a store into out had, ``out_programs`` how many of its programs stored into out, and ``out_full_before`` when out was whole before the first), ``raised`` (its
    exception, described; with ``interpreter_error`` when Triton's interpreter raised it while running a kernel),
    ``not_implemented`` (the stub), ``interrupted``. Of the address checks (the pre-flight only): ``race`` (two
    programs of one launch that stored into one element of out, or one that loaded what another stored: right
    only in the interpreter's order), ``violations``, ``read`` (input name -> bool per element: loaded by a
    kernel), ``stores`` (uint8 counts of the stores into each element of out, at most 255), ``poison_read`` (a
    load of out, or an atomic on it, while it held the poison: [how, first flat index, elements]),
    ``outside_data`` (a load of data the launcher made: [the kernel's parameter name, lanes]), ``shifts``
    ("load:x", "store:out" -> the one constant ``Watch`` found between the element each lane of a 1-D access
    addressed and its place in its program's block, pid * lanes + lane, over every such access of that kind in
    every launch of a 1-D grid; None where it varied), ``last_digest`` (out's digest after the last launch) and
    ``changed_after`` (out changed since). Of the child: ``timeout``
    with ``stop`` (why the time limit stopped it, or judged it slow once it ended), ``elapsed`` (its seconds on
    the time limit's clock), ``died`` (the signal that ended it), ``lost`` (how it ended without its record),
    ``no_fork`` (it ran in this process, without a time limit), ``peak_bytes`` (how much its resident memory grew
    at its peak while the launcher ran; None where unmeasured)."""

    launches: list[dict] = field(default_factory=list)
    race: Race | None = None
    violations: list[Violation] = field(default_factory=list)
    read: dict[str, np.ndarray] = field(default_factory=dict)
    stores: np.ndarray | None = None
    poison_read: list | None = None
    outside_data: list | None = None
    shifts: dict[str, int | None] = field(default_factory=dict)
    last_digest: str | None = None
    changed_after: bool = False
    raised: str = ""
    interpreter_error: bool = False
    not_implemented: bool = False
    interrupted: bool = False
    timeout: bool = False
    stop: Stop | None = None
    elapsed: float | None = None
    died: int | None = None
    lost: str = ""
    no_fork: bool = False
    peak_bytes: int | None = None

    @property
    def stopped(self) -> bool:
        """Whether the run ended early: a time-out, a death, an exception or an access outside the buffers."""
        return self.timeout or self.died is not None or bool(self.lost or self.raised or self.violations)

    def to_json(self) -> str:
        """As JSON (it crosses from the child process through a pipe)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["violations"] = [dataclasses.asdict(v) for v in self.violations]
        d["race"] = None if self.race is None else dataclasses.asdict(self.race)
        d["stop"] = None if self.stop is None else dataclasses.asdict(self.stop)
        d["stores"] = None if self.stores is None else base64.b64encode(self.stores.tobytes()).decode()
        d["read"] = {
            k: [int(v.size), base64.b64encode(np.packbits(v).tobytes()).decode()] for k, v in self.read.items()
        }
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str | bytes) -> Seen:
        d = json.loads(text or "{}")
        d["violations"] = [Violation(**v) for v in d.get("violations", [])]
        d["race"] = None if d.get("race") is None else Race(**d["race"])
        d["stop"] = None if d.get("stop") is None else Stop(**d["stop"])
        if d.get("stores") is not None:
            d["stores"] = np.frombuffer(base64.b64decode(d["stores"]), dtype=np.uint8)
        d["read"] = {
            k: np.unpackbits(np.frombuffer(base64.b64decode(bits), dtype=np.uint8), count=n).astype(bool)
            for k, (n, bits) in d.get("read", {}).items()
        }
        return cls(**d)


# ---- watching launches, loads and stores -------------------------------------------------------------------


class _Abort(Exception):
    """Raised inside a launch at its first stray store: the store was not run, and the launch stops."""


class Watch(Patches):
    """For the duration of a ``with`` block: records every Triton launch (kernel name, grid, the buffers it
    stored into) by wrapping ``run`` of ``JITFunction`` and ``InterpretedFunction`` (``kernel[grid](...)``
    and autotuners both go through it, Triton 3.6 to 3.9). With ``check``, the launches run in Triton's
    interpreter (a ``JITFunction`` is interpreted through ``InterpretedFunction(jit_fn.fn)``), and every
    load and store address is checked against ``regions`` before it happens: an access outside them is
    recorded in ``violations`` and masked off; the input elements loaded are marked in ``read``, and the stores
    into each element of ``out_name`` are counted in ``stores``. Each launch's record holds its integer arguments
    by parameter name (``ints``: ``BLOCK_M`` and the like), the most lanes a 1-D store of it into out had
    (``lanes``: the block a program stores, whatever the kernel calls it; a 2-D tile's store is left out) and how
    many of its programs stored at least one element of out (``out_programs``). An
    autotuned kernel is not timed: case ``pick`` takes the configs in turn from config ``pick``, so that every
    config runs in some case. Leaving the block puts back every method it patched (``core.patches.Patches``).

    The interpreter runs a grid's programs one after another, in a fixed order; a GPU runs them in none. So each
    element of out remembers which program of the launch stored it (``owner``), and a store into it by another
    program, or a load of it by another program, is a ``Race``: right here only because of the order. Atomics
    are left out (their order does not matter).

    A tensor of the launcher's own passed to a kernel (scratch), or one the checker made for it (``checker_made``),
    is allowed, and watched: a load of the launcher's tensor's bytes before any kernel stored them, where it held
    data (not one repeated value, as torch.zeros gives), is data computed outside the kernels (``outside_data``).

    Each pointer a kernel offsets from one of the buffers (``InterpreterBuilder.create_addptr``, on the buffer's
    own pointer or on one offset from it already) remembers that buffer, so an access names the buffer its
    pointer came from, however far it strays. Of a 1-D access in a launch of a 1-D grid, every lane counted,
    masked or not, the element each lane addresses less its place in its program's block (pid * lanes + lane) is
    kept per kind of access (``shifts``): 0 for the lesson's offsets, a constant s where they are shifted by s."""

    def __init__(self, regions: list[Region], out_name: str, check: bool, out: Guarded | None = None, pick: int = 0):
        super().__init__()
        self.regions, self.out_name, self.check, self.out, self.pick = regions, out_name, check, out, pick
        n_out = next((r.n for r in regions if r.name == out_name), 0)
        self.stores = np.zeros(n_out, dtype=np.int64) if check else None
        self.owner = np.full(n_out, -1, dtype=np.int64) if check else None  # program number that stored, this launch
        self.program = -1  # number of the program running in this launch, in the interpreter's order
        self.race: Race | None = None
        self.poison_read: list | None = None
        self._out_bits = out.bits.numpy() if check and out is not None and out.bits.device.type == "cpu" else None
        self.launches: list[dict] = []
        self.violations: dict[tuple, Violation] = {}  # (op, name, side) -> what was seen
        self.read = {r.name: np.zeros(r.n, dtype=bool) for r in regions if r.role == "in"} if check else {}
        self.allowed: list[tuple[int, int]] = []  # storages of the learner's own tensors passed to a kernel
        self.own: list[_Own] = []  # the same, watched for data made outside the kernels
        self.outside_data: list | None = None
        self.shifts: dict[str, int | None] = {}  # "op:buffer" -> the constant shift of its 1-D accesses, or None
        self._bufs: list[_Buffer] = []  # the buffers of the launch running (``_buffers``)
        self._bases: dict[int, str] = {}  # a buffer's first byte -> its name: the pointers a kernel is given
        self._bare = 0  # > 0 inside a load or store given no mask (the interpreter makes an all-true one)
        self.last_digest = None
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
        ours = [(r.buf_lo, r.buf_hi) for r in self.regions]
        for pname, a in _tensors(fn, args, kwargs):
            if a.device.type == "cpu":
                lo = a.untyped_storage().data_ptr()
                if not any(b0 <= lo < b1 for b0, b1 in ours):
                    self.allowed.append((lo, lo + a.untyped_storage().nbytes()))
                    if self.check and not any(o.lo == lo for o in self.own):
                        self.own.append(_Own(pname, a))
        self.launches.append(rec)
        self._current = rec
        self.program = -1
        if self.owner is not None:
            self.owner.fill(-1)
        self._bufs = self._buffers()
        self._bases = {b.lo: b.name for b in self._bufs}
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
        _end_launch()
        rec.pop("_last_storer", None)
        if self.check and self.out is not None:
            self.last_digest = self.out.digest()
        self._current = None

    # pointers, in the interpreter
    def _base_of(self, ptr) -> str | None:
        """The buffer pointer ``ptr`` (a ``TensorHandle``) was offset from: remembered by ``create_addptr``, or,
        for a buffer's own pointer (every lane one address), the buffer starting there; None where unknown."""
        base = getattr(ptr, _BASE, None)
        if base is not None:
            return base
        d = np.asarray(ptr.data)
        if not d.size or not self._bases:
            return None
        first = int(d.flat[0])
        name = self._bases.get(first)
        return name if name is not None and bool((d == d.flat[0]).all()) else None

    def _addptr(self, ptr, res) -> None:
        """``res`` = ``ptr`` + offsets: it keeps the buffer ``ptr`` came from."""
        base = self._base_of(ptr)
        if base is not None:
            with contextlib.suppress(AttributeError):
                setattr(res, _BASE, base)

    def _shift(self, op: str, addr: np.ndarray, size: int, b: _Buffer | None) -> None:
        """Of a 1-D access ``op`` of ``size``-byte elements into buffer ``b`` in a launch of a 1-D grid: the element
        each lane addresses less its place in its program's block (pid * lanes + lane), kept in ``shifts`` while it
        is one constant (None once it varies)."""
        grid = (self._current or {}).get("grid")
        if b is None or addr.ndim != 1 or addr.size < 2 or size != b.itemsize or self.program < 0:
            return
        if not grid or math.prod(grid[1:]) != 1:
            return
        delta = (addr - b.lo) // b.itemsize - (self.program * addr.size + np.arange(addr.size))
        s = int(delta[0]) if bool((delta == delta[0]).all()) else None
        key = f"{op}:{b.name}"
        self.shifts[key] = s if self.shifts.get(key, s) == s else None

    def _home(self, addr: np.ndarray, base: str | None) -> _Buffer | None:
        """The buffer an access belongs to: the one its pointer came from (``base``), else the one whose span (its
        guard regions included) holds its first lane."""
        bufs = self._bufs
        if base is not None:
            return next((b for b in bufs if b.name == base), None)
        if not addr.size:
            return None
        a = int(addr.flat[0])
        return next((b for b in bufs if b.buf_lo <= a < b.buf_hi), None)

    # loads and stores, in the interpreter
    def _access(self, op: str, ptrs, mask, atomic: str = ""):
        from triton.runtime.interpreter import TensorHandle

        addr = np.asarray(ptrs.data).astype(np.int64)
        m = np.ones(addr.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool), addr.shape)
        try:
            ty = ptrs.get_element_ty() if hasattr(ptrs, "get_element_ty") else ptrs.dtype.element_ty
            size = max(1, ty.primitive_bitwidth // 8)
        except Exception:
            size = 1
        base = self._base_of(ptrs)
        if not atomic:
            self._shift(op, addr, size, self._home(addr, base))
        ok = ~m
        bad_into = np.zeros(addr.shape, bool)
        for r in self.regions:
            inside = m & (addr >= r.lo) & (addr + size <= r.hi)
            if not inside.any():
                continue
            if op == "store" and r.role == "in":
                bad_into |= inside
                continue
            ok |= inside
            if op == "load" and r.role == "in":
                self.read[r.name][r.index(addr[inside])] = True
            if op == "store" and self._current is not None and r.name not in self._current["stored"]:
                self._current["stored"].append(r.name)
            if r.name == self.out_name and self.stores is not None:
                idx = r.index(addr[inside])
                if op == "load" or atomic:
                    self._poisoned_read(atomic or "loaded", idx)
                if op == "store":
                    np.add.at(self.stores, idx, 1)
                    cur = self._current
                    if cur is not None and idx.size and cur.get("_last_storer") != self.program:
                        cur["_last_storer"] = self.program  # the interpreter runs one program after another
                        cur["out_programs"] = cur.get("out_programs", 0) + 1
                    if self._current is not None and addr.ndim == 1:  # a 1-D block's store: its lanes are the block
                        self._current["lanes"] = max(self._current.get("lanes", 0), int(addr.size))
                if not atomic and self.program >= 0:
                    self._order(op, idx)
        for lo, hi in self.allowed:
            ok |= m & (addr >= lo) & (addr + size <= hi)
        for o in self.own:
            inside = m & (addr >= o.lo) & (addr + size <= o.hi)
            if inside.any():
                made = o.touch(op, addr[inside] - o.lo, size, atomic)
                if made and self.outside_data is None:
                    self.outside_data = [o.name, made]
        bad = m & ~ok
        if not bad.any():
            return mask
        masked = mask is not None and not self._bare and not atomic
        self._classify(op, addr[bad & ~bad_into], addr[bad_into], addr[m & ok], size, base, masked)
        return TensorHandle(np.ascontiguousarray(m & ~bad), mask.dtype if mask is not None else _int1())

    def _poisoned_read(self, how: str, idx: np.ndarray) -> None:
        """A load of out's elements ``idx`` (or an atomic on them, ``how``): note those that hold the poison."""
        if self._out_bits is None:
            return
        hit = np.flatnonzero(self._out_bits[self.out.g + idx] == self.out.poison)
        if hit.size:
            if self.poison_read is None:
                self.poison_read = [how, int(idx[hit[0]]), 0]
            self.poison_read[2] += int(hit.size)

    def _order(self, op: str, idx: np.ndarray) -> None:
        """Program ``self.program`` does ``op`` on out's elements ``idx``: a ``Race`` where another program of
        this launch stored one of them; a store makes them this program's."""
        prev = self.owner[idx]
        clash = (prev >= 0) & (prev != self.program)
        if clash.any():
            k = int(np.flatnonzero(clash)[0])
            if self.race is None:
                self.race = Race(op, int(idx[k]), int(prev[k]), self.program, len(self.launches) - 1, 0)
            self.race.elements += int(clash.sum())
        if op == "store":
            self.owner[idx] = self.program

    def _buffers(self) -> list[_Buffer]:
        """Every buffer an address may belong to: the checker's (with their guard regions) and the launcher's own
        tensors (their storage, no guard)."""
        return [_Buffer(r.name, r.lo, r.hi, r.buf_lo, r.buf_hi, r.itemsize, r.n, False) for r in self.regions] + [
            _Buffer(o.name, o.t_lo, o.t_lo + o.n * o.itemsize, o.lo, o.hi, o.itemsize, o.n, True, o.checker)
            for o in self.own
        ]

    def _classify(self, op, stray, into, valid, size, base: str | None = None, masked: bool = False):
        for r in self.regions:
            sel = (into >= r.lo) & (into < r.hi)
            if sel.any():
                self._note(op, r.name, "into", r.index(into[sel]), Violation(op, r.name, "into", 0, 0, 0, r.n, size,
                                                                             r.itemsize, masked=masked))  # fmt: skip
        if not stray.size:
            return
        # a stray lane belongs to the buffer its pointer was offset from (``base``); where that is unknown, to the
        # buffer the access's other lanes hit; where they hit none or several, to the buffer whose guard region
        # holds it, else to the nearest buffer
        bufs = self._buffers()
        hit = [k for k, b in enumerate(bufs) if ((valid >= b.lo) & (valid < b.hi)).any()]
        if base is not None:
            hit = [k for k, b in enumerate(bufs) if b.name == base][:1] or hit
        home = np.full(stray.shape, hit[0] if len(hit) == 1 else -1)
        for k, b in enumerate(bufs):
            if not b.own:
                home[(home < 0) & (stray >= b.buf_lo) & (stray < b.buf_hi)] = k
        if (home < 0).any():
            dist = np.stack([np.maximum(b.lo - stray, stray + size - b.hi) for b in bufs])
            home[home < 0] = np.argmin(dist, axis=0)[home < 0]
        for k in np.unique(home):
            b, lanes = bufs[k], stray[home == k]
            for after in (True, False):
                for far in (False, True):
                    side_sel = (lanes + size > b.hi) & (lanes >= b.lo) if after else (lanes < b.lo)
                    sel = side_sel & (((lanes < b.buf_lo) | (lanes >= b.buf_hi)) == far)
                    if sel.any():
                        side = ("after" if after else "before") + ("_far" if far and not b.own else "")
                        index = (lanes[sel] - b.lo) // b.itemsize
                        self._note(op, b.name, side, index, Violation(op, b.name, side, 0, 0, 0, b.n, size, b.itemsize,
                                                                      b.own and not b.checker, masked))  # fmt: skip

    def _note(self, op, name, side, index, new: Violation):
        index = np.atleast_1d(index)
        lo, hi = int(index.min()), int(index.max())
        new.lo, new.hi = lo, hi
        v = self.violations.setdefault((op, name, side), new)
        v.lanes += int(index.size)
        v.lo, v.hi = min(v.lo, lo), max(v.hi, hi)
        v.masked = v.masked and new.masked
        if op == "store":  # the message is known: stop the launch before it spends the time limit
            self.aborted = True
            raise _Abort((op, name, side))

    def __enter__(self):
        from triton.runtime import interpreter

        from ..core.triton_compat import patch_interpreter

        patch_interpreter()  # the pre-flight runs in the interpreter on a GPU machine too
        from triton.runtime.jit import JITFunction

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
                        return orig_interp(watch.interpreted(kernel), *args, grid=grid, warmup=False, **kwargs)
                    return orig(kernel, *args, grid=grid, warmup=warmup, **kwargs)
                finally:
                    watch._end(rec)

            return run

        self.patch(JITFunction, "run", wrap(orig_jit, self.check))
        self.patch(interpreter.InterpretedFunction, "run", wrap(orig_interp, False))
        if self.check:
            # every @triton.jit function a kernel reaches (its helpers however named, their helpers, and
            # triton.language's own: tl.cdiv, tl.max, tl.sum are @jit functions too) runs interpreted: where
            # @triton.jit gave a JITFunction (a GPU), calling one raises "Cannot call @triton.jit'd outside of
            # the scope of a kernel"
            def call_interpreted(fn, *args, **kwargs):
                return watch.helper(fn)(*args, **kwargs)

            self.patch(JITFunction, "__call__", call_interpreted)
            b = interpreter.InterpreterBuilder
            load, store = b.create_masked_load, b.create_masked_store
            addptr = b.create_addptr

            def create_addptr(s, ptr, offset):
                res = addptr(s, ptr, offset)
                watch._addptr(ptr, res)
                return res

            self.patch(b, "create_addptr", create_addptr)

            def bare(orig):  # tl.load(p) and tl.store(p, v): the interpreter gives them an all-true mask
                def op(s, *a, **k):
                    watch._bare += 1
                    try:
                        return orig(s, *a, **k)
                    finally:
                        watch._bare -= 1

                return op

            self.patch(b, "create_load", bare(b.create_load))
            self.patch(b, "create_store", bare(b.create_store))
            rmw, cas = b.create_atomic_rmw, b.create_atomic_cas
            self.patch(
                b, "create_masked_load", lambda s, p, m, *r, **k: load(s, p, watch._access("load", p, m), *r, **k)
            )
            self.patch(
                b,
                "create_masked_store",
                lambda s, p, v, m, *r, **k: store(s, p, v, watch._access("store", p, m), *r, **k),
            )
            self.patch(
                b,
                "create_atomic_rmw",
                lambda s, o, p, v, m, *r, **k: rmw(
                    s, o, p, v, watch._access("store", p, m, atomic=_atomic(o)), *r, **k
                ),
            )

            def atomic_cas(s, p, *r, **k):
                if watch._access("store", p, None, atomic="tl.atomic_cas") is not None:
                    raise RuntimeError("an atomic_cas outside the checker's buffers (not run)")
                return cas(s, p, *r, **k)

            self.patch(b, "create_atomic_cas", atomic_cas)
            set_grid_idx = b.set_grid_idx  # called once before each program (Triton 3.6 to 3.9)

            def count_program(s, *idx, **k):
                _count_program()
                watch.program += 1
                return set_grid_idx(s, *idx, **k)

            self.patch(b, "set_grid_idx", count_program)
            with contextlib.suppress(ImportError):
                from triton.runtime.autotuner import Autotuner

                def bench(tuner, *args, config, **meta):  # no timing (none in the interpreter): configs in turn
                    k = next((i for i, c in enumerate(tuner.configs) if c is config), 0)
                    return [float((k - watch.pick) % max(1, len(tuner.configs)))] * 3

                self.patch(Autotuner, "_bench", bench)
        return self

    def record(self, outcome: Seen) -> Seen:
        """``outcome`` (what the launcher's call gave) with what was watched added."""
        stores = None if self.stores is None else np.minimum(self.stores, 255).astype(np.uint8)  # one byte each
        return dataclasses.replace(
            outcome,
            launches=self.launches,
            race=self.race,
            poison_read=self.poison_read,
            violations=list(self.violations.values()),
            read=self.read,
            outside_data=self.outside_data,
            shifts=dict(self.shifts),
            last_digest=self.last_digest,
            stores=stores,
        )


def _show_progress(grid: list[int]) -> None:
    """In a pre-flight's child, publish the grid of the launch about to run (``_PROGRESS``)."""
    if _PROGRESS is not None:
        _PROGRESS.launch(grid)


def _count_program() -> None:
    """In a pre-flight's child, count one more program started (``_PROGRESS``)."""
    if _PROGRESS is not None:
        _PROGRESS.program(_CLOCK)


def _end_launch() -> None:
    """In a pre-flight's child, say the launch running has ended (``_PROGRESS``)."""
    if _PROGRESS is not None:
        _PROGRESS.end_launch(_CLOCK)


#: Tensors a checker made and hands the launcher unguarded (the other output of an exercise with two, judged in a
#: run of its own): id of the tensor -> (a weak reference to it, the exercise's name for it). ``checker_made``.
_CHECKER_MADE: dict[int, tuple] = {}


def checker_made(t: torch.Tensor, name: str) -> torch.Tensor:
    """Mark ``t``, a tensor the checker made for the launcher besides its guarded buffers, as the checker's, called
    ``name`` (the exercise's name of that argument): an access outside it names it so, not as a tensor of the
    launcher's own. Returns ``t``. The mark lasts while ``t`` lives."""
    for k in [k for k, (ref, _) in _CHECKER_MADE.items() if ref() is None]:
        del _CHECKER_MADE[k]
    _CHECKER_MADE[id(t)] = (weakref.ref(t), name)
    return t


def _checker_name(t: torch.Tensor) -> str | None:
    """The exercise's name of ``t`` where a checker made it (``checker_made``): the tensor itself, or a view of
    the same first byte and storage; else None."""
    for ref, name in _CHECKER_MADE.values():
        m = ref()
        same = m is not None and m.data_ptr() == t.data_ptr()
        if same and m.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
            return name
    return None


class _Own:
    """A tensor the launcher passed to a kernel outside the checker's guarded buffers: its storage's bytes [``lo``,
    ``hi``), the tensor's first byte ``t_lo``, ``n`` elements of ``itemsize`` bytes, its ``name`` (the exercise's
    where the checker made it, ``checker``; else the kernel's parameter's), whether it held data of the launcher's
    when first seen (``made``: not one repeated byte value, and not the checker's), and which of its bytes a
    kernel has stored (``stored``)."""

    def __init__(self, name: str, t: torch.Tensor):
        st = t.untyped_storage()
        given = _checker_name(t)
        self.checker = given is not None
        self.name, self.lo, self.hi = given or name, st.data_ptr(), st.data_ptr() + st.nbytes()
        self.t_lo, self.n, self.itemsize = t.data_ptr(), t.numel(), t.element_size()
        raw = torch.empty(0, dtype=torch.uint8).set_(st) if st.nbytes() else torch.empty(0, dtype=torch.uint8)
        self.made = not self.checker and bool(raw.numel()) and not bool((raw == raw[0]).all())
        self.stored = np.zeros(self.hi - self.lo, dtype=bool)

    def touch(self, op: str, offset: np.ndarray, size: int, atomic: bool) -> int:
        """A kernel's ``op`` on the elements at byte ``offset`` (array) of ``size`` bytes; returns how many were
        loads of data made outside the kernels."""
        made = 0
        if op == "load" and not atomic and self.made:
            made = int((~self.stored[offset]).sum())
        if op == "store":
            for k in range(size):
                self.stored[offset + k] = True
        return made


@dataclass(frozen=True)
class _Buffer:
    """A buffer as a stray address is named by: the view's bytes [lo, hi), the span [buf_lo, buf_hi) that is
    still its own (guard regions, or a storage), ``itemsize``, ``n`` elements, ``own``: an unguarded tensor, the
    launcher's (``checker`` False) or one the checker made for it (``checker_made``)."""

    name: str
    lo: int
    hi: int
    buf_lo: int
    buf_hi: int
    itemsize: int
    n: int
    own: bool
    checker: bool = False


def _atomic(op) -> str:
    """The learner's name of an interpreter's atomic op (``tl.atomic_add`` for ATOMIC_OP.FADD)."""
    return "tl.atomic_" + str(op).rsplit(".", 1)[-1].lower().lstrip("fu")


def _tensors(fn, args, kwargs) -> list[tuple[str, torch.Tensor]]:
    """The tensor arguments of a launch of the kernel whose Python function is ``fn``, with their parameter
    names (positions where the signature cannot be read)."""
    try:
        params = inspect.signature(fn).parameters
        bound = inspect.signature(fn).bind_partial(*args, **{k: v for k, v in kwargs.items() if k in params})
        items = list(bound.arguments.items())
    except (TypeError, ValueError):
        items = [(f"argument {i}", a) for i, a in enumerate(list(args) + list(kwargs.values()))]
    return [(k, v) for k, v in items if isinstance(v, torch.Tensor)]


def _ints(fn, args, kwargs) -> dict:
    """The integer arguments of a launch of the kernel whose Python function is ``fn``, by parameter name."""
    try:
        params = inspect.signature(fn).parameters
        bound = inspect.signature(fn).bind_partial(*args, **{k: v for k, v in kwargs.items() if k in params})
    except (TypeError, ValueError):
        return {}
    return {k: int(v) for k, v in bound.arguments.items() if isinstance(v, int) and not isinstance(v, bool)}


def _int1():
    import triton.language as tl

    return tl.int1


# ---- one run: the launcher's call, the pre-flight in a child, the run on a GPU --------------------------------


def call(fn, args) -> Seen:
    """Run the learner's launcher; an exception it raises (SystemExit too) becomes ``Seen.raised``.
    KeyboardInterrupt is passed on: the learner stops the check. A process the launcher forked and that returns
    from it ends here (``os._exit``), so it never runs the rest of the caller's program (a notebook, a test run)
    as a second copy; on a GPU such a copy cannot use CUDA. A copy still running when the launcher returns (a
    child that never ends) is killed (``end_forked_copies``)."""
    me = os.getpid()
    before = _forked_copies(me)
    try:
        fn(*args)
    except NotImplementedError:
        return Seen(raised="NotImplementedError", not_implemented=True)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # the learner's bug (SystemExit included), reported rather than raised
        if os.getpid() != me:
            os._exit(0)
        return Seen(raised=clip(describe_error(e), 300), interpreter_error=_is_interpreter_error(e))
    finally:
        if os.getpid() == me:
            end_forked_copies(me, before)
    if os.getpid() != me:
        os._exit(0)
    return Seen()


def _forked_copies(pid: int) -> set[int]:
    """The children of process ``pid`` that are copies of it (forked, not a program they started: the same command
    line), from Linux's /proc (proc(5)); empty where /proc is missing. Started programs (ptxas, torch.compile's
    workers) are not copies."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            mine = f.read()
        entries = os.listdir("/proc")
    except OSError:
        return set()
    out = set()
    for d in entries:
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != pid:
                continue
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if f.read() == mine:
                    out.add(int(d))
        except (OSError, ValueError, IndexError):
            continue
    return out


def end_forked_copies(pid: int, before: set[int]) -> list[int]:
    """Kill (SIGKILL) and reap the copies of process ``pid`` (``_forked_copies``) that were not in ``before``: what
    a launcher forked and left running; returns their ids."""
    left = sorted(_forked_copies(pid) - before)
    for child in left:
        with contextlib.suppress(OSError):
            os.kill(child, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(child, 0)
    return left


def _is_interpreter_error(e: BaseException) -> bool:
    """Whether ``e`` was raised inside Triton's interpreter while it ran a kernel (``InterpreterError``)."""
    try:
        from triton.runtime.errors import InterpreterError
    except ImportError:  # pragma: no cover - a Triton without the interpreter's error class
        return False
    return isinstance(e, InterpreterError)


def run_unguarded(seen: Seen, device_type: str) -> bool:
    """Whether a case whose pre-flight ended as ``seen`` runs on the GPU without the address checks: on a GPU,
    when the interpreter raised and nothing else went wrong (no time-out, no crash, no access outside the
    buffers): the interpreter does not run every kernel the GPU compiles, and the GPU's own error, if any, is
    the true one. Only an error raised inside the interpreter's run of a kernel counts (``interpreter_error``);
    what the launcher's own Python raises (SystemExit, a ValueError, NotImplementedError) is the learner's, and is
    reported without a run on the GPU."""
    return (
        device_type != "cpu"
        and seen.interpreter_error
        and not (seen.timeout or seen.died is not None or seen.violations)
    )


def warm_interpreter(fn) -> None:
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


def _preflight_here(fn, args, regions, out_name, out: Guarded, pick: int = 0, measure: bool = False) -> Seen:
    base = _reset_peak() if measure else None
    with Watch(regions, out_name, check=True, out=out, pick=pick) as w:
        outcome = call(fn, args)
    if w.aborted:  # the launch was stopped at a stray store: that, not the exception, is the news
        outcome = Seen()
    seen = w.record(outcome)
    if base is not None:
        peak = _status_kib("VmHWM")
        seen.peak_bytes = None if peak is None else max(0, peak - base) * 1024
    return seen


def _status_kib(key: str) -> int | None:
    """A memory figure of this process from /proc/self/status (kiB), None where unreadable (not Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_peak() -> int | None:
    """Reset this process's peak resident memory to its present one (Linux: "5" into /proc/self/clear_refs,
    proc(5)); returns the resident memory now (kiB), None where it cannot be measured."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return _status_kib("VmRSS")


def preflight(fn, args, regions: list[Region], out_name: str, out: Guarded, limits: Limits, pick: int = 0) -> Seen:
    """Run ``fn(*args)`` (CPU tensors in shared memory) under a checking ``Watch`` (autotuned kernels: configs
    taken in turn from ``pick``) in a forked child, stopped once ``limits.clock`` has moved more than
    ``limits.seconds`` since the child started; returns its record, or one with ``timeout`` (and ``grid``, the
    launch it stopped, or None), ``died`` (a signal number) or ``lost`` (it ended without its record). The child
    leads a process group of its own: processes the launcher forks close the record's pipe, die with the child
    (PR_SET_PDEATHSIG), and are killed with the group when the case ends."""
    if not limits.fork:
        return dataclasses.replace(_preflight_here(fn, args, regions, out_name, out, pick), no_fork=True)
    clock = limits.clock
    r, w = os.pipe()
    progress = Progress()
    sys.stdout.flush()
    sys.stderr.flush()
    start = clock(progress)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: CPU buffers only, never CUDA; it leaves by os._exit, running no cleanup of ours
        try:
            _tie_to_parent(parent, limits.cpu_s)
            me = os.getpid()
            with contextlib.suppress(OSError):
                os.setpgid(0, 0)
            os.register_at_fork(after_in_child=lambda: _learners_child(w, me))
            global _PROGRESS, _CLOCK
            _PROGRESS, _CLOCK = progress, clock
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # an interrupt stops the child at once
            sys.stdout = sys.stderr = io.StringIO()  # the learner's prints stay out of the parent's streams
            torch.set_num_threads(1)
            # every kernel here runs interpreted on CPU copies: gpulab's own launchers (a solution may call them)
            # take CPU tensors and their interpreter plans, and nothing touches CUDA (a forked child cannot)
            gpulab.MODE, gpulab.DEVICE, gpulab.ON_GPU = "interpreter", "cpu", False
            os.environ["TRITON_INTERPRET"] = "1"
            with contextlib.suppress(Exception):
                import triton

                triton.knobs.runtime.interpret = True
            try:
                res = _preflight_here(fn, args, regions, out_name, out, pick, measure=True)
            except KeyboardInterrupt:
                res = Seen(interrupted=True)
            except BaseException as e:
                res = Seen(raised=clip(describe_error(e), 300))
            if os.getpid() != me:  # a process the launcher forked, returned from it: only the child reports
                os._exit(0)
            data = res.to_json().encode()
            while data:
                data = data[os.write(w, data) :]
        finally:
            os._exit(0)
    os.close(w)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # as the child does: whichever runs first
    chunks, done, stop = [], False, None
    try:
        while not done:
            if select.select([r], [], [], limits.poll_s)[0]:
                chunk = os.read(r, 1 << 16)
                done = not chunk  # the child closed its end: its record is whole
                chunks.append(chunk)
            now = clock(progress)  # read once more after the record: a case that ended is judged too
            stop = judge_progress(progress, now - start, now, limits, ended=done)
            if stop is not None:
                break
    finally:
        os.close(r)
        # the child itself when stopped, and what the launcher forked and left running; before the wait, while
        # the child's id is still its own (after its record, it is already ending: its exit status stays)
        _kill_group(pid)
        _, status = os.waitpid(pid, 0)
    if stop is not None:
        return Seen(timeout=True, stop=stop, elapsed=stop.elapsed)
    if os.WIFSIGNALED(status):
        return Seen(died=os.WTERMSIG(status))
    data = b"".join(chunks)
    try:
        res = Seen.from_json(data) if data else None
    except (ValueError, TypeError) as e:
        return Seen(lost=f"its record could not be read: {type(e).__name__}")
    if res is None:
        return Seen(lost=f"exit status {os.WEXITSTATUS(status)}")
    if res.interrupted:
        raise KeyboardInterrupt
    res.elapsed = now - start
    return res


def _kill_group(pid: int) -> None:
    """SIGKILL to the process group child ``pid`` leads, and to ``pid`` itself should it not lead one yet; only
    before ``pid`` is waited for (until then no other process can have its id)."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def _learners_child(w: int, child: int) -> None:
    """In a process the launcher forks inside a pre-flight's child ``child``: close the record's pipe (``w``, so
    the parent's read ends when the child's does) and die with ``child`` (PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError):
        os.close(w)
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != child:
        os._exit(0)


def _tie_to_parent(parent: int, cpu_s: int) -> None:
    """In a pre-flight's child: die with the process ``parent`` that forked it (Linux's PR_SET_PDEATHSIG; a
    notebook kernel killed mid-check leaves no child spinning), and use at most ``cpu_s`` CPU seconds
    (RLIMIT_CPU). Source: prctl(2), getrlimit(2)."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1  # <linux/prctl.h>
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the parent ended before the signal was asked for
        os._exit(0)
    with contextlib.suppress(Exception):
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))


def run_on_device(fn, args, out: Guarded) -> Seen:
    """The run on a GPU (after a clean pre-flight): launches recorded, nothing checked per address."""
    with Watch([], "out", check=False) as w:
        res = call(fn, args)
    if not res.raised and out.view.is_cuda:
        try:
            torch.cuda.synchronize()
        except Exception as e:
            res = Seen(raised=clip(describe_error(e), 300))
    return dataclasses.replace(res, launches=w.launches)
