// A file in a Hugging Face hub repository, named hf://OWNER/REPO/FILE[@REVISION] and read as the
// hub serves it: the file's resolve URL on the hub (HF_ENDPOINT, else https://huggingface.co)
// answers with the commit the revision names (X-Repo-Commit), the file's ETag (X-Linked-Etag for
// an LFS file: its sha256) and size, and for an LFS file a redirect to a CDN host with a signed
// URL, which serves the bytes by range. Ranges are read at that commit, so all of them are of one
// version, and the cache keys the file by its ETag, so a file changed on the hub is never mixed
// with a copy cached before. HF_TOKEN goes to the hub's host only, never to the host a redirect
// leads to: the CDN's signed URL is its credential, and it is kept out of messages.
import { HttpSource, ObjectSourceError, statusError, withRetries } from './http.js';

const DEFAULT_ENDPOINT = 'https://huggingface.co';
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const MAX_REDIRECTS = 5;
// Answers of a CDN URL that mean it no longer serves the file (its signature expired): the file is
// resolved on the hub again.
const STALE_CDN = new Set([401, 403, 404, 410]);
const NAME_PART = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * The parts of hf://OWNER/REPO/FILE[@REVISION]: FILE may hold folders; REVISION (a branch, a tag,
 * a commit or refs/pr/N, default main) follows the last '@'.
 * @example parseHfUrl('hf://google/gemma-3-1b-it-qat-q4_0-gguf/gemma-3-1b-it-q4_0.gguf@refs/pr/1')
 */
export function parseHfUrl(url) {
  const bad = (why) => new ObjectSourceError(`${url}: not an hf://OWNER/REPO/FILE[@REVISION] URL (${why})`, { code: 'bad_url' });
  const m = /^hf:\/\/([^/]*)\/([^/]*)\/(.*)$/i.exec(url);
  if (!m) throw bad('expected an owner, a repository and a file');
  const [, owner, repo, rest] = m;
  if (!NAME_PART.test(owner) || !NAME_PART.test(repo)) throw bad('the owner and the repository are letters, digits, ".", "_" and "-"');
  const at = rest.lastIndexOf('@');
  const file = at < 0 ? rest : rest.slice(0, at);
  const revision = at < 0 ? 'main' : rest.slice(at + 1);
  if (file.split('/').some((part) => part === '' || part === '.' || part === '..')) throw bad(`no file path in "${file}"`);
  if (revision === '') throw bad('an empty revision after "@"');
  return { owner, repo, file, revision };
}

/**
 * The hub's address and token from options, else the environment (HF_ENDPOINT, HF_TOKEN), as
 * huggingface_hub takes them.
 * @example const { endpoint, token } = hfConfig({}, { HF_ENDPOINT: 'http://127.0.0.1:9000' });
 */
export function hfConfig(options = {}, env = process.env) {
  const endpoint = (options.hfEndpoint ?? env.HF_ENDPOINT ?? DEFAULT_ENDPOINT).replace(/\/+$/, '');
  let origin;
  try {
    origin = new URL(endpoint);
  } catch {
    origin = null;
  }
  if (!origin || !/^https?:$/.test(origin.protocol)) {
    throw new ObjectSourceError(`HF_ENDPOINT "${endpoint}" is not an http(s) URL`, { code: 'bad_url' });
  }
  return { endpoint, origin: origin.origin, token: options.hfToken ?? env.HF_TOKEN ?? null };
}

/** The file's resolve URL on the hub at a revision (URL-encoded: refs/pr/1 is one path part). */
export function resolveUrl(endpoint, { owner, repo, file }, revision) {
  return `${endpoint}/${owner}/${repo}/resolve/${encodeURIComponent(revision)}/${file.split('/').map(encodeURIComponent).join('/')}`;
}

// fetch with the redirects followed here, not by fetch: the token rides only on requests to the
// hub's origin, and `stopAtOtherOrigin` ends at the hub's own answer (the headers describing the
// file) instead of following it to the CDN. -> {response, url}: the last answer and its URL.
async function follow(url, init, { hub, stopAtOtherOrigin = false, name }) {
  let current = url;
  for (let hop = 0; ; hop++) {
    const atHub = new URL(current).origin === hub.origin;
    const headers = atHub && hub.token ? { ...init.headers, authorization: `Bearer ${hub.token}` } : init.headers;
    const response = await fetch(current, { ...init, headers, redirect: 'manual' });
    const location = response.headers.get('location');
    if (!REDIRECTS.has(response.status) || location === null) return { response, url: current };
    const next = new URL(location, current).href;
    if (stopAtOtherOrigin && new URL(next).origin !== hub.origin) return { response, url: current };
    await response.body?.cancel();
    if (hop >= MAX_REDIRECTS) throw new ObjectSourceError(`${name}: more than ${MAX_REDIRECTS} redirects`, { code: 'bad_response' });
    current = next;
  }
}

// The request function of the file's HTTP source: each range is resolved on the hub once, then
// asked of the CDN URL the hub redirected to, until the CDN stops serving it (its signature
// expired): one hub request per load, not one per tensor.
function hubRequest(hub, name) {
  let cdn = null;
  return async (url, init) => {
    if (cdn) {
      const response = await fetch(cdn, { ...init, redirect: 'manual' });
      if (!STALE_CDN.has(response.status) && !REDIRECTS.has(response.status)) return response;
      await response.body?.cancel();
      cdn = null;
    }
    const { response, url: reached } = await follow(url, init, { hub, name });
    if (response.ok && new URL(reached).origin !== hub.origin) cdn = reached;
    return response;
  };
}

// An ETag as the hub sends it ("sha256hex", W/"..."), bare.
const bareEtag = (etag) => etag?.replace(/^W\//, '').replace(/^"(.*)"$/, '$1') || null;

// What the hub says of the file at a revision: its commit, ETag and size.
async function hubFacts(name, url, hub, options) {
  return withRetries(async () => {
    const { response } = await follow(url, { method: 'HEAD', signal: AbortSignal.timeout(options.timeoutMs ?? 30000) },
      { hub, stopAtOtherOrigin: true, name });
    if (!response.ok && !REDIRECTS.has(response.status)) throw hubError(name, response, hub);
    const header = (key) => response.headers.get(key);
    const size = header('x-linked-size') ?? (response.ok ? header('content-length') : null);
    return { commit: header('x-repo-commit'), etag: bareEtag(header('x-linked-etag') ?? header('etag')), size: size === null ? null : Number(size) };
  }, options);
}

// The hub's refusal, with its error code (RepoNotFound, GatedRepo, EntryNotFound, RevisionNotFound)
// and, for a refusal of access, whether a token was sent.
function hubError(name, response, hub) {
  const error = statusError(name, response);
  const code = response.headers.get('x-error-code');
  if (code) error.message += ` (${code})`;
  if (error.code === 'unauthorized' || (error.code === 'not_found' && code === 'RepoNotFound')) {
    error.message += hub.token ? ': HF_TOKEN was sent and does not give access' : ': a private or gated repository needs HF_TOKEN';
  }
  return error;
}

/**
 * Opens hf://OWNER/REPO/FILE[@REVISION] as an object source, with `commit` (the one read) and
 * `sha256` (the hub's ETag of an LFS file, null otherwise) besides the usual fields. Options:
 * hfEndpoint, hfToken (else HF_ENDPOINT, HF_TOKEN) and the HTTP source's retry options.
 * @example const source = await openHfSource('hf://google/gemma-3-1b-it-qat-q4_0-gguf/gemma-3-1b-it-q4_0.gguf');
 */
export async function openHfSource(url, options = {}) {
  const parts = parseHfUrl(url);
  const hub = hfConfig(options);
  const about = await hubFacts(url, resolveUrl(hub.endpoint, parts, parts.revision), hub, options);
  // At the commit the hub named, the file cannot change between two ranges.
  const pinned = resolveUrl(hub.endpoint, parts, /^[0-9a-f]{40}$/.test(about.commit ?? '') ? about.commit : parts.revision);
  const inner = await HttpSource.open(pinned, { ...options, name: url, request: hubRequest(hub, url) });
  if (about.size !== null && about.size !== inner.size) {
    await inner.close();
    throw new ObjectSourceError(`${url}: the hub gives ${about.size} bytes, its download ${inner.size}`, { code: 'bad_response' });
  }
  return {
    name: url,
    size: inner.size,
    identity: about.etag ? `${url}#${about.etag}` : inner.identity,
    validator: inner.validator,
    commit: about.commit,
    sha256: /^[0-9a-f]{64}$/.test(about.etag ?? '') ? about.etag : null,
    stats: inner.stats,
    read: (start, end) => inner.read(start, end),
    readInto: (start, end, target) => inner.readInto(start, end, target),
    close: () => inner.close(),
  };
}
