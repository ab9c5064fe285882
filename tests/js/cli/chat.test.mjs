// `layerfold chat` on a pseudo-terminal, typed at as a user types: replies streamed, the
// conversation's session reused from turn to turn, /reset, /system, """ messages, Ctrl-C and
// Ctrl-D. The expected replies come from greedy decoding straight through the Pipeline over the
// conversation rendered whole (a session of its own, no chat code), on the tiny model with the
// real Gemma vocabulary, whose replies depend on what they answer.
import assert from "node:assert/strict";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {chatTokens} from "../../../js-glue/src/tokens/chat.js";
import {gemma4, gemmaVocab, greedy} from "../support/gateway_fixture.mjs";
import {root} from "../support/models.mjs";
import {PtySession} from "../support/pty_session.mjs";

const cli = path.join(root, "js-glue", "bin", "layerfold.js");
const MAX_TOKENS = 8;

// The chat on two local nodes, greedy, each reply's timings printed.
function startChat(t, extra = [], file = gemmaVocab()) {
  const pty = new PtySession(process.execPath, [cli, "chat", "--model", file, "--nodes", "local:0-0,local:1-1", "--build", "single",
    "--verbose", ...extra]);
  t.after(() => pty.kill());
  return pty;
}

// Types `line` at the prompt that ends the text at `from` -> the reply and its timings' counts,
// and where the next prompt ends.
async function turn(pty, from, line) {
  pty.send(`${line}\r`);
  const {match, end} = await pty.expect(/\n([\s\S]*?)\n(?: {2}cached {4}(\d+) tokens\n)? {2}prompt {4}(\d+) tokens in .*\n {2}predicted .*\n> $/, from);
  return {reply: match[1], cached: Number(match[2] ?? 0), prompted: Number(match[3]), end};
}

// How many leading tokens a and b share.
function shared(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe("layerfold chat on a terminal", () => {
  let pipeline;
  before(async () => {
    pipeline = await Pipeline.open({model: gemmaVocab(), build: "single"});
  });
  after(() => pipeline.close());
  const promptOf = (messages) => chatTokens(pipeline.header, pipeline.tokenizer, messages);

  test("a second turn's reply is the whole conversation's, and only its new tokens are prefilled", async (t) => {
    const pty = startChat(t, ["--max-tokens", String(MAX_TOKENS)]);
    const ready = await pty.expect(/\n> $/, 0);
    const first = await turn(pty, ready.end, "Hi");
    const prompt1 = promptOf([{role: "user", content: "Hi"}]);
    const expected1 = await greedy(pipeline, prompt1, MAX_TOKENS);
    assert.equal(first.reply, expected1.text);
    assert.deepEqual([first.cached, first.prompted], [0, prompt1.length]);

    const second = await turn(pty, first.end, "Tell me more");
    const prompt2 = promptOf([{role: "user", content: "Hi"}, {role: "assistant", content: expected1.text}, {role: "user", content: "Tell me more"}]);
    const expected2 = await greedy(pipeline, prompt2, MAX_TOKENS);
    assert.equal(second.reply, expected2.text);
    assert.notEqual(expected2.text, expected1.text, "the model's replies would not tell the turns apart");
    // The session holds the first prompt and the reply's tokens fed back (the last one sampled at
    // the budget is never fed): what of it the second prompt starts with is not prefilled again.
    const held = [...prompt1, ...expected1.ids.slice(0, MAX_TOKENS - 1)];
    assert.equal(second.cached, shared(held, prompt2));
    assert.ok(second.cached > prompt1.length, `only ${second.cached} tokens reused`);
    assert.equal(second.prompted, prompt2.length - second.cached);
    pty.send("\x04");
    assert.equal(await pty.exited, 0);
  });

  test("/reset gives the first turn's reply again; /system renders its message into the prompt", async (t) => {
    const pty = startChat(t, ["--max-tokens", String(MAX_TOKENS)]);
    const ready = await pty.expect(/\n> $/, 0);
    const first = await turn(pty, ready.end, "Hi");
    const again = await turn(pty, first.end, "Hi");
    assert.notEqual(again.reply, first.reply, "a second Hi in the conversation answers otherwise");
    pty.send("/reset\r");
    const reset = await pty.expect(/\(the conversation starts over\)\n> $/, again.end);
    const fresh = await turn(pty, reset.end, "Hi");
    assert.equal(fresh.reply, first.reply);
    assert.deepEqual([fresh.cached, fresh.prompted], [0, first.prompted]);

    pty.send("/system Answer in French.\r");
    const system = await pty.expect(/\(system message set; the conversation starts over\)\n> $/, fresh.end);
    const briefed = await turn(pty, system.end, "Hi");
    const prompt = promptOf([{role: "system", content: "Answer in French."}, {role: "user", content: "Hi"}]);
    assert.equal(briefed.reply, (await greedy(pipeline, prompt, MAX_TOKENS)).text);
    assert.deepEqual([briefed.cached, briefed.prompted], [0, prompt.length]);
    assert.ok(prompt.length > first.prompted);
    pty.send("/exit\r");
    assert.equal(await pty.exited, 0);
  });

  test("a \"\"\" message arrives as one; an unknown command is named; Ctrl-D leaves with 0", async (t) => {
    const pty = startChat(t, ["--max-tokens", String(MAX_TOKENS)]);
    const ready = await pty.expect(/\n> $/, 0);
    pty.send("/rest\r");
    const unknown = await pty.expect(/unknown command \/rest \(did you mean \/reset\?\); \/help lists the commands\n> $/, ready.end);
    pty.send("/help\r");
    const help = await pty.expect(/\/system TEXT[\s\S]*\n> $/, unknown.end);
    pty.send('"""first line\r');
    const more = await pty.expect(/\n\.\.\. $/, help.end);
    pty.send("second line\r");
    const last = await pty.expect(/\n\.\.\. $/, more.end);
    const block = await turn(pty, last.end, '"""');
    const prompt = promptOf([{role: "user", content: "first line\nsecond line"}]);
    assert.equal(block.reply, (await greedy(pipeline, prompt, MAX_TOKENS)).text);
    assert.equal(block.prompted, prompt.length);
    pty.send("\x04");
    assert.equal(await pty.exited, 0);
  });

  test("Ctrl-C stops a reply, not the chat; at the prompt it drops the line", async (t) => {
    // No --max-tokens: the reply would go on to the end of the model's context.
    const pty = startChat(t);
    const ready = await pty.expect(/\n> $/, 0);
    pty.send("Hi\r");
    const started = await pty.expect(/^Hi\n\s*\S/, ready.end);
    pty.send("\x03");
    const stopped = await pty.expect(/\n\(stopped\)\n> $/, started.end);
    const budget = pipeline.header.info.n_ctx_train - promptOf([{role: "user", content: "Hi"}]).length;
    const words = pty.text.slice(ready.end, stopped.end).split(" ").length;
    assert.ok(words < budget / 2, `the reply went on for ${words} words`);
    pty.send("half a line\x03");
    const dropped = await pty.expect(/\n> $/, stopped.end);
    assert.equal(pty.text.slice(stopped.end - 2, dropped.end), "> \n> ", "the line typed is gone, not sent");
    const next = await turn(pty, dropped.end, "Hi");
    assert.ok(next.reply.length > 0);
    pty.send("\x04");
    assert.equal(await pty.exited, 0);
  });
});

test("on Gemma 4's template, whose turn drops the empty thought its prompt opened, the session is cut back to the shared prefix", async (t) => {
  const pipeline = await Pipeline.open({model: gemma4(), build: "single"});
  t.after(() => pipeline.close());
  const promptOf = (messages) => chatTokens(pipeline.header, pipeline.tokenizer, messages);
  const pty = startChat(t, ["--max-tokens", String(MAX_TOKENS)], gemma4());
  const ready = await pty.expect(/\n> $/, 0);
  const question = "What is the capital of France?";
  const first = await turn(pty, ready.end, question);
  const prompt1 = promptOf([{role: "user", content: question}]);
  const expected1 = await greedy(pipeline, prompt1, MAX_TOKENS);
  assert.equal(first.reply, expected1.text);
  const second = await turn(pty, first.end, "Why?");
  const prompt2 = promptOf([{role: "user", content: question}, {role: "assistant", content: expected1.text}, {role: "user", content: "Why?"}]);
  assert.equal(second.reply, (await greedy(pipeline, prompt2, MAX_TOKENS)).text);
  const held = [...prompt1, ...expected1.ids.slice(0, MAX_TOKENS - 1)];
  const kept = shared(held, prompt2);
  assert.ok(kept > 0 && kept < prompt1.length, `the prompts share ${kept} of ${prompt1.length} tokens: no cut tested`);
  assert.deepEqual([second.cached, second.prompted], [kept, prompt2.length - kept]);
  pty.send("/exit\r");
  assert.equal(await pty.exited, 0);
});
