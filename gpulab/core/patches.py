"""Attributes replaced for a while and put back, and Triton kernels run in the interpreter meanwhile: the one home
of the patch-and-restore that gpulab's watchers of Triton's interpreter share (``exercises.kernelwatch.Watch``, the
checker's address checks; ``measure.trace``, the counters without a GPU; ``exercises.work``, the dots and stores of
a launcher). Each wraps methods of ``InterpreterBuilder``, ``JITFunction`` or ``InterpretedFunction`` (Triton 3.6
to 3.9) while its ``with`` block runs, and leaves them as it found them.
"""

from __future__ import annotations

import sys
import types

_KEEP = ("__annotations__", "__dict__", "__weakref__", "__doc__")  # made or kept by Python itself
_INHERITED = object()  # an attribute a patch shadows on a class that only inherits it
_ABSENT = object()  # an entry a language snapshot did not hold


def language_namespaces() -> list:
    """Every module under ``triton.language`` that is loaded, and every class they define: the namespaces the
    interpreter rebinds while a kernel runs interpreted (its builtins, ``tensor``'s methods, ``dtype.to_ir``...)."""
    mods = [m for name, m in list(sys.modules.items()) if m is not None and name.startswith("triton.language")]
    out, seen = list(mods), set()
    for m in mods:
        for v in list(vars(m).values()):
            if isinstance(v, type) and getattr(v, "__module__", "").startswith("triton.language") and id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    return out


def language_snapshot() -> list[tuple]:
    """(namespace, a copy of its ``__dict__``) for each of ``language_namespaces()``."""
    return [(ns, dict(vars(ns))) for ns in language_namespaces()]


def restore_language(snapshot: list[tuple]) -> list[str]:
    """Put every entry of the snapshot's namespaces that was rebound or deleted since back as it was; returns the
    names put back, ``module.name`` or ``Class.name``. Entries added since stay: the interpreter keeps names of its
    own in ``triton.language``'s modules (Triton 3.6's ``interpreter_semantic``: taken away, the next interpreted
    run raised NameError), and a submodule imported meanwhile is its package's attribute.

    Triton's interpreter rebinds ``triton.language`` while an interpreted kernel runs. Up to Triton 3.5 it put
    nothing back, and an interpreted ``@triton.jit`` helper called from a kernel (``InterpretedFunction.__call__``,
    3.6 to 3.9) rebinds without putting back; in a process that also compiles for a GPU, a later compile then
    fails (``'ir.value' object has no attribute 'dtype'``). Triton PR 8735 made the kernel's own run clean up."""
    changed = []
    for ns, before in snapshot:
        now = vars(ns)
        for key in [k for k in list(now) if now.get(k, _ABSENT) is not before.get(k, _ABSENT)]:
            old = before.get(key, _ABSENT)
            if old is _ABSENT or key in _KEEP or isinstance(old, types.ModuleType):
                continue
            try:
                if isinstance(ns, type):
                    setattr(ns, key, old)
                else:
                    now[key] = old
            except (AttributeError, TypeError):
                continue
            changed.append(f"{getattr(ns, '__name__', ns)}.{key}")
        for key in [k for k in before if k not in vars(ns) and k not in _KEEP]:  # deleted since: put back
            if isinstance(ns, type):
                setattr(ns, key, before[key])
            else:
                now[key] = before[key]
            changed.append(f"{getattr(ns, '__name__', ns)}.{key}")
    return changed


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
        self._language: list | None = None  # triton.language as it was before the first interpreted run

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
        if self._language is not None:
            restore_language(self._language)
            self._language = None

    def _before_interpreting(self) -> None:
        if self._language is None:
            self._language = language_snapshot()

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

        self._before_interpreting()
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

        self._before_interpreting()
        key = ("helper", id(fn))
        if key not in self._interpreted:
            self._interpreted[key] = InterpretedFunction(fn.fn)
        return self._interpreted[key]
