"""docs/python.md's install commands, offline: a venv made with
--system-site-packages, --target, --user, pip wheel, and an sdist built
and installed where the repository is not. Each installed copy is imported
and talks to the server."""
import os
import re
import subprocess
import tarfile
import zipfile

import pytest

import snippets
from conftest import REPO

PACKAGE = os.path.join(REPO, "client", "python")
PY = "/usr/bin/python3"
CHECK = ("import reach, reach.aio, sys; from reach.v1 import retarget_pb2; "
         "c = reach.Client(); assert c.health() == 'SERVING'; print(reach.__file__)")


def offline_env(tmp_path, **extra):
    """No index: a proxy that refuses, and pip told not to look."""
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9",
               HOME=str(tmp_path / "home"), PYTHONUSERBASE=str(tmp_path / "userbase"),
               no_proxy="127.0.0.1,localhost", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    env.update(extra)
    return env


def sh(args, env, cwd=None, timeout=120):
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, args))}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def doc_commands():
    """The install commands docs/python.md gives (shell lines of its blocks)."""
    lines = []
    for block in snippets.indented_blocks(snippets.python_doc()):
        if block.startswith("sudo apt-get"):
            lines = [l for l in block.splitlines() if l and not l.startswith("#") and not l.startswith(" ")]
    return lines


def test_doc_names_these_commands():
    commands = doc_commands()
    assert "python3 -m venv --system-site-packages ~/reach-venv" in commands
    assert "~/reach-venv/bin/pip install ./client/python" in commands
    assert "python3 -m pip install --no-deps --target DIR ./client/python" in commands
    assert "python3 -m pip install --user --break-system-packages ./client/python" in commands
    assert "python3 -m pip wheel --no-deps -w dist ./client/python" in commands
    assert "python3 -m build --sdist -o dist ./client/python" in commands


@pytest.mark.timeout(240)
def test_installs_offline(server, tmp_path):
    env = offline_env(tmp_path, REACH_ADDRESS=server.address)
    home = tmp_path / "home"
    home.mkdir()
    # The document's commands, with ~ this test's HOME and DIR a directory
    # here, run from a copy of the repository's layout made of links (so
    # that dist/ lands here).
    work = tmp_path / "work"
    (work / "client").mkdir(parents=True)
    os.symlink(PACKAGE, work / "client" / "python")
    os.symlink(os.path.join(REPO, "proto"), work / "proto")
    commands = [c.replace("~", str(home)).replace("DIR", str(tmp_path / "target"))
                for c in doc_commands()[1:]]
    for command in commands:
        args = command.split()
        if args[0] == "python3":
            args[0] = PY
        sh(args, env, cwd=work, timeout=180)
    # The venv: its own copy, which imports and works.
    venv_python = str(home / "reach-venv" / "bin" / "python")
    where = sh([venv_python, "-c", CHECK], env, cwd=tmp_path)
    assert where.startswith(str(home / "reach-venv"))
    listed = sh([venv_python, "-m", "pip", "list"], env)
    assert re.search(r"^reach-ik\s+0\.2\.0", listed, re.M)
    # --target
    where = sh([PY, "-c", CHECK], dict(env, PYTHONPATH=str(tmp_path / "target")), cwd=tmp_path)
    assert where.startswith(str(tmp_path / "target"))
    # --user
    where = sh([PY, "-c", CHECK], env, cwd=tmp_path)
    assert where.startswith(str(tmp_path / "userbase"))
    # The wheel: pure, named for the distribution, stubs inside.
    dist = os.path.join(work, "dist")
    if True:
        (wheel,) = [f for f in os.listdir(dist) if f.endswith(".whl")]
        assert wheel == "reach_ik-0.2.0-py3-none-any.whl"
        with zipfile.ZipFile(os.path.join(dist, wheel)) as z:
            names = z.namelist()
        assert "reach/v1/retarget_pb2.py" in names and "reach/_health/health_pb2.py" in names
        # The sdist holds the protos; unpacked away from the repository it
        # builds and installs.
        (sdist,) = [f for f in os.listdir(dist) if f.endswith(".tar.gz")]
        unpacked = tmp_path / "elsewhere"
        with tarfile.open(os.path.join(dist, sdist)) as tar:
            assert "reach_ik-0.2.0/proto/reach/v1/retarget.proto" in tar.getnames()
            tar.extractall(unpacked)
        sh([PY, "-m", "pip", "install", "--no-deps", "--target", str(tmp_path / "from-sdist"),
            os.path.join(dist, sdist)], env, cwd=tmp_path)
        sh([PY, "-m", "pip", "install", "--no-deps", "--target", str(tmp_path / "from-unpacked"),
            str(unpacked / "reach_ik-0.2.0")], env, cwd=tmp_path)
        for target in ("from-sdist", "from-unpacked"):
            where = sh([PY, "-c", CHECK], dict(env, PYTHONPATH=str(tmp_path / target)), cwd=tmp_path)
            assert where.startswith(str(tmp_path / target))
