// Watches the first stream the viewer lists in alternate windows, as a
// browser tab that is opened and closed, and reads the stream's answered
// frames and watchers (GET /api/streams) and the server's CPU time (/proc)
// at each window's edges. Prints one JSON object: the windows in order,
// each with whether it was watched, its frames answered, its seconds, the
// server's CPU seconds in it and the frames the watcher received. Used by
// scripts/bench-viewer: neighbouring windows share this machine's drift, so
// a watched window is compared with the unwatched ones beside it.
//
// A watched window holds, as an open tab does while it shows a stream, the
// WebSocket on /api/watch, and polls the page's lists: /api/streams once
// in every watched window (twice the page's once a second), the skeletons
// and retarget profiles in every fifth (twice the page's every 5 s). The
// socket is opened before the window starts and closed after it ends: what
// is measured is a tab left open, not its opening.
//
// --control PERCENT watches nothing: in its "watched" windows a burner
// pinned to CPU 1 (the server's under bench-viewer --isolate) takes
// PERCENT % of it, a known cost the measurement must find.
//
//   node viewer/test/watch_toggle.mjs --base URL --pid SERVER_PID
//       --clk-tck TICKS --window-ms MS --windows N [--token T] [--control PERCENT]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';

const { values: args } = parseArgs({
  options: {
    base: { type: 'string' }, pid: { type: 'string' }, 'clk-tck': { type: 'string' },
    'window-ms': { type: 'string' }, windows: { type: 'string' },
    token: { type: 'string' }, control: { type: 'string' },
  },
});
for (const need of ['base', 'pid', 'clk-tck', 'window-ms', 'windows']) {
  if (!args[need]) throw new Error(`--${need} is required`);
}
const base = args.base;
const windowMs = Number(args['window-ms']);
const headers = args.token ? { Authorization: `Bearer ${args.token}` } : {};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function serverCpu() {
  const stat = readFileSync(`/proc/${args.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 1).trim().split(/\s+/);
  return (Number(fields[11]) + Number(fields[12])) / Number(args['clk-tck']);
}

async function get(path) {
  const response = await fetch(`${base}${path}`, { headers });
  if (!response.ok) throw new Error(`GET ${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

// The stream's frames answered and watchers now.
async function stream(id) {
  const s = (await get('/api/streams')).streams.find((x) => x.id === id);
  if (!s) throw new Error(`stream ${id} ended before the last window`);
  return s;
}

function watch(id) {
  const url = new URL('/api/watch', base);
  url.protocol = 'ws:';
  url.searchParams.set('stream', id);
  if (args.token) url.searchParams.set('access_token', args.token);
  const socket = new WebSocket(url);
  const watcher = { socket, received: 0, error: null };
  socket.on('message', (data) => {
    // Counted, not parsed: this process shares the machine it measures.
    if (data.includes('"rotations"')) watcher.received += 1;
    else if (data.includes('"error"')) watcher.error = String(data);
  });
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(watcher));
    socket.once('error', reject);
  });
}

// A child on CPU 1 that, while on, busies itself `percent` % of each 10 ms.
function burner(percent) {
  const code = `
import select, sys, time
share, period, on = float(sys.argv[1]) / 100, 0.01, False
while True:
    ready, _, _ = select.select([sys.stdin], [], [], 0 if on else None)
    if ready:
        line = sys.stdin.readline()
        if not line:
            break
        on = line.strip() == "on"
        continue
    start = time.perf_counter()
    while time.perf_counter() - start < share * period:
        pass
    time.sleep(period * (1 - share))
`;
  const child = spawn('taskset', ['-c', '1', '/usr/bin/python3', '-c', code, String(percent)],
                      { stdio: ['pipe', 'inherit', 'inherit'] });
  return { set: (on) => child.stdin.write(on ? 'on\n' : 'off\n'), end: () => child.stdin.end() };
}

async function main() {
  let id;
  for (let tries = 0; id === undefined; ++tries) {
    if (tries === 200) throw new Error('no stream was listed within 20 s');
    try {
      id = (await get('/api/streams')).streams[0]?.id;
    } catch (error) {
      // The server may not be up yet.
    }
    if (id === undefined) await sleep(100);
  }
  const control = args.control ? burner(Number(args.control)) : null;
  await sleep(windowMs); // The stream's first frames: a cold start.
  const result = [];
  let watchedCount = 0;
  for (let i = 0; i < Number(args.windows); ++i) {
    const watched = i % 2 === 1;
    const watcher = watched && !control ? await watch(id) : null;
    if (watched && control) control.set(true);
    const before = await stream(id);
    const cpu0 = serverCpu();
    const t0 = performance.now();
    if (watcher) {
      await sleep(windowMs / 2);
      await get('/api/streams');
      if (watchedCount % 5 === 0) {
        await get('/api/skeletons');
        await get('/api/retarget-profiles');
      }
      await sleep(Math.max(0, windowMs - (performance.now() - t0)));
    } else {
      await sleep(windowMs);
    }
    const after = await stream(id);
    const cpu1 = serverCpu();
    const t1 = performance.now();
    if (watched && control) control.set(false);
    const expected = watcher ? 1 : 0;
    if (before.watchers !== expected || after.watchers !== expected) {
      throw new Error(`window ${i}: the stream had ${before.watchers} and ${after.watchers} ` +
                      `watchers, expected ${expected}`);
    }
    let received = 0;
    if (watcher) {
      ++watchedCount;
      received = watcher.received;
      if (watcher.error || received === 0) {
        throw new Error(`window ${i}: the watch got no frame (${watcher.error ?? 'no message'})`);
      }
      const closed = new Promise((resolve) => watcher.socket.once('close', resolve));
      watcher.socket.close();
      await closed;
    }
    result.push({
      watched, frames: after.frames - before.frames, seconds: (t1 - t0) / 1000,
      cpu: cpu1 - cpu0, received,
    });
  }
  if (control) control.end();
  console.log(JSON.stringify({ stream: id, windows: result }));
}

main().catch((error) => {
  console.error(`watch_toggle: ${error.message}`);
  process.exit(1);
});
