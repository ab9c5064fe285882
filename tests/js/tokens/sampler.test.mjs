// The sampler against its definition (js-glue/src/tokens/sampler.js) written plainly: every
// candidate sorted, then cut, then drawn. Both take the same draws, so the same seed must give
// the same token on random logits and on the edges (ties, -Infinity, all equal, top_k 1, tiny
// top_p, min_p).
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LogitAdjustments} from "../../../js-glue/src/tokens/logit_adjustments.js";
import {BLOCK, MAX_TRIES, mulberry32, Sampler} from "../../../js-glue/src/tokens/sampler.js";
import {topCandidates} from "../../../js-glue/src/tokens/top_candidates.js";

// Every candidate of a logits vector in order, sorted once per vector (a full sort of 262144
// ids takes a good part of a second).
const sortedOnce = new WeakMap();
function candidateOrder(logits) {
  if (!sortedOnce.has(logits)) {
    const x = logits;
    const ids = [...x.keys()].filter((i) => x[i] > -Infinity);
    sortedOnce.set(logits, ids.sort((a, b) => (x[b] !== x[a] ? x[b] - x[a] : a - b)));
  }
  return [...sortedOnce.get(logits)];
}

// The definition with a full sort and no shortcut; random() gives its draws.
function reference(logits, {temperature = 0, topK = 0, topP = 1, minP = 0}, random) {
  const x = logits;
  let ids = candidateOrder(logits);
  if (ids.length === 0) return null;
  if (temperature <= 0) return ids[0];
  const m = x[ids[0]];
  const withTopK = topK > 0 && topK < x.length;
  if (withTopK) ids = ids.slice(0, topK);
  if (topP < 1) {
    const z = [...ids].sort((a, b) => a - b).reduce((s, id) => s + Math.exp(x[id] - m), 0);
    let cum = 0;
    let threshold = -Infinity;
    for (const id of ids) {
      cum += Math.exp(x[id] - m);
      if (cum >= topP * z) {
        threshold = x[id];
        break;
      }
    }
    ids = ids.filter((id) => x[id] >= threshold);
  }
  if (minP > 0) ids = ids.filter((id) => x[id] >= m + Math.log(minP));
  ids.sort((a, b) => a - b);
  const w = (id) => Math.exp((x[id] - m) * (1 / temperature));
  const walk = () => {
    const r = random() * ids.reduce((s, id) => s + w(id), 0);
    let cum = 0;
    for (const id of ids) {
      cum += w(id);
      if (cum > r) return id;
    }
    throw new Error("reference: ran past the end");
  };
  if (withTopK) return walk();
  // Rejection from each block's bound: its length times the w of its best candidate.
  const isCandidate = new Set(ids);
  const bestOf = new Map();
  for (const id of ids) bestOf.set(Math.floor(id / BLOCK), Math.max(bestOf.get(Math.floor(id / BLOCK)) ?? -Infinity, x[id]));
  const blocks = [];
  for (let start = 0; start < x.length; start += BLOCK) {
    const length = Math.min(BLOCK, x.length - start);
    const best = bestOf.get(start / BLOCK) ?? -Infinity;
    blocks.push({start, length, best, bound: length * Math.exp((best - m) * (1 / temperature))});
  }
  const total = blocks.reduce((s, b) => s + b.bound, 0);
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const r = random() * total;
    let cum = 0;
    const block = blocks.find((b) => (cum += b.bound) > r);
    const id = block.start + Math.floor(random() * block.length);
    const u = random();
    if (isCandidate.has(id) && u < Math.exp((x[id] - block.best) * (1 / temperature))) return id;
  }
  return walk();
}

// The fast sampler and the reference, each with its own generator from the same seed.
function both(options, logitsList, seed) {
  const sampler = new Sampler({...options, seed});
  const random = mulberry32(seed);
  return logitsList.map((logits) => [sampler.sample(logits), reference(logits, options, random)]);
}

function randomLogits(n, seed, spread) {
  const r = mulberry32(seed);
  return Float32Array.from({length: n}, () => (r() - 0.5) * spread);
}

const SETTINGS = [
  {temperature: 0},
  {temperature: 1},
  {temperature: 0.9},
  {temperature: 0.3},
  {temperature: 2},
  {temperature: 0.9, topK: 40},
  {temperature: 0.9, topK: 1},
  {temperature: 1, topP: 0.9},
  {temperature: 1, topP: 1e-9},
  {temperature: 0.7, topP: 0.5, topK: 100},
  {temperature: 1, minP: 0.05},
  {temperature: 1.3, topK: 300, topP: 0.95, minP: 0.1},
];

describe("sampler", () => {
  test("the same token as the full-sort reference on random logits, for every setting", () => {
    for (const [n, spread] of [[262144, 1], [262144, 40], [5000, 12], [5000, 300], [1, 3], [1025, 8]]) {
      const list = Array.from({length: n > 10000 ? 3 : 8}, (_, i) => randomLogits(n, 1000 * n + i + spread, spread));
      for (const options of SETTINGS) {
        both(options, list, 17).forEach(([fast, ref], i) => assert.equal(fast, ref, `n ${n}, spread ${spread}, ${JSON.stringify(options)}, logits ${i}`));
      }
    }
  });

  test("ties, -Infinity, all equal: the same token as the reference, and a banned token never", () => {
    const n = 3000;
    const equal = new Float32Array(n).fill(0.5);
    const ties = randomLogits(n, 5, 4).map((v) => Math.round(v));
    const banned = randomLogits(n, 6, 4).map((v, i) => (i % 3 === 0 ? -Infinity : v));
    const oneLeft = new Float32Array(n).fill(-Infinity);
    oneLeft[1234] = -50;
    const withNaN = randomLogits(n, 7, 4).map((v, i) => (i % 5 === 0 ? NaN : v));
    const cases = {equal, ties, banned, oneLeft, withNaN};
    for (const [name, logits] of Object.entries(cases)) {
      for (const options of SETTINGS) {
        for (let seed = 1; seed <= 30; seed++) {
          const [[fast, ref]] = both(options, [logits], seed);
          assert.equal(fast, ref, `${name}, ${JSON.stringify(options)}, seed ${seed}`);
          assert.ok(logits[fast] > -Infinity, `${name}: a -Infinity or NaN logit was chosen`);
        }
      }
    }
    // Equal logits: top_k 1 and greedy take the lowest id; a tiny top_p keeps one.
    assert.equal(new Sampler({temperature: 1, topK: 1, seed: 3}).sample(equal), 0);
    assert.equal(new Sampler({temperature: 0}).sample(equal), 0);
    // A tiny top_p keeps the best logit's whole run of ties and nothing else.
    const best = Math.max(...ties);
    const drawn = new Set(Array.from({length: 200}, (_, seed) => new Sampler({temperature: 1, topP: 1e-9, seed}).sample(ties)));
    assert.deepEqual([...drawn].map((id) => ties[id]), [...drawn].map(() => best));
    assert.ok(drawn.size > 1, "a run of equal best logits is kept whole");
  });

  test("a rejection draw refused MAX_TRIES times falls back to a walk over every candidate", () => {
    // Draws stuck near 1 always propose a block's last id, which is banned here.
    const logits = randomLogits(3 * BLOCK, 9, 4).map((v, i) => (i % BLOCK === BLOCK - 1 ? -Infinity : v));
    const stuck = () => 0.9999999;
    const fast = new Sampler({temperature: 1, random: stuck}).sample(logits);
    assert.equal(fast, reference(logits, {temperature: 1}, stuck));
    assert.equal(fast, 3 * BLOCK - 2, "the walk's last candidate");
  });

  test("the draws spread over the candidates in proportion to their weights", () => {
    // Three tokens with probabilities 1/2, 1/3, 1/6 at temperature 1; the rest banned.
    const logits = new Float32Array(4096).fill(-Infinity);
    [logits[10], logits[2000], logits[4000]] = [Math.log(3), Math.log(2), 0];
    const sampler = new Sampler({temperature: 1, seed: 99});
    const counts = {10: 0, 2000: 0, 4000: 0};
    for (let i = 0; i < 6000; i++) counts[sampler.sample(logits)]++;
    assert.ok(Math.abs(counts[10] / 6000 - 1 / 2) < 0.03, JSON.stringify(counts));
    assert.ok(Math.abs(counts[2000] / 6000 - 1 / 3) < 0.03, JSON.stringify(counts));
    assert.ok(Math.abs(counts[4000] / 6000 - 1 / 6) < 0.03, JSON.stringify(counts));
    // Four tokens of one block with probabilities 0.4, 0.3, 0.2, 0.1.
    const block = new Float32Array(2 * BLOCK).fill(-Infinity);
    [4, 3, 2, 1].forEach((w, i) => (block[7 + 50 * i] = Math.log(w)));
    const within = new Sampler({temperature: 1, seed: 5});
    const seen = new Map();
    for (let i = 0; i < 8000; i++) {
      const id = within.sample(block);
      seen.set(id, (seen.get(id) ?? 0) + 1);
    }
    [4, 3, 2, 1].forEach((w, i) => assert.ok(Math.abs(seen.get(7 + 50 * i) / 8000 - w / 10) < 0.025, JSON.stringify([...seen])));
  });

  test("the same seed draws the same tokens; every logit banned is a clear error", () => {
    const list = Array.from({length: 20}, (_, i) => randomLogits(8192, i, 6));
    const run = (seed) => {
      const s = new Sampler({temperature: 0.9, topP: 0.95, seed});
      return list.map((l) => s.sample(l));
    };
    assert.deepEqual(run(7), run(7));
    assert.notDeepEqual(run(7), run(8));
    assert.throws(() => new Sampler({temperature: 1}).sample(new Float32Array(10).fill(-Infinity)), /every logit is -Infinity or NaN/);
    assert.throws(() => new Sampler({temperature: 0}).sample(new Float32Array(10).fill(NaN)), /every logit is -Infinity or NaN/);
    assert.equal(new Sampler({temperature: 1, topP: 0.5}).sample(Float32Array.from([1, Infinity, 2, Infinity])), 1, "+Infinity: the first one");
  });

  test("topCandidates: the k best, best first, lower id first among ties", () => {
    const x = Float32Array.from([1, 3, 3, -Infinity, 2, 3, NaN, 0]);
    assert.deepEqual([...topCandidates(x, 4)], [1, 2, 5, 4]);
    assert.deepEqual([...topCandidates(x, 10)], [1, 2, 5, 4, 0, 7]);
    assert.deepEqual([...topCandidates(x, 2)], [1, 2]);
  });
});

describe("logit adjustments", () => {
  test("logit bias, then the repetition penalty over prompt and generation, then presence and frequency over the generation", () => {
    const adj = new LogitAdjustments({logitBias: new Map([[0, 5], [1, -100]]), repetitionPenalty: 2, presencePenalty: 0.5, frequencyPenalty: 0.25});
    adj.notePrompt([2, 3]);
    adj.accept(4);
    adj.accept(4);
    adj.accept(3);
    const x = Float32Array.from([1, 1, 4, -4, 6, 7]);
    adj.apply(x);
    // 0: 1 + 5; 1: 1 - 100; 2: prompt only, 4 / 2; 3: -4 · 2, generated once: - 0.25 - 0.5;
    // 4: 6 / 2, generated twice: - 0.5 - 0.5; 5: untouched.
    assert.deepEqual([...x], [6, -99, 2, -8.75, 2, 7]);
  });

  test("a biased or penalized sampler picks what the adjusted logits make best", () => {
    const logits = Float32Array.from([5, 4, 3, 2]);
    assert.equal(new Sampler({temperature: 0, logitBias: new Map([[3, 100]])}).sample(logits), 3);
    assert.equal(new Sampler({temperature: 0.8, seed: 4, logitBias: new Map([[3, 100]])}).sample(logits), 3);
    const banned = new Sampler({temperature: 5, seed: 4, logitBias: new Map([[0, -100], [1, -100], [2, -100]])});
    for (let i = 0; i < 50; i++) assert.equal(banned.sample(logits), 3);
    const penalized = new Sampler({temperature: 0, frequencyPenalty: 2});
    assert.equal(penalized.sample(logits), 0);
    penalized.accept(0);
    assert.equal(penalized.sample(logits), 1, "5 - 2 < 4");
    assert.deepEqual([...logits], [5, 4, 3, 2], "the model's logits are not changed");
  });
});
