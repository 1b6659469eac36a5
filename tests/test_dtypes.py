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


def test_name_of_a_torch_dtype_is_the_tables_first_row_else_torchs_name():
    assert [dtypes.name_of(d) for d in (torch.float64, torch.float32, torch.bfloat16, torch.float16)] == [
        "fp64",
        "fp32",  # not "tf32", which stores float32 too
        "bf16",
        "fp16",
    ]
    assert dtypes.name_of(torch.float8_e4m3fn) == "fp8"
    assert dtypes.name_of(torch.int64) == "int64" and dtypes.name_of(torch.float8_e5m2) == "float8_e5m2"
    for d in dtypes.TABLE.values():
        assert dtypes.TABLE[dtypes.name_of(d.torch)].torch is d.torch
    with pytest.raises(TypeError, match="torch dtype"):
        dtypes.name_of("bf16")


def _dtype_name_dicts() -> list[str]:
    """Modules of gpulab holding a dict literal from torch dtypes to strings: a second table of names."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Dict)
                and node.keys
                and all(isinstance(k, ast.Attribute) and getattr(k.value, "id", None) == "torch" for k in node.keys)
                and all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in node.values)
            ):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    return found


def test_one_table_of_dtype_names():
    assert _dtype_name_dicts() == [], "name a torch dtype with dtypes.name_of"
