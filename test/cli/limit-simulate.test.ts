/**
 * `limit-simulate ROUTE --requests SCHEDULE`: the proxy's token bucket on a simulated clock, request
 * by request (the worked example of src/limits/token-bucket.ts), the schedule's syntax errors, and
 * the exit codes of the built command line.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { parseArguments } from '../../src/cli/arguments.js';
import { parseSchedule, runLimitSimulate } from '../../src/cli/limit-simulate.js';
import { parseConfig } from '../../src/config/load-config.js';
import { UsageError } from '../../src/errors.js';
import { buildCli, REPO } from '../helpers/built-cli.js';
import { writeConfig } from '../helpers/cli-process.js';

const CONFIG_TEXT = [
  '[proxy.api]',
  'path = /api',
  'pass = http://127.0.0.1:9001',
  'rate_limit = 10/s burst=5',
  'conn_limit = 3',
  '',
  '[proxy.open]',
  'path = /',
  'pass = http://127.0.0.1:9001',
  '',
].join('\n');
const config = parseConfig(CONFIG_TEXT, 'env.ini');

test("10/s burst=5: the token bucket's worked example (7 requests at 0 instead of 30), row by row, with the bound", () => {
  const got = runLimitSimulate(config, 'api', parseSchedule('0ms x7, 250ms x3, 1.25s x6, 1900ms x1'));
  const want = [
    'route api: rate_limit = 10/s burst=5: a token every 100ms, bucket of 5, starts full; one client (127.0.0.1)',
    'conn_limit = 3: not simulated (it counts requests in flight; a schedule of arrivals has no response times)',
    '',
    ' time  request  tokens before  decision            tokens after',
    '  0ms        1           5.00  200                         4.00',
    '  0ms        2           4.00  200                         3.00',
    '  0ms        3           3.00  200                         2.00',
    '  0ms        4           2.00  200                         1.00',
    '  0ms        5           1.00  200                         0.00',
    '  0ms        6           0.00  429 Retry-After: 1          0.00',
    '  0ms        7           0.00  429 Retry-After: 1          0.00',
    '250ms        8           2.50  200                         1.50',
    '250ms        9           1.50  200                         0.50',
    '250ms       10           0.50  429 Retry-After: 1          0.50',
    '1.25s       11           5.00  200                         4.00',
    '1.25s       12           4.00  200                         3.00',
    '1.25s       13           3.00  200                         2.00',
    '1.25s       14           2.00  200                         1.00',
    '1.25s       15           1.00  200                         0.00',
    '1.25s       16           0.00  429 Retry-After: 1          0.00',
    ' 1.9s       17           5.00  200                         4.00',
    '',
    '17 requests: 13 passed (200), 4 limited (429)',
    'bound over T = 1.9s: rate × T + burst = 10/s × 1.9s + 5 = 24 (passed 13)',
    '',
  ].join('\n');
  assert.equal(got, want);
});

test('1/m: Retry-After counts down in whole seconds (60, 30, 1) and a token is back at 60 s', () => {
  const perMinute = parseConfig('[proxy.m]\npath = /\npass = http://127.0.0.1:9001\nrate_limit = 1/m\n', 'env.ini');
  const got = runLimitSimulate(perMinute, 'm', parseSchedule('0ms x2, 30s x1, 59.5s x1, 60s x1'));
  const decisions = [...got.matchAll(/^ *\S+ +\d+ +[\d.]+ {2}(200|429 Retry-After: \d+) /gm)].map((match) => match[1]);
  assert.deepEqual(decisions, ['200', '429 Retry-After: 60', '429 Retry-After: 30', '429 Retry-After: 1', '200']);
  assert.match(got, /^conn_limit: off$/m);
  assert.match(got, /^bound over T = 60s: rate × T \+ burst = 1\/m × 60s \+ 1 = 2 \(passed 2\)$/m);
});

test('every request at one instant: the footer says so and bounds them by the burst, not "T = 0ms"', () => {
  const got = runLimitSimulate(config, 'api', parseSchedule('500ms x4, 500ms x3'));
  assert.match(got, /^7 requests: 5 passed \(200\), 2 limited \(429\)$/m);
  const footer = got.trimEnd().split('\n').at(-1);
  assert.equal(footer, 'bound, all at one instant (500ms): no time to refill, so at most burst = 5 pass (passed 5)');
});

test("one request: the footer says '1 request', not '1 requests' (break test)", () => {
  const got = runLimitSimulate(config, 'api', parseSchedule('0ms x1'));
  const footer = got.split('\n').find((line) => line.includes('passed (200)'));
  assert.equal(footer, '1 request: 1 passed (200), 0 limited (429)');
});

test('the schedule: TIME xCOUNT items, whole milliseconds, spaces around commas', () => {
  assert.deepEqual(parseSchedule('0ms x5, 100ms x3,1s x10 ,  1.5s x1, 2.025s x2'), [
    { atMs: 0, count: 5 },
    { atMs: 100, count: 3 },
    { atMs: 1000, count: 10 },
    { atMs: 1500, count: 1 },
    { atMs: 2025, count: 2 },
  ]);
});

test('the schedule takes the units of config durations, m, h and d too (break test: 1m x1 was refused)', () => {
  assert.deepEqual(parseSchedule('0ms x1, 1m x1, 1.5m x1, 0.25h x1, 1h x1, 1.5d x1, 365d x1'), [
    { atMs: 0, count: 1 },
    { atMs: 60_000, count: 1 },
    { atMs: 90_000, count: 1 },
    { atMs: 900_000, count: 1 },
    { atMs: 3_600_000, count: 1 },
    { atMs: 129_600_000, count: 1 },
    { atMs: 31_536_000_000, count: 1 },
  ]);
  assert.deepEqual(parseSchedule('0.00001d x1, 1.000000000s x1'), [{ atMs: 864, count: 1 }, { atMs: 1000, count: 1 }], 'trailing zeros and exact fractions of a day');
  for (const [text, reason] of [
    ['0.0000001m x1', 'the time must be whole milliseconds'],
    ['0.000001d x1', 'the time must be whole milliseconds'],
    ['366d x1', 'the time must be at most 365 days (31536000s) after the start'],
  ]) {
    assert.throws(() => parseSchedule(text!), (error: unknown) => error instanceof UsageError && error.message === `--requests: '${text}' at column 1: ${reason}`, `'${text}': want ${reason}`);
  }
});

test('a bad schedule is a UsageError naming the item and its column', () => {
  assert.deepEqual(parseSchedule('0ms x1, 31536000s x1'), [{ atMs: 0, count: 1 }, { atMs: 31_536_000_000, count: 1 }], 'one year is the latest time');
  const cases: [string, string][] = [
    ['100 x3', "--requests: '100 x3' at column 1: expected a time like 100ms or 1s"],
    ['0ms x1,  2s x0', "--requests: '2s x0' at column 13: the count must be at least 1"],
    ['0ms x1, 5ms', "--requests: '5ms' at column 12: expected xCOUNT after the time, like x3"],
    ['0ms x1, 5ms x2 y', "--requests: '5ms x2 y' at column 16: expected xCOUNT after the time, like x3"],
    ['0ms x3 extra', "--requests: '0ms x3 extra' at column 8: expected xCOUNT after the time, like x3"],
    ['1s x1; 2s x1', "--requests: '1s x1; 2s x1' at column 6: expected xCOUNT after the time, like x3"],
    ['0ms 3', "--requests: '0ms 3' at column 5: expected xCOUNT after the time, like x3"],
    ['1s x1, 500ms x2', "--requests: '500ms x2' at column 8: the times must not go back (the one before is 1s)"],
    ['1.0001s x1', "--requests: '1.0001s x1' at column 1: the time must be whole milliseconds"],
    ['2.5ms x1', "--requests: '2.5ms x1' at column 1: the time must be whole milliseconds"],
    ['0ms x1,', "--requests: '' at column 8: expected TIME xCOUNT, like 100ms x3"],
    ['0ms x100001', "--requests: '0ms x100001' at column 5: more than 100000 requests in all"],
    ['0ms x1, -5ms x1', "--requests: '-5ms x1' at column 9: a time cannot be negative (it is the offset from the start)"],
    ['NaNms x1', "--requests: 'NaNms x1' at column 1: expected a time like 100ms or 1s"],
    ['0ms x1, 31536000001ms x1', "--requests: '31536000001ms x1' at column 9: the time must be at most 365 days (31536000s) after the start"],
    [`${'9'.repeat(400)}s x1`, `--requests: '${'9'.repeat(400)}s x1' at column 1: the time must be at most 365 days (31536000s) after the start`],
  ];
  for (const [text, message] of cases) {
    assert.throws(() => parseSchedule(text), (error: unknown) => {
      assert.ok(error instanceof UsageError, `${text}: got ${String(error)}, want a UsageError`);
      assert.equal(error.message, message, `for '${text}'`);
      return true;
    });
  }
});

test('parseArguments: limit-simulate needs a ROUTE and --requests, and takes no other option', () => {
  assert.deepEqual(parseArguments(['limit-simulate', 'api', '--requests', '0ms x2', '--config', 'x.ini']), {
    kind: 'limit-simulate',
    configFile: 'x.ini',
    route: 'api',
    arrivals: [{ atMs: 0, count: 2 }],
  });
  assert.throws(() => parseArguments(['limit-simulate', '--requests', '0ms x1']), /limit-simulate needs a ROUTE name/);
  assert.throws(() => parseArguments(['limit-simulate', 'api']), /limit-simulate needs --requests/);
  assert.throws(() => parseArguments(['limit-simulate', 'api', '--requests', '0ms x1', '-n', '3']), /option '-n' does not apply here/);
  assert.throws(() => parseArguments(['simulate', 'api', '--requests', '0ms x1']), /option '--requests' does not apply here/);
  assert.throws(
    () => parseArguments(['limit-simulate', 'api', '--requests', '0ms x1', '--requests', '0ms x9']),
    (error: unknown) => error instanceof UsageError && error.message === '--requests is given twice',
    'a repeated --requests is a usage error (exit 2), not the last one winning (break test)',
  );
  for (const args of [['--config', 'a.ini', '--config', 'b.ini'], ['--check', '-c', 'a.ini', '--config=b.ini'], ['simulate', 'api', '--config=a.ini', '--config=a.ini']]) {
    assert.throws(
      () => parseArguments(args),
      (error: unknown) => error instanceof UsageError && error.message === '--config is given twice',
      `${args.join(' ')}: a repeated --config is a usage error, not the last one winning (break test)`,
    );
  }
  assert.deepEqual(parseArguments(['--config=b.ini']), { kind: 'run', configFile: 'b.ini' });
});

test('the built CLI: prints the table and exits 0; no rate_limit, an unknown route or a bad schedule exit 2 with the reason', async () => {
  const main = await buildCli();
  const file = writeConfig(CONFIG_TEXT);
  const run = (...args: string[]) => spawnSync(process.execPath, [main, 'limit-simulate', ...args, '--config', file], { cwd: REPO, encoding: 'utf8', timeout: 60_000 });

  const ok = run('api', '--requests', '0ms x6');
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /^ 0ms {8}6 {11}0\.00 {2}429 Retry-After: 1 {10}0\.00$/m);
  assert.match(ok.stdout, /^6 requests: 5 passed \(200\), 1 limited \(429\)$/m);

  const cases: [string[], string][] = [
    [['open', '--requests', '0ms x1'], 'error: route open has no rate_limit: nothing to simulate (routes with a rate_limit: api)'],
    [['nope', '--requests', '0ms x1'], "error: unknown route 'nope' (routes: api, open)"],
    [['api', '--requests', '100 x3'], "error: --requests: '100 x3' at column 1: expected a time like 100ms or 1s"],
    [['api', '--requests', '0ms x1', '--requests', '0ms x9'], 'error: --requests is given twice'],
  ];
  for (const [args, message] of cases) {
    const result = run(...args);
    assert.equal(result.status, 2, `${args.join(' ')}: exit code got ${result.status}, want 2; stderr: ${result.stderr}`);
    assert.equal(result.stdout, '');
    const want = `${message}; see 'node dist/main.js --help'\n`;
    assert.equal(result.stderr, want, `${args.join(' ')}: stderr got ${JSON.stringify(result.stderr.slice(0, 200))}, want ${JSON.stringify(want)} (one line, not the whole usage)`);
  }
});
