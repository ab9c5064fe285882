// A gateway in this process for the media tests (images, audio, encoder nodes): the single-thread
// module, model id "g", on a free loopback port, shut down after the test; and one greedy chat
// request to it.
import {serveGateway} from "../../../js-glue/src/gateway/host.js";

/**
 * serveGateway with `options` (model, nodes, images, ...), opened.
 * @example const gw = await mediaGateway(t, {model: gemma4(), nodes: "local:0-1", images: {mmproj}});
 */
export async function mediaGateway(t, options) {
  const gw = await serveGateway({modelId: "g", port: 0, host: "127.0.0.1", build: "single", log: () => {}, ...options});
  t.after(() => gw.shutdown());
  await gw.opened;
  return gw;
}

/**
 * POST /v1/chat/completions of `messages` (8 tokens, temperature 0, `extra` added) -> {status, body}.
 * @example const r = await mediaChat(gw, [{role: "user", content: "hi"}]);
 */
export async function mediaChat(gw, messages, extra = {}) {
  const response = await fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST", headers: {"content-type": "application/json"},
    body: JSON.stringify({model: "g", messages, max_tokens: 8, temperature: 0, ...extra}),
  });
  return {status: response.status, body: await response.json()};
}
