// --nodes SPEC: "local:0-29,local:30-59" (inclusive layer ranges). Ranges must cover the model's
// layers in order, with no gap and no overlap.

/**
 * @returns {{kind: 'local', begin: number, end: number}[]} end exclusive
 * @example parseNodesSpec('local:0-1,local:2-5', 6) // [{kind:'local',begin:0,end:2}, {kind:'local',begin:2,end:6}]
 */
export function parseNodesSpec(spec, nLayer) {
  const nodes = spec.split(',').map((entry) => {
    const m = /^local:(\d+)-(\d+)$/.exec(entry.trim());
    if (!m) throw new Error(`bad node "${entry}": expected local:FIRST-LAST (remote nodes arrive with the container node)`);
    const first = Number(m[1]);
    const last = Number(m[2]);
    if (last < first) throw new Error(`bad node "${entry}": last layer before first`);
    return { kind: 'local', begin: first, end: last + 1 };
  });
  let expected = 0;
  for (const node of nodes) {
    if (node.begin > expected) throw new Error(`layers ${expected}-${node.begin - 1} are served by no node (gap)`);
    if (node.begin < expected) throw new Error(`layers ${node.begin}-${expected - 1} are served by two nodes (overlap)`);
    expected = node.end;
  }
  if (expected !== nLayer) throw new Error(`the nodes serve layers 0-${expected - 1} but the model has ${nLayer} layers (0-${nLayer - 1})`);
  return nodes;
}
