"""A stand-in for Nsight Compute on the CPU: ``install(monkeypatch)`` makes ``gpulab.measure.ncu`` see counters as available
and answers its ``subprocess.run`` calls: the profiling call writes the report file (or fails as told); the two
imports print the fixtures in ncu's raw-page CSV (kernel names, and names renamed by NVTX range)."""

import subprocess
from pathlib import Path

from gpulab.measure import ncu

FIXTURES = Path(__file__).parent / "fixtures"
RAW = (FIXTURES / "ncu_raw_fusion.csv").read_text()
RAW_NVTX = (FIXTURES / "ncu_raw_fusion_nvtx.csv").read_text()
NCU = "/opt/ncu"

_REAL_RUN = subprocess.run


class FakeNcu:
    """Stands in for subprocess.run: the profiling call writes the report file (or fails as told); the imports
    print the fixtures."""

    def __init__(self, fail_first: str | None = None):
        self.calls, self.fail_first = [], fail_first

    def __call__(self, cmd, **kw):
        if cmd[0] != NCU:  # nvidia-smi for the provenance on a GPU: the real one
            return _REAL_RUN(cmd, **kw)
        self.calls.append(cmd)
        if "--version" in cmd:
            return subprocess.CompletedProcess(
                cmd,
                0,
                "NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.1.0.0 (build 1) (public-release)\n",
                "",
            )
        if "--import" in cmd:
            return subprocess.CompletedProcess(cmd, 0, RAW_NVTX if "--print-nvtx-rename" in cmd else RAW, "")
        Path(cmd[cmd.index("--export") + 1] + ".ncu-rep").write_bytes(b"report")  # also when failing: partial
        if self.fail_first is not None:
            msg, self.fail_first = self.fail_first, None
            return subprocess.CompletedProcess(cmd, 1, "==PROF== Connected to process 7\n", msg)
        return subprocess.CompletedProcess(cmd, 0, "==PROF== Connected to process 7\n==PROF== Disconnected\n", "")


def install(monkeypatch, fail_first: str | None = None) -> FakeNcu:
    """Counters available, ncu at ``NCU``, and every ``subprocess.run`` of it answered by a new ``FakeNcu``."""
    monkeypatch.setattr(ncu, "available", lambda: (True, ""))
    monkeypatch.setattr(ncu, "ncu_path", lambda: NCU)
    fake = FakeNcu(fail_first)
    monkeypatch.setattr(ncu.subprocess, "run", fake)
    return fake
