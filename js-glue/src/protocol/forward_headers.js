// A forward's headers (docs/http-api.md): in the request the early-exit state its last row
// arrives in (x-layerfold-exit-state), in the answer the milliseconds each of the node's layers
// took (x-layerfold-layer-ms) and what the approximate modes did (x-layerfold-approx).
import { LayerfoldError } from '../wasm/capi.js';

export const EXIT_STATE = 'x-layerfold-exit-state';
export const LAYER_MS = 'x-layerfold-layer-ms';
export const APPROX_STATS = 'x-layerfold-approx';

/**
 * The exit state (the previous node's approxStats().early_exit) as its header, its two fields only.
 * @example encodeExitState({ exit_layer: -1, recent_updates: [0.2], layers_skipped: 0 }) // '{"exit_layer":-1,"recent_updates":[0.2]}'
 */
export function encodeExitState({ exit_layer, recent_updates }) {
  return JSON.stringify({ exit_layer, recent_updates });
}

/**
 * The other way: null when absent. Each field is checked for its type here (exit_layer an
 * integer ≥ -1, recent_updates an array of finite numbers ≥ 0) and any other key refused, since
 * only these two reach the engine; the engine checks the array's length against its exit window
 * before any session is touched. A refusal is 'invalid_argument' naming the header.
 * @example decodeExitState('{"exit_layer":-1,"recent_updates":[0.2]}') // { exit_layer: -1, recent_updates: [0.2] }
 */
export function decodeExitState(raw) {
  if (raw === undefined || raw === null) return null;
  let state = null;
  try {
    state = raw.length <= 4096 ? JSON.parse(raw) : null;
  } catch {
    state = null;
  }
  const bad = (why) => new LayerfoldError('invalid_argument', `${EXIT_STATE} ${JSON.stringify(raw.slice(0, 80))}: ${why}`);
  if (state === null || typeof state !== 'object' || Array.isArray(state) ||
      Object.keys(state).some((key) => key !== 'exit_layer' && key !== 'recent_updates')) {
    throw bad('expected a JSON object {"exit_layer", "recent_updates"}');
  }
  if ('exit_layer' in state && !(Number.isSafeInteger(state.exit_layer) && state.exit_layer >= -1)) {
    throw bad('exit_layer must be an integer ≥ -1 (-1: not exited)');
  }
  if ('recent_updates' in state && !(Array.isArray(state.recent_updates) &&
      state.recent_updates.every((x) => typeof x === 'number' && Number.isFinite(x) && x >= 0 && x <= 3.4e38))) {
    throw bad('recent_updates must be an array of finite numbers ≥ 0');
  }
  return state;
}

/**
 * A forward's per-layer milliseconds as their header: comma-separated, to the microsecond.
 * @example encodeLayerMs([1.25, 0.5]) // '1.250,0.500'
 */
export function encodeLayerMs(layerMs) {
  return layerMs.map((ms) => ms.toFixed(3)).join(',');
}

/**
 * The other way: absent or empty is none.
 * @example decodeLayerMs('1.250,0.500') // [1.25, 0.5]
 */
export function decodeLayerMs(raw) {
  return raw ? raw.split(',').map(Number) : [];
}

/**
 * What the approximate modes did (LayerNode.approxStats) as its header.
 * @example encodeApproxStats(node.approxStats('s'))
 */
export function encodeApproxStats(stats) {
  return JSON.stringify(stats);
}

/**
 * The other way: null when absent; a header that is not JSON is a 'bad_response' naming `what`.
 * @example decodeApproxStats(response.headers.get(APPROX_STATS), 'POST /v1/sessions/{id}/forward')
 */
export function decodeApproxStats(raw, what) {
  if (raw === undefined || raw === null) return null;
  try {
    return JSON.parse(raw);
  } catch (error) {
    throw new LayerfoldError('bad_response', `${what}: ${APPROX_STATS} is not JSON (${error.message})`);
  }
}
