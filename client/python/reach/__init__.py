"""Python client of the Reach inverse-kinematics service.

    import reach

    with reach.Client() as client:   # $REACH_ADDRESS, else 127.0.0.1:50051
        skeleton_id = client.register("examples/humanoid.skeleton.json").skeleton_id
        solved = client.solve(skeleton_id, [
            {"chain": "l_leg", "target": (0.1, 0.2, 0.1), "pole": (0.1, 0.5, 1.0)},
        ])
        print(solved.results[0].reached, solved.rotation("l_knee"))   # (w, x, y, z)

Blocking: reach.Client; asyncio: reach.aio.Client. Goals as arrays:
reach.Goals (solve_batch answers a reach.BatchSolution of arrays).
Retargeting: Client.create_profile, retarget, retarget_batch,
retarget_stream. Every failure raises reach.ReachError (code:
grpc.StatusCode, message, field).
"""
from reach._arrays import BatchSolution, Goals
from reach._retarget import (LimbOutcome, Limbs, RetargetedFrame, RetargetedMotion, RetargetProfile,
                             SideReport)
from reach._types import (GoalResult, Imported, ReachError, Registered, Solution, goal_message,
                          pose_message, skeleton_message, solve_request, solver_value)
from reach.client import TLS, Client, RetargetStream, Stream

__all__ = ["Client", "Stream", "RetargetStream", "TLS", "ReachError", "Registered", "Imported",
           "Solution", "GoalResult", "Goals", "BatchSolution", "RetargetProfile", "SideReport",
           "RetargetedMotion", "RetargetedFrame", "Limbs", "LimbOutcome", "goal_message",
           "pose_message", "skeleton_message", "solve_request", "solver_value"]
__version__ = "0.2.0"
