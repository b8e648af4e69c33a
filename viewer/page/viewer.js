// The Reach viewer: the registry, a 3D view of a skeleton (rest pose,
// limits, chains, joint names on hover) and a playground whose dragged
// target is solved by the server's own Solve (POST /api/solve). Everything
// it loads comes from the server that serves it.
import * as THREE from 'three';
import { OrbitControls } from 'three/addons/controls/OrbitControls.js';
import { TransformControls } from 'three/addons/controls/TransformControls.js';

const $ = (id) => document.getElementById(id);
const CHAIN_COLORS = [0xe6553a, 0x3aa0e6, 0x5fc46a, 0xe6c03a, 0xb36ae6,
                      0x3ae6c8, 0xe63aa0, 0x9fb0c0];
const SOLVERS = ['SOLVER_AUTO', 'SOLVER_TWO_BONE', 'SOLVER_FABRIK', 'SOLVER_CCD',
                 'SOLVER_JACOBIAN_TRANSPOSE', 'SOLVER_JACOBIAN_PINV',
                 'SOLVER_JACOBIAN_DLS', 'SOLVER_GRADIENT_DESCENT',
                 'SOLVER_FULL_BODY'];

// What the page shows; the browser test reads it through window.reachViewer.
const state = {
  token: sessionStorage.getItem('reach.token') || '',
  skeletons: [],
  id: null,
  from: null,      // The profile whose copy of the skeleton is drawn, or null.
  skeleton: null,  // GetSkeletonResponse.skeleton
  rest: [],        // Per joint: {t, q, s} (THREE types).
  pose: [],        // Per joint: local {t, q, s}, the pose drawn.
  solves: 0,       // Playground solves answered.
  lastResult: null,
  profile: null,   // The opened GetRetargetProfileResponse.profile.
  view: 0,         // Counts changes of what is watched or opened.
};

// ---------------------------------------------------------------- API

async function api(path, init = {}) {
  const headers = Object.assign({}, init.headers || {});
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const response = await fetch(path, Object.assign({}, init, { headers }));
  const body = await response.json().catch(() => ({}));
  if (response.status === 401 || response.status === 403) {
    $('auth').hidden = false;
  }
  if (!response.ok) {
    const error = new Error(`${body.code || response.status}: ${body.message || ''}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

function showStatus(text) { $('status').textContent = text; }

// Every item of a paged list (`field` of each page), following
// nextPageToken.
async function fetchAll(path, field) {
  const all = [];
  let token = '';
  do {
    const page = await api(`${path}${token ? `?page_token=${encodeURIComponent(token)}` : ''}`);
    all.push(...(page[field] || []));
    token = page.nextPageToken || '';
  } while (token);
  return all;
}

// Fills the list `ul` with one clickable item per entry ({id, title, info,
// selected, open}); with `empty` (if given) as a hint when there are none.
function fillList(ul, entries, empty = null) {
  if (entries.length === 0 && empty !== null) {
    const li = document.createElement('li');
    li.className = 'hint';
    li.textContent = empty;
    ul.replaceChildren(li);
    return;
  }
  ul.replaceChildren(...entries.map(({ id, title, info, selected, open }) => {
    const li = document.createElement('li');
    li.dataset.id = id;
    li.classList.toggle('selected', selected);
    const name = document.createElement('div');
    name.textContent = title;
    const small = document.createElement('small');
    small.textContent = info;
    li.append(name, small);
    li.addEventListener('click', open);
    return li;
  }));
}

// ------------------------------------------------------- skeleton math

const vec = (v) => new THREE.Vector3(v?.x || 0, v?.y || 0, v?.z || 0);
function quat(q) {
  if (!q || (!q.w && !q.x && !q.y && !q.z)) return new THREE.Quaternion();
  return new THREE.Quaternion(q.x || 0, q.y || 0, q.z || 0, q.w || 0).normalize();
}

function restOf(joint) {
  const rest = joint.rest || {};
  return { t: vec(rest.translation), q: quat(rest.rotation), s: rest.scale || 1 };
}

// Model-space matrices of a pose (parents come before children).
function globals(skeleton, pose) {
  const out = [];
  skeleton.joints.forEach((joint, j) => {
    const m = new THREE.Matrix4().compose(pose[j].t, pose[j].q,
                                          new THREE.Vector3(pose[j].s, pose[j].s, pose[j].s));
    out.push(joint.parent >= 0 ? out[joint.parent].clone().multiply(m) : m);
  });
  return out;
}

const positionOf = (m) => new THREE.Vector3().setFromMatrixPosition(m);
function rotationOf(m) {
  const p = new THREE.Vector3(), q = new THREE.Quaternion(), s = new THREE.Vector3();
  m.decompose(p, q, s);
  return q;
}

function chainJoints(skeleton, chain) {
  const index = new Map(skeleton.joints.map((j, i) => [j.name, i]));
  const path = [];
  for (let j = index.get(chain.tip); j !== undefined && j >= 0;
       j = skeleton.joints[j].parent) {
    path.unshift(j);
    if (skeleton.joints[j].name === chain.root) return path;
  }
  return [];
}

// The joint's limit axis in its own frame: Joint.axis, or towards its
// first child with a non-zero rest translation, or +X.
function limitAxis(skeleton, j) {
  const a = vec(skeleton.joints[j].axis);
  if (a.lengthSq() > 0) return a.normalize();
  for (let c = j + 1; c < skeleton.joints.length; ++c) {
    if (skeleton.joints[c].parent !== j) continue;
    const t = vec(skeleton.joints[c].rest?.translation);
    if (t.lengthSq() > 0) return t.normalize();
  }
  return new THREE.Vector3(1, 0, 0);
}

// ------------------------------------------------------------ the view

const view = $('view');
const renderer = new THREE.WebGLRenderer({ antialias: true, preserveDrawingBuffer: true });
renderer.setPixelRatio(window.devicePixelRatio);
view.appendChild(renderer.domElement);
const scene = new THREE.Scene();
scene.background = new THREE.Color(0x1d2125);
scene.add(new THREE.HemisphereLight(0xffffff, 0x404050, 2.5));
const sun = new THREE.DirectionalLight(0xffffff, 1.5);
sun.position.set(2, 4, 3);
scene.add(sun);
const camera = new THREE.PerspectiveCamera(45, 1, 0.01, 1000);
camera.position.set(2, 1.5, 3);
const orbit = new OrbitControls(camera, renderer.domElement);
const grid = new THREE.GridHelper(4, 20, 0x556070, 0x333a44);
scene.add(grid);

let figure = null;  // The drawn skeleton: {group, bones, joints, limits}.
let bodySize = 1;

function resize() {
  const w = view.clientWidth, h = view.clientHeight;
  renderer.setSize(w, h);
  camera.aspect = w / Math.max(h, 1);
  camera.updateProjectionMatrix();
}
window.addEventListener('resize', resize);

function chainColorOf(skeleton) {
  const color = new Array(skeleton.joints.length).fill(null);
  (skeleton.chains || []).forEach((chain, c) => {
    const joints = chainJoints(skeleton, chain);
    joints.slice(1).forEach((j) => { color[j] = CHAIN_COLORS[c % CHAIN_COLORS.length]; });
  });
  return color;
}

// A drawn skeleton at `rest`: joint spheres, bones coloured by chain (or
// `boneColor`), and its limits unless `limits` is false. Its size is the
// rest pose's bounding box diagonal.
function makeFigure(skeleton, rest, { limits = true, jointColor = 0xdde3ea, boneColor = null } = {}) {
  const group = new THREE.Group();
  const g = globals(skeleton, rest);
  const box = new THREE.Box3();
  g.forEach((m) => box.expandByPoint(positionOf(m)));
  const size = Math.max(box.getSize(new THREE.Vector3()).length(), 1e-3);
  const r = size * 0.008;
  const jointGeometry = new THREE.SphereGeometry(r * 1.6, 12, 8);
  const boneGeometry = new THREE.CylinderGeometry(r, r, 1, 8);
  boneGeometry.translate(0, 0.5, 0);
  const colors = chainColorOf(skeleton);
  const joints = [], bones = [];
  skeleton.joints.forEach((joint, j) => {
    const sphere = new THREE.Mesh(jointGeometry,
        new THREE.MeshStandardMaterial({ color: jointColor }));
    sphere.userData.joint = j;
    group.add(sphere);
    joints.push(sphere);
    if (joint.parent >= 0) {
      const bone = new THREE.Mesh(boneGeometry, new THREE.MeshStandardMaterial({
        color: boneColor ?? colors[j] ?? 0x8a96a3 }));
      group.add(bone);
      bones.push({ mesh: bone, joint: j });
    }
  });
  // Limits, fixed to the parent's frame: ball cones about the twist axis,
  // hinge arcs about the hinge axis from the rest direction of the bone.
  const limitMeshes = [];
  skeleton.joints.forEach((joint, j) => {
    if (!limits) return;
    const length = size * 0.06;
    const material = new THREE.MeshBasicMaterial({
      color: 0xf0c050, transparent: true, opacity: 0.25, side: THREE.DoubleSide,
      depthWrite: false });
    if ((joint.type === 'JOINT_TYPE_BALL' || joint.type === 'JOINT_TYPE_UNSPECIFIED' ||
         !joint.type) && joint.maxSwingRad !== undefined) {
      // The directions the twist axis may take: a cap of a sphere about
      // +Y, of the cone's half-angle (wider than 90 degrees too).
      const cap = new THREE.SphereGeometry(length, 24, 12, 0, 2 * Math.PI, 0,
                                           Math.max(joint.maxSwingRad, 0.02));
      const mesh = new THREE.Mesh(cap, material);
      limitMeshes.push({ mesh, joint: j, kind: 'cone' });
      group.add(mesh);
    } else if (joint.type === 'JOINT_TYPE_HINGE' && joint.minAngleRad !== undefined &&
               joint.maxAngleRad !== undefined) {
      const arc = new THREE.RingGeometry(length * 0.4, length, 24, 1, joint.minAngleRad,
                                         joint.maxAngleRad - joint.minAngleRad);
      const mesh = new THREE.Mesh(arc, material);
      limitMeshes.push({ mesh, joint: j, kind: 'arc' });
      group.add(mesh);
    }
  });
  return { group, joints, bones, limits: limitMeshes, size, box };
}

function buildFigure(skeleton) {
  hideSource();  // A retarget's source belongs to the figure it was beside.
  if (figure) scene.remove(figure.group);
  figure = makeFigure(skeleton, state.rest);
  scene.add(figure.group);
  bodySize = figure.size;
  const box = figure.box;
  grid.scale.setScalar(bodySize / 2);
  grid.position.y = box.min.y;
  const center = box.getCenter(new THREE.Vector3());
  orbit.target.copy(center);
  camera.position.copy(center).add(new THREE.Vector3(0.6, 0.35, 1).multiplyScalar(bodySize * 1.1));
  camera.near = bodySize * 0.01;
  camera.far = bodySize * 100;
  camera.updateProjectionMatrix();
  orbit.update();
}

// Places a figure's meshes at `pose` (in the figure's group); returns the
// pose's model-space matrices.
function placeFigure(fig, skeleton, rest, pose) {
  const g = globals(skeleton, pose);
  const p = g.map(positionOf);
  fig.joints.forEach((sphere, j) => sphere.position.copy(p[j]));
  const up = new THREE.Vector3(0, 1, 0);
  for (const { mesh, joint } of fig.bones) {
    const from = p[skeleton.joints[joint].parent], d = p[joint].clone().sub(from);
    const length = d.length();
    mesh.visible = length > 1e-9;
    mesh.position.copy(from);
    if (length > 1e-9) mesh.quaternion.setFromUnitVectors(up, d.divideScalar(length));
    mesh.scale.set(1, Math.max(length, 1e-9), 1);
  }
  for (const { mesh, joint, kind } of fig.limits) {
    // The limit frame: the parent's model rotation times the rest rotation.
    const parent = skeleton.joints[joint].parent;
    const frame = (parent >= 0 ? rotationOf(g[parent]) : new THREE.Quaternion())
        .multiply(rest[joint].q);
    const axis = limitAxis(skeleton, joint).applyQuaternion(frame);
    mesh.position.copy(p[joint]);
    if (kind === 'cone') {
      mesh.quaternion.setFromUnitVectors(up, axis);
    } else {
      // Ring in its XY plane: Z along the hinge axis, X along the rest
      // direction of the bone (its first child) projected off the axis.
      let ref = new THREE.Vector3(1, 0, 0);
      const child = skeleton.joints.findIndex((c) => c.parent === joint);
      if (child >= 0) ref = vec(skeleton.joints[child].rest?.translation).applyQuaternion(frame);
      ref.sub(axis.clone().multiplyScalar(ref.dot(axis)));
      if (ref.lengthSq() < 1e-12) ref = new THREE.Vector3(1, 0, 0).cross(axis);
      ref.normalize();
      const y = axis.clone().cross(ref);
      mesh.quaternion.setFromRotationMatrix(new THREE.Matrix4().makeBasis(ref, y, axis));
    }
  }
  return g;
}

// Places the figure's meshes at `state.pose` (and a retarget's source
// beside it).
function drawPose() {
  if (!figure || !state.skeleton) return;
  const g = placeFigure(figure, state.skeleton, state.rest, state.pose);
  placeSource(positionOf(g[0]));
}

// ------------------------------------------------ a retarget's source beside

// The source skeleton of a retarget, drawn beside the target at the
// target's size (rigs differ in units and proportions), in blue-grey, feet
// on the same floor, moving with it: {id, from (the profile whose copy it
// is, or null: the registry's), skeleton, rest, pose, fig, scale, side,
// floor (the source's, set on the grid)}.
state.source = null;

// `given`: {skeleton, from}, the copy the profile `from` keeps. `atRest`:
// drawn anew (else the same source already drawn keeps its pose).
function showSource(id, given, atRest = false) {
  const { skeleton, from } = given;
  if (!atRest && state.source?.id === id && state.source.from === from) return;
  hideSource();
  const rest = skeleton.joints.map(restOf);
  const fig = makeFigure(skeleton, rest, { limits: false, jointColor: 0xb8c4d0,
                                           boneColor: 0x5a7fa8 });
  // The same standing height (the rest poses' vertical extent; their
  // diagonals where a rig is not Y-up).
  const height = (f) => {
    const y = f.box.max.y - f.box.min.y;
    return y > 0.3 * f.size ? y : f.size;
  };
  const scale = height(figure) / height(fig);
  fig.group.scale.setScalar(scale);
  scene.add(fig.group);
  // To the left of the target as the camera sees it now.
  camera.updateMatrixWorld();  // It may have moved since the last render.
  const left = new THREE.Vector3().setFromMatrixColumn(camera.matrixWorld, 0).negate();
  left.y = 0;
  if (left.lengthSq() < 1e-9) left.set(-1, 0, 0);
  left.normalize().multiplyScalar(0.65 * bodySize);
  // Look between the two, from further back, so that both fit (once per
  // figure built: a second source beside the same target keeps the view).
  if (!figure.widened) {
    figure.widened = true;
    camera.position.sub(orbit.target).multiplyScalar(1.3).add(orbit.target);
    const between = left.clone().multiplyScalar(0.5);
    orbit.target.add(between);
    camera.position.add(between);
    orbit.update();
  }
  state.source = { id, from, skeleton, rest,
                   pose: rest.map(({ t, q, s }) => ({ t: t.clone(), q: q.clone(), s })),
                   fig, scale, side: left, floor: fig.box.min.y };
  drawPose();
}

function hideSource() {
  if (state.source) scene.remove(state.source.fig.group);
  state.source = null;
}

// `targetRoot`: where the target's root is drawn (model space).
function placeSource(targetRoot) {
  const s = state.source;
  if (!s || !figure || !state.skeleton) return;
  const g = placeFigure(s.fig, s.skeleton, s.rest, s.pose);
  const root = positionOf(g[0]);
  s.fig.group.position.set(targetRoot.x + s.side.x - s.scale * root.x,
                           grid.position.y - s.scale * s.floor,
                           targetRoot.z + s.side.z - s.scale * root.z);
}

// ---------------------------------------------------- joint names on hover

const raycaster = new THREE.Raycaster();
const pointer = new THREE.Vector2();
renderer.domElement.addEventListener('pointermove', (event) => {
  const tip = $('tip');
  if (!figure) return;
  const rect = renderer.domElement.getBoundingClientRect();
  pointer.set(((event.clientX - rect.left) / rect.width) * 2 - 1,
              -((event.clientY - rect.top) / rect.height) * 2 + 1);
  raycaster.setFromCamera(pointer, camera);
  const hit = raycaster.intersectObjects(figure.joints, false)[0];
  if (!hit) { tip.hidden = true; return; }
  const joint = state.skeleton.joints[hit.object.userData.joint];
  const lines = [joint.name, (joint.type || 'JOINT_TYPE_BALL').replace('JOINT_TYPE_', '').toLowerCase()];
  const deg = (r) => `${THREE.MathUtils.radToDeg(r).toFixed(0)}°`;
  if (joint.maxSwingRad !== undefined) lines.push(`swing ≤ ${deg(joint.maxSwingRad)}`);
  if (joint.minAngleRad !== undefined || joint.maxAngleRad !== undefined) {
    lines.push(`${joint.type === 'JOINT_TYPE_HINGE' ? 'angle' : 'twist'} ` +
               `${joint.minAngleRad !== undefined ? deg(joint.minAngleRad) : '-∞'} … ` +
               `${joint.maxAngleRad !== undefined ? deg(joint.maxAngleRad) : '∞'}`);
  }
  tip.textContent = lines.join('\n');
  tip.style.left = `${event.clientX - rect.left + 12}px`;
  tip.style.top = `${event.clientY - rect.top + 12}px`;
  tip.hidden = false;
});

renderer.domElement.addEventListener('pointerleave', () => { $('tip').hidden = true; });

// ------------------------------------------------------------ playground

const target = new THREE.Mesh(new THREE.SphereGeometry(1, 16, 12),
                              new THREE.MeshStandardMaterial({ color: 0xff3030 }));
const pole = new THREE.Mesh(new THREE.SphereGeometry(1, 16, 12),
                            new THREE.MeshStandardMaterial({ color: 0x3070ff }));
target.visible = pole.visible = false;
scene.add(target, pole);
const gizmos = [target, pole].map((object) => {
  const controls = new TransformControls(camera, renderer.domElement);
  controls.attach(object);
  controls.addEventListener('dragging-changed', (e) => { orbit.enabled = !e.value; });
  controls.addEventListener('objectChange', () => requestSolve());
  scene.add(controls.getHelper());
  controls.getHelper().visible = false;
  controls.enabled = false;
  return controls;
});

function selectedChain() {
  return (state.skeleton?.chains || []).find((c) => c.name === $('pg-chain').value);
}

// Puts the target on the chain's tip and the pole in front of its middle.
function placeGizmos() {
  const chain = selectedChain();
  const on = Boolean(chain) && !state.watch;
  target.visible = on;
  pole.visible = on && $('pg-pole').checked;
  gizmos[0].enabled = on;
  gizmos[0].getHelper().visible = on;
  gizmos[1].enabled = pole.visible;
  gizmos[1].getHelper().visible = pole.visible;
  if (!on) return;
  const joints = chainJoints(state.skeleton, chain);
  const g = globals(state.skeleton, state.pose);
  const tip = positionOf(g[joints[joints.length - 1]]);
  const mid = positionOf(g[joints[Math.floor(joints.length / 2)]]);
  target.position.copy(tip);
  pole.position.copy(mid).add(new THREE.Vector3(0, 0, bodySize * 0.25));
  target.scale.setScalar(bodySize * 0.015);
  pole.scale.setScalar(bodySize * 0.012);
  for (const c of gizmos) c.size = 0.6;
}

let solveInFlight = false, solveAgain = false;
function requestSolve() {
  if (solveInFlight) { solveAgain = true; return; }
  solve();
}

const xyz = (v) => ({ x: v.x, y: v.y, z: v.z });
async function solve() {
  const chain = selectedChain();
  if (!chain) return;
  solveInFlight = true;
  const goal = { chain: chain.name, solver: $('pg-solver').value, target: xyz(target.position) };
  if ($('pg-pole').checked) goal.pole = xyz(pole.position);
  // Warm start from the pose shown, so dragging moves it continuously.
  const request = {
    skeletonId: state.id,
    goals: [goal],
    startPose: {
      rotations: state.pose.map(({ q }) => ({ w: q.w, x: q.x, y: q.y, z: q.z })),
      rootTranslation: xyz(state.pose[0].t),
    },
  };
  const started = performance.now();
  try {
    const response = await api('/api/solve', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(request),
    });
    const ms = performance.now() - started;
    applySolve(response);
    const result = response.results[0];
    state.solves += 1;
    state.lastResult = Object.assign({ roundTripMs: ms }, result);
    showResult(result, ms);
    showStatus('');
  } catch (error) {
    showStatus(`solve: ${error.message}`);
  } finally {
    solveInFlight = false;
    if (solveAgain) { solveAgain = false; requestSolve(); }
  }
}

function applySolve(response) {
  (response.rotatedJoints || []).forEach((j, k) => {
    const r = response.rotations.slice(4 * k, 4 * k + 4);
    state.pose[j].q.set(r[1], r[2], r[3], r[0]);
  });
  (response.translatedJoints || []).forEach((j, k) => {
    const t = response.translations.slice(3 * k, 3 * k + 3);
    state.pose[j].t.set(t[0], t[1], t[2]);
  });
  drawPose();
}

function showResult(result, ms) {
  const rows = [
    ['reached', String(result.reached)],
    ['position error', Number(result.positionError).toExponential(2)],
    ['iterations', String(result.iterations)],
    ['solver', String(result.solver).replace('SOLVER_', '').toLowerCase()],
    ['round trip', `${ms.toFixed(1)} ms`],
  ];
  const table = $('pg-result');
  table.replaceChildren(...rows.map(([k, v]) => {
    const tr = document.createElement('tr');
    for (const text of [k, v]) {
      const td = document.createElement('td');
      td.textContent = text;
      tr.appendChild(td);
    }
    return tr;
  }));
}

function resetPose() {
  state.pose = state.rest.map(({ t, q, s }) => ({ t: t.clone(), q: q.clone(), s }));
  drawPose();
  placeGizmos();
}

// ---------------------------------------------------------- live streams

const markers = new THREE.Group();  // A watched stream's targets and poles.
scene.add(markers);
state.watch = null;  // {id, socket, messages, sequence, started}

async function loadStreams() {
  const { streams } = await api('/api/streams');
  fillList($('streams'), streams.map((s) => {
    const retarget = s.kind === 'retarget';
    const skeleton = retarget ? `${nameOf(s.sourceSkeletonId)} → ${nameOf(s.skeletonId)}`
                              : (s.skeletonId || '?').slice(0, 12);
    return {
      id: s.id,
      title: `${retarget ? 'retarget' : 'stream'} ${s.id} · ${s.owner || 'anonymous'}`,
      info: `${skeleton} · ${s.frames} frames · ${s.ageS.toFixed(0)} s`,
      selected: state.watch?.id === s.id,
      open: () => watch(s).catch((error) => showStatus(`watch: ${error.message}`)),
    };
  }), 'No open streams.');
  return streams;
}

// A skeleton's name from the registry's list (else its id's start).
function nameOf(id) {
  if (!id) return '?';
  return state.skeletons.find((s) => s.skeletonId === id)?.name || id.slice(0, 12);
}

function stopWatching() {
  state.view += 1;  // What was loading for the old view is dropped.
  if (state.watch) state.watch.socket.close();
  state.watch = null;
  markers.clear();
  hideSource();
  $('watching').hidden = true;
  for (const li of $('streams').children) li.classList.remove('selected');
}

function drawMarkers(goals) {
  const size = bodySize * 0.02;  // Larger than a joint: a reached target shows.
  while (markers.children.length < 2 * goals.length) {
    const target = markers.children.length % 2 === 0;
    const m = new THREE.Mesh(new THREE.SphereGeometry(1, 12, 8),
                             new THREE.MeshStandardMaterial({ color: target ? 0xff3030 : 0x3070ff }));
    m.scale.setScalar(size);
    markers.add(m);
  }
  markers.children.forEach((m) => { m.visible = false; });
  goals.forEach((g, i) => {
    for (const [k, p] of [[0, g.target], [1, g.pole]]) {
      if (!p) continue;
      const m = markers.children[2 * i + k];
      m.position.set(p[0], p[1], p[2]);
      m.visible = true;
    }
  });
}

// Sets a drawn pose from a frame's rotations (w, x, y, z) and translations;
// false when they do not fit it.
function setPose(pose, r, t) {
  const n = pose.length;
  if (!r || !t || r.length !== 4 * n || t.length !== 3 * n) return false;
  for (let j = 0; j < n; ++j) {
    pose[j].q.set(r[4 * j + 1], r[4 * j + 2], r[4 * j + 3], r[4 * j]);
    pose[j].t.set(t[3 * j], t[3 * j + 1], t[3 * j + 2]);
  }
  return true;
}

// The height of a pose's lowest joint (model space).
const lowest = (skeleton, pose) => Math.min(...globals(skeleton, pose).map((m) => positionOf(m).y));

// Keeps the camera on a moving figure: it moves with the root joint.
function follow(w) {
  const root = positionOf(globals(state.skeleton, state.pose)[0]);
  // With a retarget's source beside it: between the two.
  if (state.source) root.addScaledVector(state.source.side, 0.5);
  if (w.root) {
    const delta = root.clone().sub(w.root);
    camera.position.add(delta);
    orbit.target.add(delta);
    grid.position.x += delta.x;
    grid.position.z += delta.z;
  } else {
    const offset = camera.position.clone().sub(orbit.target);
    orbit.target.copy(root);
    camera.position.copy(root).add(offset);
  }
  orbit.update();
  w.root = root;
}

async function watch(stream) {
  stopWatching();
  closeProfile();
  const view = state.view;
  // The stream's skeleton may be newer than the list.
  await loadSkeletons().catch(() => {});
  if (view !== state.view) return;  // Another stream or view was chosen.
  if (stream.kind === 'retarget' && stream.profileId) {
    await showPair(stream.profileId, view);
  } else if (stream.skeletonId && stream.skeletonId !== state.id) {
    // (A retarget listed before its first frame found its profile has no
    // skeleton yet: its first frame brings the profile.)
    await openSkeleton(stream.skeletonId);
  }
  if (view !== state.view) return;
  // The playground's gizmos would fight the stream for the pose.
  $('pg-chain').value = '';
  placeGizmos();
  const url = new URL('/api/watch', location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('stream', stream.id);
  if (state.token) url.searchParams.set('access_token', state.token);
  const socket = new WebSocket(url);
  const w = { id: stream.id, socket, messages: 0, sequence: null, started: performance.now(),
              ended: false, error: null, loading: false, view };
  state.watch = w;
  $('watching').hidden = false;
  for (const li of $('streams').children) li.classList.toggle('selected', Number(li.dataset.id) === stream.id);
  socket.onmessage = async (event) => {
    const frame = JSON.parse(event.data);
    if (frame.error) { w.error = frame.error; showStatus(`watch: ${frame.error}`); return; }
    if (frame.ended) { w.ended = true; $('watch-info').textContent = `stream ${w.id} ended`; return; }
    // Frames that arrive while a skeleton loads are dropped (latest wins).
    if (w.loading || state.watch !== w) return;
    const retarget = frame.kind === 'retarget';
    if (retarget ? state.from !== frame.profileId || state.source?.from !== frame.profileId
                 : frame.skeletonId !== state.id) {
      if (w.error) return;  // A skeleton that cannot be loaded: said once.
      w.loading = true;
      try {
        if (retarget) await showPair(frame.profileId, w.view);
        else await openSkeleton(frame.skeletonId);
      } catch (error) {
        // E.g. a skeleton deleted since.
        w.error = error.message;
        showStatus(`watch: ${error.message}`);
        return;
      } finally {
        w.loading = false;
      }
      w.root = null;
      w.floored = false;
      if (state.watch !== w) return;
    }
    if (!setPose(state.pose, frame.rotations, frame.translations)) return;
    if (retarget && state.source) {
      setPose(state.source.pose, frame.sourceRotations, frame.sourceTranslations);
    }
    if (!w.floored) {
      // The floor under the first frame's lowest joint: a stream's root
      // height need not match the rest pose's (nor the source's).
      w.floored = true;
      grid.position.y = lowest(state.skeleton, state.pose);
      if (state.source) state.source.floor = lowest(state.source.skeleton, state.source.pose);
    }
    drawPose();
    drawMarkers(frame.goals);
    follow(w);
    w.messages += 1;
    w.sequence = frame.sequence;
    const seconds = (performance.now() - w.started) / 1000;
    const reached = frame.goals.filter((g) => g.reached).length;
    $('watch-info').textContent = `${retarget ? 'retarget' : 'stream'} ${w.id}: ` +
        (retarget ? `${state.source?.skeleton.name || '(unnamed)'} → ` +
                    `${state.skeleton.name || '(unnamed)'}, ` : '') +
        `frame ${frame.sequence}, ` +
        `${(w.messages / Math.max(seconds, 1e-3)).toFixed(0)} frames/s shown, ` +
        `${reached}/${frame.goals.length} goals reached`;
  };
}

$('watch-stop').addEventListener('click', stopWatching);
setInterval(() => { loadStreams().catch(() => {}); }, 1000);
setInterval(() => { loadSkeletons().then(loadProfiles).catch(() => {}); }, 5000);

// -------------------------------------------------------------- registry

async function loadSkeletons() {
  const all = await fetchAll('/api/skeletons', 'skeletons');
  state.skeletons = all;
  fillList($('skeletons'), all.map((s) => ({
    id: s.skeletonId,
    title: s.name || '(unnamed)',
    info: `${s.skeletonId.slice(0, 12)} · ${s.jointCount} joints · ` +
          `${(s.chains || []).length} chains`,
    selected: s.skeletonId === state.id,
    open: () => openSkeleton(s.skeletonId),
  })));
  if (all.length === 0) showStatus('No skeletons registered yet.');
  return all;
}

async function loadProfiles() {
  const all = await fetchAll('/api/retarget-profiles', 'profiles');
  fillList($('profiles'), all.map((p) => ({
    id: p.profileId,
    title: `${p.sourceName || '(unnamed)'} → ${p.targetName || '(unnamed)'}`,
    info: `${p.profileId.slice(0, 12)} · version ${p.version}`,
    selected: p.profileId === state.profile?.profileId,
    open: () => openProfile(p.profileId).catch((e) => showStatus(e.message)),
  })), 'No retarget profiles.');
  return all;
}

// A profile never changes (its id is its content's hash): it and its
// skeletons are fetched once.
const profiles = new Map();
function profileWithSkeletons(id) {
  if (!profiles.has(id)) {
    profiles.set(id, api(`/api/retarget-profiles/${encodeURIComponent(id)}`)
      .catch((error) => { profiles.delete(id); throw error; }));
  }
  return profiles.get(id);
}

// A retarget's target with its source beside, as its profile keeps them:
// the pair it retargets between (the registry's may have been deleted
// since). `atRest`: the target is drawn anew, at rest (else a target
// already drawn from this profile keeps its pose). Returns the profile, or
// null when the view changed meanwhile.
async function showPair(id, view, atRest = false) {
  const { profile, sourceSkeleton, targetSkeleton } = await profileWithSkeletons(id);
  if (view !== state.view) return null;
  if (atRest || state.from !== id) {
    await openSkeleton(profile.target.skeletonId, { skeleton: targetSkeleton, from: id });
  }
  if (view !== state.view) return null;
  showSource(profile.source.skeletonId, { skeleton: sourceSkeleton, from: id }, atRest);
  return view === state.view ? profile : null;
}

// A profile: its target with its source beside, both at rest, and which
// joint plays each role on either side.
async function openProfile(id) {
  stopWatching();
  const view = state.view;
  const profile = await showPair(id, view, /*atRest=*/true);
  if (!profile) return;
  state.profile = profile;
  $('pg-chain').value = '';  // No playground gizmos over the pair.
  placeGizmos();
  for (const li of $('profiles').children) li.classList.toggle('selected', li.dataset.id === id);
  $('profile-details').hidden = false;
  $('profile-name').textContent =
      `${profile.source.skeletonName || '(unnamed)'} → ${profile.target.skeletonName || '(unnamed)'}`;
  const roles = new Map();
  for (const [side, k] of [[profile.source, 0], [profile.target, 1]]) {
    for (const m of side.roles || []) {
      if (!roles.has(m.role)) roles.set(m.role, ['', '']);
      roles.get(m.role)[k] = m.joint;
    }
  }
  const header = document.createElement('tr');
  for (const text of ['role', 'source', 'target']) {
    const th = document.createElement('th');
    th.textContent = text;
    header.appendChild(th);
  }
  $('profile-roles').replaceChildren(header, ...[...roles].map(([role, joints]) => {
    const tr = document.createElement('tr');
    for (const text of [role, ...joints]) {
      const td = document.createElement('td');
      td.textContent = text || '—';
      tr.appendChild(td);
    }
    return tr;
  }));
}

function closeProfile() {
  state.profile = null;
  $('profile-details').hidden = true;
  for (const li of $('profiles').children) li.classList.remove('selected');
}

// `given`: {skeleton, from}, a profile's copy, instead of the registry's.
async function openSkeleton(id, given = null) {
  const response = given ?? await api(`/api/skeletons/${encodeURIComponent(id)}`);
  closeProfile();  // openProfile opens it again, after this.
  state.id = id;
  state.from = given?.from ?? null;
  state.skeleton = response.skeleton;
  state.rest = state.skeleton.joints.map(restOf);
  for (const li of $('skeletons').children) li.classList.toggle('selected', li.dataset.id === id);
  $('details').hidden = false;
  $('skeleton-name').textContent = state.skeleton.name || '(unnamed)';
  const limited = state.skeleton.joints.filter((j) => j.maxSwingRad !== undefined ||
      j.minAngleRad !== undefined || j.maxAngleRad !== undefined).length;
  $('skeleton-info').textContent = `${state.skeleton.joints.length} joints, ` +
      `${limited} limited · ` +
      (given ? 'as its retarget profile keeps it' : `version ${response.version}`);
  const chains = state.skeleton.chains || [];
  $('chains').replaceChildren(...chains.map((c, k) => {
    const li = document.createElement('li');
    const swatch = document.createElement('span');
    swatch.className = 'swatch';
    swatch.style.background = `#${CHAIN_COLORS[k % CHAIN_COLORS.length].toString(16).padStart(6, '0')}`;
    li.append(swatch, `${c.name}: ${c.root} → ${c.tip}`);
    return li;
  }));
  buildFigure(state.skeleton);
  $('playground').hidden = chains.length === 0;
  $('pg-chain').replaceChildren(...chains.map((c) => new Option(c.name, c.name)));
  resetPose();
}

// ------------------------------------------------------------------ start

$('pg-solver').replaceChildren(...SOLVERS.map((s) =>
  new Option(s.replace('SOLVER_', '').toLowerCase(), s)));
$('pg-chain').addEventListener('change', () => { stopWatching(); placeGizmos(); });
$('pg-pole').addEventListener('change', placeGizmos);
$('pg-reset').addEventListener('click', resetPose);
$('token').value = state.token;
$('token-save').addEventListener('click', () => {
  state.token = $('token').value.trim();
  sessionStorage.setItem('reach.token', state.token);
  start();
});

async function start() {
  try {
    const skeletons = await loadSkeletons();
    await loadProfiles();
    await loadStreams();
    $('auth').hidden = Boolean(state.token) ? $('auth').hidden : true;
    const wanted = new URLSearchParams(location.search).get('skeleton');
    const first = skeletons.find((s) => s.skeletonId === wanted) || skeletons[0];
    if (first) await openSkeleton(first.skeletonId);
    showStatus('');
  } catch (error) {
    showStatus(error.message);
  }
}

resize();
renderer.setAnimationLoop(() => renderer.render(scene, camera));
window.reachViewer = {
  state,
  ready: start(),
  // Screen position (CSS pixels, page coordinates) of a point in the view.
  screenOf(point) {
    const p = new THREE.Vector3(point.x, point.y, point.z).project(camera);
    const rect = renderer.domElement.getBoundingClientRect();
    return { x: rect.left + (p.x + 1) / 2 * rect.width, y: rect.top + (1 - p.y) / 2 * rect.height };
  },
  targetPosition: () => xyz(target.position),
  bodySize: () => bodySize,
  markersShown: () => markers.children.filter((m) => m.visible).length,
  // A retarget's source figure beside the target: its joints in the view's
  // space (scaled and placed), or null.
  sourceJointPositions: () => {
    const s = state.source;
    if (!s) return null;
    s.fig.group.updateMatrixWorld(true);
    return s.fig.joints.map((m) => xyz(m.getWorldPosition(new THREE.Vector3())));
  },
  jointPositions: () => state.skeleton ? globals(state.skeleton, state.pose).map((m) => xyz(positionOf(m))) : [],
};
