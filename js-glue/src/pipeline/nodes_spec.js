// --nodes SPEC: comma-separated nodes in pipeline order, each "local:FIRST-LAST" (inclusive
// layer range, run in this process) or an http(s) URL of a layer node, which says itself which
// layers it serves. Together they must cover the model's layers in order, with no gap and no
// overlap (checkCoverage, once the remote nodes have answered).

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
 * @returns {({kind: 'local', begin: number, end: number} | {kind: 'remote', url: string})[]} end exclusive
 * @example parseNodesSpec('local:0-1,http://10.0.0.7:8080') // [{kind:'local',begin:0,end:2}, {kind:'remote',url:'http://10.0.0.7:8080'}]
 */
export function parseNodesSpec(spec) {
  return spec.split(',').map((entry) => {
    const text = entry.trim();
    if (/^https?:\/\/[^\s/]+\/?$/i.test(text)) return { kind: 'remote', url: text.replace(/\/$/, '') };
    const m = /^local:(\d+)-(\d+)$/.exec(text);
    if (!m) throw new Error(`bad node "${entry}": expected local:FIRST-LAST or http(s)://HOST:PORT`);
    const first = Number(m[1]);
    const last = Number(m[2]);
    if (last < first) throw new Error(`bad node "${entry}": last layer before first`);
    return { kind: 'local', begin: first, end: last + 1 };
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
