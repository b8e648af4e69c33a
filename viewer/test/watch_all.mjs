// Watches every stream the viewer lists, as a browser tab would: polls
// /api/streams and keeps one WebSocket on each stream until it ends.
// Prints the frames received when stopped (SIGTERM). Used by
// scripts/bench-viewer to measure what watching costs a stream.
//
//   node viewer/test/watch_all.mjs http://127.0.0.1:PORT [TOKEN]
import WebSocket from 'ws';

const [base, token] = process.argv.slice(2);
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const watching = new Map();
let frames = 0;

async function poll() {
  try {
    const response = await fetch(`${base}/api/streams`, { headers });
    const { streams } = await response.json();
    for (const s of streams) {
      if (watching.has(s.id)) continue;
      const url = new URL('/api/watch', base);
      url.protocol = 'ws:';
      url.searchParams.set('stream', s.id);
      if (token) url.searchParams.set('access_token', token);
      const socket = new WebSocket(url);
      socket.on('message', (data) => {
        // Counted, not parsed: this process shares the machine it measures.
        if (data.includes('"rotations"')) frames += 1;
      });
      socket.on('close', () => watching.delete(s.id));
      watching.set(s.id, socket);
    }
  } catch (error) {
    // The server may not be up yet, or is going away.
  }
}

// New streams are looked for 4 times a second until one is watched, then
// once a second, as a tab's list refreshes.
let timer = setInterval(function tick() {
  poll();
  if (watching.size > 0 && timer) {
    clearInterval(timer);
    timer = setInterval(poll, 1000);
  }
}, 250);
poll();
process.on('SIGTERM', () => {
  clearInterval(timer);
  console.log(JSON.stringify({ frames }));
  process.exit(0);
});
