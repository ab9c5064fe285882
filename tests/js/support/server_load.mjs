// Load on one layer-node server with autocannon: every request a fresh session's forward at
// start_pos 0 of the same hidden states, so every 200 must carry exactly the same bytes; the
// only other answer allowed is the bounded queue's deliberate 429. Shared by the load test and
// scripts/bench-server.
import {createRequire} from "node:module";
import path from "node:path";

import {root} from "./models.mjs";

// autocannon is one of js-glue's dev dependencies.
const autocannon = createRequire(path.join(root, "js-glue", "package.json"))("autocannon");

/**
 * Runs autocannon for `seconds` with `connections` concurrent clients.
 * Returns {ok, refused, wrong, wrongExamples, refusedWithoutRetryAfter, requestsPerSecond, latency}
 * with latency percentiles in ms over all responses.
 * @example const r = await loadServer({url, token, hidden, expected, connections: 16, seconds: 3});
 */
export async function loadServer({url, token, hidden, expected, connections, seconds}) {
  // autocannon hands bodies over as strings decoded as UTF-8 chunk by chunk: compare against the
  // expected bytes decoded the same way (a small body arrives as one chunk on loopback).
  const expectedText = expected.toString();
  const counts = {ok: 0, refused: 0, wrong: 0, refusedWithoutRetryAfter: 0};
  const wrongExamples = [];
  let next = 0;
  const prefix = `load-${process.pid}-${Date.now()}`;
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    requests: [{
      method: "POST",
      headers: {"content-type": "application/octet-stream", authorization: `Bearer ${token}`},
      body: Buffer.from(hidden.buffer, hidden.byteOffset, hidden.byteLength),
      setupRequest: (request) => ({...request, path: `/v1/sessions/${prefix}-${next++}/forward?start_pos=0`}),
      onResponse: (status, body, context, headers) => {
        const header = (name) => Object.entries(headers).find(([k]) => k.toLowerCase() === name)?.[1];
        if (status === 200 && body === expectedText) counts.ok++;
        else if (status === 429 && JSON.parse(body).error.code === "queue_full") {
          counts.refused++;
          if (!(Number(header("retry-after")) >= 1)) counts.refusedWithoutRetryAfter++;
        } else {
          counts.wrong++;
          if (wrongExamples.length < 3) wrongExamples.push({status, body: body.slice(0, 200)});
        }
      },
    }],
  });
  const l = result.latency;
  return {
    ...counts,
    wrongExamples,
    errors: result.errors,
    timeouts: result.timeouts,
    requestsPerSecond: result.requests.average,
    total: result.requests.total,
    latency: {p50: l.p50, p90: l.p90, p99: l.p99, max: l.max, mean: l.mean},
  };
}
