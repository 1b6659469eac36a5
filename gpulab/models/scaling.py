"""Scaling laws: why a training run's compute decides its model, and what that compute costs at a given MFU
(lesson 09). The seed lecture: language models obey scaling laws, so more compute and more data usually improve
results, and progress comes as much from the hardware as from new model ideas.

- Kaplan et al. 2020, "Scaling Laws for Neural Language Models" (arXiv:2001.08361): a language model's test loss
  falls as a power law in its parameters N, its training tokens D and its training compute C, some trends spanning
  more than seven orders of magnitude; a training run costs ``C ≈ 6 N D`` FLOPs (their section 2.1: about 2N a token
  forward, 4N backward).
- Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (arXiv:2203.15556): for a given compute,
  parameters and tokens should grow in equal proportion. Their compute-optimal Chinchilla has 70 B parameters
  trained on 1.4 T tokens, 20 tokens a parameter: the rule of thumb ``compute_optimal_tokens`` applies.

Units: FLOPs (a count, not a rate), tokens, TFLOP/s, hours. A cost model: it says what a run costs, not how good
its model becomes.
"""

from __future__ import annotations

from ..core import validate

#: Chinchilla (Hoffmann et al. 2022): parameters and training tokens of the compute-optimal model.
CHINCHILLA_PARAMS, CHINCHILLA_TOKENS = 70e9, 1.4e12
#: Tokens a parameter at the compute-optimal ratio: 1.4 T / 70 B = 20.
TOKENS_PER_PARAM = CHINCHILLA_TOKENS / CHINCHILLA_PARAMS


def compute_optimal_tokens(n_params: float) -> float:
    """Training tokens for ``n_params`` parameters at Chinchilla's ratio (``TOKENS_PER_PARAM`` a parameter).
    Raises ValueError naming ``n_params`` unless it is positive and finite."""
    return TOKENS_PER_PARAM * validate.positive("n_params", n_params)


def training_flops(n_params: float, tokens: float, flops_per_token: float | None = None) -> float:
    """FLOPs of a training run on ``tokens`` tokens: ``flops_per_token`` each where given (a model's own count, such
    as ``gpulab.capstone.explain.model_flops_per_token``, which adds attention's term), else Kaplan et al.'s
    ``6 n_params``. Raises ValueError naming the argument unless each is positive and finite."""
    n_params, tokens = validate.positive("n_params", n_params), validate.positive("tokens", tokens)
    per_token = 6 * n_params if flops_per_token is None else validate.positive("flops_per_token", flops_per_token)
    return per_token * tokens


def run_hours(flops: float, peak_tflops: float, mfu: float) -> float:
    """Hours one GPU of ``peak_tflops`` (TFLOP/s) takes for ``flops`` at model FLOPs utilization ``mfu`` (the share
    of the peak the run turns into model FLOPs, in (0, 1]): ``flops / (mfu * peak_tflops * 1e12) / 3600``. Raises
    ValueError naming the argument for a non-positive number or an ``mfu`` above 1."""
    flops, peak = validate.positive("flops", flops), validate.positive("peak_tflops", peak_tflops)
    mfu = validate.positive("mfu", mfu)
    if mfu > 1:
        raise ValueError(f"mfu must be in (0, 1]: a share of the peak, got {mfu!r}")
    return flops / (mfu * peak * 1e12) / 3600
