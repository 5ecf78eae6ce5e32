/**
 * "Did you mean …?": the suggestion a config error adds when a name is close to a valid one
 * (`pas` → `pass`, `round_robin` → `round-robin`). Closeness is the Levenshtein edit distance
 * (V. I. Levenshtein, 1966: the fewest single-character insertions, deletions or substitutions that
 * turn one word into the other), computed with the textbook two-row dynamic programme.
 */

/**
 * The Levenshtein distance between `a` and `b`: how many single-character edits turn one into the other.
 * `levenshtein('pas', 'pass')` is 1, `levenshtein('kitten', 'sitting')` is 3. Counts UTF-16 code units.
 */
export function levenshtein(a: string, b: string): number {
  // previous[j] = distance between the first i−1 characters of a and the first j of b.
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      const deletion = (previous[j] ?? 0) + 1;
      const insertion = (current[j - 1] ?? 0) + 1;
      current.push(Math.min(substitution, deletion, insertion));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/**
 * The candidate closest to `word`, or undefined when none is close enough to be a likely typo.
 * Close enough: at most 2 edits (1 for words of up to 3 characters), and fewer edits than the
 * candidate has characters (so `x` never "means" `ip`). Case differences count as edits, except that
 * a case-insensitive exact match always wins. Ties go to the earlier candidate.
 *
 * @example suggest('pas', ['path', 'pass']) === 'pass'   // path is 2 edits away, pass 1
 */
export function suggest(word: string, candidates: readonly string[]): string | undefined {
  const caseInsensitive = candidates.find((candidate) => candidate.toLowerCase() === word.toLowerCase());
  if (caseInsensitive !== undefined) return caseInsensitive;
  const maxDistance = word.length <= 3 ? 1 : 2;
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = levenshtein(word, candidate);
    if (distance <= maxDistance && distance < candidate.length && distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}
