"""Lesson 00's figures (the machine and your first kernel): this GPU's measured ceilings beside the datasheet.

Inputs: a device profile (``gpulab.device``) and a datasheet entry (``gpulab.hardware``). Figures hold plain
lists (see ``gpulab.plots``).
"""
from __future__ import annotations

from plotly.subplots import make_subplots


def ceilings_figure(profile: dict, spec=None, where: str = ""):
    """Two panels: HBM copy bandwidth (TB/s) and the matmul rate per dtype (TFLOP/s, log axis), measured
    (``profile``: a device-profile dict with ``copy_tbps`` and ``matmul_tflops``) beside the datasheet
    (``spec``: a ``hardware.GPUSpec``, or None when the table does not know this GPU), each datasheet bar
    labelled with the fraction of it that was measured. ``where`` names the source (the title)."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.25, 0.75], subplot_titles=("HBM copy (TB/s)", "matmul (TFLOP/s)"))
    dtypes = [d for d, r in profile["matmul_tflops"].items() if r]
    fig.add_bar(x=["copy"], y=[profile["copy_tbps"]], name="measured", marker_color="#1f77b4", row=1, col=1,
                text=[f"{profile['copy_tbps']:.2f}"])
    fig.add_bar(x=dtypes, y=[profile["matmul_tflops"][d] for d in dtypes], name="measured", marker_color="#1f77b4",
                showlegend=False, row=1, col=2)
    if spec is not None:
        fig.add_bar(x=["copy"], y=[spec.hbm_tbps], name=f"datasheet {spec.name}", marker_color="#bbbbbb", row=1, col=1,
                    text=[f"{profile['copy_tbps'] / spec.hbm_tbps:.0%}"])
        fig.add_bar(x=dtypes, y=[spec.peak_tflops[d] for d in dtypes], marker_color="#bbbbbb", showlegend=False,
                    text=[f"{profile['matmul_tflops'][d] / spec.peak_tflops[d]:.0%}" for d in dtypes], row=1, col=2)
    fig.update_yaxes(type="log", row=1, col=2)  # fp32 on CUDA cores is ~20x below fp8 on tensor cores
    fig.update_layout(title=f"Measured beside the datasheet: {where}", barmode="group", template="plotly_white",
                      height=420, title_font_size=12)
    return fig
