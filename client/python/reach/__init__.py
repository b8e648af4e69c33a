"""Python client of the Reach inverse-kinematics service.

    import reach
    with reach.Client("127.0.0.1:50051", token=None, tls=None) as client:
        skeleton_id = client.register("examples/humanoid.skeleton.json").skeleton_id
        solved = client.solve(skeleton_id, [
            {"chain": "l_leg", "target": (0.1, 0.1, 0.2), "pole": (0.1, 0.5, 1.0)},
        ])
        print(solved.results[0].reached, solved.rotations)   # (n, 4) with NumPy

Synchronous: reach.Client; asyncio: reach.aio.Client. Every failure raises
reach.ReachError (code: grpc.StatusCode, message, field).
"""
from reach._types import (GoalResult, Imported, ReachError, Registered, Solution, goal_message,
                          pose_message, skeleton_message, solve_request, solver_value)
from reach.client import TLS, Client, Stream

__all__ = ["Client", "Stream", "TLS", "ReachError", "Registered", "Imported", "Solution", "GoalResult",
           "goal_message", "pose_message", "skeleton_message", "solve_request", "solver_value"]
__version__ = "0.1.0"
