// The container, as far as it can be checked without Docker: the Dockerfile lints clean and has
// the shape Cloud Run needs, its exact ENTRYPOINT with its ENV serves a node outside Docker, and
// the pipeline deployment script is shell-clean and renders one service per planned node.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {model, root} from "../support/models.mjs";
import {bytesOf, forward, startServer, waitReady} from "../support/server_process.mjs";

const require = createRequire(path.join(root, "js-glue", "package.json"));
const {validate} = require("dockerfile-utils");
const {DockerfileParser} = require("dockerfile-ast");

const dockerfile = fs.readFileSync(path.join(root, "container", "Dockerfile"), "utf8");
const TOKEN = "container-token-9";

// The runtime (last) stage's instructions as [keyword, instruction].
function runtimeStage() {
  const instructions = DockerfileParser.parse(dockerfile).getInstructions();
  const lastFrom = instructions.findLastIndex((i) => i.getKeyword() === "FROM");
  return instructions.slice(lastFrom).map((i) => [i.getKeyword(), i]);
}

describe("container", () => {
  test("the Dockerfile lints clean: multi-stage, Node 24 slim runtime as a non-root user, no HEALTHCHECK", () => {
    assert.deepEqual(validate(dockerfile).map((d) => `${d.range.start.line + 1}: ${d.message}`), []);
    const froms = DockerfileParser.parse(dockerfile).getFROMs();
    assert.equal(froms.length, 2);
    assert.match(froms[0].getImage(), /^debian:bookworm/);
    assert.equal(froms[1].getImage(), "node:24-bookworm-slim");
    const stage = runtimeStage();
    const users = stage.filter(([k]) => k === "USER").map(([, i]) => i.getArgumentsContent());
    assert.equal(users.length, 1);
    assert.notEqual(users[0], "root");
    assert.equal(stage.some(([k]) => k === "HEALTHCHECK"), false);
    assert.ok(stage.some(([k, i]) => k === "RUN" && /npm ci --omit=dev/.test(i.getArgumentsContent())));
  });

  test("everything the Dockerfile copies exists and passes its .dockerignore", () => {
    const ignore = fs.readFileSync(path.join(root, "container", "Dockerfile.dockerignore"), "utf8");
    const kept = ignore.split("\n").filter((l) => l.startsWith("!")).map((l) => l.slice(1));
    const sources = DockerfileParser.parse(dockerfile).getInstructions()
      .filter((i) => i.getKeyword() === "COPY" && !i.getFlags().some((f) => f.getName() === "from"))
      .flatMap((i) => i.getArguments().slice(0, -1).map((a) => a.getValue()));
    assert.ok(sources.length >= 5);
    for (const source of sources) {
      assert.ok(fs.existsSync(path.join(root, source)), `${source} does not exist`);
      assert.ok(kept.includes(source), `${source} is excluded by Dockerfile.dockerignore`);
    }
  });

  test("the ENTRYPOINT with the image's ENV serves a layer node outside Docker", async (t) => {
    const stage = runtimeStage();
    const entrypoint = stage.find(([k]) => k === "ENTRYPOINT")[1].getJSONStrings().map((s) => s.getJSONValue());
    assert.deepEqual(entrypoint, ["node", "js-glue/bin/layerfold.js", "serve"]);
    const imageEnv = Object.fromEntries(stage.filter(([k]) => k === "ENV").flatMap(([, i]) => i.getProperties().map((p) => [p.getName(), p.getValue()])));
    assert.equal(imageEnv.PORT, "8080");
    const file = model("tiny", "tiny", ["--type", "Q4_0"]);
    // As Cloud Run runs it: the image's ENV, then the service's (PORT 0 and loopback here).
    const server = await startServer(t, {
      argv: entrypoint.slice(1),  // after "node", this very node
      env: {...imageEnv, PORT: "0", HOST: "127.0.0.1", MODEL_URL: file, LAYERS: "0-1", THREADS: "1", AUTH_TOKEN: TOKEN},
    });
    await waitReady(server.url);
    const reference = await LayerNode.open({model: file, threads: 1});
    t.after(() => reference.close());
    const hidden = reference.embed([2, 5, 9]);
    const r = await forward(server.url, {session: "c", startPos: 0, hidden, lastOnly: true, token: TOKEN});
    assert.equal(r.status, 200, JSON.stringify(r.error));
    assert.ok(r.bytes.equals(bytesOf(await reference.forward({session: "c", startPos: 0, hidden, lastOnly: true}))));
    const started = server.logs.find((l) => l.message === "starting");
    assert.equal(started.config.authToken, "[redacted]");
    assert.deepEqual(started.config.layers, [0, 2]);
    assert.deepEqual(await server.stop(), {code: 0, signal: null});
  });

  test("deploy-pipeline.sh is shell-clean and renders one service per planned node", () => {
    const script = path.join(root, "container", "cloudrun", "deploy-pipeline.sh");
    assert.equal(spawnSync("bash", ["-n", script]).status, 0);
    const shellcheck = spawnSync("shellcheck", [script], {encoding: "utf8"});
    if (shellcheck.error?.code !== "ENOENT") assert.equal(shellcheck.status, 0, shellcheck.stdout);
    const out = fs.mkdtempSync(path.join(os.tmpdir(), "lf-deploy-"));
    try {
      const deploy = (env) => spawnSync(script, [], {
        encoding: "utf8",
        env: {...process.env, DRY_RUN: "1", IMAGE: "registry.example/layerfold-node:test", MODEL_URL: "r2://models/tiny.gguf",
          PLAN_MODEL: model("tiny-gemma3", "tiny-gemma3"), NODES: "3", OUT_DIR: out, R2_ENDPOINT: "https://acct.r2.example", ...env},
      });
      const r = deploy({});
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stderr, "");
      const rendered = [0, 1, 2].map((i) => fs.readFileSync(path.join(out, `layerfold-node-${i}.yaml`), "utf8"));
      assert.deepEqual(rendered.map((y) => /name: LAYERS\n\s+value: "([^"]+)"/.exec(y)[1]), ["0-0", "1-1", "2-2"]);
      for (const y of rendered) {
        assert.doesNotMatch(y, /\$\{/);
        assert.match(y, /image: registry\.example\/layerfold-node:test/);
        assert.match(y, /path: \/readyz/);
        assert.match(y, /name: AUTH_TOKEN\n\s+valueFrom:\n\s+secretKeyRef:/);
        assert.match(y, /name: R2_ENDPOINT\n\s+value: "https:\/\/acct\.r2\.example"/);
      }
      // No endpoint for an r2:// model: the dry run warns, a real deployment refuses before gcloud.
      const dry = deploy({R2_ENDPOINT: ""});
      assert.equal(dry.status, 0, dry.stderr);
      assert.match(dry.stderr, /^deploy-pipeline: warning: R2_ENDPOINT is empty/);
      // A gcloud first on PATH that only says it was called: this machine's must never run here.
      const bin = fs.mkdtempSync(path.join(os.tmpdir(), "lf-gcloud-"));
      fs.writeFileSync(path.join(bin, "gcloud"), "#!/bin/sh\necho 'gcloud was called' >&2\nexit 99\n", {mode: 0o755});
      const real = deploy({R2_ENDPOINT: "", DRY_RUN: "0", REGION: "europe-west4", PATH: `${bin}:${process.env.PATH}`});
      fs.rmSync(bin, {recursive: true, force: true});
      assert.equal(real.status, 1);
      assert.match(real.stderr, /^deploy-pipeline: R2_ENDPOINT is empty: the nodes could not read r2:\/\/models\/tiny\.gguf/);
    } finally {
      fs.rmSync(out, {recursive: true, force: true});
    }
  });
});
