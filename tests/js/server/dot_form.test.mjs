// `layerfold serve --dot-form` (or DOT_FORM): the relaxed kernels' form of the Q4_0 dot product
// forced, said in the ready line; unforced, timed at load and said too; a form the loaded module
// does not have, or a form it does not know, refused by name.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import {describe, test} from "node:test";

import {relaxedSimdSupported} from "../../../js-glue/src/wasm/features.js";
import {serveConfigOf} from "../support/cli_config.mjs";
import {model, root} from "../support/models.mjs";
import {cli, startServer, waitReady} from "../support/server_process.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const readyLine = (server) => server.logs.find((entry) => entry.message === "ready");

describe("serve's dot form", () => {
  test("the flag and DOT_FORM set it, the flag first; unset, the load times it", () => {
    assert.equal(serveConfigOf({model: "m"}, {DOT_FORM: "pairs"}).dotForm, "pairs");
    assert.equal(serveConfigOf({model: "m", "dot-form": "dot-add"}, {DOT_FORM: "pairs"}).dotForm, "dot-add");
    assert.equal(serveConfigOf({model: "m"}, {}).dotForm, undefined);
    assert.throws(() => serveConfigOf({model: "m"}, {DOT_FORM: "vnni"}), /DOT_FORM must be one of dot-add, pairs, got "vnni"/);
  });

  if (relaxedSimdSupported()) {
    test("forced: the ready line names the form and that the caller chose it", async (t) => {
      const server = await startServer(t, {args: ["--model", tiny(), "--dot-form", "pairs"]});
      await waitReady(server.url);
      assert.equal(readyLine(server).dotForm, "the pairs form, as the caller chose (dotForm option)");
    });
  } else {
    test("forced on a module without relaxed kernels: the load fails naming why", () => {
      const r = spawnSync(process.execPath, [cli, "serve", "--model", tiny(), "--port", "0", "--host", "127.0.0.1", "--dot-form", "pairs"],
        {cwd: root, encoding: "utf8", timeout: 60_000});
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stdout + r.stderr, /the dot form \\"?pairs\\"? names a relaxed kernel; this module runs wasm-simd128/);
    });
  }

  test("unforced: the ready line gives the module's own account", async (t) => {
    const server = await startServer(t, {args: ["--model", tiny()]});
    await waitReady(server.url);
    const {dotForm} = readyLine(server);
    if (relaxedSimdSupported()) assert.match(dotForm, /^the (dot-add|pairs) form: [0-9.]+ ms for pairs against [0-9.]+ ms for dot-add/);
    else assert.equal(dotForm, "this module runs no relaxed kernels: no dot form to choose");
  });
});
