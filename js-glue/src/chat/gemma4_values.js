// Gemma 4's argument syntax, the one its chat template writes tool calls in and the model answers
// in: `{key:value,…}` with bare keys, strings between `<|"|>` delimiters, and JSON's numbers,
// true, false and null. Read into JSON text by llama.cpp's grammar (common/chat.cpp, the
// gemma4-* rules): a key is any run of characters but `:` and `}` kept as written, whitespace is
// allowed after `{`, `[`, `:` and `,` and before the closing bracket but not before a comma, and a
// string holds anything up to the next `<|"|>` (quotes, backslashes, newlines) unescaped.
//
// Each reader takes the text and a position and answers {end, json} when a value ends inside
// the text, MORE when the text ends before the value could (more may come), or null when the
// text cannot be such a value whatever follows.

/** The text ran out before the value was decided. */
export const MORE = Object.freeze({ more: true });

export const QUOTE = '<|"|>';

// std::isspace in the C locale, as llama.cpp's space() reads it.
const SPACE = new Set([' ', '\t', '\n', '\v', '\f', '\r']);

function skipSpace(s, i) {
  while (i < s.length && SPACE.has(s[i])) i++;
  return i;
}

/** Whether s[i…] starts with `word`: true, MORE when s ends inside it, false. */
export function startsWith(s, i, word) {
  const n = Math.min(word.length, s.length - i);
  if (s.slice(i, i + n) !== word.slice(0, n)) return false;
  return n === word.length ? true : MORE;
}

// A JSON string's inside: JSON.stringify escapes as llama.cpp's escape_json_string_inner does
// (quote, backslash, \b \f \n \r \t, other controls as \u00xx, the rest as written).
const inner = (text) => JSON.stringify(text).slice(1, -1);

function literal(s, i, word) {
  const at = startsWith(s, i, word);
  return at === true ? { end: i + word.length, json: word } : at === MORE ? MORE : null;
}

function string(s, i) {
  const open = startsWith(s, i, QUOTE);
  if (open !== true) return open === MORE ? MORE : null;
  const close = s.indexOf(QUOTE, i + QUOTE.length);
  if (close < 0) return MORE;
  return { end: close + QUOTE.length, json: `"${inner(s.slice(i + QUOTE.length, close))}"` };
}

const isDigit = (c) => c >= '0' && c <= '9';

// JSON's number, not followed by a character that could extend it (llama.cpp's json_number).
function number(s, i) {
  let j = i;
  if (s[j] === '-') j++;
  if (j >= s.length) return MORE;
  if (s[j] === '0') j++;
  else if (s[j] >= '1' && s[j] <= '9') while (++j < s.length && isDigit(s[j]));
  else return null;
  const digits = (k) => {
    if (k >= s.length) return MORE;
    if (!isDigit(s[k])) return null;
    while (++k < s.length && isDigit(s[k]));
    return k;
  };
  if (s[j] === '.') {
    const k = digits(j + 1);
    if (k === MORE) return MORE;
    if (k !== null) j = k;
  }
  if (s[j] === 'e' || s[j] === 'E') {
    let k = j + 1;
    if (s[k] === '+' || s[k] === '-') k++;
    k = digits(k);
    if (k === MORE) return MORE;
    if (k !== null) j = k;
  }
  if (j >= s.length) return MORE;
  if (/[0-9.eE+-]/.test(s[j])) return null;
  return { end: j, json: s.slice(i, j) };
}

// open ws (close | item ("," ws item)* ws close): a dict's or an array's shape.
function sequence(s, i, open, close, item) {
  if (i >= s.length) return MORE;
  if (s[i] !== open) return null;
  let j = skipSpace(s, i + 1);
  if (j >= s.length) return MORE;
  if (s[j] === close) return { end: j + 1, json: open + close };
  const items = [];
  for (;;) {
    const got = item(s, j);
    if (got === null || got === MORE) return got;
    items.push(got.json);
    j = got.end;
    if (j >= s.length) return MORE;
    if (s[j] !== ',') break;
    j = skipSpace(s, j + 1);
  }
  j = skipSpace(s, j);
  if (j >= s.length) return MORE;
  return s[j] === close ? { end: j + 1, json: open + items.join(',') + close } : null;
}

// key ":" ws value, the key any characters but ":" and "}" (at least one).
function member(s, i) {
  let j = i;
  while (j < s.length && s[j] !== ':' && s[j] !== '}') j++;
  if (j >= s.length) return MORE;
  if (j === i || s[j] !== ':') return null;
  const got = value(s, skipSpace(s, j + 1));
  if (got === null || got === MORE) return got;
  return { end: got.end, json: `"${inner(s.slice(i, j))}":${got.json}` };
}

/** A dict `{key:value,…}` at s[i] as a JSON object's text. */
export function dict(s, i) {
  return sequence(s, i, '{', '}', member);
}

function array(s, i) {
  return sequence(s, i, '[', ']', value);
}

/** Any value at s[i]: the first of string, dict, array, number, true/false, null that is not refused. */
export function value(s, i) {
  if (i >= s.length) return MORE;
  for (const read of [string, dict, array, number, (t, k) => literal(t, k, 'true') ?? literal(t, k, 'false'), (t, k) => literal(t, k, 'null')]) {
    const got = read(s, i);
    if (got !== null) return got;
  }
  return null;
}
