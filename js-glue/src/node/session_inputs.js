// What a forward call sets on its session before its step runs (its approximate modes and the
// early-exit state its last row arrives in, its per-layer inputs, the K/V rows of the source
// layers the node mirrors, whether its rows are a media span), and the K/V rows a finished
// forward hands out, read back.
import { engineApprox } from '../protocol/approx_options.js';
import { callWithJson, withCopies } from '../wasm/wasm_copies.js';

// The engine checks the options, and refuses a bad one naming it.
function setApprox(lf, handle, approx, exitState) {
  callWithJson(lf, lf.fn.lf_session_set_approx, handle, engineApprox(approx));
  if (exitState) {
    const { exit_layer, recent_updates } = exitState;
    callWithJson(lf, lf.fn.lf_session_set_exit_state, handle, { exit_layer, recent_updates });
  }
}

function setPerLayer(lf, handle, perLayer) {
  const values = perLayer ?? new Float32Array(0);
  withCopies(lf, [values], ([ptr]) => {
    if (!lf.fn.lf_session_set_per_layer_inputs(handle, ptr, values.length)) throw lf.lastError();
  });
}

/**
 * The call's K/V rows for the session `handle`: those of the kvRowsIn layers ([{layer}]),
 * nothing else (a layer missing is the engine's to refuse, naming it).
 * @example setKvRows(lf, handle, node.kvRowsIn, { 13: rows }, 0, 5);
 */
export function setKvRows(lf, handle, kvRowsIn, kvRows, startPos, n) {
  lf.fn.lf_session_clear_kv_rows(handle);
  for (const { layer } of kvRowsIn) {
    const bytes = kvRows?.[layer];
    if (!bytes) continue;
    withCopies(lf, [bytes], ([ptr]) => {
      if (!lf.fn.lf_session_set_kv_rows(handle, layer, startPos, n, ptr, bytes.byteLength)) throw lf.lastError();
    });
  }
}

/**
 * Sets a forward call's inputs (LayerNode.forward's approx, exitState, perLayer, kvRows, span) on
 * the session `handle`, whose every earlier setting they replace; throws the engine's refusal.
 * @example setCallInputs(lf, handle, call, node.kvRowsIn);
 */
export function setCallInputs(lf, handle, { startPos, rows, approx, exitState, perLayer, kvRows, span }, kvRowsIn) {
  setApprox(lf, handle, approx, exitState);
  lf.fn.lf_session_set_span(handle, span ? 1 : 0);
  setPerLayer(lf, handle, perLayer);
  setKvRows(lf, handle, kvRowsIn, kvRows, startPos, rows);
}

/**
 * What a finished forward of the session handed out of the kvRowsOut layers, copied out of
 * WASM memory: { [layer]: Uint8Array } (the rows in the cache's types, protocol/kv_rows.js).
 * @example const rows = readKvRows(lf, handle, node.kvRowsOut);
 */
export function readKvRows(lf, handle, kvRowsOut) {
  const rows = {};
  for (const { layer } of kvRowsOut) {
    const count = lf.fn.lf_session_kv_rows_bytes(handle, layer);
    if (count < 0) throw lf.lastError();
    const ptr = lf.fn.lf_session_kv_rows(handle, layer);
    rows[layer] = lf.bytes().slice(ptr, ptr + count);
  }
  return rows;
}
