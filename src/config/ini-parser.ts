/**
 * INI text → document with line numbers: the first of the config's three layers (SPEC 1.1). This
 * parser knows nothing about proxies; it turns text into sections of `key = value` entries, each
 * remembering where it was written, so that every later error can say `env.ini:12:7: …`.
 *
 * INI has no standard; this dialect follows the common core (Windows `GetPrivateProfileString`,
 * Python's `configparser`, git-config) with stricter edges, because a typo in a proxy config should
 * stop the proxy, not be silently ignored:
 * - UTF-8 text, an optional byte order mark, LF or CRLF line ends (a CR before the LF is dropped).
 * - Blank lines are ignored. A line whose first non-blank character is `;` or `#` is a comment.
 * - `[name]` opens a section; names use letters, digits, `.`, `_`, `-`; a dot separates a child
 *   name (`[proxy.a]`), so no part may be empty. A section may not be opened twice.
 * - `key = value`, spaces around `=` optional. Keys are lowercase letters, digits and `_`, starting
 *   with a letter. A key may appear once per section, unless it is a list key (`listKeys`).
 * - `;` or `#` preceded by a space or tab starts an inline comment (so `a#b` and `http://x/#y` keep
 *   their `#`). A value in double quotes keeps spaces, `;` and `#`; inside it `\"` is a quote and
 *   `\\` a backslash; after the closing quote only spaces and an inline comment may follow.
 * - Control characters (other than tab) are errors anywhere: they are invisible in an editor.
 *
 * Lines and columns are 1-based; columns count characters (Unicode code points), not bytes, and the
 * byte order mark is not counted.
 */
import { ConfigSyntaxError, type SourcePlace } from '../errors.js';

/** One `key = value` line. */
export interface IniEntry {
  readonly key: string;
  /** The value with quotes removed and escapes resolved; '' for `key =`. */
  readonly value: string;
  /** True when the value was written in double quotes. */
  readonly isQuoted: boolean;
  /** Where the key starts. */
  readonly place: SourcePlace;
  /** Where the value starts (its opening quote when quoted; just after `=` and spaces when empty). */
  readonly valuePlace: SourcePlace;
}

/** One `[name]` section and its entries, in file order. */
export interface IniSection {
  /** As written between the brackets; '' for the root pseudo-section. */
  readonly name: string;
  /** Where the `[` is (line 1, column 1 for the root pseudo-section). */
  readonly place: SourcePlace;
  readonly entries: readonly IniEntry[];
}

/** A parsed INI file. */
export interface IniDocument {
  readonly file: string;
  /** Entries written before the first section header (a pseudo-section named ''). */
  readonly root: IniSection;
  /** Sections in file order. */
  readonly sections: readonly IniSection[];
}

export interface ParseIniOptions {
  /** Keys that may repeat within a section, each line adding one item in order. Default none. */
  readonly listKeys?: readonly string[];
}

const BYTE_ORDER_MARK = '\uFEFF';

/**
 * Parses INI text (SPEC 1.1) into a document whose sections and entries remember their places.
 *
 * @param text the file's content, already decoded from UTF-8 (a leading BOM is skipped).
 * @param file the name used in error places, e.g. `env.ini`.
 * @param options `listKeys`: keys allowed to repeat within one section.
 * @throws ConfigSyntaxError at the offending character: bad section header, repeated section, bad
 *   key, missing `=`, unterminated quote, unknown escape, text after a closing quote, repeated key
 *   (pointing at the repeat and naming the first's line), control character.
 */
export function parseIni(text: string, file: string, options: ParseIniOptions = {}): IniDocument {
  const listKeys = new Set(options.listKeys ?? []);
  const body = text.startsWith(BYTE_ORDER_MARK) ? text.slice(1) : text;
  const lines = body.split('\n');

  const root: MutableSection = { name: '', place: { file, line: 1, column: 1 }, entries: [] };
  const sections: MutableSection[] = [];
  const sectionsByName = new Map<string, MutableSection>();
  let current = root;
  let firstLineOfKey = new Map<string, number>();

  for (let index = 0; index < lines.length; index++) {
    const line = new LineReader(file, index + 1, stripCarriageReturn(lines[index] ?? ''));
    line.rejectControlCharacters();
    line.skipBlanks();
    line.start = line.position;
    if (line.isAtEnd() || line.peek() === ';' || line.peek() === '#') continue;

    if (line.peek() === '[') {
      const section: MutableSection = { name: readSectionHeader(line), place: line.placeOf(line.start), entries: [] };
      const previous = sectionsByName.get(section.name);
      if (previous !== undefined) {
        line.fail(line.start, `repeated section [${section.name}] (first on line ${previous.place.line})`);
      }
      sectionsByName.set(section.name, section);
      sections.push(section);
      current = section;
      firstLineOfKey = new Map();
      continue;
    }

    const entry = readEntry(line);
    const firstLine = firstLineOfKey.get(entry.key);
    if (firstLine !== undefined && !listKeys.has(entry.key)) {
      const where = current.name === '' ? '' : ` in [${current.name}]`;
      line.fail(line.start, `repeated key '${entry.key}'${where} (first on line ${firstLine})`);
    }
    if (firstLine === undefined) firstLineOfKey.set(entry.key, line.lineNumber);
    current.entries.push(entry);
  }

  return { file, root, sections };
}

/**
 * The place of the character `offset` UTF-16 units into `entry.value`, for errors about part of a
 * value (a flag in a `pass` line, one item of a list). In a quoted value whose escapes moved
 * characters around, this is the opening quote instead: never wrong, only less precise.
 */
export function placeInValue(entry: IniEntry, offset: number): SourcePlace {
  if (entry.isQuoted && /["\\]/.test(entry.value)) return entry.valuePlace;
  const characters = Array.from(entry.value.slice(0, offset)).length;
  return { ...entry.valuePlace, column: entry.valuePlace.column + (entry.isQuoted ? 1 : 0) + characters };
}

// ---- the pieces of a line -------------------------------------------------------------------------

interface MutableSection {
  readonly name: string;
  readonly place: SourcePlace;
  readonly entries: IniEntry[];
}

const SECTION_NAME_CHARACTER = /[A-Za-z0-9._-]/;
const KEY_START = /[a-z]/;
const KEY_CHARACTER = /[a-z0-9_]/;
const KEY_SYNTAX = /^[a-z][a-z0-9_]*$/;

/** `[name]`, then only blanks or an inline comment. Leaves the reader at the end of the line. */
function readSectionHeader(line: LineReader): string {
  line.advance(); // '['
  const nameStart = line.position;
  while (!line.isAtEnd() && line.peek() !== ']') {
    const character = line.peek();
    if (!SECTION_NAME_CHARACTER.test(character)) {
      line.fail(
        line.position,
        `invalid character ${describeCharacter(character)} in section name (allowed: letters, digits, '.', '_', '-')`,
      );
    }
    line.advance();
  }
  if (line.isAtEnd()) line.fail(line.position, "missing ']' at the end of the section header");
  const name = line.slice(nameStart, line.position);
  if (name === '') line.fail(nameStart, 'empty section name');
  const parts = name.split('.');
  let partStart = nameStart;
  for (const part of parts) {
    if (part === '') {
      // The offending dot: the one that ends the empty part, or the last one for a trailing dot.
      const dot = partStart < nameStart + name.length ? partStart : partStart - 1;
      line.fail(dot, `empty part in section name '${name}' (a dot separates a parent from a child, as in proxy.a)`);
    }
    partStart += part.length + 1;
  }
  line.advance(); // ']'
  line.expectEndOrComment('after the section header');
  return name;
}

/** `key = value` with an optional inline comment. */
function readEntry(line: LineReader): IniEntry {
  const keyStart = line.position;
  while (!line.isAtEnd() && !isBlank(line.peek()) && line.peek() !== '=') line.advance();
  const key = line.slice(keyStart, line.position);
  if (key === '') line.fail(keyStart, "missing key before '='");
  checkKeySyntax(line, key, keyStart);

  line.skipBlanks();
  if (line.isAtEnd() || line.peek() !== '=') line.fail(line.position, `expected '=' after key '${key}'`);
  line.advance(); // '='
  line.skipBlanks();

  const valuePlace = line.placeOf(line.position);
  const place = line.placeOf(keyStart);
  if (!line.isAtEnd() && line.peek() === '"') {
    return { key, value: readQuotedValue(line), isQuoted: true, place, valuePlace };
  }
  return { key, value: readBareValue(line), isQuoted: false, place, valuePlace };
}

function checkKeySyntax(line: LineReader, key: string, keyStart: number): void {
  const characters = Array.from(key);
  for (let i = 0; i < characters.length; i++) {
    const character = characters[i] ?? '';
    if (i === 0 ? KEY_START.test(character) : KEY_CHARACTER.test(character)) continue;
    const lowercase = key.toLowerCase();
    const hint = KEY_SYNTAX.test(lowercase)
      ? `keys are lowercase: did you mean '${lowercase}'?`
      : "keys are lowercase letters, digits and '_', starting with a letter";
    line.fail(keyStart + i, `invalid character ${describeCharacter(character)} in key '${key}' (${hint})`);
  }
}

/** `"…"` with `\"` and `\\`; after it only blanks or an inline comment. */
function readQuotedValue(line: LineReader): string {
  const openingQuote = line.position;
  line.advance();
  let value = '';
  for (;;) {
    if (line.isAtEnd()) line.fail(openingQuote, "unterminated quoted value (missing closing '\"')");
    const character = line.peek();
    if (character === '"') break;
    if (character === '\\') {
      const escaped = line.peekAt(line.position + 1);
      if (escaped !== '"' && escaped !== '\\') {
        const shown = escaped === undefined ? 'at the end of the line' : `'\\${escaped}'`;
        line.fail(line.position, `unknown escape ${shown} in quoted value (only \\" and \\\\ are escapes)`);
      }
      value += escaped;
      line.advance();
      line.advance();
      continue;
    }
    value += character;
    line.advance();
  }
  line.advance(); // closing quote
  line.expectEndOrComment('after the closing quote');
  return value;
}

/** Everything up to an inline comment (`;`/`#` after a blank) or the end, without trailing blanks. */
function readBareValue(line: LineReader): string {
  const valueStart = line.position;
  while (!line.isAtEnd()) {
    const character = line.peek();
    const isAfterBlank = line.position > 0 && isBlank(line.peekAt(line.position - 1) ?? '');
    if ((character === ';' || character === '#') && isAfterBlank) break;
    line.advance();
  }
  return line.slice(valueStart, line.position).replace(/[ \t]+$/, '');
}

function isBlank(character: string): boolean {
  return character === ' ' || character === '\t';
}

function stripCarriageReturn(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}

function isControlCharacter(codePoint: number): boolean {
  return (codePoint < 0x20 && codePoint !== 0x09) || (codePoint >= 0x7f && codePoint <= 0x9f);
}

/** `'x'` for a visible character, `U+000D` style for the others (a space shows as `' '`). */
function describeCharacter(character: string): string {
  const codePoint = character.codePointAt(0) ?? 0;
  if (isControlCharacter(codePoint) || character === '\t') {
    return `U+${codePoint.toString(16).toUpperCase().padStart(4, '0')}`;
  }
  return `'${character}'`;
}

/** A cursor over one line's characters (code points, so columns count characters). */
class LineReader {
  private readonly characters: readonly string[];
  position = 0;
  /** The line's first non-blank character: where its header or key starts. */
  start = 0;

  constructor(
    private readonly file: string,
    readonly lineNumber: number,
    text: string,
  ) {
    this.characters = Array.from(text);
  }

  isAtEnd(): boolean {
    return this.position >= this.characters.length;
  }

  peek(): string {
    return this.characters[this.position] ?? '';
  }

  peekAt(position: number): string | undefined {
    return this.characters[position];
  }

  advance(): void {
    this.position++;
  }

  skipBlanks(): void {
    while (!this.isAtEnd() && isBlank(this.peek())) this.advance();
  }

  slice(from: number, to: number): string {
    return this.characters.slice(from, to).join('');
  }

  placeOf(position: number): SourcePlace {
    return { file: this.file, line: this.lineNumber, column: position + 1 };
  }

  fail(position: number, reason: string): never {
    throw new ConfigSyntaxError(this.placeOf(position), reason);
  }

  rejectControlCharacters(): void {
    const position = this.characters.findIndex((character) => isControlCharacter(character.codePointAt(0) ?? 0));
    if (position >= 0) {
      const character = this.characters[position] ?? '';
      const hint = character === '\r' ? ' (a carriage return is only allowed just before a line feed)' : '';
      this.fail(position, `control character ${describeCharacter(character)} is not allowed${hint}`);
    }
  }

  /** After a header or a closing quote: blanks, then the end or an inline comment. */
  expectEndOrComment(context: string): void {
    const before = this.position;
    this.skipBlanks();
    if (this.isAtEnd()) return;
    const character = this.peek();
    if ((character === ';' || character === '#') && this.position > before) return;
    this.fail(this.position, `unexpected ${describeCharacter(character)} ${context}`);
  }
}
