"""Goals as arrays (reach.Goals) and batch answers as arrays
(reach.BatchSolution), checked by the forward kinematics of test_client."""
import grpc
import numpy as np
import pytest

import reach
from reach import _arrays
from test_client import LEGS, Rig


@pytest.fixture(scope="module")
def rig():
    return Rig()


def leg_targets(rig, n):
    rest = rig.positions(rig.rest)
    t = np.linspace(0.0, 1.0, n)
    out = np.empty((n, 2, 3))
    for g, leg in enumerate(LEGS):
        out[:, g] = rest[rig.tip(leg)] + np.stack([0.05 * np.sin(5 * t), 0.05 + 0.1 * t, 0.1 * np.cos(3 * t)], 1)
    return out


def test_batch_of_arrays(client, rig, humanoid):
    n = 300
    targets = leg_targets(rig, n)
    poles = [(0.1, 0.5, 1.0), (-0.1, 0.5, 1.0)]
    batch = client.solve_batch(reach.Goals(list(LEGS), targets, poles=poles), skeleton_id=humanoid)
    assert len(batch) == n and batch.joint_names == rig.names
    assert batch.poses.shape == (n, len(rig.names), 4)
    assert batch.reached.all() and not batch.errors
    assert (batch.solver == "two_bone").all()
    for i in range(0, n, 37):
        pos = rig.positions(batch.poses[i])
        for g, leg in enumerate(LEGS):
            error = np.linalg.norm(pos[rig.tip(leg)] - targets[i, g])
            assert error < 1e-4 and abs(error - batch.position_error[i, g]) < 1e-6
    # Joints the solve did not turn keep the rest pose.
    assert np.array_equal(batch.poses[:, batch.joint("head")], np.broadcast_to(rig.rest[rig.names.index("head")], (n, 4)))
    assert batch.rotated[:, batch.joint("l_knee")].all() and not batch.rotated[:, batch.joint("head")].any()
    # The same as the dict path, item by item.
    dicts = [[{"chain": leg, "target": tuple(targets[i, g]), "pole": poles[g]} for g, leg in enumerate(LEGS)]
             for i in range(0, n, 50)]
    for k, solution in enumerate(client.solve_batch(dicts, skeleton_id=humanoid)):
        assert np.array_equal(solution.apply(rig.rest), batch.poses[50 * k])
        assert solution.rotated_names == [batch.joint_names[j] for j in solution.rotated_joints]


def test_fast_decoding_equals_protobufs(client, rig, humanoid):
    """The wire decoder against the protobuf classes on real answers,
    mixed: orientations, start poses, unreachable goals, a bad item."""
    n = 200
    targets = leg_targets(rig, n)
    targets[::7, 0] += (0, -5.0, 0)  # Out of reach: reached False.
    orientations = np.tile([1.0, 0.0, 0.0, 0.0], (n, 2, 1))
    start = np.broadcast_to(rig.rest, (n, len(rig.names), 4)).copy()
    start[:, rig.names.index("spine1")] = (np.cos(0.1), np.sin(0.1), 0, 0)
    goals = reach.Goals(list(LEGS), targets, orientations=orientations, solver="jacobian_dls",
                        options={"max_iterations": 50})
    data = _arrays.batch_bytes(humanoid, goals, start)
    raw = client._unary["SolveBatch"](data, timeout=10)
    info = _arrays.SkeletonInfo(client.get(humanoid)["skeleton"])
    fast = _arrays.batch_solution(raw, info, 2, start)
    slow = _arrays.batch_solution(raw, info, 2, start, fast=False)
    for name in ("poses", "translations", "rotated", "reached", "position_error", "orientation_error_rad",
                 "iterations", "solver"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
    assert not fast.reached[::7, 0].any() and fast.reached[1:7, 0].all()
    assert np.array_equal(fast.poses[:, rig.names.index("spine1")], start[:, rig.names.index("spine1")])


def test_goals_for_one_solve(client, rig, humanoid):
    targets = leg_targets(rig, 1)[0]
    # Priorities reach the server (which takes them for full-body goals only).
    with pytest.raises(reach.ReachError) as e:
        client.solve(humanoid, reach.Goals(list(LEGS), targets, priorities=[0, 1]))
    assert e.value.field == "goals[1].priority"
    solved = client.solve(humanoid, reach.Goals(list(LEGS), targets, weights=[1.0, 0.5]))
    pos = rig.positions(solved.apply(rig.rest))
    errors = [np.linalg.norm(pos[rig.tip(leg)] - targets[g]) for g, leg in enumerate(LEGS)]
    assert errors[0] < 1e-4  # Weight 1: reached; weight 0.5: part of the way.
    assert 1e-3 < errors[1] < np.linalg.norm(rig.positions(rig.rest)[rig.tip("r_leg")] - targets[1])
    assert np.allclose(errors, [r.position_error for r in solved.results], atol=1e-6)
    assert solved.rotation("l_knee") is not None and solved.rotation("head") is None


def test_bad_arrays_name_the_field(client, humanoid):
    with pytest.raises(reach.ReachError) as e:
        reach.Goals(["l_leg", "r_leg"], np.zeros((10, 3, 3)))
    assert e.value.field == "targets" and "(10, 3, 3)" in e.value.message
    with pytest.raises(reach.ReachError) as e:
        reach.Goals(["l_leg"], [(0.0, np.nan, 0.0)])
    assert e.value.field == "targets" and "not finite" in e.value.message
    with pytest.raises(reach.ReachError) as e:
        reach.Goals(["l_leg", "r_leg"], np.zeros((10, 2, 3)), poles=np.zeros((3, 2, 3)))
    assert e.value.field == "poles"
    with pytest.raises(reach.ReachError) as e:
        reach.Goals(["l_leg"], [(0, 0, 0)], solver="magic")
    assert e.value.field == "solver"
    with pytest.raises(reach.ReachError) as e:
        client.solve_batch(reach.Goals(["l_leg"], np.zeros((4, 1, 3))))
    assert e.value.field == "skeleton_id"
    with pytest.raises(reach.ReachError) as e:
        client.solve_batch(reach.Goals(["l_leg"], np.zeros((4, 1, 3))), skeleton_id=humanoid,
                           start_poses=np.zeros((4, 5, 4)))
    assert e.value.field == "start_poses.rotations"
    # The server refuses an item on its own: its error names the goal.
    batch = client.solve_batch(reach.Goals(["tail"], np.zeros((4, 1, 3))), skeleton_id=humanoid)
    assert sorted(batch.errors) == [0, 1, 2, 3]
    assert batch.errors[2].code == grpc.StatusCode.NOT_FOUND and batch.errors[2].field == "goals[0].chain"
    assert np.isnan(batch.position_error).all() and not batch.reached.any()
