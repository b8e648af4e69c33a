// Watches the first stream the viewer lists in alternate windows, as a
// browser tab that is opened and closed, and reads the stream's answered
// frames (GET /api/streams) and the server's CPU time (/proc) at each
// window's edges. Prints one JSON object: the windows in order, each with
// whether it was watched, its frames answered, its seconds, the server's
// CPU seconds in it and the frames the watcher received. Used by
// scripts/bench-viewer: neighbouring windows share this machine's drift, so
// a watched window is compared with the unwatched ones beside it.
//
//   node viewer/test/watch_toggle.mjs BASE_URL SERVER_PID WINDOW_MS WINDOWS [TOKEN]
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';

const [base, pid, windowMs, windows, token] = process.argv.slice(2);
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const ticks = 100; // USER_HZ on Linux: /proc/PID/stat's clock
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function serverCpu() {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').pop().trim().split(/\s+/);
  return (Number(fields[11]) + Number(fields[12])) / ticks;
}

async function streams() {
  const response = await fetch(`${base}/api/streams`, { headers });
  return (await response.json()).streams;
}

async function answered(id) {
  const stream = (await streams()).find((s) => s.id === id);
  if (!stream) throw new Error(`stream ${id} ended before the last window`);
  return stream.frames;
}

function watch(id) {
  const url = new URL('/api/watch', base);
  url.protocol = 'ws:';
  url.searchParams.set('stream', id);
  if (token) url.searchParams.set('access_token', token);
  const socket = new WebSocket(url);
  const watcher = { socket, received: 0 };
  socket.on('message', (data) => {
    // Counted, not parsed: this process shares the machine it measures.
    if (data.includes('"rotations"')) watcher.received += 1;
  });
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(watcher));
    socket.once('error', reject);
  });
}

async function main() {
  let id;
  for (let tries = 0; !id; ++tries) {
    if (tries === 200) throw new Error('no stream was listed within 20 s');
    try {
      id = (await streams())[0]?.id;
    } catch (error) {
      // The server may not be up yet.
    }
    if (!id) await sleep(100);
  }
  await sleep(Number(windowMs)); // The stream's first frames: a cold start.
  const result = [];
  for (let i = 0; i < Number(windows); ++i) {
    const watched = i % 2 === 1;
    const watcher = watched ? await watch(id) : null;
    const frames0 = await answered(id);
    const cpu0 = serverCpu();
    const t0 = performance.now();
    await sleep(Number(windowMs));
    const frames1 = await answered(id);
    const cpu1 = serverCpu();
    const t1 = performance.now();
    let received = 0;
    if (watcher) {
      received = watcher.received;
      const closed = new Promise((resolve) => watcher.socket.once('close', resolve));
      watcher.socket.close();
      await closed;
    }
    result.push({
      watched, frames: frames1 - frames0, seconds: (t1 - t0) / 1000,
      cpu: cpu1 - cpu0, received,
    });
  }
  console.log(JSON.stringify({ stream: id, windows: result }));
}

main().catch((error) => {
  console.error(error.message);
  process.exit(1);
});
