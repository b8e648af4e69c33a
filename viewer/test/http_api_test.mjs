// The HTTP API (docs/openapi.yaml) against a real reach-server on loopback:
// the document validates (swagger-parser), then every documented route is
// called and each answer checked against the document (its status is one
// the operation lists, its body matches the schema, by ajv) and on its own
// terms: a solve's answer by this file's forward kinematics, a batch's and
// a stream's answers against the unary ones, a retarget's limb errors by
// forward kinematics of the target pose. Also: tokens and roles (401, 403),
// limits (a body over --max_message_bytes: 413 naming it; --max_batch,
// --quota_skeletons, --http_max_streams, a WebSocket message over
// --max_message_bytes), bad input (400 naming the field), the metrics the
// calls were counted in, and docs/http.md's curl example run as written.
//
//   node viewer/test/http_api_test.mjs --server build/server/reach-server \
//     --repo .
import { spawn, execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import Ajv from 'ajv';
import WebSocket from 'ws';

const args = Object.fromEntries(process.argv.slice(2).reduce((pairs, a, i, all) => {
  if (a.startsWith('--')) pairs.push([a.slice(2), all[i + 1]]);
  return pairs;
}, []));
for (const need of ['server', 'repo']) {
  if (!args[need]) { console.error(`http_api_test: --${need} is required`); process.exit(2); }
}
const repo = args.repo;

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures += 1;
  return ok;
}

// ---- The document ---------------------------------------------------------
const openapiPath = join(repo, 'docs', 'openapi.yaml');
await SwaggerParser.validate(openapiPath);
check(true, 'docs/openapi.yaml is a valid OpenAPI 3 document');
const doc = await SwaggerParser.dereference(openapiPath);
const ajv = new Ajv({ strict: false, allErrors: true });
const validators = new Map();
function validatorFor(schema) {
  if (!validators.has(schema)) validators.set(schema, ajv.compile(schema));
  return validators.get(schema);
}
const operations = [];  // [template, method]
for (const [template, item] of Object.entries(doc.paths)) {
  for (const method of ['get', 'post', 'put', 'delete']) {
    if (item[method]) operations.push([template, method]);
  }
}
const answered = new Set();  // "METHOD template" answered with 2xx/101.

// The documented operation a request path falls under.
function operationOf(method, path) {
  const bare = path.split('?')[0];
  let best = null;
  for (const [template, m] of operations) {
    if (m !== method.toLowerCase()) continue;
    const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (!pattern.test(bare)) continue;
    // A literal path beats a template (/skeletons/import over {id}).
    if (!best || !template.includes('{')) best = template;
  }
  return best;
}

// Checks an answer against the document: a status the operation lists,
// and its body against that status's schema.
function documented(method, path, status, body, schemaStatus = status) {
  const template = operationOf(method, path);
  if (!check(template !== null, `${method} ${path}: a documented operation`)) return;
  const op = doc.paths[template][method.toLowerCase()];
  const response = op.responses[String(schemaStatus)];
  if (!check(response !== undefined,
             `${method} ${template}: status ${schemaStatus} is documented`)) return;
  const schema = response.content?.['application/json']?.schema;
  if (schema) {
    const validate = validatorFor(schema);
    const ok = validate(body);
    check(ok, `${method} ${template} ${status}: the body matches the schema` +
              (ok ? '' : ` (${ajv.errorsText(validate.errors)}): ${JSON.stringify(body).slice(0, 300)}`));
  }
  if (status < 300) answered.add(`${method.toLowerCase()} ${template}`);
}

// ---- The server -------------------------------------------------------------
const dir = mkdtempSync(join(tmpdir(), 'reach-http-api-'));
const token = (name) => `${name}-${randomBytes(12).toString('hex')}`;
const tokens = {
  solver: token('solver'), registrar: token('registrar'), other: token('other'),
  admin: token('admin'), metrics: token('metrics'),
};
const roles = { solver: 'solve', registrar: 'register', other: 'register', admin: 'admin', metrics: 'metrics' };
writeFileSync(join(dir, 'tokens'), Object.entries(tokens).map(([name, t]) =>
  `${name} ${createHash('sha256').update(t).digest('hex')} ${roles[name]}\n`).join(''));
const MAX_BODY = 4000000;
const MAX_BATCH = 8;

async function startServer(extra) {
  const server = spawn(args.server, ['--listen=127.0.0.1:0', '--metrics_listen=127.0.0.1:0',
    '--http_listen=127.0.0.1:0', '--in_memory', ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const ports = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start line: ${log}`)), 30000);
    server.stderr.on('data', (d) => {
      log += d;
      const m = /listening on \S+ \(port (\d+)\).*metrics on \S+ \(port (\d+)\).*viewer on \S+ \(port (\d+)\)/.exec(log);
      if (m) { clearTimeout(timer); resolve({ grpc: +m[1], metrics: +m[2], http: +m[3] }); }
    });
    server.on('exit', (code) => reject(new Error(`reach-server exited ${code}: ${log}`)));
  });
  return { server, ports, log: () => log };
}

const { server, ports } = await startServer([
  `--auth_tokens_file=${join(dir, 'tokens')}`, `--max_message_bytes=${MAX_BODY}`,
  `--max_batch=${MAX_BATCH}`, '--quota_skeletons=3', '--http_max_streams=2']);
const base = `http://127.0.0.1:${ports.http}`;
const servers = [server];
process.on('exit', () => { for (const s of servers) s.kill('SIGKILL'); });

// One request; {status, body} with the body parsed as JSON.
async function call(method, path, { as = 'admin', body, type = 'application/json', raw = false } = {}) {
  const headers = {};
  if (as) headers.Authorization = `Bearer ${tokens[as] ?? as}`;
  if (body !== undefined) headers['Content-Type'] = type;
  const response = await fetch(base + path, {
    method, headers,
    body: body === undefined ? undefined : (raw ? body : JSON.stringify(body)),
  });
  const text = await response.text();
  let json = null;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: response.status, body: json };
}

// A call whose answer must be `status`, checked against the document.
async function expect(status, method, path, options, what) {
  const r = await call(method, path, options);
  check(r.status === status, `${what}: ${method} ${path.split('?')[0]} answers ${status} (got ${r.status}` +
        `${r.status !== status ? `: ${JSON.stringify(r.body).slice(0, 300)}` : ''})`);
  documented(method, path, r.status, r.body);
  return r.body;
}

// An error naming `words` (each a substring of its message).
function names(body, words, what) {
  const message = body?.message ?? '';
  for (const w of words) check(message.includes(w), `${what}: the error names '${w}' ("${message.slice(0, 200)}")`);
}

// ---- Forward kinematics, this file's own ----------------------------------
const qmul = (a, b) => [  // [x, y, z, w]
  a[3] * b[0] + a[0] * b[3] + a[1] * b[2] - a[2] * b[1],
  a[3] * b[1] - a[0] * b[2] + a[1] * b[3] + a[2] * b[0],
  a[3] * b[2] + a[0] * b[1] - a[1] * b[0] + a[2] * b[3],
  a[3] * b[3] - a[0] * b[0] - a[1] * b[1] - a[2] * b[2]];
const rotate = (q, v) => {
  const p = qmul(qmul(q, [v[0], v[1], v[2], 0]), [-q[0], -q[1], -q[2], q[3]]);
  return [p[0], p[1], p[2]];
};
const dist = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
// Model-space positions of every joint for local rotations `rotations`
// (default: the rest's) and local translations `translations` (default:
// the rest's).
function fk(skeleton, rotations = null, translations = null) {
  const pos = []; const rot = []; const scale = [];
  skeleton.joints.forEach((joint, j) => {
    const t = translations?.[j] ?? joint.rest.translation;
    const q = rotations?.[j] ?? joint.rest.rotation;
    const s = joint.rest.scale || 1;
    const p = j === 0 || joint.parent < 0 ? -1 : joint.parent;
    if (p < 0) { pos[j] = t; rot[j] = q; scale[j] = s; return; }
    const offset = rotate(rot[p], t);
    pos[j] = [0, 1, 2].map((k) => pos[p][k] + scale[p] * offset[k]);
    rot[j] = qmul(rot[p], q);
    scale[j] = scale[p] * s;
  });
  return pos;
}
// The local rotations and translations a SolveResponse leaves: the start's
// with its rotated and translated joints replaced.
function applySolve(skeleton, answer, start = null) {
  const rotations = skeleton.joints.map((j, i) => start?.[i] ?? j.rest.rotation);
  const translations = skeleton.joints.map((j) => j.rest.translation);
  answer.rotated_joints.forEach((j, k) => { rotations[j] = answer.rotations[k]; });
  answer.translated_joints.forEach((j, k) => { translations[j] = answer.translations[k]; });
  return { rotations, translations };
}
// The largest difference between two answers' numbers; Infinity when they
// differ otherwise (shape, keys, strings, booleans).
function maxDiff(a, b) {
  if (typeof a === 'number' && typeof b === 'number') return Math.abs(a - b);
  if (Array.isArray(a) !== Array.isArray(b) || typeof a !== typeof b) return Infinity;
  if (a === null || typeof a !== 'object') return a === b ? 0 : Infinity;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  let worst = 0;
  for (const k of keys) worst = Math.max(worst, k in a && k in b ? maxDiff(a[k], b[k]) : Infinity);
  return worst;
}

// ---- Skeletons ----------------------------------------------------------------
const humanoid = JSON.parse(readFileSync(join(repo, 'examples', 'humanoid_limited.skeleton.json'), 'utf8'));
const registered = await expect(200, 'POST', '/api/v1/skeletons', { as: 'registrar', body: { skeleton: humanoid } }, 'register');
check(registered.created === true && /^[0-9a-f]{64}$/.test(registered.skeleton_id), 'register: created, with a hash id');
const id = registered.skeleton_id;
const again = await expect(200, 'POST', '/api/v1/skeletons', { as: 'registrar', body: { skeleton: humanoid } }, 'register again');
check(again.created === false && again.skeleton_id === id && again.version === registered.version,
      'register again: the same id and version, not created');
names(await expect(401, 'POST', '/api/v1/skeletons', { as: null, body: { skeleton: humanoid } }, 'no token'),
      ['authorization'], 'no token');
await expect(401, 'GET', '/api/v1/skeletons', { as: 'not-a-token' }, 'a wrong token');
names(await expect(403, 'POST', '/api/v1/skeletons', { as: 'solver', body: { skeleton: humanoid } }, 'solve role registers'),
      ['register'], 'solve role registers');
await expect(403, 'GET', '/api/v1/skeletons', { as: 'metrics' }, 'metrics role lists');
names(await expect(400, 'POST', '/api/v1/skeletons', { as: 'registrar',
  body: { skeleton: { name: 'x', joints: [{ name: 'a', parent: -1, rest: { translation: [0, 1] } }] } } }, 'a 2-number vector'),
['skeleton.joints[0].rest.translation', '[x, y, z]'], 'a 2-number vector');
names(await expect(400, 'POST', '/api/v1/skeletons', { as: 'registrar',
  body: { skeleton: { name: 'x', joints: [{ name: 'a', parent: 5 }] } } }, 'a bad parent'),
['joints[0]', 'parent'], 'a bad parent');
names(await expect(415, 'POST', '/api/v1/skeletons', { as: 'registrar', body: '{}', type: 'text/plain', raw: true }, 'text/plain'),
      ['Content-Type'], 'text/plain');

// A body over --max_message_bytes: 413 from its Content-Length, unread.
async function oversized(path, type) {
  const response = await new Promise((resolve, reject) => {
    const socket = net.connect(ports.http, '127.0.0.1', () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${ports.http}\r\n` +
                   `Authorization: Bearer ${tokens.registrar}\r\nContent-Type: ${type}\r\n` +
                   `Content-Length: ${MAX_BODY + 1}\r\n\r\n{`);
    });
    let data = '';
    socket.on('data', (d) => { data += d; });
    socket.on('end', () => resolve(data));
    socket.on('error', (e) => (data ? resolve(data) : reject(e)));
  });
  const status = +/^HTTP\/1\.1 (\d+)/.exec(response)?.[1];
  const body = JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4));
  check(status === 413, `${path}: a body of ${MAX_BODY + 1} bytes answers 413 (got ${status})`);
  documented('POST', path, status, body);
  names(body, ['--max_message_bytes=4000000'], `${path} oversized`);
}
await oversized('/api/v1/skeletons', 'application/json');
await oversized('/api/v1/skeletons/import', 'application/octet-stream');
await oversized('/api/v1/solve', 'application/json');

const listed = await expect(200, 'GET', '/api/v1/skeletons', { as: 'solver' }, 'list');
check(listed.skeletons.some((s) => s.skeleton_id === id && s.joint_count === humanoid.joints.length),
      'list: the skeleton, with its joint count');
names(await expect(400, 'GET', '/api/v1/skeletons?page_size=many', { as: 'solver' }, 'page_size=many'),
      ['page_size'], 'page_size=many');
const got = await expect(200, 'GET', `/api/v1/skeletons/${id}`, { as: 'solver' }, 'get');
const skeleton = got.skeleton;
check(skeleton.joints.length === humanoid.joints.length &&
      skeleton.joints.every((j) => j.rest.rotation.length === 4 && j.rest.translation.length === 3),
      'get: every joint, rest rotation [x, y, z, w] and translation [x, y, z]');
check(dist(skeleton.joints[0].rest.translation, [0, 0.95, 0]) < 1e-12 &&
      maxDiff(skeleton.joints[0].rest.rotation, [0, 0, 0, 1]) < 1e-12,
      'get: hips at [0, 0.95, 0], identity [0, 0, 0, 1]');
await expect(404, 'GET', `/api/v1/skeletons/${'0'.repeat(64)}`, { as: 'solver' }, 'get an unknown id');

// Imports: the file is the body.
const walkBvh = readFileSync(join(repo, 'tests', 'data', 'mocap', 'cmu_02_01_walk.bvh'));
const walk = await expect(200, 'POST', '/api/v1/skeletons/import?format=bvh&file_name=walk.bvh&return_motion=true',
  { as: 'registrar', body: walkBvh, type: 'application/octet-stream', raw: true }, 'import a BVH');
check(walk.motion.length > 100 && walk.motion[0].rotations.length === walk.skeleton.joints.length &&
      Math.abs(walk.frame_time_s - 1 / 120) < 1e-6,
      `import a BVH: ${walk.motion.length} frames of ${walk.skeleton.joints.length} rotations, 1/120 s`);
// bvh_rest_frame: the Character Creator clip's T-pose frame as its rest
// pose (its zero pose holds the limbs up): its hips turn at rest, and a
// negative frame is refused naming the field.
const ccBvh = readFileSync(join(repo, 'tests', 'data', 'mocap', 'cmu_06_15_shoot_ccrig.bvh'));
const ccRested = await expect(200, 'POST', '/api/v1/skeletons/import?format=bvh&file_name=cc.bvh&bvh_rest_frame=0',
  { as: 'registrar', body: ccBvh, type: 'application/octet-stream', raw: true }, 'import a BVH, rest from frame 0');
check(maxDiff(ccRested.skeleton.joints[0].rest.rotation, [0, 0, 0, 1]) > 1e-3,
      'import a BVH, rest from frame 0: the hips turn at rest');
// (Deleted again: the registrar's quota is three skeletons.)
await expect(200, 'DELETE', `/api/v1/skeletons/${ccRested.skeleton_id}`, { as: 'registrar' },
  'delete the rested skeleton');
names(await expect(400, 'POST', '/api/v1/skeletons/import?format=bvh&file_name=cc.bvh&bvh_rest_frame=-1',
  { as: 'registrar', body: ccBvh, type: 'application/octet-stream', raw: true }, 'bvh_rest_frame=-1'),
  ['bvh_rest_frame'], 'bvh_rest_frame=-1');
const bcnGlb = readFileSync(join(repo, 'tests', 'data', 'rigs', 'BCN_Epileptic.glb'));
const bcn = await expect(200, 'POST', '/api/v1/skeletons/import?format=gltf&file_name=BCN_Epileptic.glb',
  { as: 'registrar', body: bcnGlb, type: 'application/octet-stream', raw: true }, 'import a GLB');
check(bcn.created && bcn.skeleton.joints.length > 20, `import a GLB: ${bcn.skeleton.joints.length} joints`);
names(await expect(400, 'POST', '/api/v1/skeletons/import?format=fbx', { as: 'registrar', body: walkBvh,
  type: 'application/octet-stream', raw: true }, 'format=fbx'), ['format'], 'format=fbx');
names(await expect(400, 'POST', '/api/v1/skeletons/import?format=bvh&file_name=bad.bvh', { as: 'registrar',
  body: 'HIERARCHY\nROOT\n', type: 'application/octet-stream', raw: true }, 'a broken BVH'), ['bad.bvh'], 'a broken BVH');
await expect(403, 'POST', '/api/v1/skeletons/import?format=bvh', { as: 'solver', body: walkBvh,
  type: 'application/octet-stream', raw: true }, 'solve role imports');
// The registrar holds 3 skeletons: --quota_skeletons=3.
const urdf = readFileSync(join(repo, 'tests', 'data', 'urdf', 'turret.urdf'));
names(await expect(429, 'POST', '/api/v1/skeletons/import?format=urdf&file_name=turret.urdf', { as: 'registrar', body: urdf,
  type: 'application/octet-stream', raw: true }, 'a fourth skeleton'), ['--quota_skeletons'], 'a fourth skeleton');
const turret = await expect(200, 'POST', '/api/v1/skeletons/import?format=urdf&file_name=turret.urdf', { as: 'other', body: urdf,
  type: 'application/octet-stream', raw: true }, 'import a URDF');
check(turret.skeleton.joints.length >= 2, `import a URDF: ${turret.skeleton.joints.length} joints`);

// ---- Solve ------------------------------------------------------------------
const rest = fk(skeleton);
const jointIndex = (name) => skeleton.joints.findIndex((j) => j.name === name);
const wrist = jointIndex('l_wrist');
const targets = [[0.45, 1.3, 0.25], [0.5, 1.1, 0.2], [0.35, 1.45, 0.15], [0.55, 1.2, -0.05], [0.35, 1.15, 0.3]];
const solveRequest = (target, sequence = 0) => ({
  skeleton_id: id, sequence, goals: [{ chain: 'l_arm', target }], return_globals: true,
  start_pose: { rotations: skeleton.joints.map((j) => j.rest.rotation) },
});
const unary = [];
for (const [k, target] of targets.entries()) {
  const answer = await expect(200, 'POST', '/api/v1/solve', { as: 'solver', body: solveRequest(target, k + 1) }, `solve ${k}`);
  unary.push(answer);
  const { rotations, translations } = applySolve(skeleton, answer);
  const tip = fk(skeleton, rotations, translations)[wrist];
  const error = dist(tip, target);
  check(answer.sequence === k + 1 && answer.results[0].reached &&
        Math.abs(error - answer.results[0].position_error) < 1e-9 && error <= answer.results[0].tolerance,
        `solve ${k}: the wrist reaches ${JSON.stringify(target)} by this test's FK (${error.toExponential(2)}, ` +
        `reported ${answer.results[0].position_error.toExponential(2)})`);
  check(answer.rotations.every((q) => Math.abs(Math.hypot(...q) - 1) < 1e-9),
        `solve ${k}: rotations are unit [x, y, z, w]`);
  check(dist(answer.globals[wrist].translation, tip) < 1e-9, `solve ${k}: globals agree with this test's FK`);
}
check(dist(rest[wrist], targets[0]) > 0.1, 'solve: the targets are away from the rest pose');
names(await expect(400, 'POST', '/api/v1/solve', { as: 'solver',
  body: { skeleton_id: id, goals: [{ chain: 'l_arm', target: [0.4, 1] }] } }, 'a 2-number target'),
['goals[0].target'], 'a 2-number target');
const nan = await call('POST', '/api/v1/solve', { as: 'solver',
  body: `{"skeleton_id": "${id}", "goals": [{"chain": "l_arm", "target": [NaN, 1, 0]}]}`, raw: true });
check(nan.status === 400, `a NaN target: 400 (got ${nan.status})`);
documented('POST', '/api/v1/solve', nan.status, nan.body);
names(nan.body, ['goals[0].target', 'finite'], 'a NaN target');
names(await expect(404, 'POST', '/api/v1/solve', { as: 'solver',
  body: { skeleton_id: id, goals: [{ chain: 'no_such_chain', target: [0, 1, 0] }] } }, 'an unknown chain'),
['goals[0].chain', 'no_such_chain', 'l_arm'], 'an unknown chain');
names(await expect(400, 'POST', '/api/v1/solve', { as: 'solver', body: '{"skeleton_id": ', raw: true }, 'not JSON'),
      ['SolveRequest'], 'not JSON');
names(await expect(400, 'POST', '/api/v1/solve', { as: 'solver', body: { skeleton_id: id, gaols: [] } }, 'an unknown field'),
      ['gaols'], 'an unknown field');
await expect(404, 'POST', '/api/v1/solve', { as: 'solver', body: { ...solveRequest(targets[0]), skeleton_id: 'f'.repeat(64) } },
             'solve an unknown skeleton');
await expect(401, 'POST', '/api/v1/solve', { as: null, body: solveRequest(targets[0]) }, 'solve without a token');

const batch = await expect(200, 'POST', '/api/v1/solve-batch', { as: 'solver',
  body: { skeleton_id: id, items: targets.map((t, k) => ({ ...solveRequest(t, k + 1), skeleton_id: '' })) } }, 'solve-batch');
check(batch.items.length === targets.length &&
      batch.items.every((item, k) => maxDiff(item.rotations, unary[k].rotations) < 1e-12 &&
                                     item.sequence === k + 1),
      'solve-batch: each item equals its unary solve');
names(await expect(400, 'POST', '/api/v1/solve-batch', { as: 'solver',
  body: { skeleton_id: id, items: Array(MAX_BATCH + 1).fill({ goals: [{ chain: 'l_arm', target: [0.4, 1.2, 0.2] }] }) } },
'a batch over --max_batch'), ['--max_batch'], 'a batch over --max_batch');
names(await expect(400, 'POST', '/api/v1/solve', { as: 'solver',
  body: { skeleton_id: id, goals: Array(65).fill({ chain: 'l_arm', target: [0.4, 1.2, 0.2] }) } }, 'goals over --max_goals'),
['--max_goals'], 'goals over --max_goals');
const badItem = await expect(200, 'POST', '/api/v1/solve-batch', { as: 'solver',
  body: { skeleton_id: id, items: [solveRequest(targets[0], 1), { goals: [{ chain: 'l_arm', target: [0, 0, 'NaN'] }] }] } },
'a batch with a bad item');
check(badItem.items[1].error?.code === 3 && badItem.items[1].error.message.includes('items[1]') ||
      badItem.items[1].error?.message.includes('goals[0].target'),
      `a batch with a bad item: its own error names it (${JSON.stringify(badItem.items[1].error)})`);

// ---- Retarget ---------------------------------------------------------------
const profileBody = { spec: { source: { skeleton_id: walk.skeleton_id }, target: { skeleton_id: bcn.skeleton_id } } };
const made = await expect(200, 'POST', '/api/v1/retarget-profiles', { as: 'registrar', body: profileBody }, 'create a profile');
const profile = made.profile;
check(made.created && profile.source.skeleton_id === walk.skeleton_id && profile.target.roles.length > 10,
      `create a profile: ${profile.target.roles.length} target roles`);
await expect(403, 'POST', '/api/v1/retarget-profiles', { as: 'solver', body: profileBody }, 'solve role creates a profile');
names(await expect(404, 'POST', '/api/v1/retarget-profiles', { as: 'registrar',
  body: { spec: { source: { skeleton_id: 'a'.repeat(64) }, target: { skeleton_id: bcn.skeleton_id } } } }, 'an unknown source'),
['source'], 'an unknown source');
const profiles = await expect(200, 'GET', '/api/v1/retarget-profiles', { as: 'solver' }, 'list profiles');
check(profiles.profiles.some((p) => p.profile_id === profile.profile_id), 'list profiles: the profile');
const withSkeletons = await expect(200, 'GET', `/api/v1/retarget-profiles/${profile.profile_id}?include_skeletons=true`,
  { as: 'solver' }, 'get a profile');
check(withSkeletons.target_skeleton.joints.length === bcn.skeleton.joints.length, 'get a profile: with its skeletons');
names(await expect(400, 'GET', `/api/v1/retarget-profiles/${profile.profile_id}?include_skeletons=maybe`,
  { as: 'solver' }, 'include_skeletons=maybe'), ['include_skeletons'], 'include_skeletons=maybe');
const updated = await expect(200, 'PUT', `/api/v1/retarget-profiles/${profile.profile_id}`, { as: 'registrar',
  body: { version: profile.version, spec: { ...profileBody.spec, contact_height: 0.06 } } }, 'update a profile');
check(updated.profile.version > profile.version && Math.abs(updated.profile.spec.contact_height - 0.06) < 1e-12,
      'update a profile: a new version with the new spec');
await expect(409, 'PUT', `/api/v1/retarget-profiles/${profile.profile_id}`, { as: 'registrar',
  body: { version: profile.version, spec: profileBody.spec } }, 'update from a stale version');
names(await expect(400, 'PUT', `/api/v1/retarget-profiles/${profile.profile_id}`, { as: 'registrar',
  body: { profile_id: 'b'.repeat(64), version: updated.profile.version, spec: profileBody.spec } }, 'two ids'),
['profile_id'], 'two ids');

const target = withSkeletons.target_skeleton;
const frames = walk.motion.slice(0, 6);
const frameTime = walk.frame_time_s;
const retargeted = [];
for (const [k, source] of frames.entries()) {
  retargeted.push(await expect(200, 'POST', '/api/v1/retarget', { as: 'solver',
    body: { profile_id: profile.profile_id, sequence: k, source, frame_time_s: frameTime } }, `retarget frame ${k}`));
}
// The limbs' goals by this test's FK of the answered pose.
const roleJoint = (role) => target.joints.findIndex((j) =>
  j.name === updated.profile.target.roles.find((r) => r.role === role)?.joint);
const roleNames = updated.profile.target.roles.map((r) => r.role);
const limbs = { left_foot: 'left.foot', right_foot: 'right.foot', left_hand: 'left.hand', right_hand: 'right.hand' };
check(Object.values(limbs).every((r) => roleNames.includes(r)), `create a profile: the target's hands and feet are mapped`);
for (const [k, answer] of retargeted.entries()) {
  const positions = fk(target, answer.target.rotations,
    target.joints.map((j, i) => (i === 0 && answer.target.root_translation ? answer.target.root_translation : j.rest.translation)));
  let checked = 0;
  for (const [limb, role] of Object.entries(limbs)) {
    const outcome = answer[limb];
    const joint = roleJoint(role);
    if (!outcome?.active || joint < 0) continue;
    const error = dist(positions[joint], outcome.goal);
    check(Math.abs(error - outcome.position_error) < 1e-6,
          `retarget frame ${k}: ${limb}'s error by this test's FK ${error.toExponential(2)} = reported ` +
          `${outcome.position_error.toExponential(2)}`);
    checked += 1;
  }
  check(answer.target.rotations.length === target.joints.length && checked >= 2,
        `retarget frame ${k}: a rotation per target joint, ${checked} limbs checked (${JSON.stringify(updated.profile.target.roles).slice(0, 300)} ${JSON.stringify(answer.left_foot)})`);
}
names(await expect(400, 'POST', '/api/v1/retarget', { as: 'solver',
  body: { profile_id: profile.profile_id, source: { rotations: frames[0].rotations.slice(1) } } }, 'a short pose'),
['source.rotations'], 'a short pose');
await expect(404, 'POST', '/api/v1/retarget', { as: 'solver', body: { profile_id: 'c'.repeat(64), source: frames[0] } },
             'retarget with an unknown profile');
const clip = await expect(200, 'POST', '/api/v1/retarget-batch', { as: 'solver',
  body: { profile_id: profile.profile_id, frames, frame_time_s: frameTime, report: true } }, 'retarget-batch');
check(clip.frames.length === frames.length && clip.quality.frames === frames.length &&
      maxDiff(clip.frames[0].target, retargeted[0].target) < 1e-12,
      `retarget-batch: a frame each, a quality report, frame 0 equals its unary retarget (${maxDiff(clip.frames[0].target, retargeted[0].target)} ${JSON.stringify(clip.frames[0]).slice(0, 300)} vs ${JSON.stringify(retargeted[0]).slice(0, 300)})`);

// ---- Streams ----------------------------------------------------------------
function openStream(route, { as = 'solver', query = '' } = {}) {
  const headers = as ? { Authorization: `Bearer ${tokens[as] ?? as}` } : {};
  const ws = new WebSocket(`ws://127.0.0.1:${ports.http}${route}${query}`, { headers });
  const messages = [];
  let waiting = null;
  ws.on('message', (data) => { messages.push(JSON.parse(data.toString())); waiting?.(); });
  const opened = new Promise((resolve) => {
    ws.on('open', () => resolve(true));
    ws.on('error', () => resolve(false));
    ws.on('unexpected-response', (request, response) => { resolve(false); response.resume(); });
  });
  const closed = new Promise((resolve) => ws.on('close', resolve));
  // Waits until `n` messages arrived (or the socket closed).
  const until = async (n) => {
    while (messages.length < n) {
      const more = new Promise((resolve) => { waiting = resolve; });
      if (await Promise.race([more.then(() => 'more'), closed.then(() => 'closed'),
        new Promise((r) => setTimeout(() => r('timeout'), 20000))]) !== 'more') break;
    }
    return messages;
  };
  return { ws, messages, opened, closed, until };
}
const streamStatus = (message) => message && 'status' in message && Object.keys(message).length === 1;

// Solve stream: the unary requests (each with its start pose, so no warm
// start), answered in order and equal to the unary answers.
{
  const s = openStream('/api/v1/solve-stream');
  check(await s.opened, 'solve-stream: opens with a solve token');
  for (const [k, t] of targets.entries()) s.ws.send(JSON.stringify(solveRequest(t, k + 1)));
  s.ws.send('');
  await s.until(targets.length + 1);
  await s.closed;
  const answers = s.messages.slice(0, targets.length);
  check(answers.length === targets.length && answers.every((a, k) => a.sequence === k + 1),
        `solve-stream: ${answers.length} answers, in order`);
  check(answers.every((a, k) => maxDiff(a.rotations, unary[k].rotations) < 1e-12 &&
                              maxDiff(a.results, unary[k].results) < 1e-12),
        `solve-stream: every answer equals the unary solve (${JSON.stringify(answers[0]).slice(0, 400)} vs ${JSON.stringify(unary[0]).slice(0, 400)})`);
  for (const a of answers) documented('GET', '/api/v1/solve-stream', 101, a);
  const last = s.messages[targets.length];
  check(streamStatus(last) && last.status.code === 'OK', `solve-stream: ends with status OK (${JSON.stringify(last)})`);
  documented('GET', '/api/v1/solve-stream', 101, last);
}
// Retarget stream: frames in order, equal to the batch (the same clip,
// planting across frames) and frame 0 to the unary retarget.
{
  const s = openStream('/api/v1/retarget-stream', { as: null, query: `?access_token=${tokens.solver}` });
  check(await s.opened, 'retarget-stream: opens with the token in the query');
  for (const [k, source] of frames.entries()) {
    s.ws.send(JSON.stringify({ profile_id: profile.profile_id, sequence: k, source, frame_time_s: frameTime }));
  }
  // A blank message ends a stream as an empty one does (Godot 3's
  // WebSocketPeer cannot send an empty message; client/godot sends this).
  s.ws.send(' \n');
  await s.until(frames.length + 1);
  await s.closed;
  const answers = s.messages.slice(0, frames.length);
  check(answers.length === frames.length && answers.every((a, k) => a.sequence === k),
        `retarget-stream: ${answers.length} answers, in order`);
  check(answers.every((a, k) => maxDiff(a.target, clip.frames[k].target) < 1e-9),
        'retarget-stream: every frame equals retarget-batch\'s');
  check(maxDiff(answers[0].target, retargeted[0].target) < 1e-12, 'retarget-stream: frame 0 equals the unary retarget');
  for (const a of answers) documented('GET', '/api/v1/retarget-stream', 101, a);
  const last = s.messages[frames.length];
  check(streamStatus(last) && last.status.code === 'OK', 'retarget-stream: ends with status OK');
}
// Refusals: no token, a wrong one, the metrics role: no handshake.
for (const [as, what] of [[null, 'no token'], ['wrong-token', 'a wrong token'], ['metrics', 'the metrics role']]) {
  const s = openStream('/api/v1/solve-stream', { as });
  check(!(await s.opened), `solve-stream with ${what}: the handshake is refused`);
}
// A bad frame ends the stream naming it, after the answers before it.
{
  const s = openStream('/api/v1/solve-stream');
  await s.opened;
  s.ws.send(JSON.stringify(solveRequest(targets[0], 1)));
  s.ws.send(JSON.stringify({ skeleton_id: id, goals: [{ chain: 'l_arm', target: [1, 2] }] }));
  await s.until(2);
  await s.closed;
  const last = s.messages.at(-1);
  check(s.messages[0].sequence === 1 && streamStatus(last) && last.status.code === 'INVALID_ARGUMENT' &&
        last.status.message.includes('frame 2') && last.status.message.includes('goals[0].target'),
        `solve-stream: a bad frame ends it naming the frame and field (${JSON.stringify(last)})`);
  documented('GET', '/api/v1/solve-stream', 101, last);
}
// A frame the service refuses is that answer's error; the stream goes on.
{
  const s = openStream('/api/v1/solve-stream');
  await s.opened;
  s.ws.send(JSON.stringify({ skeleton_id: id, sequence: 1, goals: [{ chain: 'l_arm', target: ['NaN', 1, 0] }] }));
  s.ws.send(JSON.stringify(solveRequest(targets[1], 2)));
  s.ws.send('');
  await s.until(3);
  await s.closed;
  check(s.messages[0].error?.message.includes('goals[0].target') && s.messages[1].results?.[0].reached &&
        s.messages[2].status?.code === 'OK',
        `solve-stream: a refused frame's answer carries its error and the next is solved (${JSON.stringify(s.messages[0].error)})`);
}
// A message over --max_message_bytes.
{
  const s = openStream('/api/v1/solve-stream');
  await s.opened;
  s.ws.send(JSON.stringify({ ...solveRequest(targets[0], 1), pad: 'x'.repeat(MAX_BODY) }));
  await s.until(1);
  const last = s.messages.at(-1);
  check(last?.status?.code === 'RESOURCE_EXHAUSTED' && last.status.message.includes('--max_message_bytes=4000000'),
        `solve-stream: a message over the limit ends it naming --max_message_bytes (${JSON.stringify(last)?.slice(0, 200)})`);
  // Closed before the next block counts streams: until then it holds one
  // of the server's --http_max_streams (a loaded machine let the third
  // stream below in while this one was still closing).
  await s.closed;
}
// --http_max_streams=2: a third stream at once is refused in band.
{
  const a = openStream('/api/v1/solve-stream');
  const b = openStream('/api/v1/retarget-stream');
  await a.opened; await b.opened;
  const c = openStream('/api/v1/solve-stream');
  check(await c.opened, 'a third stream: the handshake completes (authenticated)');
  await c.until(1);
  check(c.messages[0]?.status?.code === 'RESOURCE_EXHAUSTED' && c.messages[0].status.message.includes('--http_max_streams=2'),
        `a third stream: RESOURCE_EXHAUSTED naming --http_max_streams (${JSON.stringify(c.messages[0])})`);
  a.ws.close(); b.ws.close();
  await a.closed; await b.closed; await c.closed;
  // Slots are freed when streams close.
  await new Promise((r) => setTimeout(r, 200));
  const d = openStream('/api/v1/solve-stream');
  await d.opened;
  d.ws.send(JSON.stringify(solveRequest(targets[2], 7)));
  await d.until(1);
  check(d.messages[0]?.sequence === 7, 'after they close, a new stream is served');
  d.ws.close();
  await d.closed;
}
const plain = await call('GET', '/api/v1/solve-stream', { as: 'solver' });
check(plain.status === 400 && plain.body.message.includes('WebSocket'), 'solve-stream without Upgrade: 400 naming WebSocket');
documented('GET', '/api/v1/solve-stream', plain.status, plain.body);
const plainRetarget = await call('GET', '/api/v1/retarget-stream', { as: 'solver' });
documented('GET', '/api/v1/retarget-stream', plainRetarget.status, plainRetarget.body);

// ---- Deletes ----------------------------------------------------------------
await expect(403, 'DELETE', `/api/v1/retarget-profiles/${profile.profile_id}`, { as: 'solver' }, 'solve role deletes a profile');
await expect(200, 'DELETE', `/api/v1/retarget-profiles/${profile.profile_id}`, { as: 'registrar' }, 'delete a profile');
await expect(404, 'GET', `/api/v1/retarget-profiles/${profile.profile_id}`, { as: 'solver' }, 'get a deleted profile');
await expect(404, 'DELETE', `/api/v1/retarget-profiles/${profile.profile_id}`, { as: 'registrar' }, 'delete it again');
await expect(403, 'DELETE', `/api/v1/skeletons/${id}`, { as: 'other' }, 'another owner deletes');
await expect(200, 'DELETE', `/api/v1/skeletons/${id}`, { as: 'registrar' }, 'delete a skeleton');
await expect(404, 'GET', `/api/v1/skeletons/${id}`, { as: 'solver' }, 'get a deleted skeleton');

// ---- Metrics: the calls were counted as gRPC's ----------------------------
{
  const response = await fetch(`http://127.0.0.1:${ports.metrics}/metrics`,
    { headers: { Authorization: `Basic ${Buffer.from(`metrics:${tokens.metrics}`).toString('base64')}` } });
  const text = await response.text();
  for (const method of ['RegisterSkeleton', 'ImportSkeleton', 'GetSkeleton', 'ListSkeletons', 'DeleteSkeleton',
    'Solve', 'SolveBatch', 'SolveStream', 'CreateRetargetProfile', 'GetRetargetProfile', 'ListRetargetProfiles',
    'UpdateRetargetProfile', 'DeleteRetargetProfile', 'Retarget', 'RetargetBatch', 'RetargetStream']) {
    const line = text.split('\n').find((l) => l.startsWith('grpc_server_handled_total') &&
      l.includes(`grpc_method="${method}"`) && l.includes('grpc_code="OK"'));
    check(line && +line.split(' ').at(-1) > 0, `metrics: ${method} handled OK counted (${line ?? `none: ${response.status} ${text.slice(0, 300)}`})`);
  }
}

// ---- The byte budget: a caller's share of --max_buffered_bytes ------------
{
  const { server: small, ports: smallPorts } = await startServer(['--max_buffered_bytes_per_caller=20000']);
  servers.push(small);
  const smallBase = `http://127.0.0.1:${smallPorts.http}`;
  const post = async (path, body) => {
    const r = await fetch(smallBase + path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body) });
    return { status: r.status, body: await r.json() };
  };
  const small_id = (await post('/api/v1/skeletons', { skeleton: humanoid })).body.skeleton_id;
  const r = await post('/api/v1/solve-batch', { skeleton_id: small_id,
    items: Array(200).fill({ goals: [{ chain: 'l_arm', target: [0.4, 1.2, 0.2] }], return_globals: true }) });
  check(r.status === 429, `a batch over the caller's byte budget: 429 (got ${r.status})`);
  documented('POST', '/api/v1/solve-batch', r.status, r.body);
  names(r.body, ['--max_buffered_bytes'], 'a batch over the byte budget');
  const one = await post('/api/v1/solve', solveRequest(targets[0], 1));
  check(one.status === 200 && maxDiff(one.body.rotations, unary[0].rotations) < 1e-12,
        'within the budget the same server solves');
  small.kill('SIGTERM');
}

// ---- Every documented operation answered -----------------------------------
for (const [template, method] of operations) {
  check(answered.has(`${method} ${template}`), `${method.toUpperCase()} ${template}: called and answered as documented`);
}

// ---- docs/http.md's example, as written -------------------------------------
{
  const doc = readFileSync(join(repo, 'docs', 'http.md'), 'utf8');
  const m = /<!-- http-api-example -->\n```sh\n([\s\S]*?)```/.exec(doc);
  if (check(m !== null, 'docs/http.md: the HTTP API example is there')) {
    const { server: plainServer, ports: plainPorts } = await startServer([]);
    servers.push(plainServer);
    const out = execFileSync('bash', ['-euo', 'pipefail', '-c', m[1]], {
      cwd: repo, env: { ...process.env, REACH_URL: `http://127.0.0.1:${plainPorts.http}` }, encoding: 'utf8',
    });
    const answer = JSON.parse(out.trim().split('\n').at(-1));
    check(answer.results?.[0]?.reached === true && answer.rotations.every((q) => q.length === 4),
          `docs/http.md example: the solve answers, reached (${out.trim().slice(0, 120)}...)`);
    plainServer.kill('SIGTERM');
  }
}

server.kill('SIGTERM');
console.log(failures === 0 ? 'PASS' : `${failures} FAILED`);
process.exit(failures === 0 ? 0 : 1);
