"""Reference solution kernels for lesson 05's kernel exercise (hidden behind show_solution): the fused forward
of y = s(s(s(x))) and its backward that rebuilds s1, s2, s3 from x instead of loading them.

They are gpulab's teaching pair, written once in ``gpulab.kernels.sigmoid3_teaching``: lesson 05's suite times the
same kernels against the production pair. ``show_solution`` prints them below this module."""

from ..kernels.sigmoid3_teaching import sigmoid3_bwd, sigmoid3_bwd_kernel, sigmoid3_fwd, sigmoid3_fwd_kernel

#: What ``show_solution`` prints after this module: the kernels, then their launchers.
SHOWN = (sigmoid3_fwd_kernel, sigmoid3_bwd_kernel, sigmoid3_fwd, sigmoid3_bwd)
