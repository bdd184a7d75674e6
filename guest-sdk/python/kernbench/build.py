"""Build a Python algorithm or bench module into a KernBench component.

    python -m kernbench.build algorithm path/to/ring_allreduce.py -o ring_allreduce.wasm
    python -m kernbench.build bench path/to/ccl_hello.py -o ccl_hello.wasm

It writes the glue module (``WitWorld`` exporting the module) and runs
componentize-py (``pip install componentize-py==0.25.1``) against the
KernBench WIT (``--wit``, default: the ``wit/`` of the KernBench tree this
SDK sits in).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

COMPONENTIZE_PY = "0.25.1"
SDK_DIR = Path(__file__).resolve().parent.parent
WORLDS = {"algorithm": "algorithm-full", "bench": "bench"}
GLUE = {"algorithm": "export_algorithm", "bench": "export_bench"}


def componentize_py():
    """The componentize-py executable next to this Python, or on PATH; a
    clear error naming the pip package otherwise."""
    here = Path(sys.executable).parent / "componentize-py"
    found = str(here) if here.exists() else shutil.which("componentize-py")
    if not found:
        sys.exit(
            f"kernbench.build: componentize-py not found: install it with "
            f"`pip install componentize-py=={COMPONENTIZE_PY}`"
        )
    return found


def build(kind, module_path, out, wit=None):
    module_path = Path(module_path).resolve()
    if not module_path.is_file():
        sys.exit(f"kernbench.build: no such module file: {module_path}")
    wit = Path(wit) if wit else SDK_DIR.parent.parent / "wit"
    if not (wit / "kernbench.wit").is_file():
        sys.exit(f"kernbench.build: no kernbench.wit in {wit} (pass --wit DIR)")
    name = module_path.stem
    with tempfile.TemporaryDirectory(prefix="kernbench-build-") as tmp:
        glue = Path(tmp) / "kernbench_app.py"
        glue.write_text(
            f"from kernbench.{kind} import {GLUE[kind]}\n"
            f"import {name} as _user\n"
            f"WitWorld = {GLUE[kind]}(_user)\n"
        )
        cmd = [
            componentize_py(),
            "--wit-path",
            str(wit),
            "--world",
            WORLDS[kind],
            "componentize",
            "kernbench_app",
            "-p",
            tmp,
            "-p",
            str(module_path.parent),
            "-p",
            str(SDK_DIR),
            "-o",
            str(out),
        ]
        env = dict(os.environ)
        env.pop("VIRTUAL_ENV", None)  # do not pull a venv's site-packages in
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(
                f"kernbench.build: componentize-py failed for {module_path}:\n"
                f"{r.stdout}{r.stderr}"
            )


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kernbench.build", description=__doc__)
    ap.add_argument("kind", choices=sorted(WORLDS))
    ap.add_argument("module", help="the algorithm or bench .py file")
    ap.add_argument("-o", "--output", required=True, help="the .wasm to write")
    ap.add_argument("--wit", help="the KernBench wit/ directory")
    a = ap.parse_args(argv)
    build(a.kind, a.module, a.output, a.wit)


if __name__ == "__main__":
    main()
