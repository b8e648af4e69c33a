#!/usr/bin/python3
"""Registers the humanoid and solves both feet in one call, knees forward.

    PYTHONPATH=build/python-site examples/python/solve_feet.py [--addr HOST:PORT]
    (or after `pip install ./client/python`; --token / REACH_TOKEN and
    --tls-ca for a secured server)
"""
import argparse
import os
import sys

import reach

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:50051")
    parser.add_argument("--token", default=None)
    parser.add_argument("--tls-ca", default=None)
    parser.add_argument("--skeleton", default=os.path.join(HERE, "..", "humanoid.skeleton.json"))
    args = parser.parse_args()
    tls = reach.TLS(ca=args.tls_ca) if args.tls_ca else None
    try:
        with reach.Client(args.addr, token=args.token, tls=tls) as client:
            skeleton_id = client.register(args.skeleton).skeleton_id
            # The ankles of the humanoid at rest are at (+-0.1, 0.05, 0);
            # lift them 15 cm and step forward 10 cm, poles in front.
            goals = [{"chain": leg, "target": (x, 0.2, 0.1), "pole": (x, 0.5, 1.0)}
                     for leg, x in (("l_leg", 0.1), ("r_leg", -0.1))]
            solved = client.solve(skeleton_id, goals)
    except reach.ReachError as e:
        print(f"solve_feet: {e}", file=sys.stderr)
        return 1
    for goal, result in zip(goals, solved.results):
        print(f"{goal['chain']}: reached={result.reached} error={result.position_error:.2e} m "
              f"solver={result.solver} iterations={result.iterations}")
    print(f"rotated joints {solved.rotated_joints}")
    print(f"rotations (w, x, y, z):\n{solved.rotations}")
    return 0 if all(r.reached for r in solved.results) else 1


if __name__ == "__main__":
    sys.exit(main())
