"""How a kernel exercise's checker draws its cases: shapes at random from the ranges the lesson names, a shape past
every constant a learner might hard-code, and the inputs, all from one seed that the report prints.

A kernel right only for the shapes it was tested on is a class of mistakes (a launcher that hard-codes D = 16, a
row kernel with a fixed BLOCK_N = 2048, a matmul that never tiles N). The defence is the same for every exercise:
each case's shape is drawn from the lesson's range (``Draw.size``, ``Draw.choice``), at least one case lies past the
largest constant the lesson's kernels use (``Draw.past``: a size, not a power of two, above the largest block or
tile a learner might write), and the report names the seed (``Report.seed``), so that ``check(fn, seed=...)`` draws
the same cases again. Awkward fixed shapes (one element, a partial last block) stay beside the drawn ones.

Costs: the checks run in Triton's interpreter, so a case past a constant is past it in one dimension only (a row
wider than any block, with few rows), never large in all of them.
"""

from __future__ import annotations

import random

import torch

import gpulab

from ..core import validate

#: The widest block or tile side a learner might hard-code in a kernel of these lessons (elements): a power of two
#: of registers a program could hold; 1-D exercises use ``kernelcheck.LONG_N``, above 2^17, for the same reason.
TILE_LIMIT = 1024
#: The widest row a row-wise kernel might hold whole in one program (elements): the lesson 09 exercise's rows are
#: GPT-2 activations, 768 wide and 3072 in the MLP, so a hard-coded BLOCK_N of 4096 or 8192 must fail.
ROW_LIMIT = 2**14


class Draw:
    """One check's random choices, every one from ``seed`` (an int >= 0; None draws a fresh one): shapes through
    ``size``, ``choice`` and ``past``, inputs through ``randn``, ``rand`` and ``randperm``, further seeds through
    ``seed_for``. ``stamp(report)`` writes the seed into the checker's ``Report``, which prints it. Raises
    TypeError/ValueError naming the argument for a seed that is not an int >= 0."""

    def __init__(self, seed: int | None = None):
        self.seed = random.SystemRandom().randrange(2**31) if seed is None else validate.integer("seed", seed)
        self.rng = random.Random(self.seed)
        self._gen = torch.Generator().manual_seed(self.seed)

    def size(self, lo: int, hi: int) -> int:
        """An int drawn uniformly from [lo, hi]."""
        return self.rng.randint(lo, hi)

    def choice(self, options):
        """One of ``options``, drawn uniformly."""
        return self.rng.choice(list(options))

    def past(self, limit: int) -> int:
        """A size above ``limit`` (a constant a learner might hard-code), at most an eighth beyond it, odd and so
        no multiple of any block: ``limit + 1 + 2k`` for a drawn k."""
        limit = validate.positive_int("limit", limit)
        return limit + 1 + 2 * self.rng.randrange(max(1, limit // 16))

    def spread(self, options, k: int) -> list:
        """``k`` of ``options``, each option at least once when k >= len(options) (a drawn order of all of them,
        then further draws): every value of a lesson's range appears among a check's cases."""
        options = list(options)
        return (self.rng.sample(options, len(options)) + [self.choice(options) for _ in range(k)])[:k]

    def seed_for(self) -> int:
        """A seed drawn from this one, for a generator of its own (a NumPy or torch generator a helper takes)."""
        return self.rng.randrange(2**31)

    def randn(self, *shape, dtype=torch.float32, scale: float = 1.0, device=None) -> torch.Tensor:
        """Normal values times ``scale``, drawn in float64 on the CPU (the same numbers on every device), cast to
        ``dtype`` and moved to ``device`` (default ``gpulab.DEVICE``)."""
        x = torch.randn(*shape, dtype=torch.float64, generator=self._gen) * scale
        return x.to(dtype).to(gpulab.DEVICE if device is None else device)

    def rand(self, *shape, dtype=torch.float32, device=None) -> torch.Tensor:
        """Uniform values in [0, 1), as ``randn`` draws them."""
        x = torch.rand(*shape, dtype=torch.float64, generator=self._gen)
        return x.to(dtype).to(gpulab.DEVICE if device is None else device)

    def randperm(self, n: int, device=None) -> torch.Tensor:
        """A random permutation of 0 .. n - 1 (int64)."""
        return torch.randperm(n, generator=self._gen).to(gpulab.DEVICE if device is None else device)

    def stamp(self, report):
        """``report`` with this draw's seed (``Report.seed``: printed, and the way to draw the cases again)."""
        report.seed = self.seed
        return report
