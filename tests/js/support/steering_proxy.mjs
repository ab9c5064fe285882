// A proxy in front of the `layerfold serve` node that holds the LM head, for agent-loop tests
// that need the real engine to write a given text (a tool call, then an answer) that random
// weights never would: every request passes through to the node, which computes as usual, and
// each POST /v1/logits answer gets the next token of a script raised above the row's largest
// logit, as a logit_bias that moves with the position would. Between scripts (before a script is
// set, after it ran out) the node's logits pass unchanged.
import {passOn, startNodeProxy} from "./node_proxy.mjs";

/**
 * {url, steer(ids), steered}: steer(ids) makes the next ids.length logits answers pick ids in
 * order; steered counts the rows raised. `t.after` closes it.
 * @example const proxy = await startSteeringProxy(t, server.url); proxy.steer(tokenizer.encode(text, {addBos: false, parseSpecial: true}));
 */
export async function startSteeringProxy(t, target) {
  let script = [];
  const state = {steered: 0};
  const url = await startNodeProxy(t, target, async (req, res, forward) => {
    const answer = await forward();
    if (req.url.startsWith("/v1/logits") && answer.upstream.ok && script.length > 0) steerRow(answer.body, script.shift(), state);
    passOn(res, answer);
  });
  return {
    url,
    steer(ids) { script = [...ids]; },
    get steered() { return state.steered; },
  };
}

// The answer is one row of n_vocab little-endian floats per position asked; the gateway asks
// for the last position only, so its one row is the row steered.
function steerRow(body, id, state) {
  const row = new Float32Array(body.buffer, body.byteOffset, body.length / 4);
  if (id >= row.length) throw new Error(`steered token ${id} is outside the row of ${row.length} logits`);
  row[id] = row.reduce((max, x) => Math.max(max, x), -Infinity) + 10;
  state.steered++;
}
