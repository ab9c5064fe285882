// A local stand-in for the Hugging Face hub, on two loopback ports as the real one is on two
// hosts: the hub answers /OWNER/REPO/resolve/REVISION/FILE (HEAD or GET) with the file's commit
// (X-Repo-Commit), ETag and X-Linked-Etag (its sha256), X-Linked-Size and a 302 to the CDN with a
// signed-looking query, checking the bearer token when it has one; the CDN serves the blob by
// range with its own ETag, honoring If-Match and If-Range. Tests change a file (a new commit),
// expire the CDN's signatures, break a transfer partway or hold one open, and read every request
// each host saw.
import crypto from "node:crypto";
import http from "node:http";

const sha256 = (bytes) => crypto.createHash("sha256").update(bytes).digest("hex");
const commitOf = (text) => crypto.createHash("sha1").update(text).digest("hex");

function listen(server) {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${server.address().port}`)));
}

/**
 * Starts the two hosts. token: the bearer token the hub wants (none: a public repository).
 * -> {hub, cdn (their base URLs), publish(path, bytes) -> {commit, sha256}, state, close()};
 * state.hubRequests / cdnRequests: [{method, url, authorization, range}]; state.breakAfter: bytes
 * after which the next CDN body is cut (the connection destroyed), once; state.holdFrom: a range
 * start from which CDN GETs are held unanswered; state.expired: signatures the CDN answers 403.
 * @example const hub = await startHub({ token: "hf_test" }); hub.publish("me/tiny/tiny.gguf", bytes);
 */
export async function startHub({token = null} = {}) {
  const state = {files: new Map(), blobs: new Map(), hubRequests: [], cdnRequests: [], breakAfter: null, holdFrom: null, expired: new Set(), held: []};
  let signatures = 0;
  const cdnServer = http.createServer((req, res) => cdnAnswer(state, req, res));
  const cdn = await listen(cdnServer);
  const hubServer = http.createServer((req, res) => {
    state.hubRequests.push({method: req.method, url: req.url, authorization: req.headers.authorization, range: req.headers.range});
    const m = /^\/([^/]+)\/([^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(req.url);
    if (token && req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401, {"x-error-code": "GatedRepo", "content-type": "text/plain"}).end("Access to this repository is restricted");
      return;
    }
    const file = m && state.files.get(`${m[1]}/${m[2]}/${decodeURIComponent(m[4])}`);
    const revision = m && decodeURIComponent(m[3]);
    const version = file && (revision === "main" ? file.at(-1) : file.find((v) => v.commit === revision));
    if (!version) {
      res.writeHead(404, {"x-error-code": file ? "RevisionNotFound" : "EntryNotFound"}).end();
      return;
    }
    const location = `${cdn}/blobs/${version.sha256}?X-Amz-Signature=sig${++signatures}&Expires=9999999999`;
    // The redirect's own small body: its length is not the file's.
    const body = `Found. Redirecting to ${location}`;
    res.writeHead(302, {
      location, "content-length": Buffer.byteLength(body), "x-repo-commit": version.commit,
      etag: `"${version.sha256}"`, "x-linked-etag": `"${version.sha256}"`, "x-linked-size": version.bytes.length,
    });
    res.end(req.method === "HEAD" ? undefined : body);
  });
  const hub = await listen(hubServer);
  return {
    hub, cdn, state,
    /** Adds a new version of path (OWNER/REPO/FILE) as a new commit on main. */
    publish(path, bytes) {
      const digest = sha256(bytes);
      const version = {commit: commitOf(`${path}#${(state.files.get(path) ?? []).length}`), sha256: digest, bytes};
      state.files.set(path, [...(state.files.get(path) ?? []), version]);
      state.blobs.set(digest, bytes);
      return version;
    },
    close() {
      for (const res of state.held) res.destroy();
      hubServer.closeAllConnections();
      cdnServer.closeAllConnections();
      return Promise.all([new Promise((r) => hubServer.close(r)), new Promise((r) => cdnServer.close(r))]);
    },
  };
}

function cdnAnswer(state, req, res) {
  const url = new URL(req.url, "http://cdn");
  state.cdnRequests.push({method: req.method, url: req.url, authorization: req.headers.authorization, range: req.headers.range});
  const signature = url.searchParams.get("X-Amz-Signature");
  const bytes = state.blobs.get(url.pathname.replace("/blobs/", ""));
  if (!signature || state.expired.has(signature)) return res.writeHead(403).end("Request has expired");
  if (!bytes) return res.writeHead(404).end();
  // The CDN's own ETag, not the hub's sha256, as an object store's is.
  const etag = `"cdn-${sha256(bytes).slice(0, 16)}"`;
  const ifMatch = req.headers["if-match"];
  if (ifMatch && ifMatch !== etag) return res.writeHead(412).end();
  const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
  const ranged = range && (!req.headers["if-range"] || req.headers["if-range"] === etag);
  const start = ranged ? Number(range[1]) : 0;
  const end = ranged && range[2] ? Math.min(Number(range[2]) + 1, bytes.length) : bytes.length;
  const headers = {etag, "accept-ranges": "bytes", "content-length": end - start};
  if (ranged) headers["content-range"] = `bytes ${start}-${end - 1}/${bytes.length}`;
  res.writeHead(ranged ? 206 : 200, headers);
  if (req.method === "HEAD") return res.end();
  if (state.holdFrom !== null && start >= state.holdFrom) {
    state.held.push(res);
    return res.flushHeaders();
  }
  const body = bytes.subarray(start, end);
  if (state.breakAfter !== null && state.breakAfter < body.length) {
    const cut = state.breakAfter;
    state.breakAfter = null;
    res.write(body.subarray(0, cut), () => res.destroy());
    return;
  }
  res.end(body);
}
