"""Autograd helpers shared by the kernels wrapped in ``torch.autograd.Function``."""

from __future__ import annotations

import torch


def differentiable_once(what: str, grads: tuple, inputs: tuple) -> tuple:
    """Return ``grads`` (the tensors a Function's ``backward`` computed by kernels) such that differentiating
    them again raises ``RuntimeError`` naming ``what``, instead of silently leaving out their term of a second
    derivative. Only under grad mode (``create_graph=True``) is anything attached; otherwise ``grads`` come back
    as they are. ``inputs``: the tensors the gradients depend on (the Function's inputs and the incoming
    gradient), to which the raising node is attached.

    torch's ``torch.autograd.function.once_differentiable`` is not enough: it attaches its error to detached
    copies, so ``torch.autograd.grad(g, inputs=x)`` prunes that node and drops the term without a word."""
    if not torch.is_grad_enabled():
        return grads
    return _RaiseOnBackward.apply(what, len(grads), *grads, *inputs)[: len(grads)]


class _RaiseOnBackward(torch.autograd.Function):
    """Passes the first ``n`` tensors through, attached to the rest, with a backward that raises."""

    @staticmethod
    def forward(ctx, what, n, *tensors):
        ctx.what = what
        return tuple(t.view_as(t) for t in tensors[:n])

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            f"{ctx.what} is differentiable once: its backward kernels have no derivative (a second "
            "derivative through it, e.g. after create_graph=True, is not supported)"
        )
