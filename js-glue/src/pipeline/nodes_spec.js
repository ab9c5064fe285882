// --nodes SPEC: comma-separated nodes in pipeline order, each "local:FIRST-LAST" (inclusive
// layer range, run in this process), an http(s) URL of a layer node, which says itself which
// layers it serves, or a tensor-parallel group (docs/tensor-parallel.md): "tp(URL,URL,...)", the
// URLs of its members' servers in member order, or "tp(local:FIRST-LAST*S)", S members in this
// process. Together they must cover the model's layers in order, with no gap and no overlap
// (checkCoverage, once the remote nodes have answered).

const URL_PATTERN = /^https?:\/\/[^\s/]+\/?$/i;

// SPEC's entries: split at the commas outside parentheses.
function entriesOf(spec) {
  const entries = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < spec.length; ++i) {
    if (spec[i] === '(') depth++;
    if (spec[i] === ')') depth--;
    if (depth < 0) throw new Error(`bad --nodes "${spec}": a ")" without its "("`);
    if (spec[i] === ',' && depth === 0) {
      entries.push(spec.slice(from, i));
      from = i + 1;
    }
  }
  if (depth !== 0) throw new Error(`bad --nodes "${spec}": a "(" without its ")"`);
  entries.push(spec.slice(from));
  return entries;
}

// "FIRST-LAST" of local:FIRST-LAST -> [FIRST, LAST + 1), or throws naming the entry.
function localRange(entry, first, last) {
  if (Number(last) < Number(first)) throw new Error(`bad node "${entry}": last layer before first`);
  return [Number(first), Number(last) + 1];
}

// tp(...)'s inside -> a group entry.
function groupEntry(entry, inside) {
  const local = /^local:(\d+)-(\d+)\*(\d+)$/.exec(inside.trim());
  if (local) {
    const [begin, end] = localRange(entry, local[1], local[2]);
    const members = Number(local[3]);
    if (members < 1) throw new Error(`bad node "${entry}": a group of at least 1 member`);
    return { kind: 'group', begin, end, members };
  }
  const urls = inside.split(',').map((url) => url.trim());
  if (!urls.every((url) => URL_PATTERN.test(url))) {
    throw new Error(`bad node "${entry}": expected tp(URL,URL,...) of the members' servers or tp(local:FIRST-LAST*S)`);
  }
  return { kind: 'group', urls: urls.map((url) => url.replace(/\/$/, '')) };
}

/**
 * A node's layers as `serve --layers` and an edge worker's LAYERS give them: "FIRST-LAST",
 * inclusive as in local:FIRST-LAST, spaces allowed -> [FIRST, LAST + 1); null when it is not that.
 * @example layerRange(' 0-5 ') // [0, 6]
 */
export function layerRange(text) {
  const m = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(text);
  return m && Number(m[2]) >= Number(m[1]) ? [Number(m[1]), Number(m[2]) + 1] : null;
}

/**
 * A group member as `serve --shard` and an edge worker's SHARD give it: "I/S", member I (0-based)
 * of a group of S, spaces allowed -> [I, S]; null when it is not that.
 * @example memberShard('1/3') // [1, 3]
 */
export function memberShard(text) {
  const m = /^\s*(\d+)\s*\/\s*(\d+)\s*$/.exec(text);
  return m && Number(m[2]) >= 1 && Number(m[1]) < Number(m[2]) ? [Number(m[1]), Number(m[2])] : null;
}

/**
 * @returns {({kind: 'local', begin: number, end: number} | {kind: 'remote', url: string} |
 *   {kind: 'group', urls: string[]} | {kind: 'group', begin: number, end: number, members: number})[]} end exclusive
 * @example parseNodesSpec('local:0-1,tp(http://a:8080,http://b:8080),http://c:8080')
 *   // [{kind:'local',begin:0,end:2}, {kind:'group',urls:['http://a:8080','http://b:8080']}, {kind:'remote',url:'http://c:8080'}]
 */
export function parseNodesSpec(spec) {
  return entriesOf(spec).map((entry) => {
    const text = entry.trim();
    if (URL_PATTERN.test(text)) return { kind: 'remote', url: text.replace(/\/$/, '') };
    const group = /^tp\((.*)\)$/.exec(text);
    if (group) return groupEntry(entry, group[1]);
    const m = /^local:(\d+)-(\d+)$/.exec(text);
    if (!m) throw new Error(`bad node "${entry}": expected local:FIRST-LAST, http(s)://HOST:PORT or tp(...)`);
    const [begin, end] = localRange(entry, m[1], m[2]);
    return { kind: 'local', begin, end };
  });
}

/**
 * Checks that ranges [begin, end) cover layers 0..nLayer-1 in order; names[i] says which node
 * served ranges[i] in the error.
 * @example checkCoverage([[0, 2], [2, 6]], 6, ['local:0-1', 'http://b:8080'])
 */
export function checkCoverage(ranges, nLayer, names) {
  let expected = 0;
  for (const [i, [begin, end]] of ranges.entries()) {
    if (begin > expected) throw new Error(`layers ${expected}-${begin - 1} are served by no node (gap before ${names[i]})`);
    if (begin < expected) throw new Error(`layers ${begin}-${expected - 1} are served by two nodes (overlap at ${names[i]})`);
    expected = end;
  }
  if (expected !== nLayer) throw new Error(`the nodes serve layers 0-${expected - 1} but the model has ${nLayer} layers (0-${nLayer - 1})`);
}
