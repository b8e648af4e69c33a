#!/usr/bin/env python3
"""A stream through haproxy survives the kill of its replica.

Streams FRAMES targets through ADDRESS (haproxy) with the Python client's
resume_streams; once KILL_AT frames are answered it finds the replica that
holds the stream (reach_active_streams == 1 on its /metrics) and kills it
(KILL with {name} replaced: `docker kill {name}` in deploy/smoke-ha.sh,
`kill -9 {name}` with process ids in deploy/haproxy_test.sh). Then checks: every frame answered once, in order,
no error, the stream resumed (on another replica, through haproxy), the
longest wait for an answer across the kill under 1 s and the largest joint
step across it within twice the warm stream's (no pop). Prints the numbers
and the killed container's name (last line: `killed NAME`).

    ha_stream_check.py ADDRESS --ca CA [--server-name N] [--token-file F]
        [--metrics-token-file F] --replica NAME=http://IP:9464/metrics ...
        [--kill 'docker kill {name}'] [--register-on REPLICA_ADDRESS ...]

Needs the Python client (client/python) on PYTHONPATH and numpy.
"""
import argparse
import base64
import math
import shlex
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import reach


def chain(joints, bone=0.1):
    """A straight chain along +z (as client/python/tests/test_replicas.py)."""
    out = [{"name": "j0", "parent": -1}]
    for i in range(1, joints):
        out.append({"name": f"j{i}", "parent": i - 1, "rest": {"translation": {"z": bone}}})
    return {"name": f"ha-chain{joints}", "joints": out,
            "chains": [{"name": "chain", "root": "j0", "tip": f"j{joints - 1}"}]}


def largest_step(a, b):
    """The largest rotation, radians, of any joint between two poses."""
    dots = np.abs(np.sum(a * b, axis=1)) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(np.max(2 * np.arccos(np.minimum(dots, 1.0))))


def active_streams(url, password):
    request = urllib.request.Request(url)
    if password:
        auth = base64.b64encode(f"prometheus:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {auth}")
    with urllib.request.urlopen(request, timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("reach_active_streams "):
                return float(line.split()[-1])
    return -1.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address")
    parser.add_argument("--ca", required=True)
    parser.add_argument("--server-name")
    parser.add_argument("--token-file")
    parser.add_argument("--metrics-token-file")
    parser.add_argument("--replica", action="append", required=True,
                        help="NAME=METRICS_URL, once per replica")
    parser.add_argument("--kill", default="docker kill {name}")
    parser.add_argument("--register-on", action="append", default=[],
                        help="also register the skeleton on this replica directly "
                             "(replicas without a shared registry)")
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--kill-at", type=int, default=200)
    args = parser.parse_args()
    token = open(args.token_file).read().strip() if args.token_file else None
    metrics_password = (open(args.metrics_token_file).read().strip()
                        if args.metrics_token_file else None)
    replicas = dict(r.split("=", 1) for r in args.replica)

    killed = None
    tls = reach.TLS(ca=args.ca, server_name=args.server_name)
    for address in args.register_on:
        with reach.Client(address, token=token, tls=tls) as direct:
            direct.register(chain(8))
    with reach.Client(args.address, token=token, tls=tls, resume_streams=True) as client:
        skeleton = client.register(chain(8)).skeleton_id
        pose = np.tile([1.0, 0.0, 0.0, 0.0], (8, 1))  # The rest pose.
        warm_largest = resumed_largest = largest_gap = 0.0
        with client.stream(skeleton, window=4, timeout=120) as stream:
            def send():
                for i in range(args.frames):
                    a = 0.01 * i
                    stream.send([{"chain": "chain", "solver": "fabrik",
                                  "target": (0.35 * math.cos(a), 0.35 * math.sin(a), 0.3)}])
                    time.sleep(0.002)
                stream.close()

            sender = threading.Thread(target=send)
            sender.start()
            expected = 1
            last = time.monotonic()
            for answered, solution in enumerate(stream):
                now = time.monotonic()
                if solution.sequence != expected:
                    sys.exit(f"frame {solution.sequence} answered where {expected} was due")
                expected += 1
                if solution.error is not None:
                    sys.exit(f"frame {solution.sequence}: {solution.error}")
                rotations = solution.apply(pose)
                step = largest_step(pose, rotations)
                pose = rotations
                if 10 <= answered < args.kill_at:
                    warm_largest = max(warm_largest, step)
                elif answered >= args.kill_at:
                    resumed_largest = max(resumed_largest, step)
                    largest_gap = max(largest_gap, now - last)
                last = now
                if answered + 1 == args.kill_at:
                    holders = [name for name, url in replicas.items()
                               if active_streams(url, metrics_password) == 1]
                    if len(holders) != 1:
                        sys.exit(f"replicas holding the stream: {holders}")
                    killed = holders[0]
                    subprocess.run(shlex.split(args.kill.format(name=killed)), check=True,
                                   stdout=subprocess.DEVNULL)
                    last = time.monotonic()
            sender.join()
        resumes = stream.resumes
    print(f"stream: {expected - 1} of {args.frames} frames answered in order, each once; "
          f"resumed {resumes} time(s) after {killed} was killed at frame {args.kill_at}; "
          f"longest wait {largest_gap:.3f} s; largest joint step warm {warm_largest:.4f} rad, "
          f"across the kill {resumed_largest:.4f} rad")
    ok = (expected == args.frames + 1 and resumes >= 1 and largest_gap < 1.0
          and 0 < warm_largest and resumed_largest <= 2 * warm_largest)
    if not ok:
        sys.exit("stream: FAILED (every frame once, a resume, a wait under 1 s, a step "
                 "within 2x the warm one)")
    print(f"killed {killed}")


if __name__ == "__main__":
    main()
