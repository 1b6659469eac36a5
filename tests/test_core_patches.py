"""``gpulab.core.patches.Patches``, the one patch-and-restore of gpulab's watchers of Triton's interpreter: every
attribute and dict entry is put back, an inherited method shows through again, and each watcher (the checker's
``Watch``, the trace's ``_Tracer``, ``work``'s kernel counter), alone or nested, leaves Triton as it found it."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import torch
import triton
import triton.language as tl

from gpulab.core.patches import Patches


class _Base:
    def f(self):
        return "base"


class _Own(_Base):
    def g(self):
        return "own"


def test_patches_are_put_back_the_last_first_and_inherited_ones_deleted():
    namespace = {"k": 1}
    own_g = _Own.__dict__["g"]
    with Patches() as p:
        p.patch(_Own, "f", lambda self: "patched")  # _Own only inherits f
        p.patch(_Own, "g", lambda self: "once")
        p.patch(_Own, "g", lambda self: "twice")  # the second patch of one attribute
        p.swap(namespace, "k", 2)
        assert _Own().f() == "patched" and _Own().g() == "twice" and namespace["k"] == 2
    assert "f" not in _Own.__dict__ and _Own().f() == "base"
    assert _Own.__dict__["g"] is own_g and namespace == {"k": 1}


def test_patches_are_put_back_when_the_block_raises():
    try:
        with Patches() as p:
            p.patch(_Own, "g", lambda self: "patched")
            raise RuntimeError
    except RuntimeError:
        pass
    assert _Own().g() == "own"


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _state():
    """The methods the watchers patch, as the classes hold them (None: inherited)."""
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    b = interpreter.InterpreterBuilder
    names = [n for n in vars(b) if n.startswith(("create_", "set_grid"))]
    return (
        {n: vars(b).get(n) for n in names},
        {n: vars(JITFunction).get(n) for n in ("run", "__call__")},
        vars(interpreter.InterpretedFunction).get("run"),
    )


def test_every_watcher_alone_and_nested_leaves_triton_as_it_found_it():
    from gpulab.exercises import kernelwatch, work
    from gpulab.measure import trace

    x = torch.randn(300)
    before = _state()

    def launch(x, out):
        _double[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)

    out = torch.empty_like(x)
    tally = work.Tally()
    with kernelwatch.Watch([], "out", check=True):
        work.watched(launch, tally, kernels=True)(x, out)  # work's counter inside the checker's watch
    assert torch.equal(out, 2 * x) and tally.stored == 300
    assert _state() == before
    t = trace.trace(launch, x, torch.empty_like(x), layout="emulated")
    assert t.launches and _state() == before
