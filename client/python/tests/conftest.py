"""Fixtures: a real reach-server on loopback (REACH_SERVER_BINARY, default
build/server/reach-server), plaintext, or with TLS and tokens made by
openssl (deploy/make-certs.sh) in the test."""
import hashlib
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SERVER = os.environ.get("REACH_SERVER_BINARY", os.path.join(REPO, "build", "server", "reach-server"))
CLI = os.environ.get("REACH_CLI_BINARY", os.path.join(REPO, "build", "client", "reach"))
HUMANOID = os.path.join(REPO, "examples", "humanoid.skeleton.json")


def pytest_collection_modifyitems(items):
    """Nothing hangs: every test has a deadline (pytest-timeout,
    python3-pytest-timeout), 60 s unless it sets its own."""
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(60))


class Server:
    def __init__(self, *flags):
        self.dir = tempfile.mkdtemp(prefix="reach-pytest-")
        self.log_path = os.path.join(self.dir, "server.log")
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [SERVER, "--listen=127.0.0.1:0", "--metrics_listen=", "--http_listen=", "--in_memory", *flags],
            stdout=self.log, stderr=self.log)
        deadline = time.time() + 30
        self.port = None
        while self.port is None and time.time() < deadline:
            m = re.search(r"listening on \S+ \(port (\d+)\)", open(self.log_path).read())
            if m:
                self.port = int(m.group(1))
            elif self.process.poll() is not None:
                raise RuntimeError("reach-server exited: " + open(self.log_path).read())
            else:
                time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("reach-server did not start: " + open(self.log_path).read())
        self.address = f"127.0.0.1:{self.port}"

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    """A client of `server` (plaintext)."""
    import reach
    with reach.Client(server.address) as c:
        yield c


@pytest.fixture(scope="module")
def humanoid(client):
    """examples/humanoid.skeleton.json registered on `server`."""
    return client.register(HUMANOID).skeleton_id


@pytest.fixture(scope="module")
def secure_server():
    """TLS from certificates openssl makes now, tokens: tool (register),
    game (solve)."""
    pki = tempfile.mkdtemp(prefix="reach-pytest-pki-")
    subprocess.run([os.path.join(REPO, "deploy", "make-certs.sh"), pki], check=True,
                   stdout=subprocess.DEVNULL)
    tokens = {"tool": secrets.token_hex(32), "game": secrets.token_hex(32)}
    with open(os.path.join(pki, "tokens"), "w") as f:
        for name, role in (("tool", "register"), ("game", "solve")):
            f.write(f"{name} {hashlib.sha256(tokens[name].encode()).hexdigest()} {role}\n")
    s = Server(f"--tls_cert={pki}/tls.crt", f"--tls_key={pki}/tls.key",
               f"--auth_tokens_file={pki}/tokens")
    s.pki = pki
    s.tokens = tokens
    yield s
    s.stop()
    shutil.rmtree(pki, ignore_errors=True)
