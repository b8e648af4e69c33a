"""Streams that cannot deadlock, and every code example of docs/python.md
and of the package's docstrings, run as written against the
real server (in a fresh interpreter each, with a deadline)."""
import asyncio
import threading

import grpc
import numpy as np
import pytest

import reach
import reach.aio
import snippets
from conftest import HUMANOID


def frame(i):
    return [{"chain": "l_leg", "target": (0.1, 0.2, 0.1 + 0.0001 * i)}]


def test_doc_has_the_examples():
    blocks = snippets.python_blocks(snippets.python_doc())
    assert len(blocks) == 4
    # The stream example: 1,000 frames through a window of 8.
    assert "range(1000)" in blocks[0] and "window=8" in blocks[0]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("index", range(4))
def test_doc_example_runs_as_written(server, index):
    blocks = snippets.python_blocks(snippets.python_doc())
    snippets.run(blocks[index], server.address)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("module", ["reach", "reach.aio"])
def test_docstring_example_runs_as_written(server, module):
    import importlib
    (code,) = snippets.python_blocks(importlib.import_module(module).__doc__)
    snippets.run(code, server.address)


def test_send_everything_then_read(client, humanoid):
    # The pattern that hung: more frames than the window, then iterate.
    with client.stream(humanoid, window=8) as stream:
        for i in range(300):
            stream.send(frame(i))
            assert stream.in_flight() <= 8
        answers = [a.sequence for a in stream]
    assert answers == list(range(1, 301))


def test_read_after_the_with_block(client, humanoid):
    with client.stream(humanoid, window=4) as stream:
        for i in range(50):
            stream.send(frame(i))
    # The block waited for every answer; they are still there to read.
    assert [a.sequence for a in stream] == list(range(1, 51))


def test_producer_and_consumer_threads(client, humanoid):
    answers = []
    with client.stream(humanoid, window=8) as stream:
        consumer = threading.Thread(target=lambda: answers.extend(stream))
        consumer.start()  # Before anything is sent: it waits, not ends.

        def produce():
            for i in range(500):
                stream.send(frame(i))
            stream.close()
        producer = threading.Thread(target=produce)
        producer.start()
        producer.join(30)
        consumer.join(30)
        assert not producer.is_alive() and not consumer.is_alive()
    assert [a.sequence for a in answers] == list(range(1, 501))
    assert all(a.error is None and a.results[0].reached for a in answers)
    assert answers[0].rotated_names == ["l_hip", "l_knee"] or "l_knee" in answers[0].rotated_names


def test_two_producers_one_consumer(client, humanoid):
    answers = []
    with client.stream(humanoid, window=8) as stream:
        consumer = threading.Thread(target=lambda: answers.extend(stream))
        consumer.start()
        producers = [threading.Thread(target=lambda: [stream.send(frame(i)) for i in range(200)])
                     for _ in range(2)]
        for p in producers:
            p.start()
        for p in producers:
            p.join(30)
        stream.close()
        consumer.join(30)
        assert not consumer.is_alive()
    assert sorted(a.sequence for a in answers) == list(range(1, 401))


def test_asyncio_producer_and_consumer_tasks(server):
    async def main():
        async with reach.aio.Client(server.address) as client:
            skeleton_id = (await client.register(HUMANOID)).skeleton_id
            async with client.stream(skeleton_id, window=8) as stream:
                async def consume():
                    return [a async for a in stream]

                async def produce():
                    for i in range(500):
                        await stream.send(frame(i))
                        assert stream.in_flight() <= 8
                    await stream.close()
                consumer = asyncio.create_task(consume())  # First: it waits.
                await asyncio.sleep(0.05)
                assert not consumer.done()
                await produce()
                answers = await asyncio.wait_for(consumer, 30)
            assert [a.sequence for a in answers] == list(range(1, 501))
            # One task sending everything, then iterating (no close).
            async with client.stream(skeleton_id, window=8) as stream:
                for i in range(100):
                    await stream.send(frame(i))
                answers = [a async for a in stream]
            assert len(answers) == 100
    asyncio.run(asyncio.wait_for(main(), 50))


def test_a_failed_stream_raises_and_does_not_hang(client, humanoid):
    # The server ends the call at once for a deadline that has passed: the
    # sender and the reader both see it.
    stream = client.stream(humanoid, window=2, timeout=0.000001)
    with pytest.raises(reach.ReachError) as e:
        for i in range(100):
            stream.send(frame(i))
        stream.wait()
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    with pytest.raises(reach.ReachError):
        list(stream)


def test_stream_misuse_is_refused(client, humanoid):
    with pytest.raises(reach.ReachError) as e:
        client.stream(humanoid, window=0)
    assert e.value.field == "window"
    with client.stream(humanoid) as stream:
        stream.close()
        with pytest.raises(reach.ReachError) as e:
            stream.send(frame(0))
        assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION


def test_stream_with_goal_arrays(client, humanoid):
    with client.stream(humanoid, window=8) as stream:
        for i in range(100):
            stream.send(reach.Goals(["l_leg", "r_leg"], [(0.1, 0.2, 0.1 + 0.001 * i), (-0.1, 0.2, 0.1)]))
        answers = list(stream)
    assert [a.sequence for a in answers] == list(range(1, 101))
    assert all(r.reached for a in answers for r in a.results)
    assert np.allclose(np.linalg.norm(answers[5].rotations, axis=1), 1.0)
