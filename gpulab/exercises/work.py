"""What a kernel exercise's launcher must do besides getting the answer right: do the work once, keep its memory
within a bound, and compute the answer itself, not through torch's autograd or torch's attention.

An answer can be right and still be made the wrong way: a persistent matmul whose programs step through the tiles
by 1 from their pid computes each tile many times; a FlashAttention backward "tiled in torch" can call
``torch.autograd.grad`` on torch's own attention, or build each head's whole L x L matrix in a loop over heads.
The values cannot tell these apart from the lesson's kernels; what the launcher did can. ``watched(fn, tally)``
wraps the learner's launcher so that each call records, in a ``Tally``:

- the work of its Triton kernels, in Triton's interpreter: each ``tl.dot``'s multiply-adds and tile shape, and how
  many times each element of ``out`` (the launcher's last argument) was stored;
- the torch calls it made (a ``TorchFunctionMode``, cheap beside a dispatch mode on a loop of small tiles): the
  backward passes of autograd's engine (``torch.autograd.grad``, ``.backward()`` and ``torch.func``'s transforms all
  run through it), any of torch's attention kernels (``scaled_dot_product_*``, forward or backward, through
  ``torch.nn.functional`` or ``torch.ops``), and the peak bytes of the tensors it made and kept at once (its largest
  single tensor too).

A ``Tally`` lives in memory a forked child shares with its parent, so the record of ``kernelcheck``'s pre-flight
(a child process) reaches the checker; the checker reads it in its ``mismatch`` hook, which ``check_kernel`` calls
after each case's runs. ``matmul_redone`` and ``torch_shortcut`` turn a record into the learner's message, a
``kerneldiagnosis.Mistake`` of kind "redone", "shortcut" or "over_memory", which ``check_kernel`` says as it is
(no difference of values: not "values differ").

Limits: the work is counted in the interpreter only (the pre-flight; a GPU's run is not counted, and a ``Tally``
keeps the pre-flight's record through it); the memory is what the learner's torch calls return (a view is not
counted again; scratch memory inside one call and tensors under 16 x 16 elements are not seen).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import weakref

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from ..core.patches import Patches
from ..models.waves import cdiv
from .kerneldiagnosis import Mistake
from .kernelwatch import warm_interpreter

_FIELDS = (
    "calls",  # launcher calls recorded
    "dots",  # tl.dot calls
    "macs",  # their multiply-adds
    "tile_m",  # the dots' tile shape (m, k, n) when every dot has one shape; -1 when they differ
    "tile_k",
    "tile_n",
    "stored",  # elements of out stored at least once
    "restored",  # elements of out stored more than once
    "most_stores",  # the most stores into one element of out
    "backward_passes",  # backward passes autograd's engine ran
    "attention_ops",  # torch attention operations (scaled_dot_product_*), forward or backward
    "peak_bytes",  # the most bytes of tensors the launcher made that were alive at once
    "largest",  # the most elements of one tensor it made
)
_TEXT = 256  # bytes for the name of the first attention op seen


class Tally:
    """The record of a launcher's last call (``watched``), in anonymous shared memory: a child forked after it is
    made writes here, and its parent reads. Integer fields: ``calls``, ``dots``, ``macs``, ``tile_m``/``tile_k``/
    ``tile_n`` (-1: dots of several shapes; 0: no dot), ``stored``, ``restored``, ``most_stores``,
    ``backward_passes``, ``attention_ops``, ``peak_bytes``, ``largest``; text: ``attention_op`` (the first seen)."""

    def __init__(self):
        self._mm = mmap.mmap(-1, 8 * len(_FIELDS) + _TEXT)
        self._words = np.frombuffer(self._mm, dtype=np.int64, count=len(_FIELDS))
        self.reset()

    def reset(self) -> None:
        self._words[:] = 0
        self._mm[8 * len(_FIELDS) :] = bytes(_TEXT)

    def __getattr__(self, name):
        if name in _FIELDS:
            return int(self._words[_FIELDS.index(name)])
        raise AttributeError(name)

    def _set(self, name: str, value: int) -> None:
        self._words[_FIELDS.index(name)] = value

    def _add(self, name: str, value: int) -> None:
        self._words[_FIELDS.index(name)] += value

    @property
    def attention_op(self) -> str:
        lo = 8 * len(_FIELDS)
        return bytes(self._mm[lo : lo + _TEXT]).split(b"\0", 1)[0].decode(errors="replace")

    def _set_attention_op(self, name: str) -> None:
        raw = name.encode()[: _TEXT - 1]
        lo = 8 * len(_FIELDS)
        self._mm[lo : lo + _TEXT] = raw + bytes(_TEXT - len(raw))

    @property
    def dot_shape(self) -> tuple[int, int, int] | None:
        """(m, k, n) of every tl.dot of the call, or None (no dot, or dots of several shapes)."""
        shape = (self.tile_m, self.tile_k, self.tile_n)
        return shape if min(shape) > 0 else None


# ---- the interpreter's dots and stores ---------------------------------------------------------------------------


class _KernelWork(Patches):
    """Inside a ``with``: every ``tl.dot`` and every store into ``out`` that Triton's interpreter runs, counted
    (``InterpreterBuilder.create_dot`` and ``create_masked_store``, Triton 3.6 to 3.9, wrapped around whatever
    wraps them already: ``kernelcheck``'s address checks run first, so a stray lane it masks off is not counted;
    put back when the block ends)."""

    def __init__(self, out: torch.Tensor | None):
        super().__init__()
        self.macs = self.dots = 0
        self.shapes: set[tuple[int, int, int]] = set()
        self.out = out
        self.stores = np.zeros(out.numel() if out is not None else 0, dtype=np.int64)

    def __enter__(self):
        from triton.runtime import interpreter

        b = interpreter.InterpreterBuilder
        dot, store = b.create_dot, b.create_masked_store
        work = self

        def create_dot(s, a, bb, *rest, **kw):
            m, k, n = int(np.prod(a.data.shape[:-1])), a.data.shape[-1], bb.data.shape[-1]
            work.dots += 1
            work.macs += m * k * n
            work.shapes.add((a.data.shape[-2] if a.data.ndim > 1 else 1, k, n))
            return dot(s, a, bb, *rest, **kw)

        def create_masked_store(s, ptrs, value, mask, *rest, **kw):
            work._count_store(ptrs, mask)
            return store(s, ptrs, value, mask, *rest, **kw)

        self.patch(b, "create_dot", create_dot)
        self.patch(b, "create_masked_store", create_masked_store)
        return self

    def _count_store(self, ptrs, mask) -> None:
        if self.out is None or not self.stores.size:
            return
        addr = np.asarray(ptrs.data).astype(np.int64).ravel()
        m = np.ones(addr.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool), ptrs.data.shape)
        item = self.out.element_size()
        lo = self.out.data_ptr()
        inside = m.ravel() & (addr >= lo) & (addr < lo + self.stores.size * item)
        np.add.at(self.stores, (addr[inside] - lo) // item, 1)


# ---- torch's operations ------------------------------------------------------------------------------------------


#: Tensors of fewer elements are not followed for memory (one 16 x 16 tile and up are): following every scalar
#: and row vector would cost more time than the memory they hold.
_SMALLEST = 256


class _Engine:
    """Stands in for autograd's engine (``torch.autograd.variable.Variable._execution_engine``, through which
    ``torch.autograd.grad``, ``Tensor.backward`` and ``torch.func``'s transforms run every backward pass):
    counts the backward passes, then runs them."""

    def __init__(self, engine, ops: _TorchCalls):
        self._engine, self._ops = engine, ops

    def run_backward(self, *args, **kwargs):
        self._ops.backward_passes += 1
        return self._engine.run_backward(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._engine, name)


class _TorchCalls(TorchFunctionMode):
    """Inside a ``with``: the torch calls made (a function mode: what the learner's Python calls, torch.ops
    included), counting torch's attention kernels and the bytes of the tensors made and alive (a new tensor of
    ``_SMALLEST`` elements or more that is no view of another, from the call that made it until it is freed); and
    every backward pass of autograd's engine (``_Engine``)."""

    def __init__(self):
        super().__init__()
        self.backward_passes = self.attention_ops = 0
        self.attention_op = ""
        self.live = self.peak = self.largest = 0
        self._alive: set[int] = set()
        self._attention: dict = {}

    def __enter__(self):
        from torch.autograd.variable import Variable

        self._saved_engine = Variable._execution_engine
        Variable._execution_engine = _Engine(self._saved_engine, self)
        return super().__enter__()

    def __exit__(self, *exc):
        from torch.autograd.variable import Variable

        Variable._execution_engine = self._saved_engine
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        attention = self._attention.get(func)
        if attention is None:
            name = getattr(func, "__name__", "")
            attention = self._attention[func] = "scaled_dot_product" in name or "attention" in name
        if attention:
            self.attention_ops += 1
            self.attention_op = self.attention_op or getattr(func, "__name__", str(func))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() >= _SMALLEST and t._base is None:
                self._maybe_made(t, args, kwargs)
        return out

    def _maybe_made(self, t: torch.Tensor, args, kwargs) -> None:
        if any(t is a for a in args) or any(t is a for a in kwargs.values()):
            return  # an in-place result: the argument itself
        key = _storage(t)
        given = (_storage(a) for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
        if key in self._alive or key in given:
            return  # memory counted already, or an argument's
        n = t.numel() * t.element_size()
        self.largest = max(self.largest, t.numel())
        self._alive.add(key)
        self.live += n
        self.peak = max(self.peak, self.live)
        weakref.finalize(t, self._freed, n, key)  # the tensor's end (a view kept past it is not followed)

    def _freed(self, n: int, key: int) -> None:
        self.live -= n
        self._alive.discard(key)


def _storage(t: torch.Tensor) -> int:
    """The address of the memory ``t`` views (0 for a tensor without one)."""
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return 0


# ---- the wrapper -------------------------------------------------------------------------------------------------


def watched(fn, tally: Tally, *, kernels: bool = False, torch_ops: bool = False, interpreted_only: bool = True):
    """``fn`` (a launcher whose last argument is ``out``) wrapped so that each call records into ``tally`` what it
    did: its kernels' dots and stores into ``out`` (``kernels``, counted in Triton's interpreter) and the torch
    operations it ran (``torch_ops``). With ``interpreted_only`` (the kernel exercises) a call records only where it
    runs in the interpreter (``TRITON_INTERPRET=1``: the pre-flight), so that a GPU's run keeps the pre-flight's
    record; without it (a torch exercise) every call records. Returns the wrapper, which returns what ``fn``
    returns and raises what it raises."""
    warm_interpreter(fn)  # a forked child finds the kernels fn names rewritten

    def launcher(*args):
        if interpreted_only and os.environ.get("TRITON_INTERPRET") != "1":
            return fn(*args)
        tally.reset()
        out = args[-1] if args and isinstance(args[-1], torch.Tensor) and args[-1].device.type == "cpu" else None
        with contextlib.ExitStack() as stack:
            work = stack.enter_context(_KernelWork(out)) if kernels else None
            ops = stack.enter_context(_TorchCalls()) if torch_ops else None
            try:
                return fn(*args)
            finally:
                tally._add("calls", 1)
                if work is not None:
                    shapes = work.shapes
                    tile = next(iter(shapes)) if len(shapes) == 1 else ((-1, -1, -1) if shapes else (0, 0, 0))
                    for name, v in zip(("tile_m", "tile_k", "tile_n"), tile):
                        tally._set(name, v)
                    tally._set("dots", work.dots)
                    tally._set("macs", work.macs)
                    tally._set("stored", int((work.stores > 0).sum()))
                    tally._set("restored", int((work.stores > 1).sum()))
                    tally._set("most_stores", int(work.stores.max()) if work.stores.size else 0)
                if ops is not None:
                    for name in ("backward_passes", "attention_ops", "largest"):
                        tally._set(name, getattr(ops, name))
                    tally._set("peak_bytes", ops.peak)
                    tally._set_attention_op(ops.attention_op)

    launcher.__name__ = getattr(fn, "__name__", "launcher")
    launcher.__wrapped__ = fn
    return launcher


# ---- the messages ------------------------------------------------------------------------------------------------

#: How each message of this module starts (its kind: "redone", "shortcut", "over_memory").
REDONE = "work done more than once"
SHORTCUT = "not computed by your own code"
OVER_MEMORY = "more memory than a tiled backward"


def matmul_redone(tally: Tally, M: int, N: int, K: int) -> Mistake | None:
    """None when the call recorded in ``tally`` (a matmul C = A @ B, A: (M, K), B: (K, N)) computed each tile of C
    once: every element of out stored once, and its ``tl.dot`` calls doing no more multiply-adds than one pass over
    C's tiles at the dots' own tile shape (m, k, n): cdiv(M, m) m x cdiv(N, n) n x cdiv(K, k) k. Else what was done
    more than once (kind "redone"). Dots of several shapes are not held to a plan (their stores still are)."""
    if not tally.calls:
        return None
    if tally.restored:
        return Mistake("redone", (
            f"{REDONE}: {tally.restored} elements of out were stored more than once (one {tally.most_stores} times): "
            "the programs computed some tiles of C more than once; each tile must be computed and stored by one "
            "program"
        ))  # fmt: skip
    shape = tally.dot_shape
    if shape is None:
        return None
    m, k, n = shape
    plan = cdiv(M, m) * m * cdiv(N, n) * n * cdiv(K, k) * k
    if tally.macs > plan:
        return Mistake("redone", (
            f"{REDONE}: the kernel's tl.dot calls did {tally.macs / plan:.3g}x the multiply-adds of one pass over C's "
            f"tiles ({cdiv(M, m)} x {cdiv(N, n)} tiles of {m} x {n}, K in {cdiv(K, k)} steps of {k}): some tiles were "
            "computed more than once (or tiles past C's edge were computed); compute each tile of C once"
        ))  # fmt: skip
    return None


def torch_shortcut(tally: Tally, bound_bytes: int | None = None, what: str = "") -> Mistake | None:
    """None when the call recorded in ``tally`` ran no backward pass of autograd's engine and none of torch's
    attention kernels, and (with ``bound_bytes``) never held more than ``bound_bytes`` of tensors it made at once;
    else which of these it did (kind "shortcut", or "over_memory" for the bound). ``what``: how the bound is made,
    said beside it."""
    if not tally.calls:
        return None
    if tally.backward_passes:
        return Mistake("shortcut", (
            f"{SHORTCUT}: the gradients came from torch's autograd ({tally.backward_passes} backward pass"
            f"{'es' * (tally.backward_passes > 1)} of its engine): the exercise is the backward's formulas, written "
            "out and computed tile by tile, not a call to autograd (torch.autograd.grad, .backward(), torch.func)"
        ))  # fmt: skip
    if tally.attention_ops:
        return Mistake("shortcut", (
            f"{SHORTCUT}: torch's attention computed it ({tally.attention_op}): build the tiles of S = scale Q K^T "
            "and P from your own products, not from torch's attention kernels"
        ))  # fmt: skip
    if bound_bytes is not None and tally.peak_bytes > bound_bytes:
        return Mistake("over_memory", (
            f"{OVER_MEMORY}: tensors of {tally.peak_bytes / 2**20:.2f} MiB at once (the largest {tally.largest} "
            f"elements), over the {bound_bytes / 2**20:.2f} MiB bound{what}: work tile by tile, a block of queries "
            "against a block of keys, never S (or one head's S) whole"
        ))  # fmt: skip
    return None
