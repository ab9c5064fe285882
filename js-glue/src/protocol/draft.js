// MTP drafts on the logits call of the node holding the head (docs/http-api.md, "Routes"): the
// request's query asks for k drafts after a session's step (draft=k,
// session=ID, tokens=the step's input tokens of its rows), the answer's x-layerfold-draft header
// carries them as {"after", "token", "ids"} (and "stopped" once the session's drafts stopped):
// encoded and checked here for both ends.
import { LayerfoldError } from '../wasm/capi.js';

export const DRAFT = 'x-layerfold-draft';
/** The most tokens drafted at once, and the most rows a drafting step may have. */
export const MAX_DRAFT = 64;

const bad = (code, what, why) => new LayerfoldError(code, `${what}: ${why}`);

// A whole number in [min, max] from its decimal text, or the error `code` naming `what`.
function whole(text, min, max, code, what) {
  const value = /^\d{1,10}$/.test(text ?? '') ? Number(text) : NaN;
  if (!(value >= min && value <= max)) throw bad(code, what, `${JSON.stringify(String(text).slice(0, 20))} is not a whole number in [${min}, ${max}]`);
  return value;
}

/**
 * A drafting logits call's query parameters.
 * @example draftQuery({ session: 's-1', tokens: [17, 4], k: 4 }) // { session: 's-1', draft: '4', tokens: '17,4' }
 */
export function draftQuery({ session, tokens, k }) {
  return { session, draft: String(k), tokens: tokens.join(',') };
}

/**
 * The other way, from the query's draft, session and tokens values (draft absent: null); each
 * refused with 'invalid_argument' naming it: k above MAX_DRAFT, tokens outside [0, nVocab) or more
 * than MAX_DRAFT + 1 of them. The session id is the caller's to check.
 * @example readDraftQuery({ draft: '4', session: 's-1', tokens: '17,4' }, 262144) // { k: 4, session: 's-1', tokens: [17, 4] }
 */
export function readDraftQuery({ draft, session, tokens }, nVocab) {
  if (draft === undefined) return null;
  const k = whole(draft, 0, MAX_DRAFT, 'invalid_argument', 'draft');
  if (session === undefined) throw bad('invalid_argument', 'draft', 'needs session, the session whose step it follows');
  const list = String(tokens ?? '').split(',');
  if (tokens === undefined || tokens === '' || list.length > MAX_DRAFT + 1) {
    throw bad('invalid_argument', 'tokens', `the step's input tokens, 1 to ${MAX_DRAFT + 1} of them, comma-separated`);
  }
  return { k, session, tokens: list.map((t) => whole(t, 0, nVocab - 1, 'invalid_argument', 'tokens')) };
}

/**
 * The answer's header value for LayerNode.draftAfter's result.
 * @example encodeDraft({ after: 0, token: 9, ids: [4, 4] }) // '{"after":0,"token":9,"ids":[4,4]}'
 */
export function encodeDraft({ after, token, ids, stopped }) {
  return JSON.stringify({ after, token, ids, ...(stopped ? { stopped: stopped.slice(0, 300) } : {}) });
}

/**
 * The other way, checked against the request (rows: the step's rows, k: the drafts asked for):
 * after in [0, rows), token and ids within the vocabulary, at most k ids; anything else is
 * 'bad_response' naming the header. Absent: null (a node without a draft model).
 * @example decodeDraft('{"after":0,"token":9,"ids":[4]}', { rows: 1, k: 4, nVocab: 1024 }) // { after: 0, token: 9, ids: [4] }
 */
export function decodeDraft(raw, { rows, k, nVocab }) {
  if (raw === null || raw === undefined) return null;
  let value = null;
  try {
    value = raw.length <= 4096 ? JSON.parse(raw) : null;
  } catch {
    value = null;
  }
  const id = (x) => Number.isSafeInteger(x) && x >= 0 && x < nVocab;
  const ok = value !== null && typeof value === 'object' && Number.isSafeInteger(value.after) && value.after >= 0 && value.after < rows &&
    id(value.token) && Array.isArray(value.ids) && value.ids.length <= k && value.ids.every(id) &&
    (value.stopped === undefined || typeof value.stopped === 'string');
  if (!ok) throw bad('bad_response', DRAFT, `${JSON.stringify(raw.slice(0, 80))} is not {"after", "token", "ids"} of this step`);
  return { after: value.after, token: value.token, ids: value.ids, ...(value.stopped ? { stopped: value.stopped } : {}) };
}
