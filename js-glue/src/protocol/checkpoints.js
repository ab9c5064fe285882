// How many checkpoints a session keeps (LayerNode.checkpoint's `keep`, the node protocol's
// ?keep=): each holds a copy of the rows of every sliding ring that a continuation reads, up to
// n_swa - 1 positions per ring layer, so the count bounds what they cost per session.
export const MAX_CHECKPOINTS = 8;
export const DEFAULT_CHECKPOINTS = 4;
