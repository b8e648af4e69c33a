// The viewer in a real browser: Debian's chromium (headless, SwiftShader
// WebGL), driven by puppeteer-core, against a real reach-server with a
// skeleton registered through the real `reach` tool.
//
//   node viewer/test/browser_test.mjs --server build/server/reach-server \
//     --cli build/client/reach --skeleton examples/humanoid_limited.skeleton.json \
//     --out build [--data tests/data] [--chromium /usr/bin/chromium]
//
// Checks: the page loads with no console error, failed request or page
// error; it lists the registered skeleton; the 3D view is not empty (pixels
// of a screenshot); hovering a joint names it; dragging the playground's
// target with the mouse solves through the server and moves the arm; a
// running `reach stream` (a CMU walk from --data, default tests/data next
// to this repository) is listed, and watching it shows frames advancing
// until it ends; a running `reach retarget --live` (the walk onto the BCN
// rig) is listed, and watching it shows the target with its source beside
// it, both moving; the profile it made is listed with its roles, and is
// drawn from its own copies of the skeletons after one is deleted.
// Screenshots: OUT/viewer-rest.png, OUT/viewer-playground.png,
// OUT/viewer-stream.png, OUT/viewer-retarget.png, OUT/viewer-profile.png.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const args = Object.fromEntries(process.argv.slice(2).reduce((pairs, a, i, all) => {
  if (a.startsWith('--')) pairs.push([a.slice(2), all[i + 1]]);
  return pairs;
}, []));
for (const need of ['server', 'cli', 'skeleton', 'out']) {
  if (!args[need]) { console.error(`browser_test: --${need} is required`); process.exit(2); }
}
const chromium = args.chromium || '/usr/bin/chromium';

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures += 1;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, fn, timeoutMs = 20000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

// Clicks a registry or stream list entry. The page rebuilds those lists
// every second or five, so an element handle can be detached between
// finding it and clicking it (puppeteer's page.click did, on a loaded
// machine): the click is dispatched in the page, on the entry there now.
async function clickListed(page, selector) {
  await waitFor(`the entry ${selector}`, () => page.evaluate((s) => {
    const item = document.querySelector(s);
    if (!item) return false;
    item.click();
    return true;
  }, selector));
}

// A screenshot's pixels within `box` ({x0, y0, x1, y1} in CSS pixels; the
// 3D view by default) that are not the background or the grid's greys
// (`figure`), yellowish as the limits are (`limits`), or blue as a
// retarget's source bones are (`blue`); counted in the page.
function pixelCounts(page, path, box = null) {
  return page.evaluate(async (png, b) => {
    const image = new Image();
    image.src = `data:image/png;base64,${png}`;
    await image.decode();
    const canvas = document.createElement('canvas');
    canvas.width = image.width; canvas.height = image.height;
    const context = canvas.getContext('2d');
    context.drawImage(image, 0, 0);
    const view = document.querySelector('#view').getBoundingClientRect();
    const r = b || { x0: view.left, y0: view.top, x1: view.right, y1: view.bottom };
    const x0 = Math.max(0, Math.floor(r.x0)), y0 = Math.max(0, Math.floor(r.y0));
    const data = context.getImageData(x0, y0, Math.max(1, Math.ceil(r.x1) - x0),
                                      Math.max(1, Math.ceil(r.y1) - y0)).data;
    let figure = 0, limits = 0, blue = 0;
    for (let i = 0; i < data.length; i += 4) {
      const [red, green, bl] = [data[i], data[i + 1], data[i + 2]];
      // Background 1d2125 and the grid's greys aside.
      const grey = Math.abs(red - green) < 12 && Math.abs(green - bl) < 16 && red < 0x70;
      if (!grey) figure += 1;
      if (red > 60 && red > bl + 30 && green > bl + 10) limits += 1;
      if (bl > red + 25 && bl > 70) blue += 1;
    }
    return { figure, limits, blue, total: data.length / 4 };
  }, readFileSync(path).toString('base64'), box);
}

// The server, on ports the kernel picks, read from its start line.
const work = mkdtempSync(join(tmpdir(), 'reach-viewer-'));
const logPath = join(work, 'server.log');
const server = spawn(args.server, ['--listen=127.0.0.1:0', '--metrics_listen=',
                                   '--http_listen=127.0.0.1:0', '--in_memory'],
                     { stdio: ['ignore', 'ignore', openSync(logPath, 'w')] });
const exited = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));
let browser = null;
try {
  const [grpcPort, httpPort] = await waitFor('the server\'s start line', () => {
    const m = /listening on \S+ \(port (\d+)\).*viewer on \S+ \(port (\d+)\)/
        .exec(readFileSync(logPath, 'utf8'));
    return m && [m[1], m[2]];
  });
  const registered = execFileSync(args.cli, [`--addr=127.0.0.1:${grpcPort}`, 'register',
                                             '--json', args.skeleton], { encoding: 'utf8' });
  const id = JSON.parse(registered).skeletonId;
  const name = JSON.parse(readFileSync(args.skeleton, 'utf8')).name;

  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
           '--window-size=1280,800'],
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  const problems = [];
  // Chrome reports a ping that reached it after the server's close frame
  // as a failed WebSocket: civetweb pings a socket that has been silent
  // for --http_request_timeout / 6 even while it waits for the page's
  // answer to its close, and under the sanitizers' load that answer can
  // take longer. The watch had ended and closed as it should; counted and
  // printed, not a page error.
  const pingAfterClose = /^WebSocket connection to '[^']*\/api\/watch\?stream=\d+' failed: Ping received after close$/;
  let pingsAfterClose = 0;
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (pingAfterClose.test(m.text())) { ++pingsAfterClose; return; }
    problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });

  const base = `http://127.0.0.1:${httpPort}`;
  await page.goto(`${base}/`, { waitUntil: 'load' });
  await page.evaluate(() => window.reachViewer.ready);

  const listed = await page.$$eval('#skeletons li', (items) => items.map((li) => li.textContent));
  check(listed.length === 1 && listed[0].includes(name) && listed[0].includes(id.slice(0, 12)),
        `the registry lists the registered skeleton (${listed.length} listed)`);
  const selected = await page.$eval('#skeleton-name', (e) => e.textContent);
  check(selected === name, 'the first skeleton opens');
  const chains = await page.$$eval('#chains li', (items) => items.map((li) => li.textContent));
  check(chains.length === 5 && chains[0].startsWith('l_leg'), `its chains are listed (${chains.join(', ')})`);

  // The 3D view: pixels of a screenshot that are not the background.
  await sleep(500);
  const shot = join(args.out, 'viewer-rest.png');
  await page.screenshot({ path: shot });
  const counts = await pixelCounts(page, shot);
  check(counts.figure > 2000, `the 3D view draws the skeleton (${counts.figure} of ${counts.total} pixels)`);
  check(counts.limits > 200, `limits are drawn (${counts.limits} pixels)`);

  // Hover: a joint's name.
  const head = await page.evaluate(() => {
    const v = window.reachViewer;
    const j = v.state.skeleton.joints.findIndex((x) => x.name === 'head');
    return v.screenOf(v.jointPositions()[j]);
  });
  await page.mouse.move(head.x, head.y);
  const tip = await waitFor('the hover tip', () => page.$eval('#tip', (e) => !e.hidden && e.textContent));
  check(tip.startsWith('head'), `hovering the head names it (${JSON.stringify(tip.split('\n')[0])})`);

  // Playground: drag the target of l_arm with the mouse.
  await page.select('#pg-chain', 'l_arm');
  await page.select('#pg-solver', 'SOLVER_FABRIK');
  await page.evaluate(() => document.querySelector('#pg-chain').dispatchEvent(new Event('change')));
  const before = await page.evaluate(() => window.reachViewer.jointPositions());
  const start = await page.evaluate(() => window.reachViewer.screenOf(window.reachViewer.targetPosition()));
  const targetBefore = await page.evaluate(() => window.reachViewer.targetPosition());
  await page.mouse.move(start.x, start.y);
  await page.mouse.down();
  // Towards the shoulder on screen, so the target stays within reach.
  const shoulder = await page.evaluate(() => {
    const v = window.reachViewer;
    const j = v.state.skeleton.joints.findIndex((x) => x.name === 'l_shoulder');
    return v.screenOf(v.jointPositions()[j]);
  });
  for (let k = 1; k <= 10; ++k) {
    await page.mouse.move(start.x + 0.04 * k * (shoulder.x - start.x),
                          start.y + 0.04 * k * (shoulder.y - start.y) - 4 * k);
    await sleep(30);
  }
  await page.mouse.up();
  const targetAfter = await page.evaluate(() => window.reachViewer.targetPosition());
  const moved = Math.hypot(targetAfter.x - targetBefore.x, targetAfter.y - targetBefore.y,
                           targetAfter.z - targetBefore.z);
  check(moved > 0.02, `the drag moves the target (${moved.toFixed(3)} m)`);
  await waitFor('a playground solve', () => page.evaluate(() => window.reachViewer.state.solves > 0));
  await sleep(500);  // The last drag position's solve.
  const after = await page.evaluate(() => window.reachViewer.jointPositions());
  const wrist = await page.evaluate(() => window.reachViewer.state.skeleton.joints
      .findIndex((x) => x.name === 'l_wrist'));
  const dist = (a, b) => Math.hypot(a.x - b.x, a.y - b.y, a.z - b.z);
  check(dist(after[wrist], before[wrist]) > 0.02,
        `the solve moves the wrist (${dist(after[wrist], before[wrist]).toFixed(3)} m)`);
  const result = await page.evaluate(() => window.reachViewer.state.lastResult);
  const final = await page.evaluate(() => window.reachViewer.targetPosition());
  check(result && result.iterations >= 1 && result.positionError < 1e-3 &&
        dist(after[wrist], final) < 1e-3,
        `the wrist reaches the dragged target (error ${result?.positionError}, ` +
        `${result?.iterations} iterations, ${result?.roundTripMs?.toFixed(1)} ms round trip)`);
  const shown = await page.$eval('#pg-result', (e) => e.textContent);
  check(shown.includes('iterations') && shown.includes('round trip'), 'the result is shown');
  await page.screenshot({ path: join(args.out, 'viewer-playground.png') });

  // Live: a running `reach stream` (the walk at 40 frames/s, about 8.6 s)
  // is listed, and watching it shows its frames advancing.
  const data = args.data || join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'tests', 'data');
  const clip = join(data, 'mocap', 'cmu_02_01_walk.bvh');
  const streamer = spawn(args.cli, [`--addr=127.0.0.1:${grpcPort}`, 'stream', clip,
                                    '--fps', '40', '--quiet'], { stdio: 'ignore' });
  let streamerExit = null;
  const streamEnded = new Promise((resolve) => streamer.on('exit', (code) => {
    streamerExit = code;
    resolve(code);
  }));
  try {
    const streamId = await waitFor('the stream in the list', () => {
      if (streamerExit !== null) throw new Error(`reach stream ${clip} exited ${streamerExit}`);
      return page.evaluate(() => document.querySelector('#streams li[data-id]')?.dataset.id);
    });
    await clickListed(page, `#streams li[data-id="${streamId}"]`);
    const first = await waitFor('frames of the stream', () => page.evaluate(() =>
      window.reachViewer.state.watch?.messages >= 3 && window.reachViewer.state.watch.sequence));
    const hipsBefore = await page.evaluate(() => window.reachViewer.jointPositions()[0]);
    await sleep(1500);
    const watched = await page.evaluate(() => ({
      messages: window.reachViewer.state.watch.messages,
      sequence: window.reachViewer.state.watch.sequence,
      info: document.querySelector('#watch-info').textContent,
      markers: window.reachViewer.markersShown(),
    }));
    const hipsAfter = await page.evaluate(() => window.reachViewer.jointPositions()[0]);
    check(Number(watched.sequence) > Number(first) + 10 && watched.messages > 10,
          `the watched stream advances (frame ${first} -> ${watched.sequence}, ` +
          `${watched.messages} frames shown: ${watched.info})`);
    check(dist(hipsAfter, hipsBefore) > 0.05,
          `the walk moves the pelvis (${dist(hipsAfter, hipsBefore).toFixed(2)} m in 1.5 s)`);
    check(watched.markers >= 4, `targets are drawn (${watched.markers})`);
    await page.screenshot({ path: join(args.out, 'viewer-stream.png') });
    check(await streamEnded === 0, `reach stream exits 0 (${streamerExit})`);
    check(await waitFor('the end of the stream', () =>
      page.evaluate(() => window.reachViewer.state.watch?.ended)) === true,
          'the page sees the stream end');
  } finally {
    streamer.kill();
  }

  // Retarget side by side: `reach retarget --live` of the walk onto the
  // BCN rig (other names, metres) at 40 frames/s is listed as a retarget;
  // watching it shows the target with its source beside it, both moving.
  const rig = join(data, 'rigs', 'BCN_Epileptic.glb');
  const retargeter = spawn(args.cli, [`--addr=127.0.0.1:${grpcPort}`, 'retarget', clip,
                                      '--to', rig, '--live', '--fps', '40', '--quiet'],
                           { stdio: 'ignore' });
  let retargetExit = null;
  const retargetEnded = new Promise((resolve) => retargeter.on('exit', (code) => {
    retargetExit = code;
    resolve(code);
  }));
  try {
    const streamId = await waitFor('the retarget stream in the list', () => {
      if (retargetExit !== null) throw new Error(`reach retarget exited ${retargetExit}`);
      return page.evaluate(() => [...document.querySelectorAll('#streams li[data-id]')]
          .find((li) => li.textContent.startsWith('retarget'))?.dataset.id);
    });
    const entry = await page.$eval(`#streams li[data-id="${streamId}"]`, (e) => e.textContent);
    check(entry.includes('→'), `the retarget stream is listed with its skeletons (${entry})`);
    await clickListed(page, `#streams li[data-id="${streamId}"]`);
    const first = await waitFor('frames of the retarget', () => page.evaluate(() =>
      window.reachViewer.state.watch?.messages >= 3 && window.reachViewer.state.source &&
      window.reachViewer.state.watch.sequence));
    const sample = () => page.evaluate(() => ({
      target: window.reachViewer.jointPositions(),
      source: window.reachViewer.sourceJointPositions(),
      sequence: window.reachViewer.state.watch.sequence,
      messages: window.reachViewer.state.watch.messages,
      info: document.querySelector('#watch-info').textContent,
      markers: window.reachViewer.markersShown(),
      size: window.reachViewer.bodySize(),
    }));
    const before = await sample();
    await sleep(1500);
    const after = await sample();
    check(Number(after.sequence) > Number(first) + 10,
          `the watched retarget advances (frame ${first} -> ${after.sequence}: ${after.info})`);
    check(after.info.includes('→'), 'the watch names the source and the target');
    // Both figures move: the target's root walks, and the source's limbs
    // move about its root (the page places the source's root beside the
    // target's, so only its pose, relative to the root, is its own).
    const targetMoved = dist(after.target[0], before.target[0]);
    const limbs = (p) => p.map((q) => ({ x: q.x - p[0].x, y: q.y - p[0].y, z: q.z - p[0].z }));
    const [limbsBefore, limbsAfter] = [limbs(before.source), limbs(after.source)];
    const sourceMoved = Math.max(...limbsAfter.map((q, j) => dist(q, limbsBefore[j])));
    check(targetMoved > 0.05 * after.size && sourceMoved > 0.05 * after.size,
          `the target walks and its source's limbs move (${targetMoved.toFixed(2)} and ` +
          `${sourceMoved.toFixed(2)} in 1.5 s, body ${after.size.toFixed(2)})`);
    // Beside, not on top: the roots are apart across the view.
    const apart = Math.hypot(after.source[0].x - after.target[0].x,
                             after.source[0].z - after.target[0].z);
    check(apart > 0.3 * after.size, `the source is drawn beside the target (${apart.toFixed(2)} apart)`);
    check(after.markers >= 4, `the retarget's limb goals are drawn (${after.markers})`);
    const shotRetarget = join(args.out, 'viewer-retarget.png');
    await page.screenshot({ path: shotRetarget });
    // Pixels of the source figure: within its joints' screen box, not the
    // background (the box is checked apart from the target's first).
    const boxes = await page.evaluate(() => {
      const v = window.reachViewer;
      const box = (points) => {
        const s = points.map((p) => v.screenOf(p));
        return { x0: Math.min(...s.map((p) => p.x)), x1: Math.max(...s.map((p) => p.x)),
                 y0: Math.min(...s.map((p) => p.y)), y1: Math.max(...s.map((p) => p.y)) };
      };
      return { source: box(v.sourceJointPositions()), target: box(v.jointPositions()) };
    });
    const overlap = Math.max(0, Math.min(boxes.source.x1, boxes.target.x1) -
                                Math.max(boxes.source.x0, boxes.target.x0));
    check(overlap < 0.5 * (boxes.source.x1 - boxes.source.x0),
          `source and target stand apart on screen (overlap ${overlap.toFixed(0)} px)`);
    const sourcePixels = (await pixelCounts(page, shotRetarget, boxes.source)).blue;
    check(sourcePixels > 300, `the source figure is drawn (${sourcePixels} pixels of its bones)`);
    check(await retargetEnded === 0, `reach retarget --live exits 0 (${retargetExit})`);
    check(await waitFor('the end of the retarget', () =>
      page.evaluate(() => window.reachViewer.state.watch?.ended)) === true,
          'the page sees the retarget end');
  } finally {
    retargeter.kill();
  }

  // The registry lists the profile `reach retarget` made; opening it (right
  // after watching its retarget) shows both skeletons at rest and which
  // joint plays each role on either side.
  const profileId = await waitFor('the profile in the registry', () =>
    page.evaluate(() => document.querySelector('#profiles li[data-id]')?.dataset.id));
  const openProfile = async () => {
    await clickListed(page, `#profiles li[data-id="${profileId}"]`);
    const roles = await waitFor('the profile\'s roles', () => page.evaluate(() =>
      !document.querySelector('#profile-details').hidden &&
      window.reachViewer.state.source &&
      [...document.querySelectorAll('#profile-roles tr')].map((tr) => tr.textContent)));
    return page.evaluate((rows) => {
      const { state } = window.reachViewer;
      const atRest = (pose, rest) => pose.every((p, j) => p.q.angleTo(rest[j].q) < 1e-9);
      return {
        rows,
        sourceJoints: window.reachViewer.sourceJointPositions().length,
        from: state.source.from,
        info: document.querySelector('#skeleton-info').textContent,
        atRest: atRest(state.pose, state.rest) && atRest(state.source.pose, state.source.rest),
      };
    }, roles);
  };
  const opened = await openProfile();
  check(opened.rows.length > 10 && opened.rows.some((r) => r.startsWith('left.hand') && r.includes('B_Hand_Left')),
        `the profile shows its roles (${opened.rows.length - 1}, e.g. ${opened.rows.find((r) => r.startsWith('left.hand'))})`);
  check(opened.atRest, 'the profile shows both skeletons at rest');
  // Its source skeleton deleted from the registry, a fresh page (nothing
  // cached from the watch) still draws the profile: from the copies the
  // profile keeps.
  const sourceId = await page.evaluate(async (id) => {
    const response = await fetch(`/api/retarget-profiles/${id}`);
    return (await response.json()).profile.source.skeletonId;
  }, profileId);
  execFileSync(args.cli, [`--addr=127.0.0.1:${grpcPort}`, 'delete', sourceId]);
  await page.reload();
  await page.evaluate(() => window.reachViewer.ready);
  const kept = await openProfile();
  check(kept.rows.length === opened.rows.length && kept.sourceJoints > 20 && kept.from === profileId &&
        kept.info.includes('retarget profile keeps') && kept.atRest,
        `with its source deleted from the registry, the profile draws its own copies ` +
        `(${kept.sourceJoints} source joints; "${kept.info}")`);
  await sleep(300);
  await page.screenshot({ path: join(args.out, 'viewer-profile.png') });

  check(problems.length === 0, `no console errors or failed requests${problems.length ? `: ${problems.join('; ')}` : ''}`);
  if (pingsAfterClose > 0) console.log(`note ${pingsAfterClose} ping(s) after a watch's close frame (civetweb's keep-alive; see above)`);
} catch (error) {
  check(false, `${error.stack || error}`);
  console.log(readFileSync(logPath, 'utf8'));
} finally {
  if (browser) await browser.close();
}
// The server drains and exits 0 (under the sanitizers, also: no leak, no
// error report at exit).
server.kill('SIGTERM');
const exit = await Promise.race([exited, sleep(60000).then(() => null)]);
check(exit !== null && exit.code === 0,
      `reach-server exits 0 on SIGTERM (${exit ? `code ${exit.code}, signal ${exit.signal}` : 'still running after 60 s'})`);
if (exit === null) server.kill('SIGKILL');
if (!exit || exit.code !== 0) console.log(readFileSync(logPath, 'utf8'));
console.log(failures ? `browser_test: ${failures} check(s) failed` : 'browser_test: all checks passed');
process.exit(failures ? 1 : 0);
