"""What a launcher did, recorded by ``gpulab.exercises.work``: the tl.dot work and the stores of its kernels in the
interpreter, the backward passes of autograd's engine, torch's attention calls and the peak memory of the tensors it
made; a record made in a forked child reaches the parent; the messages it gives."""

import gpulab  # (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import math
import os

import pytest
import torch
import torch.nn.functional as F

from gpulab.exercises import ex07_solutions, work

pytestmark = pytest.mark.usefixtures("seed")

#: Kernels' work is counted in Triton's interpreter only (the pre-flight's child); on a GPU these launches would run
#: compiled, on CPU tensors a compiled kernel refuses.
INTERPRETED = pytest.mark.skipif(
    gpulab.ON_GPU, reason="counts work in Triton's interpreter; on a GPU the kernels run compiled"
)


def _matmul(M, N, K):
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    return a, b, torch.empty(M, N, dtype=torch.float16)


@INTERPRETED
def test_the_dots_and_stores_of_a_tiled_matmul_are_counted():
    tally = work.Tally()
    launch = work.watched(ex07_solutions.tiled_matmul, tally, kernels=True)
    a, b, out = _matmul(40, 70, 33)
    launch(a, b, out)  # 32 x 32 x 32 tiles: 2 x 3 tiles of C, K in 2 steps
    assert tally.calls == 1 and tally.dot_shape == (32, 32, 32)
    assert tally.dots == 2 * 3 * 2 and tally.macs == 12 * 32**3
    assert tally.stored == 40 * 70 and tally.restored == 0 and tally.most_stores == 1
    assert work.matmul_redone(tally, 40, 70, 33) is None


@INTERPRETED
def test_a_second_launch_over_the_same_tiles_is_work_done_twice():
    tally = work.Tally()

    def twice(a, b, out):
        ex07_solutions.tiled_matmul(a, b, out)
        ex07_solutions.tiled_matmul(a, b, out)

    launch = work.watched(twice, tally, kernels=True)
    launch(*_matmul(40, 70, 33))
    msg = work.matmul_redone(tally, 40, 70, 33)
    assert tally.restored == 40 * 70 and tally.most_stores == 2
    assert msg.startswith(work.REDONE) and "stored more than once" in msg and msg.kind == "redone"


def test_the_plan_counts_padded_tiles_and_refuses_more():
    tally = work.Tally()
    for name, v in dict(calls=1, tile_m=32, tile_k=16, tile_n=64, stored=1, macs=0).items():
        tally._set(name, v)
    plan = 64 * 128 * 48  # M = 40 -> 2 tiles of 32, N = 70 -> 2 of 64, K = 33 -> 3 steps of 16
    tally._set("macs", plan)
    assert work.matmul_redone(tally, 40, 70, 33) is None
    tally._set("macs", plan + 1)
    msg = work.matmul_redone(tally, 40, 70, 33)
    assert "2 x 2 tiles of 32 x 64, K in 3 steps of 16" in msg
    tally._set("tile_m", -1)  # dots of several shapes: no plan to hold them to
    assert tally.dot_shape is None and work.matmul_redone(tally, 40, 70, 33) is None


@INTERPRETED
def test_a_record_made_in_a_forked_child_reaches_the_parent():
    tally = work.Tally()
    launch = work.watched(ex07_solutions.tiled_matmul, tally, kernels=True)
    a, b, out = _matmul(17, 20, 5)
    pid = os.fork()
    if pid == 0:  # the child: as kernelcheck's pre-flight runs the launcher
        try:
            launch(a, b, out)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert tally.calls == 1 and tally.dots == 1 and tally.stored == 17 * 20


@INTERPRETED
def test_a_run_outside_the_interpreter_keeps_the_pre_flight_s_record(monkeypatch):
    tally = work.Tally()
    launch = work.watched(ex07_solutions.tiled_matmul, tally, kernels=True)
    a, b, out = _matmul(17, 20, 5)
    launch(a, b, out)
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # as a GPU's run after the pre-flight
    monkeypatch.setattr(work, "_KernelWork", None)  # nothing is counted there
    launch(a, b, out)
    assert tally.calls == 1 and tally.dots == 1


def _qkv(L=64, d=16):
    return [torch.randn(1, 2, L, d) for _ in range(4)]


def test_autograd_s_engine_is_seen_through_every_door():
    def by_grad(q, k, v, do):
        qg = q.clone().requires_grad_()
        return torch.autograd.grad((qg @ k.transpose(-1, -2)).sum(), qg)

    def by_backward(q, k, v, do):
        qg = q.clone().requires_grad_()
        (qg * k).sum().backward()
        return qg.grad

    def by_func(q, k, v, do):
        return torch.func.grad(lambda x: (x @ k.transpose(-1, -2)).sum())(q)

    for fn in (by_grad, by_backward, by_func):
        tally = work.Tally()
        work.watched(fn, tally, torch_ops=True, interpreted_only=False)(*_qkv())
        assert tally.backward_passes >= 1, fn.__name__
        assert work.torch_shortcut(tally).startswith(work.SHORTCUT), fn.__name__
        assert work.torch_shortcut(tally).kind == "shortcut", fn.__name__
    from torch.autograd.variable import Variable

    assert type(Variable._execution_engine).__name__ != "_Engine"  # put back after the call


def test_torch_s_attention_is_seen_through_functional_and_ops():
    for fn in (
        lambda q, k, v, do: F.scaled_dot_product_attention(q, k, v),
        lambda q, k, v, do: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0],
    ):
        tally = work.Tally()
        work.watched(fn, tally, torch_ops=True, interpreted_only=False)(*_qkv())
        assert tally.attention_ops == 1 and "scaled_dot_product" in tally.attention_op
        assert "torch's attention computed it" in work.torch_shortcut(tally)


def test_the_peak_counts_the_tensors_alive_together_and_not_views():
    def kept(n):
        return [torch.ones(1024) for _ in range(n)]  # n tensors of 4 KiB alive together

    def freed(n):
        for _ in range(n):
            t = torch.ones(1024)
            del t

    def views(x):
        return [x[i : i + 512] for i in range(8)] + [x.t(), x.view(-1), x.add_(1)]  # no new memory

    for fn, arg, peak in ((kept, 10, 10 * 4096), (freed, 10, 4096), (views, torch.ones(2048, 1), 0)):
        tally = work.Tally()
        work.watched(fn, tally, torch_ops=True, interpreted_only=False)(arg)
        assert tally.peak_bytes == peak, (fn.__name__, tally.peak_bytes)
    assert work.torch_shortcut(tally, bound_bytes=10) is None  # views made nothing
    tally._set("peak_bytes", 2 * 2**20)
    msg = work.torch_shortcut(tally, bound_bytes=2**20, what=" (because)")
    assert msg.startswith(work.OVER_MEMORY) and "2.00 MiB" in msg and "1.00 MiB bound (because)" in msg
    assert msg.kind == "over_memory"


def test_check_kernel_files_a_mistake_under_its_kind_and_any_other_message_as_values(monkeypatch):
    """A ``mismatch`` hook's ``Mistake`` is said as it is under its kind (text added to it keeps the kind, and the
    exercise's note for that kind follows it); a plain message is a difference of values."""
    from gpulab.exercises import ex00_solutions, kernelcheck
    from gpulab.exercises.kerneldiagnosis import Mistake

    cases = [dict(x=torch.randn(n), y=torch.randn(n)) for n in (5, 17, 40)]

    def check(mismatch):
        return kernelcheck.check_kernel(
            "add", ex00_solutions.add, cases, out=lambda c: (c["x"].shape, torch.float32),
            reference=lambda c: c["x"].double() + c["y"].double(), mismatch=mismatch,
            notes={"redone": " (the note)"},
        )  # fmt: skip

    said = Mistake("redone", f"{work.REDONE}: twice") + " (n = 5)"
    assert said.kind == "redone" and said == f"{work.REDONE}: twice (n = 5)"
    rep = check(lambda got, ref, case: said if case["x"].numel() == 5 else None)
    assert rep.failures == [f"{said} (the note) [1 of 3 cases, e.g. add(x=<float32 tensor of shape (5,)>, "
                            "y=<float32 tensor of shape (5,)>)]"], rep.failures  # fmt: skip
    rep = check(lambda got, ref, case: "3 of 5 elements" if case["x"].numel() == 5 else None)
    assert rep.failures[0].startswith("values differ: 3 of 5 elements ["), rep.failures


def test_a_launcher_s_result_and_error_pass_through():
    tally = work.Tally()
    assert work.watched(lambda x: x + 1, tally, torch_ops=True, interpreted_only=False)(1) == 2

    def stub(*a):
        raise NotImplementedError

    with pytest.raises(NotImplementedError):
        work.watched(stub, tally, kernels=True, torch_ops=True)(torch.zeros(3))
    assert tally.calls == 1 and math.isfinite(tally.peak_bytes)
