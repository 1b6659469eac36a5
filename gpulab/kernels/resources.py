"""What a compiled Triton kernel costs the SM: registers per thread, spills, shared memory, warps.

Read from the object a launch returns on a GPU (``kernel[grid](...)``); the interpreter returns none. The
lesson 04 and 07 suites put these beside their timings (register pressure, ``gpulab.models.fusion.resident_warps``).
"""

from __future__ import annotations


def kernel_resources(compiled) -> dict:
    """Registers per thread, spilled registers and shared memory of a compiled Triton kernel (the object a
    launch returns on a GPU). Triton 3.6 fills ``n_regs``/``n_spills`` when the binary is loaded (the first
    launch). Returns Nones for what is missing (the interpreter returns no compiled kernel)."""
    if compiled is None:
        return {"n_regs": None, "n_spills": None, "shared_bytes": None, "num_warps": None}
    if getattr(compiled, "n_regs", None) is None and hasattr(compiled, "_init_handles"):
        compiled._init_handles()
    meta = getattr(compiled, "metadata", None)
    return {
        "n_regs": getattr(compiled, "n_regs", None),
        "n_spills": getattr(compiled, "n_spills", None),
        "shared_bytes": getattr(meta, "shared", None),
        "num_warps": getattr(meta, "num_warps", None),
    }
