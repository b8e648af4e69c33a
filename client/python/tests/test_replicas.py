"""Issue 43, 3 and 4: three reach-server replicas on one PostgreSQL registry
(initdb into a temporary directory, a unix socket; skipped only when the
PostgreSQL binaries are absent, which scripts/setup installs). One client
over all three spreads its calls round-robin, and a stream whose replica is
killed (-9) or drained (SIGTERM) goes on, warm, on another."""
import glob
import math
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

import numpy as np
import pytest

import reach
from conftest import SERVER

pytestmark = pytest.mark.timeout(90)


def _bin_dir():
    for path in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(path, "initdb")):
            return path
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """initdb and a postmaster on a unix socket (as `postgres` when root)."""

    def __init__(self):
        self.bin = _bin_dir()
        self.dir = tempfile.mkdtemp(prefix="reach-pg-")
        self.port = _free_port()
        self.prefix = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        subprocess.run(self.prefix + [f"{self.bin}/initdb", "-D", f"{self.dir}/data", "--auth=trust",
                                      "-U", "postgres", "-E", "UTF8", "--no-sync"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(self.prefix + [f"{self.bin}/pg_ctl", "-D", f"{self.dir}/data", "-l",
                                      f"{self.dir}/postgres.log", "-w", "-o",
                                      f"-k {self.dir} -c listen_addresses='' -p {self.port} -c fsync=off",
                                      "start"], check=True, stdout=subprocess.DEVNULL)
        self.url = f"postgresql:///postgres?host={self.dir}&port={self.port}&user=postgres"

    def stop(self):
        subprocess.run(self.prefix + [f"{self.bin}/pg_ctl", "-D", f"{self.dir}/data", "-m", "immediate",
                                      "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


class Replica:
    def __init__(self, url):
        self.dir = tempfile.mkdtemp(prefix="reach-replica-")
        self.log_path = os.path.join(self.dir, "server.log")
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [SERVER, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0", "--http_listen=",
                 "--solver_threads=1", f"--registry={url}"], stdout=log, stderr=log)

    def wait(self):
        deadline = time.time() + 30
        while time.time() < deadline:
            ports = re.findall(r"\(port (\d+)\)", open(self.log_path).read())
            if len(ports) >= 2:
                self.port, self.metrics_port = int(ports[0]), int(ports[1])
                self.address = f"127.0.0.1:{self.port}"
                return
            assert self.process.poll() is None, open(self.log_path).read()
            time.sleep(0.02)
        raise RuntimeError("replica did not start: " + open(self.log_path).read())

    def metric(self, pattern):
        """The value of the first metric line matching `pattern` (a regex
        over the line before its value), or 0."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if re.fullmatch(pattern, name):
                return float(value)
        return 0.0

    def solves(self):
        return self.metric(r'grpc_server_started_total\{.*grpc_method="Solve".*\}')

    def kill(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture()
def replicas():
    if _bin_dir() is None:
        pytest.skip("PostgreSQL is not installed (scripts/setup installs it)")
    pg = Postgres()
    started = [Replica(pg.url) for _ in range(3)]
    try:
        for r in started:
            r.wait()
        yield started
    finally:
        for r in started:
            r.stop()
        pg.stop()


LEG = {"name": "leg", "joints": [
    {"name": "hip", "parent": -1},
    {"name": "knee", "parent": 0, "rest": {"translation": {"z": -0.4}}},
    {"name": "ankle", "parent": 1, "rest": {"translation": {"z": -0.4}}}],
    "chains": [{"name": "leg", "root": "hip", "tip": "ankle"}]}


def _chain(joints, bone=0.1):
    """A straight chain along +z, `joints` joints."""
    out = [{"name": "j0", "parent": -1}]
    for i in range(1, joints):
        out.append({"name": f"j{i}", "parent": i - 1, "rest": {"translation": {"z": bone}}})
    return {"name": f"chain{joints}", "joints": out,
            "chains": [{"name": "chain", "root": "j0", "tip": f"j{joints - 1}"}]}


def test_round_robin_spreads_calls_over_three_replicas(replicas):
    addresses = ",".join(r.address for r in replicas)
    with reach.Client(addresses) as client:
        leg = client.register(LEG).skeleton_id
        before = [r.solves() for r in replicas]
        for _ in range(3000):
            client.solve(leg, {"chain": "leg", "target": (0.2, 0, -0.6)})
    counts = [r.solves() - b for r, b in zip(replicas, before)]
    print("Python client: Solve calls per replica", counts)
    assert sum(counts) == 3000
    for count in counts:
        assert abs(count - 1000) <= 150, counts


def test_an_address_list_names_the_bad_part():
    with pytest.raises(reach.ReachError, match=r"address: part 2 'localhost:1'"):
        reach.Client("127.0.0.1:1,localhost:1")


def _largest_step(a, b):
    """The largest rotation, radians, of any joint between two poses."""
    dots = np.abs(np.sum(a * b, axis=1)) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(np.max(2 * np.arccos(np.minimum(dots, 1.0))))


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "drain"])
def test_a_stream_resumes_warm_on_another_replica(replicas, how):
    addresses = ",".join(r.address for r in replicas)
    frames, kill_at = 400, 150
    with reach.Client(addresses, resume_streams=True) as client:
        skeleton = client.register(_chain(8)).skeleton_id
        pose = np.tile([1.0, 0.0, 0.0, 0.0], (8, 1))  # The rest pose.
        warm_largest = resumed_largest = 0.0
        largest_gap = 0.0
        with client.stream(skeleton, window=4, timeout=60) as stream:
            def send():
                for i in range(frames):
                    a = 0.01 * i
                    stream.send([{"chain": "chain", "target": (0.35 * math.cos(a), 0.35 * math.sin(a), 0.3),
                                  "solver": "fabrik"}])
                    time.sleep(0.002)
                stream.close()

            sender = threading.Thread(target=send)
            sender.start()
            last = time.monotonic()
            expected = 1
            for answered, solution in enumerate(stream):
                now = time.monotonic()
                assert solution.sequence == expected, "in order, each frame once"
                expected += 1
                assert solution.error is None, solution.error
                rotations = solution.apply(pose)
                step = _largest_step(pose, rotations)
                pose = rotations
                if 10 <= answered < kill_at:
                    warm_largest = max(warm_largest, step)
                elif answered >= kill_at:
                    resumed_largest = max(resumed_largest, step)
                    largest_gap = max(largest_gap, now - last)
                last = now
                if answered + 1 == kill_at:
                    holders = [r for r in replicas if r.metric("reach_active_streams") == 1]
                    assert len(holders) == 1
                    # SIGTERM drains: the replica answers what it read and
                    # ends the stream with UNAVAILABLE.
                    holders[0].process.send_signal(how)
            sender.join()
        assert expected == frames + 1, "every frame answered"
        assert stream.resumes >= 1
    print(f"Python resume ({how.name}): largest gap {largest_gap:.3f} s, largest joint step warm {warm_largest:.4f} rad, "
          f"across the resume {resumed_largest:.4f} rad")
    assert largest_gap < 1.0
    assert 0 < warm_largest
    assert resumed_largest <= 2 * warm_largest


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "drain"])
def test_an_asyncio_stream_resumes_warm_on_another_replica(replicas, how):
    """reach.aio's streams resume as the blocking client's do: the replica
    holding the stream killed (-9) or drained mid-stream, every frame is
    answered once, in order, within 1 s, and no joint jumps more than twice
    the warm stream's largest step."""
    import asyncio

    import reach.aio

    addresses = ",".join(r.address for r in replicas)
    frames, kill_at = 400, 150

    async def main():
        async with reach.aio.Client(addresses, resume_streams=True) as client:
            skeleton = (await client.register(_chain(8))).skeleton_id
            pose = np.tile([1.0, 0.0, 0.0, 0.0], (8, 1))  # The rest pose.
            warm_largest = resumed_largest = largest_gap = 0.0
            async with client.stream(skeleton, window=4, timeout=60) as stream:
                async def send():
                    for i in range(frames):
                        a = 0.01 * i
                        await stream.send([{"chain": "chain",
                                            "target": (0.35 * math.cos(a), 0.35 * math.sin(a), 0.3),
                                            "solver": "fabrik"}])
                        await asyncio.sleep(0.002)
                    await stream.close()

                sender = asyncio.create_task(send())
                last = time.monotonic()
                expected = 1
                answered = 0
                async for solution in stream:
                    now = time.monotonic()
                    assert solution.sequence == expected, "in order, each frame once"
                    expected += 1
                    assert solution.error is None, solution.error
                    rotations = solution.apply(pose)
                    step = _largest_step(pose, rotations)
                    pose = rotations
                    if 10 <= answered < kill_at:
                        warm_largest = max(warm_largest, step)
                    elif answered >= kill_at:
                        resumed_largest = max(resumed_largest, step)
                        largest_gap = max(largest_gap, now - last)
                    last = now
                    answered += 1
                    if answered == kill_at:
                        holders = [r for r in replicas if r.metric("reach_active_streams") == 1]
                        assert len(holders) == 1
                        holders[0].process.send_signal(how)
                await sender
            assert expected == frames + 1, "every frame answered"
            assert stream.resumes >= 1
            return warm_largest, resumed_largest, largest_gap

    warm_largest, resumed_largest, largest_gap = asyncio.run(main())
    print(f"Python asyncio resume ({how.name}): largest gap {largest_gap:.3f} s, largest joint step warm "
          f"{warm_largest:.4f} rad, across the resume {resumed_largest:.4f} rad")
    assert largest_gap < 1.0
    assert 0 < warm_largest
    assert resumed_largest <= 2 * warm_largest
