// The CLI's load bars on a terminal: one per node, each measuring that node's own bytes, so on
// a load split over three nodes every bar reaches 100% and none goes past it.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import path from "node:path";
import {test} from "node:test";

import {model, root} from "../support/models.mjs";

const cli = path.join(root, "js-glue", "bin", "layerfold.js");

test("validate over three local nodes under a terminal: each node's bar reaches 100%, none above", () => {
  const file = model("small-q8", "small", ["--type", "Q8_0"]);
  // file:// so that no llama.cpp comparison runs; script(1) gives the CLI a pseudo-terminal.
  const command = `"${process.execPath}" "${cli}" validate --model "file://${file}" --nodes local:0-1,local:2-3,local:4-5 --build single`;
  const r = spawnSync("script", ["-qec", command, "/dev/null"], {encoding: "utf8", timeout: 120_000});
  assert.equal(r.status, 0, r.stdout);
  const frames = [...r.stdout.matchAll(/node (\d) \|[^|]*\| *(\d+)%/g)].map((m) => ({node: Number(m[1]), percent: Number(m[2])}));
  for (const node of [0, 1, 2]) {
    const percents = frames.filter((f) => f.node === node).map((f) => f.percent);
    assert.ok(percents.length > 0, `no bar for node ${node} in\n${r.stdout}`);
    assert.equal(Math.max(...percents), 100, `node ${node}'s bar stopped at ${Math.max(...percents)}%`);
  }
  assert.ok(frames.every((f) => f.percent <= 100), JSON.stringify(frames));
});
