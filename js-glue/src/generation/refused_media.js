// A host's reason to read no media, given where a MediaInput (media.js) would be: each image or
// audio part is a 400 naming the part and that reason (the edge gateway without an encoder node).
import { badParam } from './errors.js';

export class RefusedMedia {
  /**
   * @param {(kind: 'image' | 'audio') => string} reason what the client is told of a part of that kind, after its name
   * @example new RefusedMedia((kind) => `this edge gateway reads no ${kind === 'audio' ? 'audio' : 'images'}: ...`)
   */
  constructor(reason) {
    this.reason = reason;
  }

  async read({ type, param }) {
    throw badParam(param, `${param}: ${this.reason(type === 'audio' ? 'audio' : 'image')}`);
  }
}
