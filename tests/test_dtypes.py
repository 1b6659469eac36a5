"""gpulab.core.dtypes: the one dtype table's bytes per element, and one home for the small helpers every model shares."""

import ast
from pathlib import Path

import pytest
import torch

from gpulab.core import dtypes

ROOT = Path(__file__).resolve().parents[1] / "gpulab"


def test_itemsize_of_names_torch_dtypes_and_bytes():
    assert [dtypes.itemsize(n) for n in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")] == [8, 4, 4, 2, 2, 1]
    assert dtypes.itemsize(torch.bfloat16) == 2 and dtypes.itemsize(torch.float8_e4m3fn) == 1
    assert dtypes.itemsize(2) == 2 and dtypes.itemsize(16) == 16  # bytes, as a model takes them
    assert dtypes.itemsize("fp8", allowed=dtypes.MATMUL) == 1


@pytest.mark.parametrize(
    "bad, kwargs, words",
    [
        ("fp64", {"allowed": dtypes.MATMUL}, ["width", "'fp64'", "fp32"]),
        ("int4", {}, ["width", "'int4'"]),
        (0, {}, ["width"]),
        (-2, {}, ["width"]),
        (True, {}, ["width"]),
        (2.0, {}, ["width"]),
    ],
)
def test_itemsize_refuses_naming_the_argument(bad, kwargs, words):
    with pytest.raises((TypeError, ValueError)) as e:
        dtypes.itemsize(bad, arg="width", **kwargs)
    assert all(w in str(e.value) for w in words), str(e.value)


def _defined(name: str) -> list[str]:
    """Modules of gpulab that define a function called ``name`` or ``_name``."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") == name:
                found.append(str(path.relative_to(ROOT.parent)))
    return found


def test_one_home_for_itemsize_and_cdiv():
    assert _defined("itemsize") == ["gpulab/core/dtypes.py"]
    assert _defined("cdiv") == ["gpulab/models/waves.py"]
