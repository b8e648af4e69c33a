"""The Python client against a real reach-server on loopback. Every solve is
checked by forward kinematics written here (NumPy), not the server's."""
import asyncio
import os
import json
import threading

import grpc
import numpy as np
import pytest

import reach
import reach.aio
from conftest import HUMANOID, REPO

LEGS = ("l_leg", "r_leg")


def quat_mul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
                     w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def rotate(q, v):
    p = quat_mul(quat_mul(q, np.r_[0.0, v]), q * np.array([1, -1, -1, -1]))
    return p[1:]


class Rig:
    """The skeleton file's joints, and model-space positions of a pose."""

    def __init__(self, path=HUMANOID):
        with open(path) as f:
            self.data = json.load(f)
        joints = self.data["joints"]
        self.names = [j["name"] for j in joints]
        self.parent = [j.get("parent", 0) for j in joints]
        self.offset = np.array([[j["rest"].get("translation", {}).get(k, 0.0) for k in "xyz"]
                                for j in joints])
        self.rest = np.array([[j["rest"].get("rotation", {}).get(k, 0.0) for k in "wxyz"]
                              for j in joints])
        self.chains = {c["name"]: (self.names.index(c["root"]), self.names.index(c["tip"]))
                       for c in self.data["chains"]}

    def positions(self, rotations):
        n = len(self.names)
        pos = np.zeros((n, 3))
        rot = np.zeros((n, 4))
        for i in range(n):
            p = self.parent[i]
            if p < 0:
                pos[i], rot[i] = self.offset[i], rotations[i]
            else:
                pos[i] = pos[p] + rotate(rot[p], self.offset[i])
                rot[i] = quat_mul(rot[p], rotations[i])
        return pos

    def tip(self, chain):
        return self.chains[chain][1]


@pytest.fixture(scope="module")
def rig():
    return Rig()


def feet_goals(rig, lift):
    rest = rig.positions(rig.rest)
    return [{"chain": leg, "target": tuple(rest[rig.tip(leg)] + np.array([0.0, lift, 0.1])),
             "pole": tuple(rest[rig.tip(leg)] + np.array([0.0, 0.4, 1.0]))} for leg in LEGS]


def check(rig, solution, goals, tolerance=1e-4):
    assert solution.error is None, solution.error
    assert isinstance(solution.rotations, np.ndarray)
    assert solution.rotations.shape == (len(solution.rotated_joints), 4)
    pos = rig.positions(solution.apply(rig.rest))
    for goal, result in zip(goals, solution.results):
        error = np.linalg.norm(pos[rig.tip(goal["chain"])] - np.array(goal["target"]))
        assert error < tolerance, (goal["chain"], error)
        assert result.reached
        assert abs(result.position_error - error) < 1e-6


def test_health(client):
    assert client.health() == "SERVING"
    assert client.health("reach.v1.IkService") == "SERVING"


def test_registry(client, rig):
    first = client.register(HUMANOID)
    again = client.register(rig.data)  # A dict: the same content, the same id.
    assert len(first.skeleton_id) == 64
    assert again.skeleton_id == first.skeleton_id and not again.created
    got = client.get(first.skeleton_id)
    assert len(got["skeleton"]["joints"]) == len(rig.names)
    assert first.skeleton_id in [s["skeleton_id"] for s in client.list()]
    other = dict(rig.data, name="to delete")
    doomed = client.register(other).skeleton_id
    client.delete(doomed)
    with pytest.raises(reach.ReachError) as e:
        client.get(doomed)
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_solve_both_feet(client, rig, humanoid):
    goals = feet_goals(rig, 0.15)
    solved = client.solve(humanoid, goals)
    check(rig, solved, goals)
    assert [r.solver for r in solved.results] == ["two_bone", "two_bone"]
    # Globals, on request: the tips where FK puts them.
    solved = client.solve(humanoid, goals, return_globals=True)
    pos = rig.positions(solved.apply(rig.rest))
    assert len(solved.globals) == len(rig.names)
    assert np.allclose([g[0] for g in solved.globals], pos, atol=1e-9)


def test_solve_batch(client, rig, humanoid):
    items = [feet_goals(rig, 0.05 + 0.01 * i) for i in range(20)]
    solved = client.solve_batch(items, skeleton_id=humanoid)
    assert len(solved) == 20
    for goals, solution in zip(items, solved):
        check(rig, solution, goals)


def test_stream_order_and_back_pressure(client, rig, humanoid):
    frames = [feet_goals(rig, 0.15 + 0.08 * np.sin(i / 10)) for i in range(200)]
    window = 4
    most = 0
    answers = []
    with client.stream(humanoid, window=window) as stream:
        def read():
            # Reads while the main thread sends.
            while len(answers) < len(frames):
                answers.extend(stream)
        reader = threading.Thread(target=read)
        for i, goals in enumerate(frames):
            stream.send(goals)
            most = max(most, stream.in_flight())
            if i == 0:
                reader.start()
        stream.close()  # The reader's iteration runs until the stream is closed.
        reader.join(timeout=60)
    assert most <= window
    assert [a.sequence for a in answers] == list(range(1, 201))
    for goals, answer in zip(frames, answers):
        check(rig, answer, goals)


def test_stream_goes_on_after_a_bad_frame(client, rig, humanoid):
    with client.stream(humanoid) as stream:
        stream.send(feet_goals(rig, 0.1))
        stream.send([{"chain": "tail", "target": (0, 0, 0)}])
        stream.send(feet_goals(rig, 0.2))
        answers = list(stream)
    assert answers[0].error is None and answers[2].error is None
    assert answers[1].error.code == grpc.StatusCode.NOT_FOUND
    assert answers[1].error.field == "goals[0].chain"


def test_errors_carry_code_and_field(client, rig, humanoid):
    with pytest.raises(reach.ReachError) as e:
        client.solve(humanoid, [{"chain": "tail", "target": (0, 0, 0)}])
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    assert e.value.field == "goals[0].chain"
    assert "tail" in e.value.message
    with pytest.raises(reach.ReachError) as e:
        client.solve("0" * 64, feet_goals(rig, 0.1))
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    # Refused before sending: the field is named too.
    with pytest.raises(reach.ReachError) as e:
        client.solve(humanoid, [{"chain": "l_leg", "target": (1, 2)}])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.field == "goals[0].target"
    with pytest.raises(reach.ReachError) as e:
        client.solve(humanoid, [{"chain": "l_leg", "target": (0, 0, 0), "solver": "magic"}])
    assert e.value.field == "solver"
    with pytest.raises(reach.ReachError) as e:
        client.register("/nonexistent/skeleton.json")
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_asyncio_client(server, rig):
    async def main():
        async with reach.aio.Client(server.address) as client:
            assert await client.health() == "SERVING"
            skeleton_id = (await client.register(HUMANOID)).skeleton_id
            goals = feet_goals(rig, 0.12)
            check(rig, await client.solve(skeleton_id, goals), goals)
            batch = await client.solve_batch([goals, goals], skeleton_id=skeleton_id)
            assert len(batch) == 2
            frames = [feet_goals(rig, 0.05 + 0.002 * i) for i in range(50)]
            answers = []
            async with client.stream(skeleton_id, window=3) as stream:
                async def read():
                    async for answer in stream:  # Until closed and every answer is in.
                        answers.append(answer)
                reader = asyncio.ensure_future(read())
                for goals in frames:
                    await stream.send(goals)
                    assert stream.in_flight() <= 3
                await stream.close()
                await asyncio.wait_for(reader, 60)
            assert [a.sequence for a in answers] == list(range(1, 51))
            for goals, answer in zip(frames, answers):
                check(rig, answer, goals)
            with pytest.raises(reach.ReachError) as e:
                await client.solve(skeleton_id, [{"chain": "tail", "target": (0, 0, 0)}])
            assert e.value.field == "goals[0].chain"
    asyncio.run(main())


def test_tls_and_tokens(secure_server, rig):
    tls = reach.TLS(ca=f"{secure_server.pki}/ca.crt")
    tokens = secure_server.tokens
    with reach.Client(secure_server.address, token=tokens["tool"], tls=tls) as tool, \
            reach.Client(secure_server.address, token=tokens["game"], tls=tls) as game:
        skeleton_id = tool.register(HUMANOID).skeleton_id
        goals = feet_goals(rig, 0.1)
        check(rig, game.solve(skeleton_id, goals), goals)
        with game.stream(skeleton_id) as stream:
            stream.send(goals)
            check(rig, next(stream), goals)
        with pytest.raises(reach.ReachError) as e:
            game.register(HUMANOID)
        assert e.value.code == grpc.StatusCode.PERMISSION_DENIED
    with reach.Client(secure_server.address, tls=tls) as anonymous:
        assert anonymous.health() == "SERVING"
        with pytest.raises(reach.ReachError) as e:
            anonymous.list()
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    # Plaintext to a TLS server, and a CA that did not sign it.
    with reach.Client(secure_server.address, token=tokens["tool"], timeout=5) as plain:
        with pytest.raises(reach.ReachError) as e:
            plain.list()
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
    with reach.Client(secure_server.address, tls=reach.TLS(ca=f"{secure_server.pki}/client.crt"),
                      timeout=5) as wrong:
        with pytest.raises(reach.ReachError) as e:
            wrong.health()
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(reach.ReachError) as e:
        reach.Client(secure_server.address, tls=reach.TLS(ca="/nonexistent/ca.crt"))
    assert e.value.field == "tls.ca"
    with pytest.raises(reach.ReachError) as e:
        reach.Client(secure_server.address, token="two words")
    assert e.value.field == "token"


def test_an_address_list_keeps_tls_and_tokens(secure_server, rig):
    # Round-robin over a list (here the one server twice): the certificate
    # is checked against the first address, the token still sent.
    tls = reach.TLS(ca=f"{secure_server.pki}/ca.crt")
    addresses = f"{secure_server.address},{secure_server.address}"
    with reach.Client(addresses, token=secure_server.tokens["tool"], tls=tls) as tool:
        skeleton_id = tool.register(HUMANOID).skeleton_id
        goals = feet_goals(rig, 0.1)
        check(rig, tool.solve(skeleton_id, goals), goals)
    with reach.Client(addresses, tls=tls) as anonymous:
        with pytest.raises(reach.ReachError) as e:
            anonymous.list()
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    with reach.Client(addresses, tls=reach.TLS(ca=f"{secure_server.pki}/ca.crt", server_name="reach.example.com"),
                      timeout=5) as wrong_name:
        with pytest.raises(reach.ReachError) as e:
            wrong_name.health()
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert reach.client.channel_setup(addresses, None, None)[0] == "ipv4:" + addresses
    for bad, part in [("127.0.0.1:1,host:2", "part 2 'host:2'"), ("127.0.0.1:1,", "part 2 ''"),
                      ("127.0.0.1:1,127.0.0.1:70000", "part 2 '127.0.0.1:70000'")]:
        with pytest.raises(reach.ReachError, match=part) as e:
            reach.Client(bad)
        assert e.value.field == "address"


DATA = os.path.join(REPO, "tests", "data")


def test_import_every_format(client):
    walk = client.import_file(os.path.join(DATA, "mocap", "cmu_02_01_walk.bvh"), return_motion=True)
    assert len(walk.skeleton_id) == 64
    joints = len(walk.skeleton["joints"])
    # The motion against the file's own text: frames, frame time, and the
    # root's position channels (the first three numbers of each frame).
    with open(os.path.join(DATA, "mocap", "cmu_02_01_walk.bvh")) as f:
        lines = f.read().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Frames:"))
    frames = int(lines[at].split()[1])
    assert walk.motion.shape == (frames, joints, 4)
    assert walk.root_translations.shape == (frames, 3)
    assert walk.frame_time_s == pytest.approx(float(lines[at + 1].split(":")[1]))
    for f in (0, frames - 1):
        first = [float(v) for v in lines[at + 2 + f].split()[:3]]
        assert np.allclose(walk.root_translations[f], first, atol=1e-9)
    assert np.allclose(np.linalg.norm(walk.motion, axis=2), 1.0, atol=1e-9)
    # Importing again: the same id, nothing new.
    again = client.import_file(os.path.join(DATA, "mocap", "cmu_02_01_walk.bvh"))
    assert again.skeleton_id == walk.skeleton_id and not again.created and again.motion is None

    for name in ("urdf/panda.urdf", "gltf/RiggedFigure.glb", "gltf/arm.gltf"):
        result = client.import_file(os.path.join(DATA, name))
        assert len(result.skeleton["joints"]) > 1, name
        assert result.skeleton_id in [s["skeleton_id"] for s in client.list()]
    renamed = client.import_file(HUMANOID, name="imported humanoid",
                                 chains={"spine": ("hips", "head")})
    assert renamed.skeleton["name"] == "imported humanoid"
    assert {"name": "spine", "root": "hips", "tip": "head"} in renamed.skeleton["chains"]


def test_import_errors_name_the_file(client, tmp_path):
    bad = tmp_path / "broken.bvh"
    bad.write_text("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  BONE x\n")
    with pytest.raises(reach.ReachError) as e:
        client.import_file(bad)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "broken.bvh:5" in e.value.message
    with pytest.raises(reach.ReachError) as e:
        client.import_file(os.path.join(DATA, "gltf", "RiggedFigure.gltf"))
    assert "RiggedFigure0.bin" in e.value.message
    with pytest.raises(reach.ReachError) as e:
        client.import_file(bad, format="fbx")
    assert e.value.field == "format"
    with pytest.raises(reach.ReachError) as e:
        client.import_file(tmp_path / "missing.bvh")
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_asyncio_import(server):
    async def main():
        async with reach.aio.Client(server.address) as client:
            result = await client.import_file(os.path.join(DATA, "urdf", "panda.urdf"))
            assert len(result.skeleton["joints"]) > 1
    asyncio.run(main())
