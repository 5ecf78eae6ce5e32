/**
 * The INI parser (SPEC 1.1): sections and entries with their places, BOM and CRLF, comments, quoted
 * values with escapes, list keys, and every syntax error with its exact line and column.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseIni, placeInValue, type IniDocument } from '../../src/config/ini-parser.js';
import { ConfigSyntaxError } from '../../src/errors.js';

const TUTORIAL = '[proxy]\n\n[proxy.a]\npath=/a\npass=http://localhost:9001\n\n[proxy.b]\npath=/b\npass=http://localhost:9002\n';

/** `[section] key=value` lines, for comparing documents at a glance. */
function flatten(document: IniDocument): string[] {
  const lines: string[] = document.root.entries.map((e) => `${e.key}=${e.value}`);
  for (const section of document.sections) {
    lines.push(`[${section.name}]`);
    for (const entry of section.entries) lines.push(`${entry.key}=${entry.value}`);
  }
  return lines;
}

function syntaxError(text: string, options?: { listKeys?: string[] }): ConfigSyntaxError {
  try {
    parseIni(text, 'env.ini', options);
  } catch (error) {
    if (error instanceof ConfigSyntaxError) return error;
    throw error;
  }
  assert.fail(`got no error, want a ConfigSyntaxError for ${JSON.stringify(text)}`);
}

describe('parseIni', () => {
  it("reads the tutorial's file: sections in order, entries with places", () => {
    const document = parseIni(TUTORIAL, 'env.ini');
    assert.deepEqual(flatten(document), ['[proxy]', '[proxy.a]', 'path=/a', 'pass=http://localhost:9001', '[proxy.b]', 'path=/b', 'pass=http://localhost:9002']);
    const b = document.sections[2];
    assert.equal(b?.name, 'proxy.b', `got ${b?.name}, want proxy.b`);
    assert.deepEqual(b?.place, { file: 'env.ini', line: 7, column: 1 });
    assert.deepEqual(b?.entries[1]?.place, { file: 'env.ini', line: 9, column: 1 });
    assert.deepEqual(b?.entries[1]?.valuePlace, { file: 'env.ini', line: 9, column: 6 });
    assert.equal(document.root.entries.length, 0, 'got root entries, want none');
  });

  it('treats CRLF, a BOM and a final lone CR like LF, without shifting columns', () => {
    const crlf = '\uFEFF' + TUTORIAL.replaceAll('\n', '\r\n');
    assert.deepEqual(flatten(parseIni(crlf, 'env.ini')), flatten(parseIni(TUTORIAL, 'env.ini')));
    const document = parseIni('\uFEFF[a]\r\nkey = v\r', 'env.ini');
    assert.deepEqual(document.sections[0]?.place, { file: 'env.ini', line: 1, column: 1 }, 'the BOM is not a column');
    assert.equal(document.sections[0]?.entries[0]?.value, 'v', 'got the CR in the value, want it dropped');
  });

  it('accepts spaces and tabs around = and before keys; blank lines are ignored', () => {
    const document = parseIni('[s]\n\n   \t\n  key\t=\t value with  spaces  \nother=x\n', 'f');
    assert.deepEqual(flatten(document), ['[s]', 'key=value with  spaces', 'other=x']);
    assert.deepEqual(document.sections[0]?.entries[0]?.place, { file: 'f', line: 4, column: 3 });
    assert.deepEqual(document.sections[0]?.entries[0]?.valuePlace, { file: 'f', line: 4, column: 10 });
  });

  it('skips full-line comments and inline comments after a blank, keeps ; and # inside words', () => {
    const text = [
      '; a comment',
      '# another',
      '   ; indented comment',
      '[s] ; after a header',
      'a = 1 ; inline',
      'b = 2\t# inline after a tab',
      'c = http://x/#frag;semi',
      'd = a;b#c',
      'e = ; only a comment',
      'f =',
    ].join('\n');
    assert.deepEqual(flatten(parseIni(text, 'f')), ['[s]', 'a=1', 'b=2', 'c=http://x/#frag;semi', 'd=a;b#c', 'e=', 'f=']);
  });

  it('keeps spaces, ; and # in double quotes, with the escapes \\" and \\\\', () => {
    const text = '[s]\nrealm = "My ; realm # here"  ; comment\nq = "say \\"hi\\" \\\\ bye"\nempty = ""\n';
    const entries = parseIni(text, 'f').sections[0]?.entries ?? [];
    assert.deepEqual(entries.map((e) => e.value), ['My ; realm # here', 'say "hi" \\ bye', '']);
    assert.deepEqual(entries.map((e) => e.isQuoted), [true, true, true]);
    assert.deepEqual(entries[0]?.valuePlace.column, 9, 'a quoted value starts at its quote');
  });

  it('keeps a quote that does not start the value', () => {
    assert.equal(parseIni('[s]\nk = say "hi"\n', 'f').sections[0]?.entries[0]?.value, 'say "hi"');
  });

  it('collects keys before any section in the root pseudo-section', () => {
    const document = parseIni('stray = 1\n[s]\n', 'f');
    assert.deepEqual(document.root.entries.map((e) => e.key), ['stray']);
    assert.equal(document.root.name, '');
  });

  it('lets list keys repeat, in order; other keys may not', () => {
    const text = '[r]\npass = a\npass = b\npass = c\n';
    const entries = parseIni(text, 'f', { listKeys: ['pass'] }).sections[0]?.entries ?? [];
    assert.deepEqual(entries.map((e) => e.value), ['a', 'b', 'c']);
    assert.equal(syntaxError(text).message, "env.ini:3:1: repeated key 'pass' in [r] (first on line 2)");
  });

  it('allows the same key in different sections', () => {
    assert.equal(parseIni('[a]\nk=1\n[b]\nk=2\n', 'f').sections.length, 2);
  });

  it('counts columns in characters, not bytes or UTF-16 units', () => {
    const entry = parseIni('[s]\nk = é😀 x\n', 'f').sections[0]?.entries[0];
    assert.equal(entry?.value, 'é😀 x');
    assert.equal(syntaxError('[s]\nk = "é😀\\x"\n').message.split(': ')[0], 'env.ini:2:8');
  });

  describe('placeInValue', () => {
    it('points into a bare value, counting characters', () => {
      const entry = parseIni('[s]\nk =  😀 abc\n', 'f').sections[0]?.entries[0];
      assert.ok(entry);
      assert.equal(placeInValue(entry, '😀 '.length).column, 8, 'got another column, want 8 (the a)');
    });
    it('points into a quoted value after its quote, or at the quote when escapes moved things', () => {
      const [plain, escaped] = parseIni('[s]\na = "x y"\nb = "\\"x y"\n', 'f').sections[0]?.entries ?? [];
      assert.ok(plain && escaped);
      assert.equal(placeInValue(plain, 2).column, 8);
      assert.equal(placeInValue(escaped, 3).column, 5);
    });
  });

  describe('syntax errors name the exact line and column', () => {
    const cases: [string, string, string][] = [
      ['section without ]', '[proxy\n', "env.ini:1:7: missing ']' at the end of the section header"],
      ['empty section name', '[]\n', 'env.ini:1:2: empty section name'],
      ['space in a section name', '[ proxy ]\n', "env.ini:1:2: invalid character ' ' in section name (allowed: letters, digits, '.', '_', '-')"],
      ['slash in a section name', 'k=1\n\n  [proxy/a]\n', "env.ini:3:9: invalid character '/' in section name (allowed: letters, digits, '.', '_', '-')"],
      ['empty part', '[proxy..a]\n', "env.ini:1:8: empty part in section name 'proxy..a' (a dot separates a parent from a child, as in proxy.a)"],
      ['leading dot', '[.a]\n', "env.ini:1:2: empty part in section name '.a' (a dot separates a parent from a child, as in proxy.a)"],
      ['trailing dot', '[a.]\n', "env.ini:1:3: empty part in section name 'a.' (a dot separates a parent from a child, as in proxy.a)"],
      ['text after a header', '[a] x\n', "env.ini:1:5: unexpected 'x' after the section header"],
      ['comment glued to a header', '[a];x\n', "env.ini:1:4: unexpected ';' after the section header"],
      ['repeated section', '[a]\n[b]\n\n[a]\n', 'env.ini:4:1: repeated section [a] (first on line 1)'],
      ['missing =', '[a]\npass http://x\n', "env.ini:2:6: expected '=' after key 'pass'"],
      ['missing = at the end', '[a]\n  lonely\n', "env.ini:2:9: expected '=' after key 'lonely'"],
      ['missing key', '[a]\n = 1\n', "env.ini:2:2: missing key before '='"],
      ['uppercase key', '[a]\nPath = /a\n', "env.ini:2:1: invalid character 'P' in key 'Path' (keys are lowercase: did you mean 'path'?)"],
      ['dash in key', '[a]\nmax-fails = 1\n', "env.ini:2:4: invalid character '-' in key 'max-fails' (keys are lowercase letters, digits and '_', starting with a letter)"],
      ['digit first', '[a]\n1st = 1\n', "env.ini:2:1: invalid character '1' in key '1st' (keys are lowercase letters, digits and '_', starting with a letter)"],
      ['unterminated quote', '[a]\nrealm = "abc\n', 'env.ini:2:9: unterminated quoted value (missing closing \'"\')'],
      ['text after the closing quote', '[a]\nrealm = "abc"def\n', "env.ini:2:14: unexpected 'd' after the closing quote"],
      ['comment glued to a closing quote', '[a]\nrealm = "abc";x\n', "env.ini:2:14: unexpected ';' after the closing quote"],
      ['unknown escape', '[a]\nrealm = "a\\nb"\n', 'env.ini:2:11: unknown escape \'\\n\' in quoted value (only \\" and \\\\ are escapes)'],
      ['backslash at the end', '[a]\nrealm = "a\\\n', 'env.ini:2:11: unknown escape at the end of the line in quoted value (only \\" and \\\\ are escapes)'],
      ['repeated key', '[proxy.a]\npath = /a\npass = x\n  path = /b\n', "env.ini:4:3: repeated key 'path' in [proxy.a] (first on line 2)"],
      ['repeated root key', 'a = 1\na = 2\n', "env.ini:2:1: repeated key 'a' (first on line 1)"],
      ['control character', '[a]\nk = a\u0007b\n', 'env.ini:2:6: control character U+0007 is not allowed'],
      ['carriage return inside a line', '[a]\r\nk = a\rb\r\n', 'env.ini:2:6: control character U+000D is not allowed (a carriage return is only allowed just before a line feed)'],
      ['NUL in a comment', '; \u0000\n', 'env.ini:1:3: control character U+0000 is not allowed'],
    ];
    for (const [name, text, message] of cases) {
      it(name, () => {
        const error = syntaxError(text);
        assert.equal(error.message, message, `got ${JSON.stringify(error.message)}, want ${JSON.stringify(message)}`);
        assert.equal(error.code, 'CFG_SYNTAX');
      });
    }

    it('reports the place as data too', () => {
      const error = syntaxError('[a]\n\n\nx y\n');
      assert.deepEqual(error.place, { file: 'env.ini', line: 4, column: 3 });
      assert.equal(error.reason, "expected '=' after key 'x'");
    });
  });
});
