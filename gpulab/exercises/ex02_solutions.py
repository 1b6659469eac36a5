"""Reference solution kernel for lesson 02's kernel exercise (hidden behind show_solution)."""

import torch
import triton
import triton.language as tl


@triton.jit
def loop_grouped_kernel(x_ptr, trips_ptr, order_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # the slots this program fills
    mask = offs < n
    idx = tl.load(order_ptr + offs, mask=mask, other=0)  # the work item in each slot
    x = tl.load(x_ptr + idx, mask=mask, other=0.0)
    trips = tl.load(trips_ptr + idx, mask=mask, other=0)
    for i in range(tl.max(trips, axis=0)):  # neighbours in order share a trip count: little is masked off
        x = tl.where(i < trips, tl.sin(x) * 0.9 + 0.1, x)
    tl.store(y_ptr + offs, x, mask=mask)


def loop_grouped(
    x: torch.Tensor, trips: torch.Tensor, order: torch.Tensor, out: torch.Tensor, block: int = 128
) -> None:
    loop_grouped_kernel[(triton.cdiv(x.numel(), block),)](x, trips, order, out, x.numel(), BLOCK=block)
