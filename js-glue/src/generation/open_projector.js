// A projector's towers on a threaded module of their own, for a Node host (the gateway, generate,
// an encoder node): the module's two pools are the vision tower's and the audio encoder's, each
// of `threads` workers, and the file is read from any source.
import { openSource } from '../sources/open_source.js';
import { loadThreadedModule } from '../wasm/load_node.js';
import { openProjector } from './projector.js';

/**
 * The projector at `mmproj` (a path or URL) -> {vision, audio, header, close()} (openProjector's,
 * close() freeing the module too); refused by name.
 * @example const { vision, audio, close } = await openProjectorModule('mmproj.gguf', { threads: 2 });
 */
export async function openProjectorModule(mmproj, { threads, cacheDir, allowUnvalidatedSource } = {}) {
  const lf = await loadThreadedModule({ threads, pools: 2 });
  try {
    const projector = await openProjector(lf, await openSource(mmproj, { cacheDir, allowUnvalidatedSource }), { threads: lf.threads });
    return { ...projector, close: () => { projector.close(); lf.close(); } };
  } catch (error) {
    lf.close();
    throw error;
  }
}
