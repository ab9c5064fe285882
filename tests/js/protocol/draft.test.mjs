// MTP drafts on the wire (protocol/draft.js): a drafting logits call's query both ways, each bad
// value refused naming it; the answer's header both ways, checked against the step it answers.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {decodeDraft, encodeDraft, MAX_DRAFT, readDraftQuery} from "../../../js-glue/src/protocol/draft.js";

const N_VOCAB = 1024;

describe("the drafting query", () => {
  test("read back as written; no draft is no drafting", () => {
    assert.deepEqual(readDraftQuery({draft: "4", session: "s-1", tokens: "17,0,1023"}, N_VOCAB), {k: 4, session: "s-1", tokens: [17, 0, 1023]});
    assert.deepEqual(readDraftQuery({draft: "0", session: "s-1", tokens: "5"}, N_VOCAB), {k: 0, session: "s-1", tokens: [5]});
    assert.equal(readDraftQuery({session: "s-1", tokens: "5"}, N_VOCAB), null);
  });

  test("bad values refused by name", () => {
    const refused = (query, pattern) => assert.throws(() => readDraftQuery(query, N_VOCAB), (e) => e.code === "invalid_argument" && pattern.test(e.message));
    refused({draft: "65", session: "s", tokens: "1"}, /^draft: "65" is not a whole number in \[0, 64\]/);
    refused({draft: "-1", session: "s", tokens: "1"}, /^draft: /);
    refused({draft: "2x", session: "s", tokens: "1"}, /^draft: /);
    refused({draft: "2", tokens: "1"}, /^draft: needs session/);
    refused({draft: "2", session: "s"}, /^tokens: the step's input tokens, 1 to 65/);
    refused({draft: "2", session: "s", tokens: ""}, /^tokens: /);
    refused({draft: "2", session: "s", tokens: "1,1024"}, /^tokens: "1024" is not a whole number in \[0, 1023\]/);
    refused({draft: "2", session: "s", tokens: "1,,2"}, /^tokens: /);
    refused({draft: "2", session: "s", tokens: Array(MAX_DRAFT + 2).fill(1).join(",")}, /^tokens: /);
  });
});

describe("the answer's header", () => {
  test("decoded as encoded, the stop's reason with it", () => {
    const draft = {after: 1, token: 9, ids: [4, 4, 1023]};
    assert.deepEqual(decodeDraft(encodeDraft(draft), {rows: 2, k: 3, nVocab: N_VOCAB}), draft);
    const stopped = {after: 0, token: 9, ids: [], stopped: "the drafter's next hidden state has a non-finite value"};
    assert.deepEqual(decodeDraft(encodeDraft(stopped), {rows: 1, k: 3, nVocab: N_VOCAB}), stopped);
    assert.equal(decodeDraft(null, {rows: 1, k: 3, nVocab: N_VOCAB}), null);
  });

  test("what does not answer the step is a bad response naming the header", () => {
    const bad = (raw, step) => assert.throws(() => decodeDraft(raw, {rows: 2, k: 2, nVocab: N_VOCAB, ...step}),
      (e) => e.code === "bad_response" && /^x-layerfold-draft: /.test(e.message));
    bad('{"after":2,"token":1,"ids":[]}');   // after beyond the step's rows
    bad('{"after":0,"token":1024,"ids":[]}');
    bad('{"after":0,"token":1,"ids":[1,2,3]}');  // more than asked
    bad('{"after":0,"token":1,"ids":[-1]}');
    bad('{"after":0,"token":1}');
    bad('{"after":0.5,"token":1,"ids":[]}');
    bad('{"after":0,"token":1,"ids":[],"stopped":7}');
    bad("not json");
    bad(`{"after":0,"token":1,"ids":[],"stopped":"${"x".repeat(5000)}"}`);
  });
});
