/**
 * Route regexes (`path = ~ REGEX`, `path = ~* REGEX`) that no request can make slow.
 *
 * V8's regex engine backtracks: a pattern with nested quantifiers such as `^/(a+)+$`, or
 * `^/static/(.*\/)*[^/]+\.css$`, takes exponential time on a path built for it (`/aaa…a!`), and
 * matching runs on the event loop, so one request would stall every other (a break test froze the
 * proxy with a 33-byte path). Go's regexp (RE2, which Caddy and Traefik use) matches in linear time
 * by construction; nginx and HAProxy bound PCRE with match limits.
 *
 * V8 has a linear-time engine too (its "experimental" engine, an automaton simulation like RE2's).
 * The flags set below make it take over any match that backtracks more than
 * {@link BACKTRACKS_BEFORE_LINEAR} times, so an ordinary match keeps the fast backtracking engine and
 * a crafted one costs at most that many steps before it goes on in linear time. The flags are set with
 * node:v8 `setFlagsFromString` when this module loads, before any route regex is made (V8 reads them
 * when a regex runs). That engine cannot run backreferences or lookaround (RE2 has neither) and has
 * no case-insensitive mode, so:
 *   - a pattern it cannot run is refused (`compileRouteRegex` throws), which V8 itself decides: the
 *     pattern must compile with the `l` (linear) flag;
 *   - `~*` is compiled as a case-sensitive pattern in which every ASCII letter stands for both cases
 *     (`caseFoldedSource`: `^/admin` → `^/[aA][dD][mM][iI][nN]`), which matches what the `i` flag
 *     would (without the `u` flag, `i` folds ASCII letters only to ASCII letters). A `~*` pattern
 *     holding a non-ASCII letter, or a class range between letters of different cases or given by
 *     escapes, is refused, since its folding is not that simple.
 */
import v8 from 'node:v8';

/** Backtracking steps after which a route regex's match goes on in linear time. */
export const BACKTRACKS_BEFORE_LINEAR = 10_000;

v8.setFlagsFromString('--enable-experimental-regexp-engine'); // the `l` flag, used to ask whether a pattern can run in linear time
v8.setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks');
v8.setFlagsFromString(`--regexp-backtracks-before-fallback=${BACKTRACKS_BEFORE_LINEAR}`);

/**
 * The regex of a `~` (case-sensitive) or `~*` (case-insensitive) route.
 * @throws Error whose message says why: not a valid regex (V8's message), a backreference or
 *   lookaround, repetition counts that multiply to more than 16 (`[a-f0-9]{32}`: the linear-time
 *   engine's limit in node 20; `[a-f0-9]{16}[a-f0-9]{16}` is the same pattern within it), or a `~*`
 *   pattern whose case folding is not ASCII's.
 */
export function compileRouteRegex(source: string, isCaseInsensitive: boolean): RegExp {
  new RegExp(source, isCaseInsensitive ? 'i' : ''); // V8's own message for a pattern that is no regex at all
  const pattern = isCaseInsensitive ? caseFoldedSource(source) : source;
  if (pattern === undefined) {
    throw new Error('~* takes ASCII letters only, no octal escapes, and class ranges that are letters of one case (a-z, A-Z) or hold no letter; write other letters in both cases, or use ~');
  }
  if (canRunInLinearTime(pattern)) return new RegExp(pattern);
  // With every repetition count made small, what still cannot run in linear time is a
  // backreference or lookaround.
  const withSmallCounts = pattern.replace(/\{(\d+)(,\d*)?\}/g, (_, _min: string, max: string | undefined) => (max === undefined ? '{1}' : max === ',' ? '{1,}' : '{1,2}'));
  if (canRunInLinearTime(withSmallCounts)) {
    throw new Error('repetition counts that multiply to more than 16 cannot be matched in linear time here (node 20); split them: [a-f0-9]{32} as [a-f0-9]{16}[a-f0-9]{16}');
  }
  throw new Error('backreferences and lookaround ((?=, (?!, (?<=, (?<!) cannot be matched in linear time and are not supported, as in RE2');
}

function canRunInLinearTime(pattern: string): boolean {
  try {
    new RegExp(pattern, 'l');
    return true;
  } catch {
    return false;
  }
}

/** Letters whose escape means something else than the letter: outside a class, and inside one (where `\b` is backspace and `\B` is the letter B). */
const SPECIAL_ESCAPE_LETTERS = 'dDwWsSbBnrtvfcxuk';
const SPECIAL_CLASS_ESCAPE_LETTERS = 'dDwWsSbnrtvfcxu';

/**
 * `source` (a regex without the `u` flag) rewritten so that, without the `i` flag, it matches what
 * `source` matches with it: each ASCII letter `x` outside a class becomes `[xX]`, inside a class it
 * gets its other case beside it, a range `a-f` gets `A-F` beside it. Escapes are kept (`\d`, `\x41`
 * as written; an identity escape of a letter, `\q`, is that letter and is folded); group names are
 * kept. Undefined when the pattern holds something this cannot fold exactly: a non-ASCII letter, a
 * class range whose ends are not letters of one case while one of them is a letter, a range or a
 * letter given by an escape in a class, a named backreference, a digit escape (a backreference or an
 * octal escape: `\101` is `A`), an escape of a non-ASCII letter, a class range that holds a letter
 * while its ends are not letters of one case (`+-_` holds A-Z), or a `\x`, `\u` or `\c` that is not
 * a whole character escape (without the `u` flag `\x` alone is the letter `x`).
 */
export function caseFoldedSource(source: string): string | undefined {
  let out = '';
  let isInClass = false;
  for (let i = 0; i < source.length; ) {
    const char = source[i]!;
    if (char === '\\') {
      const next = source[i + 1];
      if (next === undefined) return undefined;
      if (next === 'k' && !isInClass) return undefined;
      const length = next === 'c' ? 3 : next === 'x' ? 4 : next === 'u' ? 6 : 2;
      // In a class, an escape that starts a range (`[\.-a]`, `[\p-s]`) is not folded here: refuse.
      const startsRange = source[i + length] === '-' && source[i + length + 1] !== ']';
      if (isInClass && startsRange) return undefined;
      // A digit escape is a backreference or, without the `u` flag, an octal escape (`\101` is `A`),
      // which this does not fold; `\0` alone is NUL.
      if (next >= '1' && next <= '9') return undefined;
      if (next === '0' && source[i + 2] !== undefined && source[i + 2]! >= '0' && source[i + 2]! <= '9') return undefined;
      if (isAsciiLetter(next) && !(isInClass ? SPECIAL_CLASS_ESCAPE_LETTERS : SPECIAL_ESCAPE_LETTERS).includes(next)) {
        out += isInClass ? bothCases(next) : `[${bothCases(next)}]`;
        i += 2;
        continue;
      }
      // `\x` without two hex digits, `\u` without four, `\c` without a letter: without the `u`
      // flag these are the letters themselves (`\x` is `x`), which this does not fold: refuse.
      if (next === 'x' && !/^[0-9A-Fa-f]{2}$/.test(source.slice(i + 2, i + 4))) return undefined;
      if (next === 'u' && !/^[0-9A-Fa-f]{4}$/.test(source.slice(i + 2, i + 6))) return undefined;
      if (next === 'c' && !isAsciiLetter(source[i + 2] ?? '')) return undefined;
      const escaped = source.slice(i, i + length);
      i += length;
      const isCharacterEscape = next === 'x' || next === 'u' || next === 'c';
      if (!isCharacterEscape) {
        out += escaped; // \d, \w, \b, \n, a backreference, an escaped symbol: no letter of its own
        continue;
      }
      const character = next === 'c' ? undefined : String.fromCharCode(Number.parseInt(escaped.slice(2), 16));
      if (character !== undefined && isNonAsciiLetter(character)) return undefined; // `\u00e0`: à, folded to À by `i`
      if (isInClass) {
        // A letter given by an escape is not folded here: refuse rather than guess.
        if (character === undefined || isAsciiLetter(character)) return undefined;
        out += escaped;
      } else {
        out += character !== undefined && isAsciiLetter(character) ? `[${bothCases(character)}]` : escaped;
      }
      continue;
    }
    if (isInClass) {
      if (char === ']') {
        isInClass = false;
        out += char;
        i++;
        continue;
      }
      const end = source[i + 2];
      if (source[i + 1] === '-' && end !== undefined && end !== ']') {
        if (end === '\\') return undefined;
        if (isAsciiLetter(char) && isAsciiLetter(end) && isUpper(char) === isUpper(end)) {
          out += `${char}-${end}${otherCase(char)}-${otherCase(end)}`;
        } else {
          // Any other range is kept only when it holds no letter at all (`0-9`, `!-/`): `+-_` holds A-Z.
          if (rangeHoldsLetter(char, end)) return undefined;
          out += `${char}-${end}`;
        }
        i += 3;
        continue;
      }
      if (isNonAsciiLetter(char)) return undefined;
      out += isAsciiLetter(char) ? bothCases(char) : char;
      i++;
      continue;
    }
    if (char === '[') {
      isInClass = true;
      out += source[i + 1] === '^' ? '[^' : '[';
      i += source[i + 1] === '^' ? 2 : 1;
      continue;
    }
    if (char === '(' && source[i + 1] === '?' && source[i + 2] === '<' && source[i + 3] !== '=' && source[i + 3] !== '!') {
      const close = source.indexOf('>', i);
      if (close < 0) return undefined;
      out += source.slice(i, close + 1); // `(?<name>`: the name is no pattern
      i = close + 1;
      continue;
    }
    if (isNonAsciiLetter(char)) return undefined;
    out += isAsciiLetter(char) ? `[${bothCases(char)}]` : char;
    i++;
  }
  return out;
}

/** True when the class range `from-to` holds an ASCII letter or any character above ASCII. */
function rangeHoldsLetter(from: string, to: string): boolean {
  const low = from.charCodeAt(0);
  const high = to.charCodeAt(0);
  const overlaps = (start: number, end: number): boolean => low <= end && high >= start;
  return overlaps(0x41, 0x5a) || overlaps(0x61, 0x7a) || high > 0x7f;
}

function isAsciiLetter(char: string): boolean {
  return (char >= 'a' && char <= 'z') || (char >= 'A' && char <= 'Z');
}

function isUpper(char: string): boolean {
  return char >= 'A' && char <= 'Z';
}

function isNonAsciiLetter(char: string): boolean {
  return char > '\x7f' && char.toLowerCase() !== char.toUpperCase();
}

function otherCase(letter: string): string {
  return isUpper(letter) ? letter.toLowerCase() : letter.toUpperCase();
}

function bothCases(letter: string): string {
  return `${letter}${otherCase(letter)}`;
}
