/**
 * How different backends read the path they receive, written independently of
 * src/gateway/request-target.ts so the tests can check that the proxy's choice of route is the one
 * every reading serves:
 *
 * - `literal`: the bytes as they are (a backend that routes on the raw path);
 * - `decoding`: every escape decoded, then RFC 3986 §5.2.4 remove_dot_segments as the RFC writes
 *   it (steps A–E on an input buffer), nothing else (Express-like, Flask, Django);
 * - `goClean`: decoded, then Go's `path.Clean` (merges slashes, resolves dots; Go's ServeMux);
 * - `tomcat`: `;` parameters cut from the raw segments first, then decoded, `\` as `/`, slashes
 *   merged, dots resolved (Tomcat, Spring's UrlPathHelper);
 * - `whatwg`: the WHATWG URL parser's pathname (`\` as `/`, `%2e` as `.`, other escapes kept;
 *   Node's `new URL`, browsers, undici), of the target appended to an origin;
 * - `whatwgBase`: the same parser resolving the target against a base (`new URL(req.url, base)`),
 *   which reads `//evil/admin` as host `evil` and path `/admin`;
 * - `decodedThenParsed`: `new URL(decodeURIComponent(req.url), base)`, a backend that decodes first,
 *   so `%3F`, `%23` and a trailing `%20` end or shorten its path.
 * A reading that throws means that backend refuses the path (so it serves nothing).
 */

export type PathReader = (path: string) => string;

export const PATH_READERS: Readonly<Record<'literal' | 'decoding' | 'goClean' | 'tomcat' | 'whatwg' | 'whatwgBase' | 'decodedThenParsed', PathReader>> = {
  literal: (path) => path,
  decoding: (path) => removeDotSegmentsAsWritten(decodeURIComponent(path)),
  goClean: (path) => goClean(decodeURIComponent(path)),
  tomcat: (path) => goClean(decodeURIComponent(path.split('/').map((segment) => segment.replace(/;.*$/, '')).join('/')).replaceAll('\\', '/')),
  whatwg: (path) => new URL(`http://backend.test${path}`).pathname,
  whatwgBase: (path) => new URL(path, 'http://backend.test').pathname,
  decodedThenParsed: (path) => new URL(decodeURIComponent(path), 'http://backend.test').pathname,
};

/** RFC 3986 §5.2.4, step by step as the RFC writes it. */
export function removeDotSegmentsAsWritten(path: string): string {
  let input = path;
  let output = '';
  const dropLastSegment = (): void => {
    output = output.slice(0, Math.max(0, output.lastIndexOf('/')));
  };
  while (input.length > 0) {
    if (input.startsWith('../')) input = input.slice(3); // A
    else if (input.startsWith('./')) input = input.slice(2); // A
    else if (input.startsWith('/./')) input = input.slice(2); // B
    else if (input === '/.') input = '/'; // B
    else if (input.startsWith('/../')) {
      input = input.slice(3); // C
      dropLastSegment();
    } else if (input === '/..') {
      input = '/'; // C
      dropLastSegment();
    } else if (input === '.' || input === '..') {
      input = ''; // D
    } else {
      const end = input.indexOf('/', input.startsWith('/') ? 1 : 0); // E
      const segment = end < 0 ? input : input.slice(0, end);
      output += segment;
      input = input.slice(segment.length);
    }
  }
  return output;
}

/** Go's `path.Clean` for a rooted path: one `/` between names, no `.`, `..` removes the name before it; no trailing slash. */
export function goClean(path: string): string {
  const names: string[] = [];
  for (const name of path.split('/')) {
    if (name === '' || name === '.') continue;
    if (name === '..') names.pop();
    else names.push(name);
  }
  return `/${names.join('/')}`;
}

/** Whether `path` is under `prefix` on a segment boundary (`/admin`, `/admin/x`, not `/adminx`), optionally ignoring case. */
export function isUnder(path: string, prefix: string, isCaseInsensitive = false): boolean {
  const [p, q] = isCaseInsensitive ? [path.toLowerCase(), prefix.toLowerCase()] : [path, prefix];
  return p.startsWith(q) && (p.length === q.length || p.charCodeAt(q.length) === 0x2f);
}

/** Tokens the generated targets are made of: escapes good and bad, dots, slashes, `;`, `\`, `#`, `?`. */
const TOKENS = [
  'admin', 'admin', 'public', 'x', 'Admin', 'ADMIN', '.', '..', '.', '..', '/', '/', '/', '//', ';', ';x', '..;', '\\',
  '#', '?', '%2F', '%2f', '%5C', '%2E', '%2e', '.%2e', '%2e%2e', '%61', '%41', '%3B', '%25', '%2561', '%7E', '%00', '%zz', '%0', '%C0%AE',
  '%C3%A9', '/admin', 'admin/', '/../', '/./', 'dmin', '%64min',
];

/** How generated targets begin: half of them inside the protected route. */
const STARTS = ['/', '/admin/', '/admin/', '/public/'];

/** A target `/…` of 1 to 8 random tokens (`random` from test/helpers/seeded-random.ts). */
export function generateTarget(random: () => number): string {
  let target = STARTS[Math.floor(random() * STARTS.length)]!;
  const count = 1 + Math.floor(random() * 8);
  for (let i = 0; i < count; i++) target += TOKENS[Math.floor(random() * TOKENS.length)]!;
  return target;
}
