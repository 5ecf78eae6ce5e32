/**
 * Fuzzing the config layer: thousands of random and mutated files (insert, delete and replace
 * characters, with the INI-significant ones `[]=;#"\`, CR, LF, BOM, tabs, controls and non-ASCII
 * weighted in). parseIni and parseConfig must return or throw one of the config errors, whose place
 * lies inside the file; never a TypeError, a RangeError or a hang. A seeded PRNG (mulberry32) makes
 * every run the same; a failure prints the seed, the case number and the text to reproduce it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseIni } from '../../src/config/ini-parser.js';
import { LIST_KEYS, parseConfig } from '../../src/config/load-config.js';
import { ConfigSyntaxError, ConfigValueError, type SourcePlace } from '../../src/errors.js';
import { seededRandom as mulberry32 } from '../helpers/seeded-random.js';

const SEED = 0x5eed_c0f1;
const CASES = 5_000;


const VALID_CONFIGS = [
  '[proxy]\n\n[proxy.a]\npath=/a\npass=http://localhost:9001\n\n[proxy.b]\npath=/b\npass=http://localhost:9002\n',
  `; full config
[server]
listen = 127.0.0.1:8080
access_log = "/var/log/proxy access.log"
access_log_format = json
trusted_proxies = 10.0.0.0/8, ::1
header_timeout = 2s
max_body_size = 1m
workers = auto
[admin]
listen = [::1]:9090
token = abc
[proxy]
strategy = smooth-weighted-round-robin  # inline
health_status = 200,204,300-399
[proxy.api]
path = ~* ^/api/v[0-9]+/
host = *.example.com
pass = http://[::1]:9001 weight=3
pass = http://10.0.0.2 backup
pass = http://web3:8080 down
hash_key = header:x-user
auth_basic = "Staff ; only"
auth_user = tom:HASH
trace = on
`,
  '\uFEFF[proxy.x]\r\npath = "/x"\r\npass = http://a:1 weight=2\r\npass = http://b:2\r\nretries = 1\r\nconnect_timeout = 1.5s\r\n',
];

const SPECIAL = ['[', ']', '=', ';', '#', '"', '\\', '\r', '\n', '\r\n', '\uFEFF', '\t', ' ', '.', ':', '/', '~', '*', ',', '-', '_'];
const EXOTIC = ['é', '😀', '\u0000', '\u0007', '\u0085', '\u00a0', '\u2028', '\ud800', 'A', 'Z', '0', '9'];

function randomCharacter(random: () => number): string {
  const roll = random();
  if (roll < 0.5) return SPECIAL[Math.floor(random() * SPECIAL.length)] ?? '';
  if (roll < 0.7) return EXOTIC[Math.floor(random() * EXOTIC.length)] ?? '';
  return String.fromCharCode(0x20 + Math.floor(random() * 0x5f));
}

function mutate(text: string, random: () => number): string {
  let result = text;
  const edits = 1 + Math.floor(random() * 4);
  for (let i = 0; i < edits; i++) {
    const at = Math.floor(random() * (result.length + 1));
    const kind = random();
    if (kind < 0.35) result = result.slice(0, at) + randomCharacter(random) + result.slice(at);
    else if (kind < 0.6) result = result.slice(0, at) + result.slice(at + 1 + Math.floor(random() * 3));
    else if (kind < 0.85) result = result.slice(0, at) + randomCharacter(random) + result.slice(at + 1);
    else {
      // duplicate a random line somewhere else (repeated keys and sections)
      const lines = result.split('\n');
      const line = lines[Math.floor(random() * lines.length)] ?? '';
      lines.splice(Math.floor(random() * (lines.length + 1)), 0, line);
      result = lines.join('\n');
    }
  }
  return result;
}

function randomFile(random: () => number): string {
  let text = '';
  const length = Math.floor(random() * 120);
  for (let i = 0; i < length; i++) text += randomCharacter(random);
  return text;
}

/** An error's place must name a line of the file and a column at most one past that line's end. */
function assertPlaceInside(place: SourcePlace, text: string, context: string): void {
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const lines = body.split('\n').map((line) => (line.endsWith('\r') ? line.slice(0, -1) : line));
  const line = lines[place.line - 1];
  assert.ok(line !== undefined, `got line ${place.line}, want 1..${lines.length} — ${context}`);
  const width = Array.from(line).length;
  assert.ok(place.column >= 1 && place.column <= width + 1, `got column ${place.column}, want 1..${width + 1} — ${context}`);
}

function check(text: string, context: string): 'ok' | 'error' {
  try {
    parseIni(text, 'fuzz.ini', { listKeys: LIST_KEYS });
  } catch (error) {
    assert.ok(error instanceof ConfigSyntaxError, `got ${String(error)} from parseIni, want ConfigSyntaxError — ${context}`);
    assertPlaceInside(error.place, text, context);
  }
  try {
    const config = parseConfig(text, 'fuzz.ini');
    assert.ok(Object.isFrozen(config) && config.routes.length > 0, `got an unfrozen or route-less config — ${context}`);
    return 'ok';
  } catch (error) {
    const isConfigError = error instanceof ConfigSyntaxError || error instanceof ConfigValueError;
    assert.ok(isConfigError, `got ${(error as Error)?.stack ?? String(error)} from parseConfig, want a config error — ${context}`);
    assertPlaceInside(error.place, text, context);
    return 'error';
  }
}

describe('config fuzzing', () => {
  it(`${CASES} random and mutated files only ever raise config errors, at places inside the file`, () => {
    const random = mulberry32(SEED);
    const outcomes = { ok: 0, error: 0 };
    for (let i = 0; i < CASES; i++) {
      const base = VALID_CONFIGS[i % VALID_CONFIGS.length] ?? '';
      const text = i % 10 === 9 ? randomFile(random) : mutate(base, random);
      outcomes[check(text, `seed ${SEED}, case ${i}: ${JSON.stringify(text)}`)]++;
    }
    // Both outcomes must occur, or the mutations are too weak (or too strong) to test anything.
    assert.ok(outcomes.ok > CASES / 50, `got ${outcomes.ok} valid mutants, want more than ${CASES / 50}`);
    assert.ok(outcomes.error > CASES / 5, `got ${outcomes.error} rejected files, want more than ${CASES / 5}`);
  });

  it('accepts the unmutated seeds', () => {
    for (const text of VALID_CONFIGS) assert.equal(check(text, JSON.stringify(text)), 'ok');
  });
});
