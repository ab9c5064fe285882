// Tokenizer: the GGUF's vocabulary in WASM, tokenizing exactly as llama.cpp does (C ABI
// lf_tokenize / lf_detokenize). Built from a parsed header, so no tensor bytes are needed.
const I32 = 4;

export class Tokenizer {
  /**
   * @param lf a bound module (wasm/capi.js)
   * @param {number} ggufHandle an lf_gguf* from lf.fn.lf_gguf_parse; the tokenizer copies what it
   *   needs, so the caller may free the handle afterwards
   * @example const tok = Tokenizer.fromGguf(lf, gguf); lf.fn.lf_gguf_free(gguf);
   */
  static fromGguf(lf, ggufHandle) {
    const handle = lf.fn.lf_tokenizer_create(ggufHandle);
    if (!handle) throw lf.lastError();
    return new Tokenizer(lf, handle);
  }

  #lf;
  #handle;

  constructor(lf, handle) {
    this.#lf = lf;
    this.#handle = handle;
    this.nVocab = lf.fn.lf_tokenizer_n_vocab(handle);
    this.bos = lf.fn.lf_tokenizer_bos(handle);  // -1 when the vocabulary has none
    this.eos = lf.fn.lf_tokenizer_eos(handle);
    // The most input bytes one token stands for: a prompt longer than nCtx × this cannot fit
    // (0: no such bound for this vocabulary).
    this.maxTokenBytes = lf.fn.lf_tokenizer_max_token_bytes(handle);
  }

  #live() {
    if (!this.#handle) throw new Error('Tokenizer is closed');
    return this.#handle;
  }

  /**
   * Text -> token ids.
   * @param {string|Uint8Array} text a string, or its UTF-8 bytes
   * @param {{addBos?: boolean, parseSpecial?: boolean, untrusted?: ArrayLike<number>}} [options] addBos adds the
   *   special tokens the vocabulary asks for (BOS for Gemma); parseSpecial turns "<start_of_turn>"-like text
   *   into control tokens; untrusted lists byte spans [begin0, end0, begin1, end1, ...], sorted and
   *   disjoint, whose text never becomes a control or marker token while the rest is parsed as with
   *   parseSpecial (a rendered chat, its messages untrusted: tokens/chat.js)
   * @returns {number[]}
   * @example tok.encode('The capital of France is') // [2, 818, 5279, 529, 7001, 563]
   * @example tok.encode('<|turn>user\n<turn|>', { untrusted: [12, 19] }) // <turn|> as text
   */
  encode(text, { addBos = true, parseSpecial = false, untrusted = null } = {}) {
    const bytes = typeof text === 'string' ? new TextEncoder().encode(text) : text;
    const bos = addBos ? 1 : 0;
    // A token covers at least one byte, plus BOS/EOS.
    const capacity = bytes.length + 2;
    const read = (out) => Array.from(new Int32Array(out.buffer));
    if (untrusted) {
      const spans = Uint32Array.from(untrusted);
      if (spans.length % 2 !== 0) throw new RangeError(`untrusted holds ${spans.length} numbers: expected begin, end pairs`);
      const bad = Array.from(untrusted).findIndex((x, i) => x !== spans[i]);
      if (bad >= 0) throw new RangeError(`untrusted[${bad}] is ${untrusted[bad]}: expected a byte offset`);
      // The spans first, where the allocation's alignment suits their uint32s, then the text.
      const input = new Uint8Array(spans.byteLength + bytes.length);
      input.set(new Uint8Array(spans.buffer));
      input.set(bytes, spans.byteLength);
      return this.#callGrowing(input, capacity, I32,
        (handle, inPtr, outPtr, n) => this.#lf.fn.lf_tokenize_untrusted(handle, inPtr + spans.byteLength, bytes.length, bos, inPtr, spans.length / 2, outPtr, n),
        read);
    }
    return this.#callGrowing(bytes, capacity, I32,
      (handle, inPtr, outPtr, n) => this.#lf.fn.lf_tokenize(handle, inPtr, bytes.length, bos, parseSpecial ? 1 : 0, outPtr, n),
      read);
  }

  /**
   * Token ids -> text.
   * @param {number[]} ids
   * @param {{special?: boolean}} [options] special renders control tokens ("<bos>") as text
   * @returns {string}
   * @example tok.decode([2, 818, 5279]) // "The capital"
   */
  decode(ids, { special = false } = {}) {
    const idArray = Int32Array.from(ids);
    return this.#callGrowing(new Uint8Array(idArray.buffer), idArray.length * 8 + 16, 1,
      (handle, inPtr, outPtr, capacity) => this.#lf.fn.lf_detokenize(handle, inPtr, idArray.length, special ? 1 : 0, outPtr, capacity),
      (out) => new TextDecoder().decode(out));
  }

  // Copies input into WASM memory and calls call(handle, inPtr, outPtr, capacity), which returns
  // the full result length in units (snprintf-style); grows the output buffer until it fits and
  // hands read() a copy of the result bytes (TextDecoder refuses views of a SharedArrayBuffer).
  #callGrowing(input, capacity, unitBytes, call, read) {
    const lf = this.#lf;
    const handle = this.#live();
    const inPtr = lf.alloc(Math.max(1, input.byteLength));
    let outPtr = 0;
    try {
      lf.bytes().set(input, inPtr);
      for (;;) {
        outPtr = lf.alloc(Math.max(1, capacity * unitBytes));
        const n = call(handle, inPtr, outPtr, capacity);
        if (n < 0) throw lf.lastError();
        if (n <= capacity) return read(lf.bytes().slice(outPtr, outPtr + n * unitBytes));
        lf.free(outPtr);
        outPtr = 0;
        capacity = n;
      }
    } finally {
      lf.free(inPtr);
      if (outPtr) lf.free(outPtr);
    }
  }

  /**
   * The vocabulary text of a token.
   * @example tok.piece(818) // "The"; tok.piece(2) // "<bos>"
   */
  piece(id) {
    const ptr = this.#lf.fn.lf_tokenizer_piece(this.#live(), id);
    if (!ptr) throw this.#lf.lastError();
    return this.#lf.readCString(ptr);
  }

  /** Frees the WASM side; the tokenizer is unusable afterwards. */
  close() {
    if (this.#handle) this.#lf.fn.lf_tokenizer_free(this.#handle);
    this.#handle = 0;
  }
}
