#!/usr/bin/env python3
"""Create ./.venv and install gpulab into it (stdlib only; run by `make setup`).

Torch comes first, chosen for the machine:
  * a CUDA GPU (`nvidia-smi -L` lists one): plain `torch` from PyPI (a CUDA build);
  * no GPU: the CPU build, `torch==2.13.0`, never a multi-GB CUDA build.
    On Linux x86_64 the CPU wheel index is added when it answers within 3 s.
GPULAB_TORCH_SPEC overrides the choice, e.g. GPULAB_TORCH_SPEC='torch==2.13.0 --index-url URL'.
Then `pip install -e '.[lab,site,test]'` (JupyterLab, the site builder and the test tools). A stamp in .venv
makes a second run a no-op.
pip runs with --quiet (errors still print), so that `make lab` ends with JupyterLab's URL and token.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

if sys.version_info < (3, 10):
    sys.exit(f"gpulab needs Python >= 3.10; this is {platform.python_version()}. Try: PYTHON=python3.11 make setup")

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
VPY = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".gpulab-setup-stamp"
CPU_TORCH = "torch==2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def say(msg: str) -> None:
    print(f"[setup] {msg}", flush=True)


def die(msg: str) -> None:
    print(f"[setup] ERROR: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def run(*args: str) -> None:
    say("$ " + " ".join(shlex.quote(a) for a in args))
    if subprocess.call(args, cwd=ROOT) != 0:
        die(f"command failed: {' '.join(args)}")


def has_gpu() -> bool:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and any(line.startswith("GPU ") for line in out.stdout.splitlines())


def answers(url: str, seconds: float = 3.0) -> bool:
    """True if url answers within `seconds` (a thread bounds DNS lookups too)."""
    ok: list[bool] = []

    def probe() -> None:
        try:
            req = urllib.request.Request(url, method="HEAD")
            with urllib.request.urlopen(req, timeout=seconds) as r:
                ok.append(r.status < 400)
        except Exception:
            pass

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(seconds)
    return bool(ok and ok[0])


def venv_python_version() -> str | None:
    try:
        out = subprocess.run(
            [str(VPY), "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def torch_info() -> dict | None:
    code = (
        "import json, torch; print(json.dumps({'version': torch.__version__, "
        "'cuda': torch.version.cuda, 'cuda_ok': torch.cuda.is_available()}))"
    )
    out = subprocess.run([str(VPY), "-c", code], capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None


def cpu_torch_args() -> list[str]:
    """pip arguments for the CPU build; refuses to go on if pip would pick a CUDA build."""
    args = [CPU_TORCH]
    linux_x86 = sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")
    if not linux_x86:
        return args  # PyPI's macOS/Windows/aarch64 wheels are CPU builds; verified after install
    if answers(CPU_INDEX + "/"):
        say(f"CPU wheel index answers: adding --extra-index-url {CPU_INDEX}")
        args += ["--extra-index-url", CPU_INDEX]
    else:
        say("CPU wheel index unreachable: relying on pip's own indexes / find-links")
    # Ask pip which torch it would take, without downloading the wheel itself.
    say("checking which torch build pip would pick (dry run)")
    out = subprocess.run(
        [str(VPY), "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        die("pip could not resolve " + " ".join(args))
    picks = [
        i["metadata"]["version"]
        for i in json.loads(out.stdout).get("install", [])
        if i["metadata"]["name"].lower() == "torch"
    ]
    if picks and "+cpu" not in picks[0]:
        die(
            f"pip would install torch {picks[0]}, a CUDA build of several GB, on this CPU-only machine.\n"
            f"  No CPU build of {CPU_TORCH} for Python {platform.python_version()} is reachable.\n"
            f"  Use a Python that has one (here: PYTHON=python3.11 make setup), make {CPU_INDEX} reachable,\n"
            f"  or set GPULAB_TORCH_SPEC to a CPU wheel (file or spec plus --index-url)."
        )
    return args


def main() -> None:
    gpu = has_gpu()
    spec = os.environ.get("GPULAB_TORCH_SPEC", "").strip()
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    key = hashlib.sha256(
        pyproject + Path(__file__).read_bytes() + f"|{gpu}|{spec}|{platform.python_version()}".encode()
    ).hexdigest()

    if VPY.exists() and (have := venv_python_version()) != platform.python_version():
        say(f".venv was made with another Python ({have}); recreating it")
        shutil.rmtree(VENV)
    if VPY.exists() and STAMP.exists() and STAMP.read_text().strip() == key:
        say(".venv is up to date (delete .venv or run `make clean` to rebuild)")
        return

    say(f"Python {platform.python_version()} at {sys.executable}; GPU: {'yes' if gpu else 'none found'}")
    if not VPY.exists():
        say("creating .venv")
        try:
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        except subprocess.CalledProcessError:
            die("`python -m venv` failed; on Debian/Ubuntu: apt-get install python3-venv")
    pip_major = subprocess.run(
        [str(VPY), "-c", "import pip; print(pip.__version__.split('.')[0])"], capture_output=True, text=True
    ).stdout.strip()
    if not pip_major.isdigit() or int(pip_major) < 23:
        run(str(VPY), "-m", "pip", "install", "--quiet", "--upgrade", "pip>=23.1")
    STAMP.unlink(missing_ok=True)

    info = torch_info()
    if spec:
        say(f"torch: GPULAB_TORCH_SPEC={spec}")
        run(str(VPY), "-m", "pip", "install", *shlex.split(spec))
    elif gpu:
        if info and info["cuda_ok"]:
            say(f"torch {info['version']} (CUDA {info['cuda']}) already sees the GPU")
        else:
            if info:  # a CPU build from an earlier setup: swap it for the CUDA build
                run(str(VPY), "-m", "pip", "uninstall", "--yes", "torch")
            say("installing torch (CUDA build, a large download)")
            run(str(VPY), "-m", "pip", "install", "--quiet", "torch")
    elif info and info["cuda"] is None and info["version"].startswith(CPU_TORCH.split("==")[1]):
        say(f"torch {info['version']} (CPU build) already installed")
    else:
        if info:
            run(str(VPY), "-m", "pip", "uninstall", "--yes", "torch")
        say(f"installing {CPU_TORCH} (CPU build)")
        run(str(VPY), "-m", "pip", "install", "--quiet", *cpu_torch_args())

    info = torch_info()
    if info is None:
        die("`import torch` fails in .venv after installing it")
    say(f"torch {info['version']}, CUDA build: {info['cuda'] or 'no'}, GPU usable: {info['cuda_ok']}")
    if not gpu and info["cuda"] is not None:
        die(
            f"torch {info['version']} is a CUDA build on a machine without a GPU. "
            f"Run `make clean` and set GPULAB_TORCH_SPEC to a CPU build."
        )
    if gpu and not info["cuda_ok"]:
        say("WARNING: a GPU is present but torch cannot use it (driver too old for this build?)")

    say("installing gpulab and its dependencies: pip install -e '.[lab,site,test]' (a few minutes the first time)")
    run(str(VPY), "-m", "pip", "install", "--quiet", "-e", ".[lab,site,test]")
    if torch_info() != info:
        die("installing gpulab changed torch; check pyproject.toml's torch requirement")
    run(str(VPY), "-c", "import gpulab, torch, triton")
    STAMP.write_text(key + "\n")
    say(".venv is ready")


if __name__ == "__main__":
    main()
