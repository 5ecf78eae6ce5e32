/**
 * Duplicate member names in a JSON text. RFC 8259 §4 says the names of an object SHOULD be unique
 * and that readers disagree on what a repeated one means (`JSON.parse` and Go's encoding/json take
 * the last, others the first or refuse); I-JSON (RFC 7493 §2.3) forbids them. An admin call such as
 * `{"url": "http://a:1", "url": "http://b:1"}` would then be checked by one reader as one upstream
 * and acted on by another as the other, so the admin API refuses such a body (400) instead of
 * choosing. Names are compared as decoded strings: `"url"` and `"\u0075rl"` are the same name.
 */

/**
 * The first member name that appears twice in one object of `text`, or undefined when every
 * object's names are unique.
 * @param text a text `JSON.parse` accepted (the scan relies on it being valid JSON)
 */
export function firstDuplicateKey(text: string): string | undefined {
  /** One entry per open object (its names so far) or array (null), innermost last. */
  const open: (Set<string> | null)[] = [];
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (char === '{') open.push(new Set());
    else if (char === '[') open.push(null);
    else if (char === '}' || char === ']') open.pop();
    else if (char === '"') {
      const start = i;
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
      let next = i + 1;
      while (text[next] === ' ' || text[next] === '\t' || text[next] === '\n' || text[next] === '\r') next++;
      // A string followed by `:` is a member name, so the innermost open value is an object.
      if (text[next] !== ':') continue;
      const names = open.at(-1) as Set<string>;
      const name = JSON.parse(text.slice(start, i + 1)) as string;
      if (names.has(name)) return name;
      names.add(name);
    }
  }
  return undefined;
}
