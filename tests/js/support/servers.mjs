// Real servers on loopback for the tests and benchmarks: nginx with a generated config, whose
// access log records every request's range and body bytes.
import {spawn} from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, "127.0.0.1", () => {
      const {port} = server.address();
      server.close(() => resolve(port));
    }).on("error", reject);
  });
}

export async function waitForPort(port) {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise((resolve) => {
      const socket = net.connect(port, "127.0.0.1", () => { socket.end(); resolve(true); }).on("error", () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listening on 127.0.0.1:${port}`);
}

// nginx with a generated config; the access log records every request's range and body bytes.
// Its worker runs as the user running the tests: started by root, nginx would otherwise hand the
// worker to nobody, which cannot read a tree under a private folder (a checkout in /root, mode
// 0700) and answers 403 for every file in it.
export async function startNginx(root, tmp = os.tmpdir()) {
  const dir = fs.mkdtempSync(path.join(tmp, "lf-nginx-"));
  const port = await freePort();
  const log = path.join(dir, "access.log");
  fs.writeFileSync(path.join(dir, "nginx.conf"), `
daemon off;
${process.getuid?.() === 0 ? "user root root;" : ""}
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 64; }
http {
  log_format counted '$request_method $http_range $status $body_bytes_sent';
  access_log ${log} counted;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  server { listen 127.0.0.1:${port}; root ${root}; }
}`);
  const child = spawn("nginx", ["-p", dir, "-c", path.join(dir, "nginx.conf"), "-e", path.join(dir, "error.log")], {stdio: "ignore"});
  child.on("exit", (code) => { if (code) console.error(fs.readFileSync(path.join(dir, "error.log"), "utf8")); });
  await waitForPort(port);
  const entries = () => (fs.existsSync(log) ? fs.readFileSync(log, "utf8").trim().split("\n").filter(Boolean) : [])
    .map((line) => { const p = line.split(" "); return {method: p[0], status: Number(p[p.length - 2]), bytes: Number(p[p.length - 1])}; });
  return {
    url: `http://127.0.0.1:${port}`,
    entries,
    stop: () => new Promise((resolve) => { child.once("exit", resolve); child.kill("SIGQUIT"); }),
  };
}
