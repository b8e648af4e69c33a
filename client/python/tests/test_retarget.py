"""Retargeting from Python against the real server, checked against the
reach tool's BVH (`reach retarget ... --out X.bvh`, parsed here) to 1e-6."""
import asyncio
import json
import os
import re
import subprocess

import grpc
import numpy as np
import pytest

import reach
import reach.aio
from conftest import CLI, REPO

WALK = os.path.join(REPO, "tests", "data", "mocap", "cmu_02_01_walk.bvh")
BCN = os.path.join(REPO, "tests", "data", "rigs", "BCN_Epileptic.glb")
FRAMES = 120


def quat_from_zyx_degrees(z, y, x):
    """R = Rz(z) Ry(y) Rx(x), as the reach tool writes BVH channels."""
    def axis(angle, k):
        q = np.zeros(4)
        q[0] = np.cos(np.radians(angle) / 2)
        q[1 + k] = np.sin(np.radians(angle) / 2)
        return q

    def mul(a, b):
        w1, x1, y1, z1 = a
        w2, x2, y2, z2 = b
        return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                         w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])
    return mul(mul(axis(z, 2), axis(y, 1)), axis(x, 0))


def read_bvh(path):
    """(joint names with channels in file order, root positions (F, 3),
    rotations (F, joints, 4)), from the file's text."""
    with open(path) as f:
        text = f.read()
    head, motion = text.split("MOTION\n")
    names = []
    channels = []
    for m in re.finditer(r"(ROOT|JOINT) (\S+)\s*\{\s*OFFSET [^\n]*\n\s*CHANNELS (\d+) ([^\n]*)", head):
        names.append(m.group(2))
        channels.append(m.group(4).split())
    assert channels[0] == ["Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation"]
    assert all(c == ["Zrotation", "Yrotation", "Xrotation"] for c in channels[1:])
    lines = motion.strip().splitlines()
    frames = int(lines[0].split()[1])
    values = np.array([[float(v) for v in line.split()] for line in lines[2:2 + frames]])
    roots = values[:, :3]
    angles = values[:, 3:].reshape(frames, len(names), 3)
    rotations = np.array([[quat_from_zyx_degrees(*a) for a in frame] for frame in angles])
    return names, roots, rotations


def same_rotations(a, b):
    """Largest difference of two quaternion arrays, sign-blind."""
    return float(np.max(np.minimum(np.abs(a - b).max(axis=-1), np.abs(a + b).max(axis=-1))))


@pytest.fixture(scope="module")
def client(server):
    with reach.Client(server.address) as c:
        yield c


@pytest.fixture(scope="module")
def walk(client):
    return client.import_file(WALK, return_motion=True)


@pytest.fixture(scope="module")
def profile(client, walk):
    return client.create_profile(walk.skeleton_id, BCN)


@pytest.fixture(scope="module")
def retargeted(client, walk, profile):
    return client.retarget_batch(profile, walk.motion[1:1 + FRAMES], walk.root_translations[1:1 + FRAMES],
                                 frame_time_s=walk.frame_time_s, report=True)


@pytest.mark.timeout(120)
def test_equals_the_reach_tool(server, tmp_path, profile, retargeted):
    out = tmp_path / "walk_bcn.bvh"
    done = subprocess.run([CLI, f"--addr={server.address}", "retarget", WALK, "--first", "1",
                           "--frames", str(FRAMES), "--to", BCN, "--out", str(out), "--json", "--quiet"],
                          capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["profileId"] == profile.profile_id  # The same spec: the same profile.
    names, roots, rotations = read_bvh(out)
    assert rotations.shape[0] == FRAMES == len(retargeted)
    index = [retargeted.joint(name) for name in names]
    assert same_rotations(retargeted.rotations[:, index], rotations) < 1e-6
    assert np.max(np.abs(retargeted.root_translations - roots)) < 1e-6
    # The joints the BVH leaves out are End Sites (fixed tips): all others are there.
    assert len(names) >= len(retargeted.joint_names) - 8


def test_profile(client, walk, profile):
    assert len(profile.profile_id) == 64 and profile.pelvis_scale > 0
    assert profile.target.roles["left.hand"] in profile.target_joints
    assert profile.source.roles["pelvis"] == "Hips"
    assert profile.target_reference.shape == (len(profile.target_joints), 4)
    assert len(profile.source_joints) == walk.motion.shape[1]
    again = client.create_profile(walk.skeleton_id, BCN)
    assert again.profile_id == profile.profile_id and not again.created
    got = client.get_profile(profile.profile_id)
    assert got.target.roles == profile.target.roles and got.target_joints == profile.target_joints
    assert profile.profile_id in [p["profile_id"] for p in client.list_profiles()]
    # Options, a BVH frame as the reference, and delete.
    other = client.create_profile(WALK, BCN, source_reference=1, no_ik=["left_arm"], no_planting=True,
                                  target_overrides={"left.hand": profile.target.roles["left.hand"]})
    assert other.profile_id != profile.profile_id and other.spec["no_planting"]
    assert other.spec["no_left_arm_ik"] and other.target.decided["left.hand"] == "override"
    client.delete_profile(other)
    with pytest.raises(reach.ReachError) as e:
        client.get_profile(other.profile_id)
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_batch_answer(retargeted, profile):
    assert retargeted.rotations.shape == (FRAMES, len(profile.target_joints), 4)
    assert np.allclose(np.linalg.norm(retargeted.rotations, axis=2), 1.0, atol=1e-9)
    assert list(retargeted.sequence) == list(range(FRAMES))
    feet = retargeted.limbs["left_foot"]
    assert feet.active.all() and feet.reached.all() and feet.planted.any()
    assert retargeted.quality["frames"] == FRAMES
    assert not retargeted.errors and not retargeted.skipped.any()


def test_stream_equals_the_batch(client, walk, profile, retargeted):
    frames = []
    with client.retarget_stream(profile, window=8, frame_time_s=walk.frame_time_s) as live:
        for rotations, root in zip(walk.motion[1:1 + FRAMES], walk.root_translations[1:1 + FRAMES]):
            live.send(rotations, root)
        frames = list(live)
    assert [f.sequence for f in frames] == list(range(1, FRAMES + 1))
    stream_rotations = np.array([f.rotations for f in frames])
    assert np.array_equal(stream_rotations, retargeted.rotations)
    assert np.array_equal(np.array([f.root_translation for f in frames]), retargeted.root_translations)


def test_single_frame_and_globals(client, walk, profile, retargeted):
    one = client.retarget(profile, walk.motion[1], walk.root_translations[1], return_globals=True)
    # Frame 0 of a batch has no history either: the same pose.
    assert same_rotations(one.rotations, retargeted.rotations[0]) < 1e-12
    assert one.global_positions.shape == (len(profile.target_joints), 3)
    hand = profile.target_joints.index(profile.target.roles["left.hand"])
    assert np.linalg.norm(one.global_positions[hand] - one.limbs["left_hand"].goal) < 1e-3 * 2


def test_bad_input_names_the_field(client, walk, profile):
    with pytest.raises(reach.ReachError) as e:
        client.retarget_batch(profile, walk.motion[1:5, :3])
    assert e.value.field == "motion"
    bad = walk.motion[1:5].copy()
    bad[2, 3] = (2, 0, 0, 0)
    with pytest.raises(reach.ReachError) as e:
        client.retarget_batch(profile, bad)
    assert e.value.field == "motion[2][3]"
    with pytest.raises(reach.ReachError) as e:
        client.retarget_batch(profile, walk.motion[1:5], walk.root_translations[1:3])
    assert e.value.field == "root_translations"
    with pytest.raises(reach.ReachError) as e:
        client.retarget_batch(profile, walk.motion[1:5], frame_time_s=-1)
    assert e.value.field == "frame_time_s"
    with pytest.raises(reach.ReachError) as e:
        client.create_profile(walk.skeleton_id, BCN, contact_speed=-1)
    assert e.value.field == "spec.contact_speed"
    with pytest.raises(reach.ReachError) as e:
        client.create_profile(walk.skeleton_id, BCN, target_overrides={"left.hand": "nope"})
    assert e.value.field == "spec.target.overrides[0].joint"
    with pytest.raises(reach.ReachError) as e:
        client.create_profile(walk.skeleton_id, "/nonexistent/rig.glb")
    assert e.value.code == grpc.StatusCode.NOT_FOUND and "rig.glb" in e.value.message
    with pytest.raises(reach.ReachError) as e:
        client.create_profile(walk.skeleton_id, BCN, flying=True)
    assert e.value.field == "flying"
    with pytest.raises(reach.ReachError) as e:
        client.retarget("0" * 64, walk.motion[1])
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_asyncio_retargeting(server, walk, retargeted):
    async def main():
        async with reach.aio.Client(server.address) as client:
            profile = await client.create_profile(WALK, BCN)
            batch = await client.retarget_batch(profile, walk.motion[1:1 + FRAMES],
                                                walk.root_translations[1:1 + FRAMES],
                                                frame_time_s=walk.frame_time_s)
            assert np.array_equal(batch.rotations, retargeted.rotations)
            async with client.retarget_stream(profile, frame_time_s=walk.frame_time_s) as live:
                async def produce():
                    for i in range(1, 31):
                        await live.send(walk.motion[i], walk.root_translations[i])
                    await live.close()
                producer = asyncio.create_task(produce())
                frames = [f async for f in live]
                await producer
            assert np.array_equal(np.array([f.rotations for f in frames]), retargeted.rotations[:30])
            assert profile.profile_id in [p["profile_id"] for p in await client.list_profiles()]
    asyncio.run(asyncio.wait_for(main(), 50))
