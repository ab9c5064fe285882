// The note a command generating text prints on a model make-model made: its weights are random,
// so what it writes is not a sign of a fault.
import { isSynthetic } from '../gguf/header.js';

/**
 * Prints the note on stderr when make-model made the model; answers whether it did.
 * @example const synthetic = noteSynthetic(pipeline.header);
 */
export function noteSynthetic(header) {
  const synthetic = isSynthetic(header);
  if (synthetic) console.error(`note: ${header.metadata['general.name']}: make-model made this model, its weights are random and its text means nothing`);
  return synthetic;
}
