// "did you mean" for a mistyped command or option: the known name fewest edits away, when it is
// close enough to be the one meant.

// Levenshtein distance: insertions, deletions and substitutions of one character each.
function editDistance(a, b) {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return previous[b.length];
}

/**
 * The known name nearest to `typed`, or null when none is within a third of its length (at
 * least 2 edits): beyond that a suggestion is a guess.
 * @example didYouMean('thread', ['threads', 'nodes']) // 'threads'
 */
export function didYouMean(typed, known) {
  let best = null;
  let bestDistance = Math.max(2, Math.floor(typed.length / 3)) + 1;
  for (const name of known) {
    const distance = editDistance(typed, name);
    if (distance < bestDistance) [best, bestDistance] = [name, distance];
  }
  return best;
}
