"""Browser-test harness: JupyterLab + headless Chromium checks of the lesson widgets (see harness.py)."""

from .harness import (
    CHROMIUM_ARGS,
    CHROMIUM_MISSING,
    FIXTURES_DIR,
    NOTEBOOKS_DIR,
    REPO_ROOT,
    VIEWPORT,
    BrowserCase,
    CheckFailed,
    JupyterLabServer,
    LabDriver,
    find_chromium,
)

__all__ = [
    "CHROMIUM_ARGS",
    "CHROMIUM_MISSING",
    "FIXTURES_DIR",
    "NOTEBOOKS_DIR",
    "REPO_ROOT",
    "VIEWPORT",
    "BrowserCase",
    "CheckFailed",
    "JupyterLabServer",
    "LabDriver",
    "find_chromium",
]
