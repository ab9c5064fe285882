// The kinds of value a CLI option takes. Each kind reads an option's text (from the command line
// or the environment) into its value, or gives undefined when the text is not one, and a kind
// that can refuse says in words what it accepts: the same words end a refusal and a --help line,
// so they cannot disagree.
const INTEGER = /^[-+]?\d+$/;
// Decimal numbers only: Number() would also take "", " ", "0x10" and "Infinity".
const NUMBER = /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i;
const BYTE_UNITS = { '': 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30 };
const BYTES = /^(\d+(?:\.\d+)?)\s*(|KiB|MiB|GiB)$/;

// "from 1 to 256", ">= 1", "> 0 and <= 1": the bounds an option sets, unbounded above by default.
function bounds({ min, max = Infinity, minExclusive = false }) {
  const low = `${minExclusive ? '>' : '>='} ${min}`;
  if (max === Infinity) return low;
  return minExclusive ? `${low} and <= ${max}` : `from ${min} to ${max}`;
}

const inRange = (value, { min, max = Infinity, minExclusive = false }) =>
  (minExclusive ? value > min : value >= min) && value <= max;

export const KINDS = {
  integer: {
    read: (text, spec) => {
      const value = INTEGER.test(text) ? Number(text) : NaN;
      return Number.isSafeInteger(value) && inRange(value, spec) ? value : undefined;
    },
    describe: (spec) => `an integer ${bounds(spec)}`,
  },
  number: {
    read: (text, spec) => {
      const value = NUMBER.test(text) ? Number(text) : NaN;
      return Number.isFinite(value) && inRange(value, spec) ? value : undefined;
    },
    describe: (spec) => `a number ${bounds(spec)}`,
  },
  // A count of bytes, whole or with a binary unit: "134217728", "128MiB", "1.5GiB".
  bytes: {
    read: (text, spec) => {
      const m = BYTES.exec(text.trim());
      const value = m ? Math.floor(Number(m[1]) * BYTE_UNITS[m[2]]) : NaN;
      return Number.isSafeInteger(value) && inRange(value, spec) ? value : undefined;
    },
    describe: (spec) => `a number of bytes ${bounds(spec)}, optionally with KiB, MiB or GiB`,
  },
  choice: {
    read: (text, spec) => (spec.choices.includes(text) ? text : undefined),
    describe: (spec) => `one of ${spec.choices.join(', ')}`,
  },
  // Free text, never refused here: what it names (a file, a node list) is checked where it is used.
  string: { read: (text) => text },
  // Free text, repeatable: every occurrence, in order.
  list: { read: (text) => text },
  // A switch: given or not on the command line; from the environment 1 (on) or 0 (off).
  boolean: {
    read: (text) => ({ 1: true, 0: false })[text],
    describe: () => '1 (or 0, or unset)',
  },
};
