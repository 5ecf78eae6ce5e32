/**
 * An in-memory ACME server (RFC 8555) behind an `AcmeTransport`, for unit tests of the client and
 * the certificate manager without a network: it checks every JWS (ES256 over r||s, `jwk` only on
 * newAccount, `kid` after, the `url` and a nonce it issued and has not seen), can refuse nonces
 * (`badNonce`) or a whole step with a problem document, records every request, and issues a
 * certificate signed by the test CA (test/fixtures/tls/ca.pem) for the names in the CSR.
 */
import { createPublicKey, randomBytes, verify, type KeyObject } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AcmeHttpRequest, AcmeHttpResponse, AcmeTransport } from '../../src/tls/acme/acme-transport.js';
import { keyAuthorization, type EcPublicJwk } from '../../src/tls/acme/jws.js';

const BASE = 'https://acme.fake';
const fixtures = new URL('../fixtures/tls/', import.meta.url);

export interface FakeAcmeRequest {
  readonly method: string;
  readonly url: string;
  /** The decoded protected header of a POST. */
  readonly header: Record<string, unknown> | undefined;
  /** The decoded payload of a POST ('' for POST-as-GET). */
  readonly payload: unknown;
  readonly signatureBytes: number;
}

interface Problem {
  readonly type: string;
  readonly detail: string;
  readonly status: number;
}

export class FakeAcmeServer {
  readonly requests: FakeAcmeRequest[] = [];
  /** How many of the next POSTs get `badNonce` although their nonce is good. */
  badNonces = 0;
  /** A problem to answer on newOrder (once it is set, every time). */
  orderProblem: Problem | undefined;
  /** The challenge answer the fake "fetches": set by the test's publish callback. */
  readonly published = new Map<string, string>();
  /** Days the issued certificates are valid (openssl -days). */
  validityDays = 90;
  /** A CA that never finishes: after finalize the order stays `processing`, polled with `Retry-After: 0`. */
  isStuckProcessing = false;
  /** Appended to the chain the download answers (a misbehaving CA: a broken block, text, a key). */
  chainSuffix = '';
  orders = 0;
  readonly #nonces = new Set<string>();
  readonly #accounts = new Map<string, EcPublicJwk>();
  #token = '';
  #orderStatus = 'pending';
  #certificatePem = '';

  readonly transport: AcmeTransport = (request) => Promise.resolve(this.#handle(request));

  /** The directory URL to give the client. */
  readonly directoryUrl = `${BASE}/directory`;

  #nonce(): string {
    const nonce = randomBytes(8).toString('hex');
    this.#nonces.add(nonce);
    return nonce;
  }

  #answer(status: number, body: unknown, headers: Record<string, string> = {}): AcmeHttpResponse {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    const type = typeof body === 'string' ? 'application/pem-certificate-chain' : status >= 400 ? 'application/problem+json' : 'application/json';
    return { status, headers: { 'replay-nonce': this.#nonce(), 'content-type': type, ...headers }, body: Buffer.from(text) };
  }

  #problem(problem: Problem): AcmeHttpResponse {
    return this.#answer(problem.status, { type: problem.type, detail: problem.detail });
  }

  #handle(request: AcmeHttpRequest): AcmeHttpResponse {
    const { method, url } = request;
    if (method === 'GET' && url === this.directoryUrl) {
      this.requests.push({ method, url, header: undefined, payload: undefined, signatureBytes: 0 });
      return { status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify({ newNonce: `${BASE}/nonce`, newAccount: `${BASE}/account`, newOrder: `${BASE}/order` })) };
    }
    if (method === 'HEAD' && url === `${BASE}/nonce`) {
      this.requests.push({ method, url, header: undefined, payload: undefined, signatureBytes: 0 });
      return { status: 200, headers: { 'replay-nonce': this.#nonce() }, body: Buffer.alloc(0) };
    }
    if (method !== 'POST') return this.#problem({ type: 'urn:ietf:params:acme:error:malformed', detail: `${method} ${url}`, status: 405 });

    const jws = JSON.parse(request.body ?? '{}') as { protected: string; payload: string; signature: string };
    const header = JSON.parse(Buffer.from(jws.protected, 'base64url').toString()) as Record<string, unknown>;
    const payload: unknown = jws.payload === '' ? '' : JSON.parse(Buffer.from(jws.payload, 'base64url').toString());
    const signature = Buffer.from(jws.signature, 'base64url');
    this.requests.push({ method, url, header, payload, signatureBytes: signature.length });

    const malformed = (detail: string): AcmeHttpResponse => this.#problem({ type: 'urn:ietf:params:acme:error:malformed', detail, status: 400 });
    if (header.alg !== 'ES256') return malformed('alg must be ES256');
    if (header.url !== url) return malformed('url in the protected header differs');
    const isNewAccount = url === `${BASE}/account`;
    if (isNewAccount !== ('jwk' in header) || isNewAccount === ('kid' in header)) return malformed('jwk on newAccount only, kid otherwise');
    const jwk = isNewAccount ? (header.jwk as EcPublicJwk) : this.#accounts.get(header.kid as string);
    if (jwk === undefined) return this.#problem({ type: 'urn:ietf:params:acme:error:accountDoesNotExist', detail: 'unknown kid', status: 400 });
    const key: KeyObject = createPublicKey({ key: { ...jwk }, format: 'jwk' });
    const isSigned = verify('sha256', Buffer.from(`${jws.protected}.${jws.payload}`), { key, dsaEncoding: 'ieee-p1363' }, signature);
    if (!isSigned) return malformed('bad signature');
    if (typeof header.nonce !== 'string' || !this.#nonces.delete(header.nonce)) return this.#problem({ type: 'urn:ietf:params:acme:error:badNonce', detail: 'unknown or used nonce', status: 400 });
    if (this.badNonces > 0) {
      this.badNonces--;
      return this.#problem({ type: 'urn:ietf:params:acme:error:badNonce', detail: 'JWS has an invalid anti-replay nonce', status: 400 });
    }

    if (isNewAccount) {
      const accountUrl = `${BASE}/account/1`;
      this.#accounts.set(accountUrl, jwk);
      return this.#answer(201, { status: 'valid' }, { location: accountUrl });
    }
    if (url === `${BASE}/order`) {
      if (this.orderProblem !== undefined) return this.#problem(this.orderProblem);
      this.orders++;
      this.#orderStatus = 'pending';
      this.#token = randomBytes(16).toString('base64url');
      this.#names = (payload as { identifiers: { value: string }[] }).identifiers.map((i) => i.value);
      return this.#answer(201, this.#order(), { location: `${BASE}/order/1` });
    }
    if (url === `${BASE}/authz/1`) {
      const status = this.#orderStatus === 'pending' || this.#orderStatus === 'invalid' ? this.#orderStatus : 'valid';
      const error = status === 'invalid' ? { error: { type: 'urn:ietf:params:acme:error:unauthorized', detail: 'the key authorization did not match' } } : {};
      const challenge = { type: 'http-01', url: `${BASE}/chall/1`, token: this.#token, status, ...error };
      return this.#answer(200, { status, identifier: { type: 'dns', value: this.#names[0] }, challenges: [challenge] });
    }
    if (url === `${BASE}/chall/1`) {
      // The "validation": what the client published must be the key authorization (RFC 8555 §8.3).
      const isValid = this.published.get(this.#token) === keyAuthorization(this.#token, jwk);
      this.#orderStatus = isValid ? 'ready' : 'invalid';
      return this.#answer(200, { type: 'http-01', url, token: this.#token, status: isValid ? 'processing' : 'invalid' });
    }
    if (url === `${BASE}/order/1/finalize`) {
      const csr = Buffer.from((payload as { csr: string }).csr, 'base64url');
      this.#certificatePem = issue(csr, this.validityDays);
      this.#orderStatus = this.isStuckProcessing ? 'processing' : 'valid';
      return this.#answer(200, this.#order());
    }
    if (url === `${BASE}/order/1`) return this.#answer(200, this.#order(), { 'retry-after': '0' });
    if (url === `${BASE}/cert/1`) return this.#answer(200, this.#certificatePem + this.chainSuffix);
    return this.#problem({ type: 'urn:ietf:params:acme:error:malformed', detail: `no such resource ${url}`, status: 404 });
  }

  #names: string[] = [];

  #order(): Record<string, unknown> {
    return {
      status: this.#orderStatus,
      identifiers: this.#names.map((value) => ({ type: 'dns', value })),
      authorizations: [`${BASE}/authz/1`],
      finalize: `${BASE}/order/1/finalize`,
      ...(this.#orderStatus === 'valid' ? { certificate: `${BASE}/cert/1` } : {}),
      ...(this.#orderStatus === 'invalid' ? { error: { type: 'urn:ietf:params:acme:error:unauthorized', detail: 'the key authorization did not match' } } : {}),
    };
  }
}

/** Signs `csrDer` with the test CA for `days` days (openssl x509 -req copies the request's extensions): leaf + CA, PEM. */
function issue(csrDer: Buffer, days: number): string {
  const directory = mkdtempSync(join(tmpdir(), 'fake-acme-'));
  try {
    writeFileSync(join(directory, 'request.der'), csrDer);
    const leaf = execFileSync('openssl', ['x509', '-req', '-inform', 'DER', '-in', join(directory, 'request.der'), '-CA', new URL('ca.pem', fixtures).pathname,
      '-CAkey', new URL('ca.key', fixtures).pathname, '-days', String(days), '-copy_extensions', 'copy', '-set_serial', String(Date.now())], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return leaf + readFileSync(new URL('ca.pem', fixtures), 'utf8');
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}
