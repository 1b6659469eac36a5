"""``gpulab.core.patches.Patches``, the one patch-and-restore of gpulab's watchers of Triton's interpreter: every
attribute and dict entry is put back, an inherited method shows through again, and each watcher (the checker's
``Watch``, the trace's ``_Tracer``, ``work``'s kernel counter), alone or nested, leaves Triton as it found it."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import pathlib
import subprocess
import sys

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


def test_every_watcher_alone_and_nested_leaves_triton_as_it_found_it(monkeypatch):
    from gpulab.core.triton_compat import patch_interpreter
    from gpulab.exercises import kernelwatch, work
    from gpulab.measure import trace

    x = torch.randn(300)  # CPU tensors on a GPU too: each watcher runs the launch in the interpreter
    patch_interpreter()  # installed once a process and kept (on a GPU by the first watcher): no watcher's leftover
    before = _state()

    def launch(x, out):
        _double[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)

    out = torch.empty_like(x)
    tally = work.Tally()
    with monkeypatch.context() as env, kernelwatch.Watch([], "out", check=True):
        env.setenv("TRITON_INTERPRET", "1")  # as in the pre-flight's child, where work counts (on a GPU too)
        work.watched(launch, tally, kernels=True)(x, out)  # work's counter inside the checker's watch
    assert torch.equal(out, 2 * x) and tally.stored == 300
    assert _state() == before
    t = trace.trace(launch, x, torch.empty_like(x), layout="emulated")
    assert t.launches and _state() == before


@triton.jit
def _twice(x):
    return 2 * x


@triton.jit
def _double_by_helper(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, _twice(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


def test_triton_language_is_put_back_after_an_interpreted_run():
    """A @triton.jit helper run interpreted rebinds triton.language and leaves it so (Triton 3.6 to 3.9); on a GPU a
    later compile in the same process then fails. Patches puts the language back as it found it. In a fresh
    process: this one's earlier interpreted runs have rebound it already."""
    script = (
        "import gpulab, torch\n"
        "from triton.runtime.jit import JITFunction\n"
        "from gpulab.core.patches import Patches, language_snapshot, restore_language\n"
        "from tests.test_core_patches import _double_by_helper\n"
        "before = language_snapshot()\n"
        "x = torch.randn(300); y = torch.full_like(x, float('nan'))\n"
        "with Patches() as p:\n"
        "    p.interpreted(JITFunction(_double_by_helper.fn))[(3,)](x, y, x.numel(), BLOCK=128)\n"
        "assert torch.equal(y, 2 * x)\n"
        "print('left:', restore_language(before))\n"
    )
    root = pathlib.Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "left: []"


def test_restore_language_puts_back_rebound_and_deleted_entries_and_keeps_added_ones():
    from gpulab.core.patches import language_snapshot, restore_language

    before = language_snapshot()
    own_repr, own_to = tl.tensor.__repr__, vars(tl.tensor)["to"]
    tl.tensor.__repr__ = lambda self: "patched"
    tl.tensor.gpulab_added = 1
    del tl.tensor.to
    tl.core.gpulab_semantic = object()  # as Triton 3.6's interpreter keeps interpreter_semantic in the module
    try:
        put_back = restore_language(before)
        assert {"tensor.__repr__", "tensor.to"} <= set(put_back) and "tensor.gpulab_added" not in put_back
        assert tl.tensor.__repr__ is own_repr and vars(tl.tensor)["to"] is own_to
        assert tl.tensor.gpulab_added == 1 and hasattr(tl.core, "gpulab_semantic")  # added entries stay
        assert tl.core is vars(tl)["core"]  # a submodule's attribute is never taken away
    finally:
        del tl.tensor.gpulab_added, tl.core.gpulab_semantic
