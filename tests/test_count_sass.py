"""tools/count_sass.py: the SASS walk on hand-written listings, and the recorded counts reproduced by a compile."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import count_sass  # noqa: E402


def _listing(lines: list[str]) -> str:
    """A cuobjdump-style listing: one instruction per 16 bytes, each followed by its encoding line."""
    out = ["\tcode for sm_90a", "\t\tFunction : k"]
    for i, ins in enumerate(lines):
        out.append(f"        /*{16 * i:04x}*/                   {ins} ;   /* 0x000000 */")
        out.append("                                                       /* 0x000fe2 */")
    return "\n".join(out)


# 0 S2R; 1 @P0 EXIT (out of range: not taken); 2 @P1 BRA 4 (skips the load of an element in range: falls
# through); 3 LDG; 4 @!P2 BRA 8 (skips the slow path's table load: taken); 5-7 the slow path; 8 FFMA; 9 BRA 11
# (unconditional: followed); 10 a dead FMUL; 11 STG; 12 EXIT; 13 NOP (after the exit, never counted)
SLOW_PATH = [
    "S2R R0, SR_TID.X",
    "@P0 EXIT",
    "@P1 BRA 0x40",
    "LDG.E R2, desc[UR4][R6.64]",
    "@!P2 BRA 0x80",
    "IMAD.SHL.U32 R0, R2, 0x100, RZ",
    "LDG.E.CONSTANT R9, desc[UR4][R10.64]",
    "IADD3 R21, P0, R21, 0x4, RZ",
    "FFMA.FTZ R6, R7, -1.5707962512969970703, R2",
    "BRA 0xb0",
    "FMUL R0, R2, 0.5",
    "STG.E desc[UR4][R4.64], R2",
    "EXIT",
    "NOP",
]


def test_fast_path_skips_the_slow_path_and_follows_jumps():
    instrs = count_sass.parse_sass(_listing(SLOW_PATH))
    assert [a for a, *_ in instrs] == [16 * i for i in range(len(SLOW_PATH))]
    assert instrs[4][1] == "@!P2" and instrs[4][2] == "BRA" and instrs[3][2] == "LDG.E"
    got = count_sass.fast_path_count(instrs)
    # issued: 0, 1, 2, 3, 4, 8, 9, 11, 12
    assert got["total"] == 9
    assert got["by_opcode"] == {"BRA": 3, "EXIT": 2, "FFMA": 1, "LDG": 1, "S2R": 1, "STG": 1}


def test_a_forward_branch_over_ordinary_code_falls_through():
    lines = ["@P0 BRA 0x30", "FADD R1, R1, R1", "FMUL R1, R1, R1", "EXIT"]
    assert count_sass.fast_path_count(count_sass.parse_sass(_listing(lines)))["total"] == 4


@pytest.mark.parametrize(
    "lines, match",
    [
        (["FADD R1, R1, R1", "@P0 BRA 0x0", "EXIT"], "backward branch"),
        (["@P0 BRA 0x100", "EXIT"], "no instruction there"),
        (["FADD R1, R1, R1", "@P0 EXIT"], "without an unpredicated EXIT"),
    ],
)
def test_the_walk_refuses_what_it_cannot_count(lines, match):
    with pytest.raises(ValueError, match=match):
        count_sass.fast_path_count(count_sass.parse_sass(_listing(lines)))


def test_parse_refuses_text_without_sass():
    with pytest.raises(ValueError, match="no SASS instruction"):
        count_sass.parse_sass("Fatbin elf code:\n================\n")


def test_the_record_is_reproduced_by_a_compile(tmp_path):
    """One recorded row compiled again here for sm_90 (no GPU needed) gives the recorded count, when this
    Triton is the one that recorded it."""
    import triton

    record = json.loads(count_sass.OUT.read_text())
    assert record["command"] == count_sass.COMMAND and record["target"].startswith("sm_90")
    if record["triton"] != triton.__version__:
        pytest.skip(f"recorded with Triton {record['triton']}, this is {triton.__version__}")
    row = next(r for r in record["rows"] if r["variant"] == "precise" and r["elements_per_thread"] == 1)
    code = (
        "import sys, json; sys.path.insert(0, 'tools'); import count_sass as c, subprocess; from pathlib import Path\n"
        f"p = Path({str(tmp_path / 'k.cubin')!r}); c._compile(False, False, {row['block']}, {row['num_warps']}, p)\n"
        "s = subprocess.run([c._tool('cuobjdump'), '-sass', str(p)], capture_output=True, text=True, check=True)\n"
        "print(json.dumps(c.fast_path_count(c.parse_sass(s.stdout))))"
    )
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["total"] == row["fast_path_instructions"] and got["by_opcode"] == row["by_opcode"]
    assert row["per_element"] == row["fast_path_instructions"] / row["elements_per_thread"]
