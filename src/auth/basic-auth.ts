/**
 * HTTP Basic authentication enforced by the proxy itself (RFC 7617, on the framework of RFC 9110
 * section 11), for routes with `auth_basic = REALM`. The tutorial's proxy only passed credentials
 * through to a backend that checked them; an edge proxy must be able to demand them (nginx
 * `auth_basic`, Caddy `basic_auth`).
 *
 * The exchange: a request without acceptable credentials gets 401 with
 * `WWW-Authenticate: Basic realm="REALM", charset="UTF-8"`; the client retries with
 * `Authorization: Basic base64(user ":" password)`. The parser here is strict and total: any header
 * that is not exactly that shape (other scheme, bad base64, no colon, invalid UTF-8, control
 * characters, longer than 4 KiB) is simply "no credentials", never an exception, so it can only ever
 * become a 401, never a 500.
 *
 * Checking is scrypt (password-hash.ts), run off the event loop, with successes remembered in a
 * VerificationCache and identical concurrent checks (a browser's parallel requests) sharing one run.
 * An unknown user name is checked against a dummy hash with the same parameters, so the time taken
 * does not reveal which names exist.
 */
import { randomBytes } from 'node:crypto';
import type { AuthUser } from '../config/config.js';
import { ConfigValueError } from '../errors.js';
import { DEFAULT_SCRYPT_PARAMETERS, parsePasswordHash, verifyPasswordAsync, type PasswordHash } from './password-hash.js';
import { VerificationCache } from './verification-cache.js';

/** Longest `Authorization` value considered, in characters (4 KiB). Longer ones are "no credentials". */
export const MAX_AUTHORIZATION_LENGTH = 4096;

/**
 * Most bytes `user:password` may have (UTF-8) and still fit in `Basic <base64>` within
 * MAX_AUTHORIZATION_LENGTH: 3 · floor((4 096 − 6) / 4) = 3 066.
 */
export const MAX_CREDENTIALS_BYTES = 3 * Math.floor((MAX_AUTHORIZATION_LENGTH - 'Basic '.length) / 4);

/** Credentials decoded from an `Authorization: Basic …` header. */
export interface BasicCredentials {
  /** RFC 7617's user-id: everything before the first colon (may be empty). */
  readonly user: string;
  /** Everything after the first colon (may be empty, may contain colons). */
  readonly password: string;
}

/** `Basic`, one or more spaces, then a token68 that is canonical padded base64 (RFC 4648 section 4). */
const BASIC_CREDENTIALS = /^[ \t]*basic +([A-Za-z0-9+/]+={0,2})[ \t]*$/i;
/** Control characters, which RFC 7617 section 2 forbids in user-id and password. */
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Decodes an `Authorization` header value as Basic credentials (RFC 7617 section 2): the scheme
 * `Basic` in any case, one or more spaces, base64 of `user:password` in the standard alphabet with
 * correct padding and no stray bits, decoded as UTF-8 (the charset the challenge announces), split
 * at the first colon.
 *
 * Total: never throws, whatever it is given.
 *
 * @param headerValue - the raw header value (node:http's `req.headers.authorization`).
 * @returns the credentials, or undefined for a missing, malformed or over-long (> 4 096 characters) header.
 */
export function parseBasicAuthorization(headerValue: string | undefined): BasicCredentials | undefined {
  if (typeof headerValue !== 'string' || headerValue.length > MAX_AUTHORIZATION_LENGTH) return undefined;
  const token = BASIC_CREDENTIALS.exec(headerValue)?.[1];
  if (token === undefined || token.length % 4 !== 0) return undefined;
  const bytes = Buffer.from(token, 'base64');
  if (bytes.toString('base64') !== token) return undefined; // stray characters, padding or bits
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    return undefined; // not UTF-8
  }
  const colon = text.indexOf(':');
  if (colon < 0 || CONTROL_CHARACTER.test(text)) return undefined;
  return { user: text.slice(0, colon), password: text.slice(colon + 1) };
}

/**
 * Why `name` cannot be an `auth_user` name, or undefined when it can. RFC 7617 forbids a colon and
 * control characters in a user-id; env.ini adds whitespace, `;`, `#` and `"` (they would end the
 * value, start a comment or a quoted string on the `auth_user = name:HASH` line).
 */
export function checkUserName(name: string): string | undefined {
  if (name === '') return 'user name is empty';
  if (name.includes(':')) return `user name '${name}' contains ':'`;
  if (/[\s\u0000-\u001f\u007f]/.test(name)) return `user name '${name}' contains whitespace or a control character`;
  if (/[;#"]/.test(name)) return `user name '${name}' contains ';', '#' or '"'`;
  return undefined;
}

/** Knobs for tests and tuning. */
export interface BasicAuthenticatorOptions {
  /** Capacity of the cache of successful checks. Default 1 000; 0 disables it. */
  readonly cacheSize?: number;
  /** The password check. Default `verifyPasswordAsync` (scrypt on the thread pool). Tests inject a counting one. */
  readonly verify?: (password: string, hash: PasswordHash) => Promise<boolean>;
}

/**
 * One route's Basic authentication: its realm and its users (`auth_basic`, `auth_user`).
 * Build one per route when the runtime is built from config, and keep it for the route's life (the
 * cache lives in it).
 */
export class BasicAuthenticator {
  readonly realm: string;
  readonly #users = new Map<string, PasswordHash>();
  /** Checked for unknown names so they cost as much as known ones. */
  readonly #dummyHash: PasswordHash;
  readonly #cache: VerificationCache;
  readonly #inFlight = new Map<string, Promise<boolean>>();
  readonly #verify: (password: string, hash: PasswordHash) => Promise<boolean>;
  readonly #challenge: string;

  /**
   * @param realm - the `auth_basic` value; shown by browsers in the login prompt.
   * @param users - the `auth_user` lines. With none, every request is refused.
   * @throws ConfigValueError (at the line's place) for a hash `parsePasswordHash` rejects, a bad
   *   name, or a name given twice. The config loader reports these first; this is the backstop.
   */
  constructor(realm: string, users: readonly AuthUser[], options: BasicAuthenticatorOptions = {}) {
    this.realm = realm;
    for (const user of users) {
      const badName = checkUserName(user.name);
      if (badName !== undefined) throw new ConfigValueError(user.place, badName);
      const hash = parsePasswordHash(user.hash);
      if (typeof hash === 'string') throw new ConfigValueError(user.place, `auth_user '${user.name}': ${hash}`);
      if (this.#users.has(user.name)) throw new ConfigValueError(user.place, `auth_user '${user.name}' is given twice`);
      this.#users.set(user.name, hash);
    }
    this.#dummyHash = makeDummyHash(this.#users.values().next().value);
    this.#cache = new VerificationCache(options.cacheSize);
    this.#verify = options.verify ?? verifyPasswordAsync;
    this.#challenge = `Basic realm="${quote(realm)}", charset="UTF-8"`;
  }

  /**
   * True when the header carries the name and password of one of the users.
   * A malformed header is false at once (its shape tells an observer nothing about the users); an
   * unknown name costs one scrypt run against the dummy hash; a known name costs one scrypt run, or
   * nothing when the same credentials succeeded recently. Never rejects on account of the header.
   *
   * @param authorizationHeader - `req.headers.authorization`.
   */
  async check(authorizationHeader: string | undefined): Promise<boolean> {
    const credentials = parseBasicAuthorization(authorizationHeader);
    if (credentials === undefined) return false;
    const { user, password } = credentials;
    const hash = this.#users.get(user);
    if (hash === undefined) {
      await this.#verify(password, this.#dummyHash);
      return false;
    }
    const key = this.#cache.keyOf(user, password, hash.text);
    if (this.#cache.has(key)) return true;
    const running = this.#inFlight.get(key);
    if (running !== undefined) return running;
    const verification = this.#verify(password, hash)
      .then((isMatch) => {
        if (isMatch) this.#cache.remember(key);
        return isMatch;
      })
      .finally(() => this.#inFlight.delete(key));
    this.#inFlight.set(key, verification);
    return verification;
  }

  /** The `WWW-Authenticate` value for a 401: `Basic realm="REALM", charset="UTF-8"` (RFC 7617 sections 2 and 2.1). */
  challenge(): string {
    return this.#challenge;
  }
}

/** RFC 9110 section 5.6.4 quoted-string: backslash-escape `"` and `\`. */
function quote(text: string): string {
  return text.replace(/["\\]/g, (character) => `\\${character}`);
}

/** A hash no password will match (random key), costing what `model`'s parameters cost. */
function makeDummyHash(model: PasswordHash | undefined): PasswordHash {
  const defaults = DEFAULT_SCRYPT_PARAMETERS;
  const cost = model?.cost ?? defaults.cost;
  const blockSize = model?.blockSize ?? defaults.blockSize;
  const parallelization = model?.parallelization ?? defaults.parallelization;
  const salt = randomBytes(model?.salt.length ?? defaults.saltBytes);
  const key = randomBytes(model?.key.length ?? defaults.keyBytes);
  return { algorithm: 'scrypt', cost, blockSize, parallelization, salt, key, text: '' };
}
