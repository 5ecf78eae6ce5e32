/**
 * The command line (SPEC 2), parsed by hand: a command word or flag, `--config PATH`, and each
 * command's own options. Anything else is a UsageError (exit code 2) with a one-line reason, and
 * "did you mean" for a mistyped option or command (git's and curl's `unknown option`).
 */
import { isIP } from 'node:net';
import { UsageError } from '../errors.js';
import { InvalidValueError, parseDuration, parseListenAddress } from '../config/values.js';
import type { ListenAddress } from '../config/config.js';
import type { HeartbeatOptions } from './heartbeat.js';
import { parseSchedule, type Arrival } from './limit-simulate.js';
import { suggest } from '../config/did-you-mean.js';

export type Command =
  | { readonly kind: 'run'; readonly configFile: string }
  | { readonly kind: 'check'; readonly configFile: string }
  /** `listen`: `--listen HOST:PORT`; undefined = the config's port on 127.0.0.1 (run-demo.ts). */
  | { readonly kind: 'demo'; readonly configFile: string; readonly user: string; readonly listen: ListenAddress | undefined }
  | { readonly kind: 'simulate'; readonly configFile: string; readonly route: string; readonly n: number; readonly clientIp?: string; readonly key?: string }
  | { readonly kind: 'limit-simulate'; readonly configFile: string; readonly route: string; readonly arrivals: readonly Arrival[] }
  | { readonly kind: 'passwd'; readonly name: string }
  | ({ readonly kind: 'heartbeat' } & HeartbeatOptions)
  | { readonly kind: 'help' }
  | { readonly kind: 'version' };

export const USAGE = `Usage:
  node dist/main.js [--config env.ini]                 run the proxy
  node dist/main.js --check [--config F]               validate the config, print a summary, exit 0/1
  node dist/main.js demo [--config F] [--user U:P] [--listen HOST:PORT]
                                                       demo backends web1 :9001 (Basic auth) and web2 :9002, plus the proxy,
                                                       all on 127.0.0.1 (--listen widens the proxy's, e.g. 0.0.0.0:8080)
  node dist/main.js simulate ROUTE [-n N] [--client-ip IP] [--key K] [--config F]
                                                       show N balancing decisions of a route, step by step
  node dist/main.js limit-simulate ROUTE --requests "0ms x5, 100ms x3, 1s x10" [--config F]
                                                       run ROUTE's rate_limit bucket on a simulated clock, request by
                                                       request: a comma list of TIME xCOUNT, TIME the offset from the
                                                       start in whole ms (0ms, 250ms, 1.5s, 2m, 1h; never going back),
                                                       COUNT requests from one client at that instant
  node dist/main.js passwd NAME                        read a password, print an auth_user line
  node dist/main.js heartbeat --admin URL --token T --route ROUTE --url URL [--weight N] [--every 3s] [--ttl 10s]
                                                       register URL with the proxy's admin listener every --every,
                                                       deregister on SIGTERM/SIGINT (token also from PROXY_ADMIN_TOKEN)
  node dist/main.js --help | --version

Exit codes: 0 success, 1 configuration error, 2 usage error.
Signals: SIGTERM/SIGINT drain and exit, SIGHUP reloads the config, SIGUSR1 reopens the access log file.
`;

/** Parses `process.argv.slice(2)`. Throws UsageError. */
export function parseArguments(argv: readonly string[]): Command {
  const args = [...argv];
  let configFile = 'env.ini';
  let isConfigGiven = false;
  let isCheck = false;
  let word: string | undefined;
  const positional: string[] = [];
  const options = new Map<string, string>();

  const takeValue = (flag: string): string => {
    const value = args.shift();
    if (value === undefined || value.startsWith('--')) throw new UsageError(`${flag} needs a value`);
    return value;
  };
  // An option given twice is refused rather than the last one silently winning (`--requests A --requests B`).
  const setOption = (flag: string): void => {
    if (options.has(flag)) throw new UsageError(`${flag} is given twice`);
    options.set(flag, takeValue(flag));
  };

  while (args.length > 0) {
    const arg = args.shift()!;
    if (arg === '--help' || arg === '-h') return { kind: 'help' };
    if (arg === '--version' || arg === '-v') return { kind: 'version' };
    if (arg === '--check' || arg === '-t') isCheck = true;
    else if (arg === '--config' || arg === '-c' || arg.startsWith('--config=')) {
      if (isConfigGiven) throw new UsageError('--config is given twice');
      isConfigGiven = true;
      configFile = arg.startsWith('--config=') ? arg.slice('--config='.length) : takeValue(arg);
    }
    else if (COMMAND_OPTIONS.includes(arg) || HEARTBEAT_FLAGS.includes(arg)) setOption(arg);
    else if (arg.startsWith('-')) throw new UsageError(`unknown option '${arg}'${didYouMean(arg.split('=')[0]!, LONG_OPTIONS)}`);
    else if (word === undefined && positional.length === 0 && COMMANDS.includes(arg)) word = arg;
    else positional.push(arg);
  }

  const allowOptions = (...allowed: string[]): void => {
    for (const flag of options.keys()) if (!allowed.includes(flag)) throw new UsageError(`option '${flag}' does not apply here`);
  };
  const noPositional = (): void => {
    const [first] = positional;
    // Without a command word, the first argument may be a mistyped one (`simulte a`).
    if (first !== undefined) throw new UsageError(`unexpected argument '${first}'${word === undefined ? didYouMean(first, COMMANDS) : ''}`);
  };

  if (isCheck) {
    if (word !== undefined && word !== 'run') throw new UsageError(`--check cannot be combined with '${word}'`);
    allowOptions();
    noPositional();
    return { kind: 'check', configFile };
  }
  switch (word) {
    case undefined:
    case 'run':
      allowOptions();
      noPositional();
      return { kind: 'run', configFile };
    case 'demo': {
      allowOptions('--user', '--listen');
      noPositional();
      const user = options.get('--user') ?? 'tom:123';
      if (!user.includes(':') || user.startsWith(':')) throw new UsageError(`--user must be NAME:PASSWORD, got '${user}'`);
      const listenText = options.get('--listen');
      return { kind: 'demo', configFile, user, listen: listenText === undefined ? undefined : parseDemoListen(listenText) };
    }
    case 'simulate': {
      allowOptions('-n', '--client-ip', '--key');
      const [route, ...rest] = positional;
      if (route === undefined) throw new UsageError('simulate needs a ROUTE name');
      if (rest.length > 0) throw new UsageError(`unexpected argument '${rest[0]}'`);
      const nText = options.get('-n') ?? '10';
      const n = Number(nText);
      if (!Number.isInteger(n) || n < 1 || n > 1_000_000) throw new UsageError(`-n must be an integer 1..1000000, got '${nText}'`);
      const clientIp = options.get('--client-ip');
      if (clientIp !== undefined && isIP(clientIp) === 0) throw new UsageError(`--client-ip must be an IPv4 or IPv6 address, got '${clientIp}'`);
      const key = options.get('--key');
      return { kind: 'simulate', configFile, route, n, ...(clientIp === undefined ? {} : { clientIp }), ...(key === undefined ? {} : { key }) };
    }
    case 'limit-simulate': {
      allowOptions('--requests');
      const [route, ...rest] = positional;
      if (route === undefined) throw new UsageError('limit-simulate needs a ROUTE name');
      if (rest.length > 0) throw new UsageError(`unexpected argument '${rest[0]}'`);
      const schedule = options.get('--requests');
      if (schedule === undefined) throw new UsageError('limit-simulate needs --requests, e.g. --requests "0ms x5, 100ms x3, 1s x10"');
      return { kind: 'limit-simulate', configFile, route, arrivals: parseSchedule(schedule) };
    }
    case 'passwd': {
      allowOptions();
      const [name, ...rest] = positional;
      if (name === undefined) throw new UsageError('passwd needs a user NAME');
      if (rest.length > 0) throw new UsageError(`unexpected argument '${rest[0]}'`);
      return { kind: 'passwd', name };
    }
    case 'heartbeat':
      allowOptions(...HEARTBEAT_FLAGS);
      noPositional();
      return parseHeartbeat(options);
    default:
      throw new UsageError(`unknown command '${word}'`);
  }
}

/** `demo --listen HOST:PORT`, read as `[server] listen` is (src/config/values.ts). */
function parseDemoListen(text: string): ListenAddress {
  try {
    return parseListenAddress(text);
  } catch (error) {
    if (error instanceof InvalidValueError) throw new UsageError(`--listen: ${error.message}`);
    throw error;
  }
}

const HEARTBEAT_FLAGS = ['--admin', '--token', '--route', '--url', '--weight', '--every', '--ttl'];
/** The options that take a value, other than `--config` and heartbeat's. */
const COMMAND_OPTIONS = ['-n', '--client-ip', '--key', '--user', '--listen', '--requests'];
/** The command words. */
const COMMANDS = ['demo', 'simulate', 'limit-simulate', 'passwd', 'run', 'heartbeat'];
/** Every long option, for "did you mean" (a short one is too short to guess from). */
const LONG_OPTIONS = ['--help', '--version', '--check', '--config', ...COMMAND_OPTIONS, ...HEARTBEAT_FLAGS].filter((flag) => flag.startsWith('--'));

/** ` (did you mean --config?)` when `word` is a likely typo of one of `candidates` (did-you-mean.ts), else empty. */
function didYouMean(word: string, candidates: readonly string[]): string {
  const match = word.startsWith('-') && !word.startsWith('--') ? undefined : suggest(word, candidates);
  return match === undefined ? '' : ` (did you mean ${match}?)`;
}

/** `heartbeat` options; `--token` falls back to the PROXY_ADMIN_TOKEN environment variable. */
function parseHeartbeat(options: ReadonlyMap<string, string>): Command {
  const required = (flag: string): string => {
    const value = options.get(flag);
    if (value === undefined) throw new UsageError(`heartbeat needs ${flag}`);
    return value;
  };
  const duration = (flag: string, fallback: string): number => {
    const text = options.get(flag) ?? fallback;
    try {
      return parseDuration(text, 100);
    } catch (error) {
      throw new UsageError(`${flag}: ${(error as Error).message}`);
    }
  };
  const admin = required('--admin');
  if (!/^https?:\/\/[^/]+/.test(admin)) throw new UsageError(`--admin must be a URL like http://127.0.0.1:9090, got '${admin}'`);
  const weightText = options.get('--weight');
  const weight = weightText === undefined ? undefined : Number(weightText);
  if (weight !== undefined && !(Number.isInteger(weight) && weight >= 1 && weight <= 1_000_000)) {
    throw new UsageError(`--weight must be a whole number from 1 to 1000000, got '${weightText}'`);
  }
  const everyMs = duration('--every', '3s');
  const ttlMs = duration('--ttl', '10s');
  if (ttlMs <= everyMs) throw new UsageError(`--ttl (${ttlMs}ms) must be longer than --every (${everyMs}ms), ideally about three heartbeats`);
  const token = options.get('--token') ?? process.env['PROXY_ADMIN_TOKEN'];
  if (token === undefined || token === '') throw new UsageError('heartbeat needs --token (or the PROXY_ADMIN_TOKEN environment variable): registering is a state-changing call');
  return {
    kind: 'heartbeat',
    admin,
    token,
    route: required('--route'),
    url: required('--url'),
    weight,
    everyMs,
    ttlMs,
  };
}
