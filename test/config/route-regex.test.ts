/**
 * Route regexes that no request can make slow (src/config/route-regex.ts): a match that backtracks
 * too long goes on in V8's linear-time engine, patterns that engine cannot run are refused, and
 * `~*` is a case-folded pattern that matches what the `i` flag would.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { caseFoldedSource, compileRouteRegex } from '../../src/config/route-regex.js';
import { parseConfig } from '../../src/config/load-config.js';
import { ConfigValueError } from '../../src/errors.js';
import { startBackend, startTestProxy } from '../helpers/proxy-harness.js';
import { get } from '../helpers/cli-process.js';

test('caseFoldedSource: every ASCII letter stands for both cases, escapes and group names are kept', () => {
  const cases: [string, string][] = [
    ['^/admin(/|$)', '^/[aA][dD][mM][iI][nN](/|$)'],
    ['\\.(jpg|PNG)$', '\\.([jJ][pP][gG]|[Pp][Nn][Gg])$'],
    ['^/api/v[0-9a-f]+/', '^/[aA][pP][iI]/[vV][0-9a-fA-F]+/'],
    ['[^a-z]x', '[^a-zA-Z][xX]'],
    ['\\d+\\w*\\bend\\b', '\\d+\\w*\\b[eE][nN][dD]\\b'],
    ['\\x41b', '[Aa][bB]'],
    ['\\qz', '[qQ][zZ]'],
    ['^/[\\B]$', '^/[Bb]$'],
    ['[\\k\\.-]', '[kK\\.-]'],
    ['(?<name>ab)c', '(?<name>[aA][bB])[cC]'],
    ['^/a{2,3}$', '^/[aA]{2,3}$'],
  ];
  for (const [source, want] of cases) assert.equal(caseFoldedSource(source), want, `folding ${JSON.stringify(source)}`);
  for (const source of ['[A-z]', '[+-z]', 'café', '[é]', '[\\x41-\\x5a]', '\\k<n>', '^/adm\\x(/|$)', '\\xZZ', '^/\\u{2}', '\\u00', '\\c1', '[\\x]', '^/\\101dmin', '[\\141]dmin', '[+-_]dmin', '[`-~]dmin', '\\u00e0', '[\\xe0]', '[ -×]', '^/[\\@-^]$', '^/[\\.-a]$', '^/[\\b-a]$', '^/[\\]-z]$', '^/[\\--a]$', '^/[\\p-s]$', '^/[\\q-\\q]$']) {
    assert.equal(caseFoldedSource(source), undefined, `${JSON.stringify(source)} cannot be folded exactly, want undefined`);
  }
});

test('a ~* regex matches exactly what the same pattern with the i flag matches (2 000 generated paths per pattern)', () => {
  const patterns = ['^/admin(/|$)', '\\.(jpg|png|css)$', '^/api/v[0-9a-f]+/', '[^a-z]x', '^/[A-Z][a-z]*$', '^/(Ab|cD)+[eF]?$', '\\bq\\w+', '^/[^/]+/[Zz]ip$', '^/[0-9!-/]+[a-c]$', '^/\\x41\\u0062[ -/]?$', '^/[\\B\\k\\.-]x$'];
  const alphabet = 'aAbBcCdDeEfFxXzZqQ/.-_09jJpPgGnNiImM';
  let seed = 7;
  const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (const source of patterns) {
    const folded = compileRouteRegex(source, true);
    const reference = new RegExp(source, 'i');
    for (let n = 0; n < 2000; n++) {
      let path = '/';
      const length = Math.floor(random() * 12);
      for (let i = 0; i < length; i++) path += alphabet[Math.floor(random() * alphabet.length)];
      assert.equal(folded.test(path), reference.test(path), `${source} on ${JSON.stringify(path)}`);
    }
  }
});

test('a path built to make a nested quantifier backtrack is matched in linear time, by ~ and by ~* (seconds before, doubling with each byte)', () => {
  const path = `/${'a'.repeat(28)}!`; // 2^28 steps for a backtracking engine: about 2.5 s here
  for (const [source, isCaseInsensitive] of [['^/(a+)+$', false], ['^/(a+)+$', true], ['^/static/(.*/)*[^/]+\\.css$', false]] as const) {
    const regex = compileRouteRegex(source, isCaseInsensitive);
    const input = source.includes('static') ? `/static/${'a/'.repeat(28)}x` : path;
    const started = performance.now();
    assert.equal(regex.test(input), false);
    const ms = performance.now() - started;
    assert.ok(ms < 500, `${source} (${isCaseInsensitive ? '~*' : '~'}) took ${ms.toFixed(0)} ms, want well under 500`);
  }
});

test('a route regex the linear-time engine cannot run (backreference, lookaround) or a ~* one that cannot be folded is a config error at its place', () => {
  const cases: [string, RegExp][] = [
    ['~ ^/(a)\\1$', /backreferences and lookaround .* are not supported/],
    ['~ ^/x(?!y)', /backreferences and lookaround/],
    ['~* ^/x(?<=x)', /backreferences and lookaround/],
    ['~* ^/café', /~\* takes ASCII letters only/],
    ['~ ^/(', /Unterminated group/],
  ];
  for (const [value, message] of cases) {
    assert.throws(
      () => parseConfig(`[proxy.a]\npath = ${value}\npass = http://127.0.0.1:9001\n`, 'env.ini'),
      (error: unknown) => error instanceof ConfigValueError && /^env\.ini:2:\d+: invalid regular expression/.test(error.message) && message.test(error.message),
      `path = ${value}`,
    );
  }
});

test('through the proxy: a crafted path on a ~ (a+)+ route is a 404 at once, and the other routes keep answering', async (t) => {
  const backend = await startBackend();
  const proxy = await startTestProxy(`[proxy.r]\npath = ~ ^/(a+)+$\npass = ${backend.url}\n[proxy.o]\npath = /other\npass = ${backend.url}\n`);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const status = async (path: string): Promise<number> => (await get(proxy.port, path)).status;
  assert.equal(await status(`/${'a'.repeat(40)}!`), 404);
  assert.equal(await status('/other/x'), 200);
  assert.equal(await status('/aaa'), 200);
});

test('through the proxy: a long crafted path against 40 regex routes is a 414 within the regex budget, and the other routes keep answering', async (t) => {
  const backend = await startBackend();
  const regexRoutes = Array.from({ length: 40 }, (_, i) => `[proxy.r${i}]\npath = ~ ^/(\\w+\\s?)+\\.r${i}$\npass = ${backend.url}\n`).join('');
  const proxy = await startTestProxy(`${regexRoutes}[proxy.o]\npath = /\npass = ${backend.url}\n`);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const status = async (path: string): Promise<number> => (await get(proxy.port, path)).status;
  const started = performance.now();
  assert.equal(await status(`/${'a'.repeat(4000)}${'%61'.repeat(1000)}!`), 414);
  const ms = performance.now() - started;
  assert.ok(ms < 1000, `the crafted request took ${ms.toFixed(0)} ms, want it cut at the budget`);
  assert.equal(await status('/abc.r3'), 200);
  assert.equal(await status('/other'), 200);
});

test('repetition counts that multiply to more than 16 are refused with how to split them, not as lookaround: V8 could not take over their matches, and beside a nested quantifier one path froze the proxy', () => {
  assert.ok(compileRouteRegex('^/obj/[a-f0-9]{16}[a-f0-9]{16}$', false).test(`/obj/${'a'.repeat(32)}`));
  for (const source of ['^/obj/[a-f0-9]{32}$', '^/h/[a-f0-9]{32}/(a+)+$', '^/((a+)+b?){16}c$']) {
    assert.throws(() => compileRouteRegex(source, false), /^Error: repetition counts that multiply to more than 16 cannot be matched in linear time here \(node 20\); split them: \[a-f0-9\]\{32\} as \[a-f0-9\]\{16\}\[a-f0-9\]\{16\}$/, source);
  }
  assert.throws(() => compileRouteRegex('^/(a{20})\\1$', false), /backreferences and lookaround/);
});
