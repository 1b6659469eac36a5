"""What the checker does in the processes of a GPU machine, run on the CPU: the pre-flight's forked child runs
every kernel interpreted on CPU copies, so gpulab's own launchers there take CPU tensors whatever the parent's
mode (on a GPU they refused them: "x must be on device 'cuda'"), and a launcher that forks leaves one process
returning from the check, not two (on a GPU the second copy of a notebook or a test run cannot use CUDA)."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import os

import torch

from gpulab.exercises import kernelcheck, kernelwatch
from gpulab.kernels import sigmoid3


def test_the_pre_flight_child_runs_gpulab_s_launchers_on_cpu_copies_whatever_the_parent_s_mode(monkeypatch):
    monkeypatch.setattr(gpulab, "MODE", "gpu")  # the parent as on a GPU machine
    monkeypatch.setattr(gpulab, "DEVICE", "cuda")
    monkeypatch.setattr(gpulab, "ON_GPU", True)
    x = torch.randn(3000)
    host = dict(device="cpu", shared=True, guard_bytes=kernelcheck.PREFLIGHT_GUARD_BYTES)
    g_in = kernelcheck.Guarded(x.shape, x.dtype, fill=x, **host)
    g_out = kernelcheck.Guarded(x.shape, x.dtype, **host)

    def launcher(x, out):  # a solution that calls gpulab's launcher, as ex05's does
        assert (gpulab.MODE, gpulab.DEVICE, gpulab.ON_GPU) == ("interpreter", "cpu", False)
        out.copy_(sigmoid3.sigmoid3_forward(x))

    seen = kernelcheck.preflight_once(launcher, {"x": g_in}, g_out)
    assert not seen.raised, seen.raised
    assert gpulab.DEVICE == "cuda"  # the parent's mode is its own


def test_a_launcher_that_forks_returns_once(tmp_path):
    parent, children = os.getpid(), []

    def launcher():
        pid = os.fork()
        if pid:  # the launcher returns only once its copy has ended by itself (not reaped: the test reads its status)
            children.append(pid)
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)

    seen = kernelwatch.call(launcher, [])
    (tmp_path / str(os.getpid())).write_text("returned")  # each process that returns from the check writes
    if os.getpid() != parent:  # a copy that got here (the guard broken) ends now, not as a second test run
        os._exit(0)
    _, status = os.waitpid(children[0], 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert not seen.raised and sorted(p.name for p in tmp_path.iterdir()) == [str(parent)]


def test_autograd_refused_in_the_pre_flight_child_is_named_as_a_shortcut():
    """On a GPU the parent's autograd has started its device threads, and a forked child's backward pass raises;
    only autograd's engine raises that, so the launcher took autograd's answer."""
    from gpulab.exercises import kerneldiagnosis
    from gpulab.exercises.kernelwatch import Seen

    out = kernelcheck.Guarded((4,), torch.float32, device="cpu")
    text = (
        "RuntimeError: Unable to handle autograd's threading in combination with fork-based multiprocessing. "
        "See https://github.com/pytorch/pytorch/wiki/Autograd-and-Fork"
    )
    found = kerneldiagnosis.raised(kerneldiagnosis.Case({}, out, Seen(raised=text), checked=True))
    assert found.kind.startswith("shortcut") and "not computed by your own code" in found.message
    plain = kerneldiagnosis.raised(kerneldiagnosis.Case({}, out, Seen(raised="ValueError: n"), checked=True))
    assert plain.message == "raised ValueError: n"


def test_a_copy_the_launcher_forked_and_left_running_is_ended(tmp_path):
    """On a GPU the launcher runs in the notebook's own process: a child it forks that never ends is killed when it
    returns (on the CPU the pre-flight's process group ends it too)."""
    mark = tmp_path / "pid"

    def launcher():
        if os.fork() == 0:  # the learner's child: says who it is, then never ends
            mark.write_text(str(os.getpid()))
            while True:
                pass
        while not mark.exists():
            pass

    kernelwatch.call(launcher, [])
    pid = int(mark.read_text())
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    if alive:
        os.kill(pid, 9)
    assert not alive
