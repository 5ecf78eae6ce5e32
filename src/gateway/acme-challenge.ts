/**
 * The HTTP-01 challenge's resource (RFC 8555 §8.3): while an ACME server validates a name, it
 * fetches `http://NAME/.well-known/acme-challenge/TOKEN` (the `.well-known` prefix of RFC 8615) and
 * expects 200 with the key authorization as the body. The certificate manager (src/tls/acme)
 * publishes each token here for the time of its validation; the request path answers these
 * requests itself, before routing, only while `[acme]` is configured — as Caddy and certbot's
 * standalone mode answer them in front of everything else. A token that is not published gets 404
 * (a stale or guessed token is nobody's business upstream).
 */
import type { ClientRequest, ClientResponse } from '../wire/client-side.js';
import type { RequestTarget } from './request-target.js';

/** The path prefix of HTTP-01 challenge resources (RFC 8555 §8.3). `redirect_https` leaves these paths alone too. */
export const ACME_CHALLENGE_PREFIX = '/.well-known/acme-challenge/';
/**
 * A challenge resource's whole path: the prefix and one token, base64url (RFC 8555 §8.1: at least
 * 128 bits of entropy, base64url alphabet). Nothing else — no dot segment, escape or further slash —
 * so a path that is not exactly a token is no challenge and is routed (or redirected) as any other.
 */
const CHALLENGE_PATH = /^\/\.well-known\/acme-challenge\/[A-Za-z0-9_-]+$/;

/** The key authorizations being validated now, by token. */
export class AcmeChallengeStore {
  readonly #keyAuthorizations = new Map<string, string>();

  /** Publishes the answer for `token`, or withdraws it when `keyAuthorization` is undefined. */
  set(token: string, keyAuthorization: string | undefined): void {
    if (keyAuthorization === undefined) this.#keyAuthorizations.delete(token);
    else this.#keyAuthorizations.set(token, keyAuthorization);
  }

  /** Every published token with its key authorization (a new cluster worker gets them all). */
  entries(): [string, string][] {
    return [...this.#keyAuthorizations];
  }

  /** The key authorization published for the token of a challenge `path` (one `isChallengeRequest` accepted); undefined for an unknown token. */
  keyAuthorizationFor(path: string): string | undefined {
    return this.#keyAuthorizations.get(path.slice(ACME_CHALLENGE_PREFIX.length));
  }
}

/**
 * True for a request shaped as an ACME server's fetch of a challenge (RFC 8555 §8.3): a GET or HEAD
 * of exactly `ACME_CHALLENGE_PREFIX` and one token, no query, no body, no upgrade. Anything else
 * under the prefix is an ordinary request (and `redirect_https` redirects it).
 */
export function isChallengeRequest(clientReq: Pick<ClientRequest, 'method' | 'body' | 'upgrade'>, target: Pick<RequestTarget, 'path' | 'query'>): boolean {
  const { method } = clientReq;
  return (
    (method === 'GET' || method === 'HEAD') &&
    clientReq.body === undefined &&
    clientReq.upgrade === undefined &&
    target.query === '' &&
    CHALLENGE_PATH.test(target.path.literal)
  );
}

/**
 * Writes 200 `text/plain` with `keyAuthorization` as the body, exactly (no newline: RFC 8555 §8.3
 * lets the ACME server ignore trailing whitespace, but there is none to ignore); HEAD gets the head.
 * The connection stays open. @returns the body bytes written
 */
export function writeKeyAuthorization(clientRes: ClientResponse, keyAuthorization: string): number {
  const bodyBytes = Buffer.byteLength(keyAuthorization);
  clientRes.writeHead(200, 'OK', ['Content-Type', 'text/plain', 'Content-Length', String(bodyBytes), 'Cache-Control', 'no-store']);
  const isHead = clientRes.req.method === 'HEAD';
  clientRes.end(isHead ? undefined : keyAuthorization);
  return isHead ? 0 : bodyBytes;
}
