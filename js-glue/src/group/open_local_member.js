// A LocalMember in a WASM module of its own in this Node process: the threaded module with its
// own engine threads, or the single-thread one.
import { loadSingleThreadModule, loadThreadedModule } from '../wasm/load_node.js';
import { LocalMember } from './local_member.js';

/**
 * LocalMember.open's member in a module loaded here: 'threaded' with `threads` engine threads,
 * or single-threaded, its relaxed kernels' dot form forced by `dotForm` (default: timed); the
 * other options are LocalMember.open's.
 * @example const m = await openLocalMember({ source, index: 0, members: 2, layers: [0, 2], threaded: false });
 */
export async function openLocalMember({ threaded, threads = 1, dotForm, ...options }) {
  const lf = threaded ? await loadThreadedModule({ threads, dotForm }) : await loadSingleThreadModule({ dotForm });
  return LocalMember.open(lf, { ...options, threads: threaded ? threads : 1 });
}
