// Opens a .glb that `reach retarget --out OUT.glb` wrote with three.js'
// GLTFLoader (viewer/node_modules: the three.js the viewer embeds) under
// Node, plays its animation with an AnimationMixer at the frames the C++
// side chose, and checks every joint's world position against the ones it
// computed (tests/client/cli_test.cc writes them):
//
//   node gltf_animation_check.mjs --glb OUT.glb --expected EXPECTED.json \
//       [--original TARGET.glb]
//
// With --original, Khronos' glTF validator (gltf-validator, from npm) must
// find no error or warning in OUT.glb that it does not find in the target
// file it was copied from (real rigs have their own: unnormalised weights,
// a skinned mesh under a transformed node).
// EXPECTED.json: {"animation": NAME, "frameTime": S, "height": H,
//   "frames": [{"frame": F, "fraction": A, "joints": [{"node": N,
//   "name": S, "position": [x, y, z]}, ...]}, ...]}
// A frame is sampled at the clip's key F, or the fraction A (0 to 1) of the
// way from key F to key F + 1.
// Positions are in the scene's frame (the file's own, every ancestor of a
// joint applied). Exits 0 when every position is within --tolerance
// (default 1e-5) of the height, 1 otherwise; prints the worst.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const three = path.join(here, '..', 'node_modules', 'three');
const THREE = await import(path.join(three, 'build', 'three.module.js'));
const { GLTFLoader } = await import(
  path.join(three, 'examples', 'jsm', 'loaders', 'GLTFLoader.js'));

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) {
    if (fallback !== undefined) return fallback;
    console.error(`usage: gltf_animation_check.mjs --glb FILE --expected FILE`);
    process.exit(2);
  }
  return process.argv[i + 1];
}

const glbPath = arg('--glb');
const expected = JSON.parse(fs.readFileSync(arg('--expected'), 'utf8'));
const tolerance = Number(arg('--tolerance', '1e-5'));

const bytes = fs.readFileSync(glbPath);

const originalPath = arg('--original', '');
if (originalPath) {
  const validator = (await import('gltf-validator')).default;
  // Errors (0) and warnings (1) by code and JSON pointer.
  const issues = async (file) => {
    const report = await validator.validateBytes(
      new Uint8Array(fs.readFileSync(file)), { maxIssues: 0 });
    return report.issues.messages.filter((m) => m.severity <= 1)
        .map((m) => `${m.code} ${m.pointer ?? ''}: ${m.message}`);
  };
  const before = new Set(await issues(originalPath));
  const after = await issues(glbPath);
  const added = after.filter((m) => !before.has(m));
  console.log(`gltf-validator: ${after.length} errors and warnings in ` +
              `${path.basename(glbPath)}, ${before.size} in ` +
              `${path.basename(originalPath)}, ${added.length} new`);
  if (added.length > 0) {
    console.error(added.slice(0, 20).join('\n'));
    process.exit(1);
  }
}
const data = bytes.buffer.slice(bytes.byteOffset,
                                bytes.byteOffset + bytes.byteLength);
const gltf = await new Promise((resolve, reject) =>
  new GLTFLoader().parse(data, '', resolve, reject));

const clip = gltf.animations.find((a) => a.name === expected.animation);
if (!clip) {
  console.error(`no animation '${expected.animation}' in ${glbPath}; it has ` +
                gltf.animations.map((a) => `'${a.name}'`).join(', '));
  process.exit(1);
}
// The scene's object of each node index.
const byNode = new Map();
gltf.scene.traverse((object) => {
  const association = gltf.parser.associations.get(object);
  if (association && association.nodes !== undefined) {
    byNode.set(association.nodes, object);
  }
});

const mixer = new THREE.AnimationMixer(gltf.scene);
const action = mixer.clipAction(clip);
action.setLoop(THREE.LoopOnce, 1);
action.clampWhenFinished = true;
action.play();

let worst = 0;
let worstAt = '';
let checked = 0;
const keyTimes = clip.tracks[0].times;
const position = new THREE.Vector3();
for (const frame of expected.frames) {
  // The clip's own key for the frame: its time is frame * frameTime,
  // stored as a float.
  const key = keyTimes[frame.frame];
  if (Math.abs(key - frame.frame * expected.frameTime) > 1e-5) {
    console.error(`frame ${frame.frame}: key time ${key}, not ` +
                  `${frame.frame * expected.frameTime}`);
    process.exit(1);
  }
  const fraction = frame.fraction ?? 0;
  const time = fraction === 0
      ? key : key + fraction * (keyTimes[frame.frame + 1] - key);
  mixer.setTime(time);
  gltf.scene.updateMatrixWorld(true);
  for (const joint of frame.joints) {
    const object = byNode.get(joint.node);
    if (!object) {
      console.error(`node ${joint.node} ('${joint.name}') is not in the scene`);
      process.exit(1);
    }
    if (!object.isBone) {
      console.error(`node ${joint.node} ('${joint.name}') is not a bone`);
      process.exit(1);
    }
    object.getWorldPosition(position);
    const error = position.distanceTo(new THREE.Vector3(...joint.position)) /
                  expected.height;
    ++checked;
    if (error > worst) {
      worst = error;
      worstAt = `frame ${frame.frame + fraction} (t=${time.toFixed(6)} s) ` +
                `'${joint.name}'`;
    }
  }
}
console.log(`${path.basename(glbPath)}: animation '${clip.name}' ` +
            `(${clip.tracks.length} tracks, ${clip.duration.toFixed(4)} s): ` +
            `${checked} joint positions at ${expected.frames.length} frames, ` +
            `worst ${worst.toExponential(3)} of the height` +
            (worstAt ? ` at ${worstAt}` : ''));
if (!(worst <= tolerance) || checked === 0) {
  console.error(`over the tolerance ${tolerance}`);
  process.exit(1);
}
