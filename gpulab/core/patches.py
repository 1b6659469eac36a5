"""Attributes replaced for a while and put back, and Triton kernels run in the interpreter meanwhile: the one home
of the patch-and-restore that gpulab's watchers of Triton's interpreter share (``exercises.kernelwatch.Watch``, the
checker's address checks; ``measure.trace``, the counters without a GPU; ``exercises.work``, the dots and stores of
a launcher). Each wraps methods of ``InterpreterBuilder``, ``JITFunction`` or ``InterpretedFunction`` (Triton 3.6
to 3.9) while its ``with`` block runs, and leaves them as it found them.
"""

from __future__ import annotations

_INHERITED = object()  # an attribute a patch shadows on a class that only inherits it


class Patches:
    """A context manager whose ``patch(owner, name, new)`` sets an attribute (a class's method) and ``swap(namespace,
    key, new)`` an entry of a dict (a module's globals) until the ``with`` block ends; then each is put back, the
    last first, and an attribute the owner only inherited is deleted again, so the inherited one shows through.
    Entering a subclass's ``with`` calls its ``__enter__``, which patches; leaving it calls this ``__exit__``.

    ``interpreted(kernel)``: an ``InterpretedFunction`` of a ``JITFunction``'s Python function (on a GPU,
    ``@triton.jit`` gives a ``JITFunction``), made once per kernel, with the ``JITFunction`` helpers of its module's
    globals swapped for interpreted ones until the block ends; ``helper(fn)``: an ``InterpretedFunction`` of a
    ``@triton.jit`` function called from inside an interpreted kernel, made once, nothing swapped."""

    def __init__(self):
        self._patches: list[tuple] = []  # (owner, name, the old attribute or _INHERITED)
        self._swaps: list[tuple] = []  # (namespace, key, the old value)
        self._interpreted: dict = {}  # id of a kernel (or ("helper", id)) -> its InterpretedFunction

    def patch(self, owner, name: str, new) -> None:
        """``owner.name = new`` until the block ends."""
        self._patches.append((owner, name, owner.__dict__.get(name, _INHERITED)))
        setattr(owner, name, new)

    def swap(self, namespace: dict, key: str, new) -> None:
        """``namespace[key] = new`` until the block ends."""
        self._swaps.append((namespace, key, namespace[key]))
        namespace[key] = new

    def restore(self) -> None:
        """Put back every attribute and entry replaced so far, the last first."""
        for owner, name, old in reversed(self._patches):
            if old is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
        for namespace, key, old in reversed(self._swaps):
            namespace[key] = old
        self._patches, self._swaps = [], []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()
        return False

    def interpreted(self, kernel):
        """``kernel`` (a ``JITFunction``) as an ``InterpretedFunction``; the ``JITFunction`` helpers of its module's
        globals run interpreted too (swapped until the block ends)."""
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        key = id(kernel)
        if key not in self._interpreted:
            self._interpreted[key] = InterpretedFunction(kernel.fn)
            g = kernel.fn.__globals__
            for name, v in list(g.items()):
                if isinstance(v, JITFunction):
                    self.swap(g, name, InterpretedFunction(v.fn))
        return self._interpreted[key]

    def helper(self, fn):
        """The ``@triton.jit`` function ``fn`` (a ``JITFunction``), called inside an interpreted kernel, as an
        ``InterpretedFunction``."""
        from triton.runtime.interpreter import InterpretedFunction

        key = ("helper", id(fn))
        if key not in self._interpreted:
            self._interpreted[key] = InterpretedFunction(fn.fn)
        return self._interpreted[key]
