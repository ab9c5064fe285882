// layerfold calibrate-exit: the early-exit threshold τ (docs/approximate.md) for a target top-1
// agreement with the full model on a token corpus. One exact pass gives every position's
// relative updates per layer, hence the τ values at which its exit would change; real runs with
// early exit on then decide, because a token that exits changes the caches later tokens read, so
// the exact pass only predicts.
import fs from 'node:fs';

import { MAX_EXIT_WINDOW } from './approx.js';
import { openPipeline } from './open_pipeline.js';
import { MODEL, PIPELINE_OPTIONS } from './options/shared.js';
import { redactUrl } from '../log/redact.js';

const f32 = new Float32Array(1);
const f32Bits = new Uint32Array(f32.buffer);

// The smallest f32 above x ≥ 0: the engine exits when its f64 window sum is below its f32
// threshold, so this is the smallest threshold that lets a sum of x exit.
function f32Above(x) {
  f32[0] = x;
  if (f32[0] <= x) f32Bits[0] += 1;
  return f32[0];
}

/**
 * One position's exact-run updates [n_layer] -> per layer, the smallest τ at which its row would
 * exit after that layer (Infinity where it cannot: before the window is full, and at the last
 * layer, where exiting skips nothing). Sums run oldest first in f64, as the engine's do.
 * @example exitThresholds([0.9, 0.2, 0.1, 0.3], 2) // [Infinity, 1.100000023841858, 0.30000001192092896, Infinity]
 */
export function exitThresholds(updates, window) {
  return updates.map((_, l) => {
    if (l < window - 1 || l === updates.length - 1) return Infinity;
    let sum = 0;
    for (let j = l - window + 1; j <= l; j++) sum += updates[j];
    return f32Above(sum);
  });
}

/**
 * Every position's updates [positions][n_layer] -> the τ values at which some position's exit
 * layer changes, ascending, each with the layers per position it would skip if later tokens saw
 * the exact caches: [{threshold, predictedLayersSkipped}]. A position exits after the first layer
 * whose threshold is ≤ τ, so only the layers that lower its running minimum matter.
 * @example exitCandidates([[0.9, 0.2, 0.1, 0.3]], 2) // [{threshold: 0.30000001192092896, predictedLayersSkipped: 1}, {threshold: 1.100000023841858, predictedLayersSkipped: 2}]
 */
export function exitCandidates(positions, window) {
  const steps = new Map();  // τ -> change in layers skipped, summed over positions, from that τ up
  for (const updates of positions) {
    const nLayer = updates.length;
    let lowest = Infinity;
    let skippedAbove = 0;  // layers skipped for τ at the current record and above, up to the next
    const records = [];
    for (const [l, t] of exitThresholds(updates, window).entries()) {
      if (t < lowest) {
        lowest = t;
        records.push({ t, skipped: nLayer - 1 - l });
      }
    }
    // From the lowest record up, each earlier layer's record adds the layers between them.
    for (const { t, skipped } of records.reverse()) {
      steps.set(t, (steps.get(t) ?? 0) + skipped - skippedAbove);
      skippedAbove = skipped;
    }
  }
  let total = 0;
  return [...steps.keys()].sort((a, b) => a - b).map((threshold) => {
    total += steps.get(threshold);
    return { threshold, predictedLayersSkipped: total / positions.length };
  });
}

function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

// tokens through a fresh session one token a step, teacher-forced, with early exit at threshold
// τ (0: never exits, the exact model): per position the top-1 next token, its row's relative
// update per layer (−1 where skipped) and the layers it skipped.
async function teacherForced(pipeline, tokens, threshold, window) {
  const view = pipeline.withApprox({ earlyExit: true, exitThreshold: threshold, exitWindow: window });
  const rows = [];
  try {
    for (const token of tokens) {
      const { logits, timings } = await view.step('calibrate', [token]);
      const exits = timings.map((t) => t.approx.early_exit);
      rows.push({
        top1: argmax(logits),
        updates: exits.flatMap((e) => e.row_updates),
        layersSkipped: exits.reduce((n, e) => n + e.layers_skipped, 0),
      });
    }
  } finally {
    await view.dropSession('calibrate');
  }
  return rows;
}

export const CALIBRATE_EXIT_OPTIONS = {
  model: { ...MODEL, help: 'the GGUF to calibrate (required)', shown: undefined },
  corpus: { kind: 'string', value: 'FILE', help: 'UTF-8 text to measure the agreement on (required)' },
  agreement: { kind: 'number', min: 0, minExclusive: true, max: 1, value: 'A', help: 'the top-1 agreement with the full model to keep', default: 0.99 },
  'exit-window': { kind: 'integer', min: 1, max: MAX_EXIT_WINDOW, value: 'W', help: 'the layers whose updates are summed', default: 2 },
  positions: { kind: 'integer', min: 1, max: 1 << 20, value: 'N', help: 'the corpus tokens run, from its start', default: 256 },
  ...PIPELINE_OPTIONS,
};

// The corpus's text, or an error naming what is missing or unreadable.
function corpusText(options) {
  if (!options.model) throw new Error('--model is required: the GGUF to calibrate');
  if (!options.corpus) throw new Error('--corpus is required: a UTF-8 text file to measure agreement on');
  let text;
  try {
    text = fs.readFileSync(options.corpus, 'utf8');
  } catch (error) {
    throw new Error(`--corpus ${options.corpus}: cannot read it (${error.code ?? error.message})`);
  }
  if (text.trim() === '') throw new Error(`--corpus ${options.corpus} is empty: calibration needs text to run the model on`);
  return text;
}

/** layerfold calibrate-exit (see the file comment); returns the exit code. */
export async function calibrateExit(options) {
  const text = corpusText(options);
  const { agreement: target, 'exit-window': window, positions: maxPositions } = options;
  const pipeline = await openPipeline(options.model, options);
  try {
    const corpusTokens = pipeline.tokenizer.encode(text, { addBos: true });
    const tokens = corpusTokens.slice(0, maxPositions);
    const nLayer = pipeline.nodes.at(-1).layers[1];
    const progress = (line) => { if (!options.json) console.error(`calibrate-exit: ${line}`); };
    progress(`exact pass over ${tokens.length} positions`);
    const exact = await teacherForced(pipeline, tokens, 0, window);
    const candidates = exitCandidates(exact.map((row) => row.updates), window);

    // Bisection over the candidates: `lo` met the target in a real run (−1: τ = 0, the exact
    // model), `hi` did not (or lies beyond the list).
    const runs = [];
    let chosen = { threshold: 0, agreeing: tokens.length, agreement: 1, layersSkipped: 0 };
    let lo = -1;
    let hi = candidates.length;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      const rows = await teacherForced(pipeline, tokens, candidates[mid].threshold, window);
      const agreeing = rows.filter((row, i) => row.top1 === exact[i].top1).length;
      const run = {
        ...candidates[mid], agreeing, agreement: agreeing / tokens.length,
        layersSkipped: rows.reduce((n, row) => n + row.layersSkipped, 0) / tokens.length,
      };
      runs.push(run);
      progress(`τ ${run.threshold}: agreement ${run.agreement.toFixed(4)}, ${run.layersSkipped.toFixed(2)} layers skipped per token`);
      if (run.agreement >= target) [lo, chosen] = [mid, run];
      else hi = mid;
    }
    const result = {
      model: redactUrl(options.model), corpus: options.corpus, corpusTokens: corpusTokens.length, positions: tokens.length, nLayer,
      exitWindow: window, target, threshold: chosen.threshold, agreement: chosen.agreement, agreeing: chosen.agreeing,
      layersSkipped: chosen.layersSkipped, layersSkippedFraction: chosen.layersSkipped / nLayer,
      candidates: candidates.length, runs: runs.map(({ threshold, predictedLayersSkipped, agreement, layersSkipped }) =>
        ({ threshold, predictedLayersSkipped, agreement, layersSkipped })),
    };
    if (options.json) console.log(JSON.stringify(result));
    else report(result);
    return 0;
  } finally {
    await pipeline.close();
  }
}

function report(r) {
  console.log(`model      ${r.model}`);
  console.log(`corpus     ${r.corpus}: ${r.corpusTokens} tokens with BOS, the first ${r.positions} run one a step, teacher-forced`);
  console.log(`target     top-1 agreement >= ${r.target} with the full model, exit window ${r.exitWindow}`);
  if (r.threshold === 0) {
    console.log('τ          0: early exit never fires, which is the full model (agreement 1 by definition); ' +
      (r.candidates === 0 ? 'no position could exit before the last layer' : 'no candidate τ met the target'));
  } else {
    console.log(`τ          ${r.threshold}   (layerfold validate|generate --early-exit --exit-threshold ${r.threshold} --exit-window ${r.exitWindow})`);
    console.log(`measured   agreement ${r.agreement.toFixed(4)} (${r.agreeing} of ${r.positions} positions), ` +
      `${r.layersSkipped.toFixed(2)} of ${r.nLayer} layers skipped per token (${(100 * r.layersSkippedFraction).toFixed(1)}%)`);
  }
  console.log(`\n${r.runs.length} run(s), bisection over ${r.candidates} candidate τ from the exact pass:`);
  console.log('  τ               predicted skipped   agreement   layers skipped');
  for (const run of r.runs) {
    console.log(`  ${String(run.threshold.toPrecision(8)).padEnd(16)}${run.predictedLayersSkipped.toFixed(2).padStart(17)}` +
      `${run.agreement.toFixed(4).padStart(12)}${run.layersSkipped.toFixed(2).padStart(17)}`);
  }
}
