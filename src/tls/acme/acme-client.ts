/**
 * An ACME client (RFC 8555) for one job: get a certificate for some DNS names by the HTTP-01
 * challenge. The conversation, in the order the RFC's §7.1 overview gives it:
 *
 *   1. GET the directory (§7.1.1): the URLs of newNonce, newAccount, newOrder.
 *   2. Nonces (§6.5): every POST carries a fresh `nonce` from the server. The first comes from a
 *      HEAD to newNonce (§7.2); after that every answer's `Replay-Nonce` is the next one. A
 *      `badNonce` error (§6.7) is retried with the nonce that came with it, up to 3 times.
 *   3. newAccount (§7.3) with `termsOfServiceAgreed` and the `mailto:` contact, signed with the
 *      account key as a `jwk`; the answer's `Location` is the account URL, the `kid` of every
 *      later request (an existing key gets its existing account back, 200 instead of 201).
 *   4. newOrder (§7.4) with one `dns` identifier per name → the order, with its `authorizations`.
 *   5. Each authorization (§7.5) that is not valid yet: its `http-01` challenge's token is
 *      published with the key authorization (§8.1, §8.3: the server fetches
 *      `http://NAME/.well-known/acme-challenge/TOKEN`), then a POST of `{}` to the challenge URL
 *      says "ready" (§7.5.1), then the authorization is polled until it is `valid`.
 *   6. finalize (§7.4) with the CSR (csr.ts), then the order is polled until `valid`.
 *   7. The certificate URL is read (§7.4.2) as `application/pem-certificate-chain`: leaf first.
 *
 * Reads are POST-as-GET (§6.3). Polls wait `Retry-After` when the server sends it (§7.5.1),
 * otherwise 250 ms doubling to 4 s, and give up after `pollTimeoutMs` of waiting in all. An error
 * answer's RFC 7807 problem document becomes an AcmeError with its type and detail.
 */
import type { KeyObject } from 'node:crypto';
import { AcmeError } from '../../errors.js';
import type { Timers } from '../../timers.js';
import type { AcmeHttpResponse, AcmeTransport } from './acme-transport.js';
import { base64url, keyAuthorization, publicJwk, signJws, type EcPublicJwk, type JwsSigner } from './jws.js';

/** The problem type that means "retry with a fresh nonce" (RFC 8555 §6.5, §6.7). */
const BAD_NONCE = 'urn:ietf:params:acme:error:badNonce';
/** Retries of one request after `badNonce` (certbot and lego retry a few times, too). */
const MAX_BAD_NONCE_RETRIES = 3;
/** The first poll delay without Retry-After, doubling up to POLL_MAX_DELAY_MS. */
const POLL_FIRST_DELAY_MS = 250;
const POLL_MAX_DELAY_MS = 4_000;
/** A Retry-After above this (60 s) is cut to it: the poll budget decides when to give up. */
const RETRY_AFTER_MAX_MS = 60_000;

export interface AcmeClientOptions {
  /** The directory URL (https://), e.g. Let's Encrypt's. */
  readonly directoryUrl: string;
  /** The account key, EC P-256 (the key is the account, RFC 8555 §7.3). */
  readonly accountKey: KeyObject;
  /** Account contact e-mail (`mailto:` is added); undefined = none. */
  readonly email: string | undefined;
  readonly transport: AcmeTransport;
  /** The timers polls wait on. */
  readonly timers: Timers;
  /** Wall clock in ms since the epoch, to read a Retry-After HTTP-date. */
  readonly now: () => number;
  /** Total time one poll loop may wait, in ms; default 120 000. */
  readonly pollTimeoutMs?: number;
}

/** Publishes (`keyAuthorization` set) or withdraws (undefined) the answer to an HTTP-01 token. */
export type ChallengePublisher = (token: string, keyAuthorization: string | undefined) => void;

interface Directory {
  readonly newNonce: string;
  readonly newAccount: string;
  readonly newOrder: string;
}

interface Order {
  readonly status: string;
  readonly authorizations: readonly string[];
  readonly finalize: string;
  readonly certificate: string | undefined;
  readonly error: unknown;
}

/** An ACME server's answer, parsed: the status, the JSON body (or undefined), and the Location. */
interface AcmeAnswer {
  readonly response: AcmeHttpResponse;
  readonly json: Record<string, unknown> | undefined;
  readonly location: string | undefined;
}

export class AcmeClient {
  readonly #options: AcmeClientOptions;
  readonly #jwk: EcPublicJwk;
  #directory: Directory | undefined;
  /** The nonce for the next POST: the last answer's Replay-Nonce, used once. */
  #nonce: string | undefined;
  /** The account URL once newAccount answered (the `kid`). */
  #accountUrl: string | undefined;

  /** @throws RangeError for an account key that is not EC P-256 */
  constructor(options: AcmeClientOptions) {
    this.#options = options;
    this.#jwk = publicJwk(options.accountKey);
  }

  /**
   * Runs steps 1–7 for `domains` and resolves with the certificate chain (PEM, leaf first).
   * Tokens are published through `publish` while their authorization is being validated and
   * withdrawn afterwards, also on failure.
   * @param csrDer the PKCS#10 request for exactly these domains (csr.ts)
   * @throws AcmeError for any problem the server reports, an invalid authorization or order, an
   *   answer RFC 8555 does not allow, or polling beyond `pollTimeoutMs`
   */
  async obtainCertificate(domains: readonly string[], csrDer: Uint8Array, publish: ChallengePublisher): Promise<string> {
    const directory = await this.#readDirectory();
    await this.#ensureAccount(directory);
    const created = await this.#post(directory.newOrder, { identifiers: domains.map((value) => ({ type: 'dns', value })) });
    const orderUrl = requireLocation(created, directory.newOrder);
    let order = parseOrder(created.json, orderUrl);
    if (order.status === 'pending') {
      for (const authorizationUrl of order.authorizations) await this.#authorize(authorizationUrl, publish);
      order = await this.#pollOrder(orderUrl, ['pending']);
    }
    if (order.status === 'ready') {
      await this.#post(order.finalize, { csr: base64url(csrDer) });
      order = await this.#pollOrder(orderUrl, ['ready', 'processing']);
    }
    if (order.status !== 'valid' || order.certificate === undefined) {
      throw new AcmeError(`ACME order ${orderUrl} is ${order.status}${describeProblem(order.error)}`);
    }
    const download = await this.#post(order.certificate, '', { Accept: 'application/pem-certificate-chain' });
    const chain = download.response.body.toString('utf8');
    if (!chain.includes('-----BEGIN CERTIFICATE-----')) throw new AcmeError(`ACME ${order.certificate}: the answer is not a PEM certificate chain`);
    return chain;
  }

  /** Step 1, once per client. */
  async #readDirectory(): Promise<Directory> {
    if (this.#directory !== undefined) return this.#directory;
    const url = this.#options.directoryUrl;
    const answer = readAnswer(await this.#options.transport({ method: 'GET', url, headers: {} }), 'GET', url);
    const json = answer.json ?? {};
    const { newNonce, newAccount, newOrder } = json;
    if (typeof newNonce !== 'string' || typeof newAccount !== 'string' || typeof newOrder !== 'string') {
      throw new AcmeError(`ACME GET ${url}: not an ACME directory (newNonce, newAccount, newOrder missing)`);
    }
    this.#directory = { newNonce, newAccount, newOrder };
    return this.#directory;
  }

  /** Step 3, once per client: newAccount with the jwk; its Location becomes the kid. */
  async #ensureAccount(directory: Directory): Promise<void> {
    if (this.#accountUrl !== undefined) return;
    const email = this.#options.email;
    const payload = { termsOfServiceAgreed: true, ...(email === undefined ? {} : { contact: [`mailto:${email}`] }) };
    const answer = await this.#post(directory.newAccount, payload, {}, { jwk: this.#jwk });
    this.#accountUrl = requireLocation(answer, directory.newAccount);
  }

  /** Step 5 for one authorization. */
  async #authorize(authorizationUrl: string, publish: ChallengePublisher): Promise<void> {
    const authorization = (await this.#post(authorizationUrl, '')).json ?? {};
    if (authorization.status === 'valid') return;
    if (authorization.status !== 'pending') throw new AcmeError(`ACME authorization ${authorizationUrl} is ${String(authorization.status)}`);
    const challenges = Array.isArray(authorization.challenges) ? (authorization.challenges as Record<string, unknown>[]) : [];
    const challenge = challenges.find((c) => typeof c === 'object' && c !== null && c.type === 'http-01');
    const name = describeIdentifier(authorization.identifier);
    if (challenge === undefined || typeof challenge.url !== 'string' || typeof challenge.token !== 'string' || !/^[A-Za-z0-9_-]+$/.test(challenge.token)) {
      throw new AcmeError(`ACME authorization ${authorizationUrl} for ${name} offers no usable http-01 challenge`);
    }
    const token = challenge.token;
    publish(token, keyAuthorization(token, this.#jwk));
    try {
      await this.#post(challenge.url, {});
      const final = await this.#poll(authorizationUrl, (json) => json.status === 'pending');
      if (final.status !== 'valid') {
        const failed = Array.isArray(final.challenges) ? (final.challenges as Record<string, unknown>[]).find((c) => c?.token === token) : undefined;
        throw new AcmeError(`ACME authorization for ${name} is ${String(final.status)}${describeProblem(failed?.error)}`, problemTypeOf(failed?.error));
      }
    } finally {
      publish(token, undefined);
    }
  }

  async #pollOrder(orderUrl: string, waitWhile: readonly string[]): Promise<Order> {
    return parseOrder(await this.#poll(orderUrl, (body) => waitWhile.includes(body.status as string)), orderUrl);
  }

  /** POST-as-GET `url` until `isPending` says no; waits Retry-After or the doubling delay, within pollTimeoutMs. */
  async #poll(url: string, isPending: (json: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
    const budgetMs = this.#options.pollTimeoutMs ?? 120_000;
    const startedAt = this.#options.now();
    let delayMs = POLL_FIRST_DELAY_MS;
    for (;;) {
      const answer = await this.#post(url, '');
      const json = answer.json ?? {};
      if (!isPending(json)) return json;
      // Retry-After is followed when it asks for longer than our own schedule, never for shorter:
      // `Retry-After: 0` (or a date gone by) must not turn the poll into a busy loop.
      const retryAfterMs = parseRetryAfter(answer.response.headers['retry-after'], this.#options.now());
      const waitMs = Math.max(retryAfterMs ?? 0, delayMs);
      delayMs = Math.min(delayMs * 2, POLL_MAX_DELAY_MS);
      const elapsedMs = this.#options.now() - startedAt; // the requests' own time counts too
      if (elapsedMs + waitMs > budgetMs) throw new AcmeError(`ACME ${url} still ${String(json.status)} after ${elapsedMs} ms of polling`);
      await new Promise<void>((resolve) => this.#options.timers.setTimeout(resolve, waitMs));
    }
  }

  /**
   * One signed POST (RFC 8555 §6.2): JWS with the current nonce, `kid` unless `signer` says
   * otherwise; the answer's Replay-Nonce is kept; `badNonce` is retried (§6.5).
   * @param payload JSON, or `''` for POST-as-GET
   */
  async #post(url: string, payload: unknown, headers: Record<string, string> = {}, signer?: JwsSigner): Promise<AcmeAnswer> {
    for (let attempt = 0; ; attempt++) {
      const nonce = this.#nonce ?? (await this.#freshNonce());
      this.#nonce = undefined;
      const kid = this.#accountUrl;
      const by: JwsSigner = signer ?? (kid === undefined ? { jwk: this.#jwk } : { kid });
      const body = JSON.stringify(signJws(this.#options.accountKey, by, nonce, url, payload));
      const response = await this.#options.transport({ method: 'POST', url, headers: { 'Content-Type': 'application/jose+json', ...headers }, body });
      this.#nonce = response.headers['replay-nonce'] ?? undefined;
      try {
        return readAnswer(response, 'POST', url);
      } catch (error) {
        const isBadNonce = error instanceof AcmeError && error.problemType === BAD_NONCE;
        if (!isBadNonce || attempt >= MAX_BAD_NONCE_RETRIES) throw error;
      }
    }
  }

  /** HEAD newNonce (RFC 8555 §7.2): the first nonce, or the next after an answer that carried none. */
  async #freshNonce(): Promise<string> {
    const { newNonce } = await this.#readDirectory();
    const response = await this.#options.transport({ method: 'HEAD', url: newNonce, headers: {} });
    const nonce = response.headers['replay-nonce'];
    if (response.status >= 400 || nonce === undefined) throw new AcmeError(`ACME HEAD ${newNonce}: no Replay-Nonce (status ${response.status})`, undefined, response.status);
    return nonce;
  }
}

/**
 * The answer as JSON when it is JSON, with its Location.
 * @throws AcmeError for a status of 400 or more, carrying the problem document's type and detail (RFC 7807 §3.1)
 */
function readAnswer(response: AcmeHttpResponse, method: string, url: string): AcmeAnswer {
  const contentType = response.headers['content-type'] ?? '';
  let json: Record<string, unknown> | undefined;
  if (/json/i.test(contentType)) {
    try {
      const parsed: unknown = JSON.parse(response.body.toString('utf8'));
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) json = parsed as Record<string, unknown>;
    } catch {
      throw new AcmeError(`ACME ${method} ${url}: the answer (status ${response.status}) is not valid JSON`, undefined, response.status);
    }
  }
  if (response.status >= 400) {
    throw new AcmeError(`ACME ${method} ${url}: status ${response.status}${describeProblem(json)}`, problemTypeOf(json), response.status);
  }
  return { response, json, location: response.headers.location };
}

function requireLocation(answer: AcmeAnswer, url: string): string {
  if (answer.location === undefined) throw new AcmeError(`ACME POST ${url}: the answer has no Location`);
  return new URL(answer.location, url).href;
}

function parseOrder(json: Record<string, unknown> | undefined, orderUrl: string): Order {
  const { status, authorizations, finalize, certificate, error } = json ?? {};
  if (typeof status !== 'string' || !Array.isArray(authorizations) || !authorizations.every((a) => typeof a === 'string') || typeof finalize !== 'string') {
    throw new AcmeError(`ACME order ${orderUrl}: not an order (status, authorizations, finalize)`);
  }
  return { status, authorizations, finalize, certificate: typeof certificate === 'string' ? certificate : undefined, error };
}

/** `: TYPE: detail` of a problem document (RFC 7807), or '' when there is none. */
function describeProblem(problem: unknown): string {
  if (typeof problem !== 'object' || problem === null) return '';
  const { type, detail } = problem as Record<string, unknown>;
  const parts = [type, detail].filter((part): part is string => typeof part === 'string' && part !== '');
  return parts.length === 0 ? '' : `: ${parts.join(': ')}`;
}

function problemTypeOf(problem: unknown): string | undefined {
  const type = typeof problem === 'object' && problem !== null ? (problem as Record<string, unknown>).type : undefined;
  return typeof type === 'string' ? type : undefined;
}

function describeIdentifier(identifier: unknown): string {
  const value = typeof identifier === 'object' && identifier !== null ? (identifier as Record<string, unknown>).value : undefined;
  return typeof value === 'string' ? value : '(unnamed identifier)';
}

/**
 * Retry-After (RFC 9110 §10.2.3) in ms: delay-seconds or an HTTP-date, cut to 0..60 s; undefined
 * when absent or unreadable.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  const ms = /^\d+$/.test(trimmed) ? Number(trimmed) * 1000 : Date.parse(trimmed) - nowMs;
  if (Number.isNaN(ms)) return undefined;
  return Math.min(Math.max(ms, 0), RETRY_AFTER_MAX_MS);
}
