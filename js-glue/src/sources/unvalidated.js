// Sources without a validator: a server that sends neither ETag nor Last-Modified (validator
// 'size') cannot be asked for each range on the condition that the object is still the one
// opened, so a file replaced by another of the same size during a load would go unseen, and the
// node would hold weights of both. Such a source is refused unless the caller allows it; allowed,
// a layer node reads a sample of what it loaded again before the load counts as complete, and
// the warning says what that does and does not check.
import { ObjectSourceError, sourceChanged } from './http.js';

/** Bytes of each span read again (the start of the first range, the end of the last, one at random). */
export const SAMPLE_SPAN_BYTES = 1 << 20;

const OPTION = 'allowUnvalidatedSource (--allow-unvalidated-source, LAYERFOLD_ALLOW_UNVALIDATED_SOURCE=1)';

/**
 * Refuses a source whose only validator is its size ('unvalidated_source', naming it and why),
 * unless `allow`; allowed, tells onWarning what is and is not checked. Other sources pass.
 * @example admitSource(source, { allow: options.allowUnvalidatedSource, onWarning: console.warn });
 */
export function admitSource(source, { allow = false, onWarning }) {
  if (source.validator !== 'size') return;
  const why = `${source.name}: the server sends neither ETag nor Last-Modified`;
  if (!allow) {
    throw new ObjectSourceError(`${why}, so a change of the object during a load cannot be seen in every range and could mix two ` +
      `versions' weights: refused (serve it with an ETag or Last-Modified, or allow it with ${OPTION})`, { code: 'unvalidated_source' });
  }
  onWarning(`${why}; loading it as ${OPTION} allows. Checked: the object's size in every answer, the bytes asked for again when a ` +
    `transfer resumes, and, once a layer node has read its tensors, ${SAMPLE_SPAN_BYTES} bytes at three places read again (the start ` +
    'of the first tensor, the end of the last, one tensor at random). Not checked: every other byte, so a change during the load ' +
    'that keeps the size and leaves those spans as they were goes unseen');
}

/**
 * Reads again, from a source without a validator, three spans of the ranges a load placed: the
 * start of the first, the end of the last and a span of one at random (random() in [0, 1)), each
 * of up to SAMPLE_SPAN_BYTES, and throws 'source_changed' naming the source and the span when
 * one differs from the bytes placed. placed: [{offset, bytes: () => Uint8Array}] in read order,
 * bytes() the range as it lies in memory now. Any other source returns at once.
 * @example await checkSample(source, [{ offset: 4096, bytes: () => heap.subarray(ptr, ptr + n) }]);
 */
export async function checkSample(source, placed, random = Math.random) {
  if (source.validator !== 'size' || placed.length === 0) return;
  const first = placed[0];
  const last = placed[placed.length - 1];
  const other = placed[Math.min(placed.length - 1, Math.floor(random() * placed.length))];
  const spans = [
    [first, 0],
    [last, Math.max(0, last.bytes().length - SAMPLE_SPAN_BYTES)],
    [other, Math.floor(random() * Math.max(0, other.bytes().length - SAMPLE_SPAN_BYTES))],
  ];
  for (const [range, at] of spans) {
    const length = Math.min(SAMPLE_SPAN_BYTES, range.bytes().length - at);
    if (length <= 0) continue;
    const start = range.offset + at;
    const again = await source.read(start, start + length);
    // Views made after the read, which may have grown the memory under the old ones.
    const held = range.bytes().subarray(at, at + length);
    const differs = again.findIndex((byte, i) => byte !== held[i]);
    if (differs >= 0) {
      throw sourceChanged(source.name, `byte ${start + differs}, read again at the end of the load, differs from the one loaded ` +
        '(the server sends no ETag or Last-Modified to ask for each range on)');
    }
  }
}
