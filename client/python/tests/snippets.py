"""The code examples of docs/python.md and of the package's docstrings, as
written, and a runner that runs one against a server."""
import os
import subprocess
import sys
import textwrap

from conftest import REPO

PYTHON_DOC = os.path.join(REPO, "docs", "python.md")


def indented_blocks(text):
    """Blocks of lines indented by 4 spaces (blank lines inside), dedented."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("    ") or (current is not None and not line.strip()):
            if current is None:
                current = []
            current.append(line)
        else:
            if current:
                blocks.append(textwrap.dedent("\n".join(current)).strip("\n") + "\n")
            current = None
    if current:
        blocks.append(textwrap.dedent("\n".join(current)).strip("\n") + "\n")
    return blocks


def python_blocks(text):
    return [b for b in indented_blocks(text) if b.startswith(("import ", "from "))]


def python_doc():
    """docs/python.md, whole: every block in it is the Python client's."""
    with open(PYTHON_DOC, encoding="utf-8") as f:
        return f.read()


def run(code, address, timeout=90):
    """Runs `code` in a fresh interpreter from the repository's root, with
    the package this test imports and REACH_ADDRESS; returns its stdout."""
    import reach
    env = dict(os.environ, REACH_ADDRESS=address,
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(reach.__file__))))
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"example failed:\n{code}\n--- stderr:\n{done.stderr}"
    return done.stdout
