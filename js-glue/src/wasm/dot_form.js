// The relaxed kernels' form of the Q4_0 dot product (docs/kernels.md, "Two forms of the dot
// product"): the same bits either way, but x86 engines without AVX-VNNI lower the i32 dot-add to
// several instructions, where the i16 pairs form is one pmaddubsw everywhere. Chosen once per
// loaded module, by the module timing both forms itself, or by the caller. No node: imports.
import { withCStrings } from './wasm_copies.js';

export const DOT_FORMS = ['dot-add', 'pairs'];

/**
 * Checks a dotForm option before anything is loaded.
 * @param {string|undefined} dotForm
 * @example checkDotFormOption('pairs')
 */
export function checkDotFormOption(dotForm) {
  if (dotForm !== undefined && !DOT_FORMS.includes(dotForm)) {
    throw new TypeError(`dotForm: expected ${DOT_FORMS.join(' or ')}, got ${JSON.stringify(dotForm)}`);
  }
}

/**
 * What runs and why, from lf_kernel_dot_form's answer (its "form", and its times where it timed).
 * @param {{form: string|null, dot_add_ms?: number, pairs_ms?: number}} seen
 * @param {boolean} forced the caller chose the form
 * @returns {{form: string|null, reason: string, dotAddMs?: number, pairsMs?: number}}
 * @example describeDotForm({ form: 'pairs', dot_add_ms: 1.3, pairs_ms: 1.0 }, false).reason
 */
export function describeDotForm(seen, forced) {
  if (seen.form === null) return { form: null, reason: 'this module runs no relaxed kernels: no dot form to choose' };
  if (forced) return { form: seen.form, reason: `the ${seen.form} form, as the caller chose (dotForm option)` };
  const times = { dotAddMs: seen.dot_add_ms, pairsMs: seen.pairs_ms };
  if (!(seen.dot_add_ms > 0 && seen.pairs_ms > 0)) {
    return { form: seen.form, ...times, reason: `the ${seen.form} form: the clock did not advance while both were timed (as in an edge isolate), so the default` };
  }
  const ms = (x) => `${x.toFixed(3)} ms`;
  return {
    form: seen.form,
    ...times,
    reason: `the ${seen.form} form: ${ms(seen.pairs_ms)} for pairs against ${ms(seen.dot_add_ms)} for dot-add over the same strips in cache` +
      (seen.form === 'pairs' ? '' : ' (pairs must be 5% faster to be chosen)'),
  };
}

/**
 * Chooses the dot form of a loaded module (lf_kernel_dot_form): timed, or the caller's.
 * @param {object} lf a bound module (capi.js)
 * @param {string} [dotForm] 'dot-add' or 'pairs' to force one
 * @returns {{form: string|null, reason: string, dotAddMs?: number, pairsMs?: number}}
 * @example lf.dotForm = chooseDotForm(lf);
 */
export function chooseDotForm(lf, dotForm) {
  checkDotFormOption(dotForm);
  const seen = dotForm === undefined
    ? lf.json(lf.fn.lf_kernel_dot_form(0))
    : withCStrings(lf, [dotForm], ([name]) => lf.json(lf.fn.lf_kernel_dot_form(name)));
  return describeDotForm(seen, dotForm !== undefined);
}
