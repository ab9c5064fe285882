// A vocabulary read from a GGUF for the chat tests, and the tokens no client text may produce.
import fs from "node:fs";

import {reparseModelHeader} from "../../../js-glue/src/gguf/header.js";
import {Tokenizer} from "../../../js-glue/src/tokens/tokenizer.js";

/**
 * The tokenizer and metadata of a GGUF read whole (llama.cpp's vocabulary files have no layers,
 * which a model header's configuration would refuse).
 * @example const {tok, metadata} = openTokenizer(lf, llamaSourceFile("models/ggml-vocab-gemma-4.gguf"));
 */
export function openTokenizer(lf, file) {
  const bytes = fs.readFileSync(file);
  const gguf = reparseModelHeader(lf, {bytes, file_size: bytes.length});
  try {
    return {tok: Tokenizer.fromGguf(lf, gguf), metadata: lf.json(lf.fn.lf_gguf_json(gguf, 0)).metadata};
  } finally {
    lf.fn.lf_gguf_free(gguf);
  }
}

/**
 * The tokens client text must never produce, id -> text: every token whose text becomes it only
 * with special-token parsing (control, unknown), and the user-defined markers of Gemma 4's form.
 * @example guardedTokens(tok).get(106) // "<turn|>"
 */
export function guardedTokens(tok) {
  const guarded = new Map();
  for (let id = 0; id < tok.nVocab; id++) {
    const text = tok.piece(id);
    if (!/^[<[].*[>\]]$/s.test(text)) continue;
    const parsed = tok.encode(text, {addBos: false, parseSpecial: true});
    if (parsed.length !== 1 || parsed[0] !== id) continue;
    const plain = tok.encode(text, {addBos: false});
    const marker = /^<\|.*>$|^<.*\|>$/s.test(text);
    if (marker || plain.length !== 1 || plain[0] !== id) guarded.set(id, text);
  }
  return guarded;
}

/**
 * How many times each guarded token occurs in ids, in the guarded map's order.
 * @example assert.deepEqual(guardedCounts(ids, guarded), guardedCounts(benignIds, guarded));
 */
export const guardedCounts = (ids, guarded) => [...guarded.keys()].map((id) => ids.filter((x) => x === id).length);
