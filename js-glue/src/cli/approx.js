// The approximate modes on the command line (docs/approximate.md): the flags, the options they
// make for Pipeline.open, and the "approximate: ..." lines validate prints.
import { approxFromQuery } from '../protocol/approx_options.js';

// The engine's longest exit window (kMaxExitWindow, src/approx/approx.h).
export const MAX_EXIT_WINDOW = 16;

/** The modes' options (read_options.js schema) of validate and generate, each off by default. */
export const APPROX_CLI_OPTIONS = {
  'truncated-attention': { kind: 'boolean', help: 'approximate mode: truncated attention (docs/approximate.md)' },
  'truncation-threshold': { kind: 'number', min: 0, max: 1, value: 'T', help: 'with --truncated-attention: its error bound', shown: 0.15 },
  'early-exit': { kind: 'boolean', help: 'approximate mode: the last row exits early (needs --exit-threshold)' },
  'exit-threshold': { kind: 'number', min: 0, value: 'T', help: 'with --early-exit: the summed updates below which a row exits (calibrate-exit finds one)' },
  'exit-window': { kind: 'integer', min: 1, max: MAX_EXIT_WINDOW, value: 'W', help: 'with --early-exit: the layers whose updates are summed', shown: 2 },
  'ffn-top-k': { kind: 'number', min: 0, max: 1e9, value: 'K', help: 'approximate mode: top-K gate FFN, K a fraction <= 1 of the features or a count' },
  'ffn-top-k-layers': { kind: 'string', value: 'L:K,...', help: 'top-K gate FFN per layer, overriding --ffn-top-k' },
  'ffn-top-k-threshold': { kind: 'number', min: 0, max: 1, value: 'T', help: 'with --ffn-top-k: the dropped gate share above which a row runs dense', shown: 0.1 },
};

// Flags that only mean something with their mode's switch.
const NEEDS = {
  'truncation-threshold': 'truncated-attention', 'exit-threshold': 'early-exit', 'exit-window': 'early-exit',
  'ffn-top-k-threshold': 'ffn-top-k',
};

/**
 * The options read (read_options.js, each value within its bounds) -> Pipeline.open's approx
 * ({} when every mode is off), spelled as a forward's query spells them
 * (protocol/approx_options.js); ffn-top-k-layers' layers and Ks are the engine's to check, at
 * the first forward, which names a bad one.
 * @example approxFromFlags({ 'early-exit': true, 'exit-threshold': 0.05 }) // { earlyExit: true, exitThreshold: 0.05 }
 */
export function approxFromFlags(options) {
  for (const [flag, mode] of Object.entries(NEEDS)) {
    const on = mode === 'ffn-top-k' ? options['ffn-top-k'] !== undefined || options['ffn-top-k-layers'] !== undefined : options[mode];
    if (options[flag] !== undefined && !on) throw new Error(`--${flag} needs --${mode}`);
  }
  if (options['early-exit'] && options['exit-threshold'] === undefined) {
    throw new Error('--early-exit needs --exit-threshold T (layerfold calibrate-exit finds one)');
  }
  const pairs = [];
  for (const flag of Object.keys(APPROX_CLI_OPTIONS)) {
    const value = options[flag];
    if (value === undefined || value === false) continue;
    pairs.push([flag.replaceAll('-', '_'), value === true ? '1' : String(value)]);
  }
  return approxFromQuery(pairs, (name) => `--${name.replaceAll('_', '-')}`);
}

/**
 * What the modes did over every node of a step (Pipeline.step's timings), one summary per mode
 * that was on.
 * @example approxSummaries(timings, { earlyExit: true, exitThreshold: 0.05 }, 60) // [{ mode: 'early exit', exitLayer: 41, ... }]
 */
export function approxSummaries(timings, approx, nLayer) {
  const stats = timings.map((t) => t.approx).filter(Boolean);
  const summaries = [];
  const sum = (list, key) => list.reduce((total, s) => total + s[key], 0);
  const attention = stats.map((s) => s.truncated_attention).filter((s) => s.rows > 0);
  if (attention.length > 0) {
    const total = sum(attention, 'v_keys_total');
    summaries.push({
      mode: 'truncated attention', rows: sum(attention, 'rows'), truncatedRows: sum(attention, 'truncated_rows'),
      fallbackRows: sum(attention, 'fallback_rows'), vWorkSkipped: total ? 1 - sum(attention, 'v_keys_kept') / total : 0,
      maxErrorBound: Math.max(...attention.map((s) => s.max_error_bound)),
    });
  }
  const ffn = stats.map((s) => s.ffn_top_k).filter((s) => s.rows > 0);
  if (ffn.length > 0) {
    const total = sum(ffn, 'features_total');
    summaries.push({
      mode: 'top-K FFN', rows: sum(ffn, 'rows'), fallbackRows: sum(ffn, 'fallback_rows'),
      featuresSkipped: total ? 1 - sum(ffn, 'features_kept') / total : 0,
      maxDroppedGateMass: Math.max(...ffn.map((s) => s.max_dropped_gate_mass)),
    });
  }
  const exits = stats.map((s) => s.early_exit);
  if (approx.earlyExit) {
    const exitLayer = exits.at(-1)?.exit_layer ?? -1;
    summaries.push({ mode: 'early exit', exitLayer, layersSkipped: sum(exits, 'layers_skipped'), nLayer });
  }
  return summaries;
}

/** One summary as validate prints it after "approximate: ". */
export function describeApprox(a) {
  if (a.mode === 'truncated attention') {
    return `truncated attention, ${(100 * a.vWorkSkipped).toFixed(0)}% of V work skipped, max bound ${a.maxErrorBound.toPrecision(2)} ` +
      `(${a.truncatedRows} of ${a.rows} rows truncated, ${a.fallbackRows} ran exactly)`;
  }
  if (a.mode === 'top-K FFN') {
    return `top-K FFN, ${(100 * a.featuresSkipped).toFixed(0)}% of up/down features skipped, max dropped gate mass ` +
      `${a.maxDroppedGateMass.toPrecision(2)} (${a.rows - a.fallbackRows} of ${a.rows} rows top-K, ${a.fallbackRows} ran dense)`;
  }
  return a.exitLayer < 0
    ? `early exit, the last token ran all ${a.nLayer} layers`
    : `early exit after layer ${a.exitLayer} of ${a.nLayer} (${a.layersSkipped} layers skipped for the last token)`;
}
