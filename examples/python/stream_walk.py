#!/usr/bin/python3
"""Streams a walk cycle of both feet through SolveStream (warm-started
frames, at most --window in flight) and prints each frame's worst error and
the stream's rate.

    PYTHONPATH=build/python-site examples/python/stream_walk.py [--frames 480]
"""
import argparse
import math
import os
import sys
import time

import reach

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:50051")
    parser.add_argument("--token", default=None)
    parser.add_argument("--tls-ca", default=None)
    parser.add_argument("--frames", type=int, default=480)
    parser.add_argument("--window", type=int, default=8)
    parser.add_argument("--solver", default="fabrik")
    args = parser.parse_args()
    tls = reach.TLS(ca=args.tls_ca) if args.tls_ca else None
    worst = 0.0
    unreached = 0
    try:
        with reach.Client(args.addr, token=args.token, tls=tls) as client:
            skeleton_id = client.register(os.path.join(HERE, "..", "humanoid.skeleton.json")).skeleton_id
            start = time.perf_counter()
            with client.stream(skeleton_id, window=args.window) as stream:
                for i in range(args.frames):
                    phase = 2 * math.pi * i / 120
                    goals = []
                    for leg, x, offset in (("l_leg", 0.1, 0.0), ("r_leg", -0.1, math.pi)):
                        lift = 0.08 + 0.08 * max(0.0, math.sin(phase + offset))
                        goals.append({"chain": leg, "solver": args.solver,
                                      "target": (x, 0.05 + lift, 0.2 * math.cos(phase + offset)),
                                      "pole": (x, 0.5, 1.0)})
                    stream.send(goals)
                    while stream.in_flight() >= args.window:
                        answer = next(stream)
                        worst = max(worst, *(r.position_error for r in answer.results))
                        unreached += sum(not r.reached for r in answer.results)
                for answer in stream:
                    worst = max(worst, *(r.position_error for r in answer.results))
                    unreached += sum(not r.reached for r in answer.results)
            seconds = time.perf_counter() - start
    except reach.ReachError as e:
        print(f"stream_walk: {e}", file=sys.stderr)
        return 1
    print(f"{args.frames} frames in {seconds:.2f} s ({args.frames / seconds:.0f} frames/s), "
          f"worst position error {worst:.2e} m, {unreached} goals unreached")
    return 0 if unreached == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
