// Tokenizer: the GGUF's vocabulary in WASM, tokenizing exactly as llama.cpp does (C ABI
// lf_tokenize / lf_detokenize). Built from a parsed header, so no tensor bytes are needed.
const I32 = 4;

export class Tokenizer {
  /**
   * @param lf a bound module (wasm_module.js)
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
  }

  #live() {
    if (!this.#handle) throw new Error('Tokenizer is closed');
    return this.#handle;
  }

  /**
   * Text -> token ids.
   * @param {string} text
   * @param {{addBos?: boolean, parseSpecial?: boolean}} [options] addBos adds the special tokens
   *   the vocabulary asks for (BOS for Gemma); parseSpecial turns "<start_of_turn>"-like text
   *   into control tokens
   * @returns {number[]}
   * @example tok.encode('The capital of France is') // [2, 818, 5279, 529, 7001, 563]
   */
  encode(text, { addBos = true, parseSpecial = false } = {}) {
    const lf = this.#lf;
    const handle = this.#live();
    const bytes = new TextEncoder().encode(text);
    const textPtr = lf.alloc(Math.max(1, bytes.length));
    let capacity = bytes.length + 2;  // a token covers at least one byte, plus BOS/EOS
    let outPtr = 0;
    try {
      lf.bytes().set(bytes, textPtr);
      for (;;) {
        outPtr = lf.alloc(capacity * I32);
        const n = lf.fn.lf_tokenize(handle, textPtr, bytes.length, addBos ? 1 : 0, parseSpecial ? 1 : 0, outPtr, capacity);
        if (n < 0) throw lf.lastError();
        if (n <= capacity) return Array.from(new Int32Array(lf.bytes().slice(outPtr, outPtr + n * I32).buffer));
        lf.free(outPtr);
        outPtr = 0;
        capacity = n;
      }
    } finally {
      lf.free(textPtr);
      if (outPtr) lf.free(outPtr);
    }
  }

  /**
   * Token ids -> text.
   * @param {number[]} ids
   * @param {{special?: boolean}} [options] special renders control tokens ("<bos>") as text
   * @returns {string}
   * @example tok.decode([2, 818, 5279]) // "The capital"
   */
  decode(ids, { special = false } = {}) {
    const lf = this.#lf;
    const handle = this.#live();
    const idArray = Int32Array.from(ids);
    const idsPtr = lf.alloc(Math.max(1, idArray.byteLength));
    let capacity = idArray.length * 8 + 16;
    let outPtr = 0;
    try {
      lf.bytes().set(new Uint8Array(idArray.buffer), idsPtr);
      for (;;) {
        outPtr = lf.alloc(capacity);
        const n = lf.fn.lf_detokenize(handle, idsPtr, idArray.length, special ? 1 : 0, outPtr, capacity);
        if (n < 0) throw lf.lastError();
        // Copy first: TextDecoder refuses views of a SharedArrayBuffer.
        if (n <= capacity) return new TextDecoder().decode(lf.bytes().slice(outPtr, outPtr + n));
        lf.free(outPtr);
        outPtr = 0;
        capacity = n;
      }
    } finally {
      lf.free(idsPtr);
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
