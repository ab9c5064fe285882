// `layerfold serve --cache-type-k/--cache-type-v` (or CACHE_TYPE_K / CACHE_TYPE_V): the node
// holds its KV cache in those types and says so in GET /v1/info; a type it does not have is
// refused at start by name.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import {describe, test} from "node:test";

import {model, root} from "../support/models.mjs";
import {cli, startServer, waitReady} from "../support/server_process.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);

describe("serve's cache types", () => {
  test("a flag and a variable choose them; /v1/info reports them", async (t) => {
    const server = await startServer(t, {args: ["--model", tiny(), "--cache-type-k", "q8_0"], env: {CACHE_TYPE_V: "q4_0"}});
    await waitReady(server.url);
    const info = await (await fetch(`${server.url}/v1/info`)).json();
    assert.equal(info.cache_type_k, "q8_0");
    assert.equal(info.cache_type_v, "q4_0");
  });

  test("an unknown type is refused at start, by name", () => {
    const r = spawnSync(process.execPath, [cli, "serve", "--model", tiny(), "--port", "0", "--host", "127.0.0.1", "--cache-type-v", "q5_1"],
      {cwd: root, encoding: "utf8", timeout: 30_000});
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--cache-type-v must be one of f16, q8_0, q4_0, got "q5_1"/);
  });
});
