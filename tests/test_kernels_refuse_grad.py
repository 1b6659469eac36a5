"""Launchers without a backward refuse inputs that require grad (under grad mode), with one message naming the
argument: their output has no grad_fn, so a gradient through it would be lost without a word (``relu(x) + x``
would give x a gradient of 1 where torch gives 2). Under ``torch.no_grad()`` they run. The differentiable ones
(sigmoid3, flash_attention) accept such inputs."""

import gpulab  # first: it picks the mode before triton is imported  # isort: skip
import pytest
import torch

from gpulab.kernels import (
    bias_gelu,
    divergence,
    flash_attention,
    matmul,
    matmul_precision,
    matmul_steps,
    pad,
    relu,
    sigmoid3,
    sigmoid3_teaching,
    sincos,
    strided,
    transpose,
    vector_add,
)

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report

DEV = gpulab.DEVICE


def FLAGS(n):
    return torch.zeros(n, dtype=torch.bool, device=DEV)


# (launcher, argument that requires grad, call given that argument as x: (16,) float32)
CASES = [
    ("vector_add", "x", lambda x: vector_add.vector_add(x, x.detach())),
    ("vector_add", "y", lambda x: vector_add.vector_add(x.detach(), x)),
    ("relu", "x", lambda x: relu.relu(x)),
    ("sincos", "x", lambda x: sincos.sincos(x)),
    ("sincos_unfused", "x", lambda x: sincos.sincos_unfused(x)),
    ("sin_cos_parts", "x", lambda x: sincos.sin_cos_parts(x)),
    ("strided_copy", "x", lambda x: strided.strided_copy(x, 3)),
    ("matrix_copy", "a", lambda x: strided.matrix_copy(x.view(4, 4), "columns")),
    ("transpose", "a", lambda x: transpose.transpose(x.view(2, 8))),
    ("transpose_naive", "a", lambda x: transpose.transpose_naive(x.view(2, 8))),
    ("divergence.path", "x", lambda x: divergence.path(x, "A", 2)),
    ("divergence.branch_where", "x", lambda x: divergence.branch_where(x, FLAGS(16), 2, 1)),
    ("divergence.branch_uniform", "x", lambda x: divergence.branch_uniform(x, FLAGS(1), 2, 1, block=16)),
    ("divergence.loop_cost", "x", lambda x: divergence.loop_cost(x, torch.ones(16, dtype=torch.int32, device=DEV))),
    ("sigmoid3_forward", "x", lambda x: sigmoid3.sigmoid3_forward(x)),
    ("sigmoid3_backward", "x", lambda x: sigmoid3.sigmoid3_backward(x, torch.ones_like(x.detach()))),
    ("pad_rows", "t", lambda x: pad.pad_rows(x.view(2, 8)[:, 1:])),
    ("copy_rows", "src", lambda x: pad.copy_rows(x.view(2, 8), torch.empty(2, 8, device=DEV))),
    ("matmul", "a", lambda x: matmul.matmul(x.view(4, 4), torch.eye(4, device=DEV), input_precision="ieee")),
    (
        "matmul_step no reuse",
        "b",
        lambda x: matmul_steps.matmul_step(torch.eye(4, device=DEV), x.view(4, 4), "no reuse"),
    ),
    ("sigmoid3_fwd (teaching)", "x", lambda x: sigmoid3_teaching.sigmoid3_fwd(x, torch.empty(16, device=DEV))),
    ("bias_gelu", "x", lambda x: bias_gelu.bias_gelu(x.view(2, 8), torch.ones(8, device=DEV))),
    ("matmul_precision", "a", lambda x: matmul_precision.matmul_precision(x.view(4, 4), torch.eye(4, device=DEV))),
    (
        "flash_attention_forward",
        "q",
        lambda x: flash_attention.flash_attention_forward(x.view(1, 1, 1, 16), *[x.detach().view(1, 1, 1, 16)] * 2),
    ),
]


@pytest.mark.parametrize("launcher, name, call", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_launchers_without_backward_refuse_inputs_that_require_grad(launcher, name, call, seed):
    x = torch.randn(16, device=DEV).requires_grad_()
    with pytest.raises(
        ValueError,
        match=rf"^{name} requires grad, but .* no backward: the result would silently "
        rf"carry no gradient\. Use .* for autograd, or pass {name}\.detach\(\)",
    ):
        call(x)
    with torch.no_grad():  # the documented way round: no graph is being built, so nothing is lost
        out = call(x)
    for t in out if isinstance(out, tuple) else (out,):
        assert t is None or not t.requires_grad


def test_the_hostile_case_relu_plus_x():
    x = torch.tensor([1.5, -2.0], device=DEV, requires_grad=True)
    with pytest.raises(ValueError, match="torch.relu"):  # would give grad 1 where torch.relu(x) + x gives 2
        relu.relu(x) + x
    (torch.relu(x) + x).sum().backward()
    assert x.grad.tolist() == [2.0, 1.0]


def test_differentiable_launchers_accept_inputs_that_require_grad(seed):
    x = torch.randn(16, dtype=torch.float64, device=DEV).requires_grad_()
    y = sigmoid3.sigmoid3(x)
    assert y.grad_fn is not None
    q = torch.randn(1, 1, 3, 16, device=DEV).requires_grad_()
    out = flash_attention.flash_attention(q, q.detach(), q.detach())
    assert out.grad_fn is not None
    (g,) = torch.autograd.grad(out.sum(), q)
    assert g.shape == q.shape and torch.isfinite(g).all()


def test_flash_chosen_configs_accept_inputs_that_require_grad(seed):
    # lesson08's headline asks which configs its differentiable flash_attention(q, k, v) took, on the same q
    q = torch.randn(1, 1, 3, 16, device=DEV).requires_grad_()
    out = flash_attention.flash_attention(q, q.detach(), q.detach())
    chosen = flash_attention.chosen_configs(q, q.detach(), q.detach(), False)
    assert set(chosen) == {"fwd", *flash_attention.MODE_PARTS[flash_attention.DEFAULT_BWD_MODE]}
    assert out.grad_fn is not None
    with pytest.raises(ValueError, match="must have 4 dimension"):  # the other checks still hold
        flash_attention.chosen_configs(q[0], q[0].detach(), q[0].detach())
