"""Reference solution kernel for lesson 09's fused bias + GELU exercise (hidden behind show_solution).

It is gpulab's own, written once in ``gpulab.kernels.bias_gelu``: lesson 09's suite and the race time the same
kernel against torch's two. ``show_solution`` prints it below this module."""

from ..kernels.bias_gelu import bias_gelu, bias_gelu_kernel

#: What ``show_solution`` prints after this module: the kernel, then its launcher.
SHOWN = (bias_gelu_kernel, bias_gelu)
