/**
 * A count and its noun in log and command output: `1 address`, `2 addresses`, `0 requests`. English
 * plurals of the nouns used here: `s`, or `es` after s, x, z, ch and sh.
 */

/** `plural(1, 'address')` → `1 address`; `plural(3, 'failed check')` → `3 failed checks`. */
export function plural(count: number, noun: string): string {
  if (count === 1) return `${count} ${noun}`;
  return `${count} ${noun}${/(?:s|x|z|ch|sh)$/.test(noun) ? 'es' : 's'}`;
}
