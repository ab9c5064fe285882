// Stop sequences over decoded text. A stop string can span tokens ("\n\n" as "\n" + "\n", or a
// word cut by the tokenizer anywhere), so it is looked for in the whole continuation's text, and
// a tail that could still grow into a stop string is held back until the next token settles it:
// the client never sees a piece of a stop sequence. A trailing U+FFFD (a UTF-8 character whose
// bytes are not all generated yet) is held back the same way.

export class StopText {
  /** @param {string[]} stops the stop sequences (non-empty strings) */
  constructor(stops) {
    this.stops = stops;
  }

  /**
   * The continuation's whole text so far -> {text: the part of it that may be shown, stopped:
   * whether a stop sequence occurred (text then ends right before the first one)}.
   * @example new StopText(['\n\n']).update('Hi\n') // {text: 'Hi', stopped: false}
   */
  update(full) {
    let cut = -1;
    for (const stop of this.stops) {
      const at = full.indexOf(stop);
      if (at >= 0 && (cut < 0 || at < cut)) cut = at;
    }
    if (cut >= 0) return { text: full.slice(0, cut), stopped: true };
    let hold = full.endsWith('\uFFFD') ? 1 : 0;
    for (const stop of this.stops) {
      for (let k = Math.min(stop.length - 1, full.length); k > hold; k--) {
        if (full.endsWith(stop.slice(0, k))) {
          hold = k;
          break;
        }
      }
    }
    return { text: full.slice(0, full.length - hold), stopped: false };
  }
}
