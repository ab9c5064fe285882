// A command's options as --help prints them, from the schema its values are read against: each
// option's value, what it is for, what it accepts, its default and its variable.
import { KINDS } from './kinds.js';

const WIDTH = 100;
const COLUMN = 34;

// The default as a reader types it: free text quoted (a prompt's spaces show), the rest as it is.
function defaultText(spec) {
  if (spec.shown !== undefined) return spec.shown;
  if (spec.default === undefined || spec.default === false) return undefined;
  return spec.kind === 'string' ? JSON.stringify(spec.default) : String(spec.default);
}

// Words to lines of at most WIDTH characters, the first after `head`, the others under the column.
function wrap(head, text) {
  const indent = ' '.repeat(COLUMN);
  const lines = [];
  let line = indent;
  if (head.length + 2 <= COLUMN) line = head.padEnd(COLUMN);
  else lines.push(head);
  for (const word of text.split(' ')) {
    if (line.length > COLUMN && line.length + 1 + word.length > WIDTH) {
      lines.push(line);
      line = indent;
    }
    line += line.length > COLUMN ? ` ${word}` : word;
  }
  lines.push(line);
  return lines.join('\n');
}

/**
 * One line (wrapped) per option of the schema.
 * @example optionsHelp({ threads: { kind: 'integer', min: 1, max: 256, value: 'N', help: 'engine threads' } })
 * // "  --threads N   engine threads; an integer from 1 to 256"
 */
export function optionsHelp(schema) {
  return Object.entries(schema).map(([name, spec]) => {
    const switchOnly = spec.kind === 'boolean';
    const head = `  --${name}${switchOnly ? '' : ` ${spec.value ?? 'VALUE'}`}`;
    // A switch's words are about its variable's text, said by `env ...=1`.
    const { describe } = KINDS[spec.kind];
    const accepts = switchOnly || !describe ? [] : [describe(spec)];
    const shown = defaultText(spec);
    const env = spec.env ? [`env ${spec.env}${switchOnly ? '=1' : ''}`] : [];
    return wrap(head, [spec.help, ...accepts, ...(shown === undefined ? [] : [`default ${shown}`]), ...env].join('; '));
  }).join('\n');
}
