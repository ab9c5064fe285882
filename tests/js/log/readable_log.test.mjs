// Log lines on a terminal: `layerfold serve` under a pseudo-terminal (script(1)) writes readable
// lines (time, severity, message, key=value fields), redacted as its JSON lines are; the same
// command with its output piped writes JSON lines.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import {test} from "node:test";

import {readableLine} from "../../../js-glue/src/log/readable_log.js";
import {model} from "../support/models.mjs";
import {cli} from "../support/server_process.mjs";

test("a readable line: time, severity, message, then each field as key=value, quoted when it must be", () => {
  assert.equal(readableLine("2026-01-02T03:04:05.678Z", "INFO", "request", {method: "POST", route: "/v1/embed", status: 200, ms: 1.5, gone: undefined}),
    "2026-01-02T03:04:05.678Z INFO    request method=POST route=/v1/embed status=200 ms=1.5\n");
  assert.equal(readableLine("t", "WARNING", "x", {error: "a b", empty: "", nested: {layers: [0, 1]}, eq: "a=b"}),
    't WARNING x error="a b" empty="" nested={"layers":[0,1]} eq="a=b"\n');
});

// `serve` for two seconds, then SIGTERM: what it wrote, through a pseudo-terminal (script(1)) or a pipe.
// The shell stays a moment after serve has exited: script(1) may stop reading the terminal as soon
// as its command ends, losing serve's last lines.
function serveBriefly(viaTerminal) {
  const serve = `timeout -s TERM 2 "${process.execPath}" "${cli}" serve --model "${model("tiny", "tiny", ["--type", "Q4_0"])}" --host 127.0.0.1 --port 0 --threads 1; ` +
    "status=$?; sleep 0.5; exit $status";
  const env = {...process.env, AUTH_TOKEN: "hunter2"};
  const r = viaTerminal
    ? spawnSync("script", ["-qec", serve, "/dev/null"], {encoding: "utf8", timeout: 60_000, env})
    : spawnSync("sh", ["-c", serve], {encoding: "utf8", timeout: 60_000, env});
  assert.equal(r.status, 124, `timeout(1) ends it: ${r.stdout}${r.stderr}`);
  assert.doesNotMatch(r.stdout, /hunter2/);
  return r.stdout.split(/\r?\n/).filter((line) => line !== "");
}

test("serve on a terminal writes readable lines; piped, JSON lines", () => {
  const readable = serveBriefly(true);
  const listening = readable.find((line) => / listening /.test(line));
  assert.match(listening ?? "", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO    listening host=127\.0\.0\.1 port=\d+$/, readable.join("\n"));
  assert.match(readable.find((line) => / starting /.test(line)) ?? "", /authToken.*\[redacted\]/);
  assert.match(readable.at(-1), /Z INFO    stopped abandoned=0$/);
  assert.ok(readable.every((line) => !line.startsWith("{")), readable.join("\n"));

  const piped = serveBriefly(false).map((line) => JSON.parse(line));
  assert.ok(piped.some((entry) => entry.message === "listening" && entry.host === "127.0.0.1" && entry.severity === "INFO"));
  assert.ok(piped.some((entry) => entry.message === "stopped"));
});
