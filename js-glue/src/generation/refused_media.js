// A host's reason to read no images, given where a MediaInput (media.js) would be: each image part
// is a 400 naming the part and that reason. Apart from media.js so that a host refusing images
// (the edge worker) bundles no image decoder.
import { badParam } from './errors.js';

export class RefusedMedia {
  /**
   * @param {string} reason what the client is told, after the part's name
   * @example new RefusedMedia('this edge gateway reads no images: ...')
   */
  constructor(reason) {
    this.reason = reason;
  }

  async read({ param }) {
    throw badParam(param, `${param}: ${this.reason}`);
  }
}
