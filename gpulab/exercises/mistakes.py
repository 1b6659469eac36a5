"""Mistakes named from the pattern of what a kernel wrote, for exercises of more than one lesson: a 2-D grid
launched with its axes swapped (lesson 06's transpose, lesson 07's tiled matmul).

``kernelcheck.check_kernel`` asks an exercise, through its ``unwritten`` hook, to name a partly written ``out``
before it says "the grid is too small"; these functions are such names, each true only where the pattern holds
exactly.
"""

from __future__ import annotations

import torch


def _written_rectangle(unwritten: torch.Tensor, shape: tuple[int, int]) -> tuple[int, int] | None:
    """(r, c) where what was written is exactly out[:r, :c] of an out of ``shape``, short of the whole; else None.
    ``unwritten``: bool, flat, True where out was never written."""
    written = ~unwritten.reshape(shape)
    rows, cols = written.any(1), written.any(0)
    r, c = int(rows.sum()), int(cols.sum())
    if r == 0 or (r, c) == tuple(shape) or not (rows[:r].all() and cols[:c].all()):
        return None
    return (r, c) if bool(written[:r, :c].all()) else None


def swapped_grid(unwritten: torch.Tensor, shape: tuple[int, int], launches: list[dict]) -> str | None:
    """The message for an out of ``shape`` (rows, columns) that one launch on a 2-D grid (g0, g1) left partly
    written because its axes are swapped, or None. It is named when what was written is exactly out[:r, :c], the
    tiles grid (g0, g1) reaches with two of the launch's integer arguments as tile sides (the one along
    program_id(0) and the one along program_id(1), either axis of out), and grid (g1, g0) would have covered out
    with those tiles. ``launches``: ``check_kernel``'s records (``grid``, ``ints``)."""
    grids = [tuple(rec["grid"]) for rec in launches if rec.get("grid")]
    if len(grids) != 1 or len(grids[0]) < 2 or grids[0][0] == grids[0][1]:
        return None
    g0, g1 = grids[0][:2]
    rect = _written_rectangle(unwritten, shape)
    if rect is None:
        return None
    sides = sorted({v for v in launches[0].get("ints", {}).values() if isinstance(v, int) and 1 <= v <= 1 << 12})
    for along0 in (0, 1):  # the axis of out that program_id(0) tiles
        dim0, dim1 = shape[along0], shape[1 - along0]
        for b0 in sides:
            for b1 in sides:
                reached = (min(g0 * b0, dim0), min(g1 * b1, dim1))
                want = rect if along0 == 0 else rect[::-1]
                if reached == want and g1 * b0 >= dim0 and g0 * b1 >= dim1:
                    return (
                        f"the grid's axes are swapped: launched grid {(g0, g1)}, but program_id(0) steps through "
                        f"tiles of {b0} along an axis of {dim0} and program_id(1) tiles of {b1} along one of {dim1}, "
                        f"so grid ({g1}, {g0}) covers out; as launched only out[:{rect[0]}, :{rect[1]}] was "
                        "written. Order the grid as the kernel reads its program ids"
                    )
    return None
