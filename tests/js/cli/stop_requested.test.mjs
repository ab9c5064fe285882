// js-glue/src/cli/stop_requested.js as a user meets it: `npx layerfold gateway` and `npx layerfold
// serve` run node under npm's wrapper (npm, then a shell, then node); a SIGTERM sent to npm's own
// PID, as a process manager or `kill $!` sends it, must stop the server and free its port.
import assert from "node:assert/strict";
import net from "node:net";
import path from "node:path";
import {test} from "node:test";

import {tiny} from "../support/gateway_fixture.mjs";
import {root} from "../support/models.mjs";
import {startServer} from "../support/server_process.mjs";
import {sleep, until} from "../support/wait.mjs";

// The installed bin or nothing, never a download.
const npx = {command: "npx", cwd: path.join(root, "js-glue"), group: true, env: {npm_config_yes: "false"}};

// Whether something accepts connections on the port.
const listening = (port) => new Promise((resolve) => {
  const socket = net.connect(port, "127.0.0.1");
  socket.once("connect", () => { socket.destroy(); resolve(true); });
  socket.once("error", () => resolve(false));
});

for (const [command, args] of [
  ["gateway", ["--nodes", "local:0-1", "--build", "single"]],
  ["serve", ["--layers", "0-1", "--threads", "1"]],
]) {
  test(`npx layerfold ${command}: SIGTERM to npm's PID drains and stops the server, its port free`, async (t) => {
    const server = await startServer(t, {...npx, argv: ["layerfold", command, "--model", tiny(), "--host", "127.0.0.1", "--port", "0", ...args]});
    const port = Number(new URL(server.url).port);
    await until(() => server.logs.some((l) => l.message === "ready"), `${command} to be ready`, 60_000);
    assert.equal(await listening(port), true);
    process.kill(server.child.pid, "SIGTERM");
    await until(() => server.logs.some((l) => l.message === "stopped"), `${command} to drain and stop: ${server.stderr()}`, 15_000);
    const deadline = Date.now() + 5000;
    while (await listening(port)) {
      assert.ok(Date.now() < deadline, `port ${port} still taken after the server stopped`);
      await sleep(50);
    }
  });
}
