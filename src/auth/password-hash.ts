/**
 * Password hashing for `auth_user` lines: scrypt (RFC 7914) from node:crypto, with a random salt,
 * stored in a self-describing string modelled on the PHC string format
 * (https://github.com/P-H-C/phc-string-format/blob/master/phc-sf-spec.md):
 *
 *     $scrypt$N=16384,r=8,p=1$<salt>$<key>
 *
 * where `<salt>` (16 random bytes) and `<key>` (32 bytes of scrypt output) are standard base64
 * without padding, as PHC prescribes. The string holds no `:`, `;`, `#`, `"` or whitespace, so it sits
 * unquoted in env.ini after `auth_user = name:` (the line is split at the first colon).
 *
 * Why scrypt and not SHA-256: a stolen env.ini must not give the passwords away. A fast hash can be
 * brute-forced at billions of guesses a second; scrypt is slow on purpose (about 50 ms and 16 MiB of
 * memory per check with the parameters above, see RFC 7914 section 2 and OWASP's password storage
 * cheat sheet), which costs a guesser the same. The price is that the proxy pays it too, which is why
 * the authenticator (basic-auth.ts) remembers successful checks in a VerificationCache and verifies
 * off the event loop with `verifyPasswordAsync`.
 *
 * Comparison uses `crypto.timingSafeEqual`, so the time taken does not tell how many leading bytes of
 * a guess were right.
 */
import { randomBytes, scrypt, scryptSync, timingSafeEqual } from 'node:crypto';

/** A parsed `$scrypt$…` string. Buffers are owned by this object; do not mutate them. */
export interface PasswordHash {
  readonly algorithm: 'scrypt';
  /** scrypt N: CPU/memory cost, a power of two. */
  readonly cost: number;
  /** scrypt r: block size. */
  readonly blockSize: number;
  /** scrypt p: parallelisation. */
  readonly parallelization: number;
  readonly salt: Buffer;
  /** The derived key; its length is the key length used when verifying. */
  readonly key: Buffer;
  /** The string as written, e.g. for the verification cache key. */
  readonly text: string;
}

/** Parameters used by `hashPassword`: N = 2^14, r = 8, p = 1 (RFC 7914 section 2's interactive-login example), 16-byte salt, 32-byte key. */
export const DEFAULT_SCRYPT_PARAMETERS = {
  cost: 16384,
  blockSize: 8,
  parallelization: 1,
  saltBytes: 16,
  keyBytes: 32,
} as const;

/**
 * Upper bound on scrypt's memory use (128 · N · r bytes) that `parsePasswordHash` accepts: 64 MiB.
 * Above it a hash in the config could make every login cost the proxy gigabytes; below it Node's
 * `maxmem` is raised as needed.
 */
export const MAX_SCRYPT_MEMORY_BYTES = 64 * 1024 * 1024;

const MIN_SALT_BYTES = 8;
const MAX_SALT_BYTES = 64;
const MIN_KEY_BYTES = 16;
const MAX_KEY_BYTES = 64;
const MAX_PARALLELIZATION = 16;

const EXPECTED_FORMAT = 'expected $scrypt$N=<cost>,r=<block size>,p=<parallelism>$<salt>$<key>';

/**
 * Hashes `password` (its UTF-8 bytes, not normalised) with scrypt and the default parameters.
 * Takes about 50 ms of CPU on purpose.
 *
 * @param options.salt - the salt to use (tests only); default 16 random bytes from `crypto.randomBytes`.
 * @returns the encoded hash, `$scrypt$N=16384,r=8,p=1$<salt base64>$<key base64>`.
 * Source: RFC 7914 (scrypt), PHC string format.
 */
export function hashPassword(password: string, options: { readonly salt?: Buffer } = {}): string {
  const { cost, blockSize, parallelization, saltBytes, keyBytes } = DEFAULT_SCRYPT_PARAMETERS;
  const salt = options.salt ?? randomBytes(saltBytes);
  const key = scryptSync(password, salt, keyBytes, scryptOptions(cost, blockSize, parallelization));
  return `$scrypt$N=${cost},r=${blockSize},p=${parallelization}$${encodeBase64(salt)}$${encodeBase64(key)}`;
}

/**
 * Parses an encoded hash strictly: exactly `$scrypt$N=<n>,r=<r>,p=<p>$<salt>$<key>`, parameters in
 * that order as decimal numbers without leading zeros, N a power of two ≥ 2, r ≥ 1, 1 ≤ p ≤ 16,
 * 128 · N · r ≤ 64 MiB, salt 8..64 bytes and key 16..64 bytes in canonical unpadded base64.
 * Never throws.
 *
 * @returns the parsed hash, or a one-line reason (for `--check`, which prefixes file:line:column).
 */
export function parsePasswordHash(text: string): PasswordHash | string {
  const fields = text.split('$');
  if (fields.length !== 5 || fields[0] !== '') return `malformed password hash: ${EXPECTED_FORMAT}`;
  const [, algorithm = '', parameters = '', saltText = '', keyText = ''] = fields;
  if (algorithm !== 'scrypt') return `unsupported password hash algorithm '${algorithm}': ${EXPECTED_FORMAT}`;

  const match = /^N=([1-9][0-9]{0,9}),r=([1-9][0-9]{0,9}),p=([1-9][0-9]{0,9})$/.exec(parameters);
  if (match === null) return `malformed scrypt parameters '${parameters}': ${EXPECTED_FORMAT}`;
  const cost = Number(match[1]);
  const blockSize = Number(match[2]);
  const parallelization = Number(match[3]);
  if (cost < 2 || !Number.isInteger(Math.log2(cost))) {
    return `scrypt N must be a power of two of at least 2, got ${match[1]}`;
  }
  if (128 * cost * blockSize > MAX_SCRYPT_MEMORY_BYTES) {
    return `scrypt N=${cost},r=${blockSize} needs more than ${MAX_SCRYPT_MEMORY_BYTES / 1024 / 1024} MiB per check`;
  }
  if (parallelization > MAX_PARALLELIZATION) {
    return `scrypt p must be 1..${MAX_PARALLELIZATION}, got ${parallelization}`;
  }

  const salt = decodeBase64(saltText);
  if (salt === undefined) return 'password hash salt is not canonical unpadded base64';
  if (salt.length < MIN_SALT_BYTES || salt.length > MAX_SALT_BYTES) {
    return `password hash salt must be ${MIN_SALT_BYTES}..${MAX_SALT_BYTES} bytes, got ${salt.length}`;
  }
  const key = decodeBase64(keyText);
  if (key === undefined) return 'password hash key is not canonical unpadded base64';
  if (key.length < MIN_KEY_BYTES || key.length > MAX_KEY_BYTES) {
    return `password hash key must be ${MIN_KEY_BYTES}..${MAX_KEY_BYTES} bytes, got ${key.length}`;
  }
  return { algorithm: 'scrypt', cost, blockSize, parallelization, salt, key, text };
}

/**
 * `parsePasswordHash` for validators that only want the reason: undefined when `text` is a valid
 * hash, else the one-line reason. Fits the config loader's `validateAuthHash` option.
 */
export function validatePasswordHash(text: string): string | undefined {
  const hash = parsePasswordHash(text);
  return typeof hash === 'string' ? hash : undefined;
}

/**
 * True when `password` derives the same key as `hash` (compared with `crypto.timingSafeEqual`).
 * Synchronous: blocks the calling thread for the whole scrypt run (about 50 ms with the defaults), so
 * the request path uses `verifyPasswordAsync` instead; this one is for the CLI and tests.
 */
export function verifyPassword(password: string, hash: PasswordHash): boolean {
  const derived = scryptSync(password, hash.salt, hash.key.length, scryptOptionsOf(hash));
  return timingSafeEqual(derived, hash.key);
}

/**
 * As `verifyPassword`, but scrypt runs on libuv's thread pool, so the event loop keeps serving other
 * connections during the ~50 ms. Resolves to true or false; rejects only if node:crypto itself fails
 * (which a hash accepted by `parsePasswordHash` does not cause).
 */
export function verifyPasswordAsync(password: string, hash: PasswordHash): Promise<boolean> {
  return new Promise((resolve, reject) => {
    scrypt(password, hash.salt, hash.key.length, scryptOptionsOf(hash), (error, derived) => {
      if (error !== null) reject(error);
      else resolve(timingSafeEqual(derived, hash.key));
    });
  });
}

function scryptOptionsOf(hash: PasswordHash) {
  return scryptOptions(hash.cost, hash.blockSize, hash.parallelization);
}

/** Node refuses to run scrypt when 128 · N · r exceeds `maxmem` (32 MiB by default); give it headroom. */
function scryptOptions(cost: number, blockSize: number, parallelization: number) {
  return { N: cost, r: blockSize, p: parallelization, maxmem: 2 * 128 * cost * blockSize + 1024 * 1024 };
}

function encodeBase64(bytes: Buffer): string {
  return bytes.toString('base64').replace(/=+$/, '');
}

/** Strict decoding: only the base64 alphabet, no padding, and the text must be the canonical encoding of its bytes. */
function decodeBase64(text: string): Buffer | undefined {
  if (!/^[A-Za-z0-9+/]+$/.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64');
  return encodeBase64(bytes) === text ? bytes : undefined;
}
