// Gemma 4 output read by js-glue/src/chat/gemma4_output.js against llama.cpp's own parser
// (support/llama_programs/llama_gemma4_parse.cpp, the oracle's libllama-common) on a table of model outputs:
// whole, and fed one UTF-8 byte at a time through a streaming decoder, where after every byte
// what was given out equals llama.cpp's parse of that prefix as its server streams it (a call
// counts once closed: llama.cpp shows it earlier with partial arguments). Rows where llama.cpp
// drops text its grammar refuses carry the message this reader gives instead and why; for those
// the test also checks that llama.cpp does read them otherwise, so the table stays true.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {Gemma4Output} from "../../../js-glue/src/chat/gemma4_output.js";
import {llamaGemma4Reader} from "../support/llama_gemma4_parse.mjs";

const TOOLS = {tools: ["get_weather", "add", "get"], parallel: true};
const CONFIGS = {
  plain: {tools: [], parallel: true, thinking: true},
  "thinking off": {tools: [], parallel: true, thinking: false},
  tools: {...TOOLS, thinking: true},
  "tools, thinking off": {...TOOLS, thinking: false},
  "one call": {...TOOLS, parallel: false, thinking: true},
  required: {...TOOLS, required: true, thinking: true},
};

const Q = '<|"|>';
const call = (name, args) => `<|tool_call>call:${name}${args}<tool_call|>`;
const msg = (content, reasoning = "", calls = []) => ({content, reasoning_content: reasoning, tool_calls: calls.map(([name, args]) => ({name, arguments: args}))});

// [name, config names, output, kept]: kept = {why, message} where this reader keeps what llama.cpp drops.
const TABLE = [
  ["plain", ["plain", "thinking off", "tools", "required"], "Hello world"],
  ["unicode", ["plain", "tools"], "Grüße 😀 — ok, 東京"],
  ["thought + content", ["plain", "thinking off", "tools", "tools, thinking off"], "<|channel>thought\nI should greet.\n<channel|>Hello!"],
  ["empty thought", ["plain", "tools"], "<|channel>thought\n<channel|>Hi"],
  ["empty thought at the end", ["plain", "tools"], "Hi<|channel>thought\n<channel|>"],
  ["two channel markers", ["plain"], "<|channel><|channel>thought\nhm<channel|>ok"],
  ["lone channel close at the end", ["plain", "tools"], "Hi there<channel|>"],
  ["a call inside the thought", ["tools"], `<|channel>thought\nI could ${call("get_weather", "{}")} hm<channel|>Done`],
  ["one call", ["tools", "one call", "tools, thinking off", "required"], `Let me check.${call("get_weather", `{city:${Q}Paris${Q}}`)}`],
  ["thought then call", ["tools"], `<|channel>thought\nNeed the weather<channel|>${call("get_weather", `{city:${Q}Paris${Q},unit:${Q}C${Q}}`)}`],
  ["parallel calls", ["tools"], call("get_weather", `{city:${Q}Paris${Q}}`) + call("add", "{a:1,b:2}")],
  ["nested args", ["tools"], call("add", "{a:-1.5e3,b:[1, 2,\n3],opts:{deep:{x:[true,false,null]}},empty:{},none:[ ], z:0, e:1E+2}")],
  ["strings with quotes, newlines, unicode", ["tools"], call("get_weather", `{city:${Q}São "Paulo" \\ back\nnew\ttab ☃ 😀 {x:1}${Q}}`)],
  ["a closing marker inside a string", ["tools"], call("get_weather", `{note:${Q}a<tool_call|>b${Q}}`)],
  ["keys as written", ["tools"], call("add", `{ spaced key :1,${Q}q${Q}:2}`)],
  ["a name that begins another", ["tools"], call("get", "{}") + call("get_weather", "{}")],
  ["no tools: a call is text", ["plain"], `Sure ${call("get_weather", `{city:${Q}Paris${Q}}`)}`],
  ["bare string argument", ["tools"], `text ${call("get_weather", "{city:Paris}")} more`,
    {why: "a malformed call is content", message: msg(`text ${call("get_weather", "{city:Paris}")} more`)}],
  ["space before a comma", ["tools"], call("add", "{a:1 ,b:2}"),
    {why: "a malformed call is content", message: msg(call("add", "{a:1 ,b:2}"))}],
  ["leading zero", ["tools"], call("add", "{a:01}"),
    {why: "a malformed call is content", message: msg(call("add", "{a:01}"))}],
  ["undeclared function", ["tools"], `A ${call("nosuch", `{city:${Q}Paris${Q}}`)}`,
    {why: "a call to an undeclared function is content", message: msg(`A ${call("nosuch", `{city:${Q}Paris${Q}}`)}`)}],
  ["undeclared function when a call is required", ["required"], `A ${call("nosuch", "{}")}`,
    {why: "a call to an undeclared function is content where llama.cpp's parser throws", message: msg(`A ${call("nosuch", "{}")}`)}],
  ["cut off in a call", ["tools"], `text <|tool_call>call:get_weather{city:${Q}Par`,
    {why: "an unfinished call is content, not a call with half its arguments", message: msg(`text <|tool_call>call:get_weather{city:${Q}Par`)}],
  ["text after a call", ["tools"], `${call("add", "{a:1}")}after text`,
    {why: "text after a call is content", message: msg("after text", "", [["add", '{"a":1}']])}],
  ["text between calls", ["tools"], `${call("add", "{a:1}")} and ${call("add", "{a:2}")}`,
    {why: "text between calls is content, and the calls after it are calls", message: msg(" and ", "", [["add", '{"a":1}'], ["add", '{"a":2}']])}],
  ["two calls when one is allowed", ["one call"], call("add", "{a:1}") + call("add", "{a:2}"),
    {why: "a call past parallel_tool_calls: false is content", message: msg(call("add", "{a:2}"), "", [["add", '{"a":1}']])}],
  ["ends in a marker's first character", ["plain"], "Is 2 < 3? Yes <",
    {why: "the end of the output settles a held-back character as text", message: msg("Is 2 < 3? Yes <")}],
  ["a channel that opens no thought", ["plain"], "A<|channel>foo",
    {why: "text after a <|channel> that opens no thought is content", message: msg("Afoo")}],
  ["text after a lone channel close", ["plain"], "Hi<channel|> there",
    {why: "text after a lone <channel|> is content", message: msg("Hi there")}],
];

// Seeded well-formed outputs, for the corners a table misses: thoughts, content and calls whose
// arguments nest dicts and arrays with every kind of value, strings with quotes, backslashes,
// control characters and astral characters, numbers in each of JSON's forms, keys as written.
function wellFormed(seed) {
  let x = seed;
  const rand = (n) => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return (x >>> 8) % n;
  };
  const pick = (list) => list[rand(list.length)];
  const TEXT = ["Hello", " ", "\n", "\n\n", "a < b", "|>", "{x}", "naïve", "😀", "東京", "\t", "\"q\"", "\\", "\u0001", "\u001f", "\u007f", "call:", "thought"];
  const text = (n) => Array.from({length: 1 + rand(n)}, () => pick(TEXT)).join("");
  const NUMBERS = ["0", "-0", "7", "-12", "3.25", "-0.5", "1e3", "2E-7", "6.02e+23", "10"];
  const KEYS = ["a", "city", "two words", "k_1", "ÿ", "x-y", "a,b", "{k"];
  const WS = ["", "", " ", "\n  "];
  const value = (depth) => {
    const kind = rand(depth > 2 ? 4 : 6);
    if (kind === 0) return `${Q}${text(4)}${Q}`;
    if (kind === 1) return pick(NUMBERS);
    if (kind === 2) return pick(["true", "false"]);
    if (kind === 3) return "null";
    const items = Array.from({length: rand(4)}, () => (kind === 4 ? `${pick(KEYS)}:${pick(WS)}${value(depth + 1)}` : value(depth + 1)));
    const [open, close] = kind === 4 ? ["{", "}"] : ["[", "]"];
    return items.length ? `${open}${pick(WS)}${items.join(`,${pick(WS)}`)}${pick(WS)}${close}` : `${open}${pick(WS)}${close}`;
  };
  const args = () => {
    const members = Array.from({length: rand(4)}, () => `${pick(KEYS)}:${value(1)}`);
    return `{${members.join(",")}}`;
  };
  let out = rand(2) ? `<|channel>thought\n${text(6)}<channel|>` : "";
  out += rand(2) ? text(6) : "";
  for (let n = rand(3); n > 0; n--) out += call(pick(["get_weather", "add", "get"]), args());
  return out;
}

// What this reader has given out: its message without ids.
function given(out) {
  const {content, reasoning_content, tool_calls} = out.message;
  return {content, reasoning_content, tool_calls: tool_calls.map((c) => ({name: c.function.name, arguments: c.function.arguments}))};
}

function readBytes(text, config, afterByte) {
  const out = new Gemma4Output({tools: config.tools, parallelToolCalls: config.parallel});
  const bytes = new TextEncoder().encode(text);
  const decoder = new TextDecoder();
  afterByte(0, out);
  for (let k = 1; k <= bytes.length; k++) {
    out.push(decoder.decode(bytes.subarray(k - 1, k), {stream: true}));
    afterByte(k, out);
  }
  out.end();
  return given(out);
}

// llama.cpp's reading of the table, per configuration.
const read = await llamaGemma4Reader();
const TABLE_ANSWERS = {};
for (const [configName, config] of Object.entries(CONFIGS)) {
  const rows = TABLE.filter(([, configs]) => configs.includes(configName));
  TABLE_ANSWERS[configName] = await read({...config, prefixes: true, outputs: rows.map(([, , text]) => text)});
}

describe("Gemma 4 output read as llama.cpp reads it", () => {
  test("40 seeded well-formed outputs, whole and after every byte", async () => {
    const config = CONFIGS.tools;
    const outputs = Array.from({length: 40}, (_, seed) => wellFormed(seed + 1));
    const answers = await read({...config, prefixes: true, outputs});
    outputs.forEach((text, o) => {
      const llama = answers[o];
      assert.equal(llama.whole.error, undefined, text);
      const whole = readBytes(text, config, (k, out) => {
        const ours = given(out);
        assert.equal(ours.content, llama.prefixes[k].content, `output ${o} content after ${k} bytes`);
        assert.equal(ours.reasoning_content, llama.prefixes[k].reasoning_content, `output ${o} reasoning_content after ${k} bytes`);
      });
      assert.deepEqual(whole, llama.whole, `output ${o}: ${text}`);
    });
    assert.ok(answers.filter((a) => a.whole.tool_calls.length > 0).length >= 20, "most outputs call");
  });

  for (const [configName, config] of Object.entries(CONFIGS)) {
    const rows = TABLE.filter(([, configs]) => configs.includes(configName));
    const answers = TABLE_ANSWERS[configName];
    describe(configName, () => {
      rows.forEach(([name, , text, kept], r) => {
        const llama = answers[r];
        test(kept ? `${name}: ${kept.why}` : name, () => {
          assert.equal(llama.prefixes.length, new TextEncoder().encode(text).length + 1);
          const whole = readBytes(text, config, (k, out) => {
            if (kept) return;
            const ours = given(out);
            const theirs = llama.prefixes[k];
            assert.equal(ours.content, theirs.content, `content after ${k} bytes`);
            assert.equal(ours.reasoning_content, theirs.reasoning_content, `reasoning_content after ${k} bytes`);
            assert.ok(theirs.tool_calls.length - ours.tool_calls.length <= 1, `calls after ${k} bytes`);
            assert.deepEqual(ours.tool_calls, llama.whole.tool_calls.slice(0, ours.tool_calls.length), `calls after ${k} bytes`);
          });
          if (kept) {
            assert.deepEqual(whole, kept.message);
            assert.notDeepEqual(llama.whole, kept.message, "llama.cpp reads this row as this reader does: it belongs with the equal rows");
          } else {
            assert.deepEqual(whole, llama.whole);
          }
          for (const call of whole.tool_calls) JSON.parse(call.arguments);
        });
      });
    });
  }
});
