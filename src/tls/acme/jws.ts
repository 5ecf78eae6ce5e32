/**
 * How an ACME client signs its requests (RFC 8555 §6.2): every POST body is a JSON Web Signature in
 * the flattened JSON serialization (RFC 7515 §7.2.2), `{"protected", "payload", "signature"}`, each
 * base64url without padding (RFC 7515 §2). The protected header names the algorithm, the request's
 * `nonce` (§6.5) and `url` (§6.4), and the key: the public key itself as a `jwk` before the account
 * exists (newAccount), its account URL as `kid` after. A POST-as-GET (§6.3), the way to read a
 * resource, has the empty string as its payload.
 *
 * The algorithm is ES256 (RFC 7518 §3.4): ECDSA P-256 with SHA-256, whose signature is the two
 * 32-byte integers r and s side by side, 64 bytes, not the DER SEQUENCE that X.509 uses (node's
 * `crypto.sign` gives r||s with `dsaEncoding: 'ieee-p1363'`). The key authorization of a challenge
 * (§8.1) is `token "." base64url(SHA-256(JWK thumbprint))`, the thumbprint being the key's required
 * members in lexicographic order without whitespace (RFC 7638 §3).
 */
import { createHash, createPublicKey, sign, type KeyObject } from 'node:crypto';

/** An EC public key as a JWK (RFC 7518 §6.2.1): its required members only. */
export interface EcPublicJwk {
  readonly crv: 'P-256';
  readonly kty: 'EC';
  /** base64url of the 32-byte x coordinate. */
  readonly x: string;
  readonly y: string;
}

/** A flattened JWS (RFC 7515 §7.2.2), the body of every ACME POST (`Content-Type: application/jose+json`). */
export interface FlattenedJws {
  readonly protected: string;
  readonly payload: string;
  readonly signature: string;
}

/** How the signer is named in the protected header: `jwk` for newAccount, `kid` (the account URL) after (RFC 8555 §6.2). */
export type JwsSigner = { readonly jwk: EcPublicJwk } | { readonly kid: string };

export function base64url(bytes: Uint8Array | string): string {
  return Buffer.from(bytes).toString('base64url');
}

/**
 * The public JWK of a P-256 key (private or public).
 * @throws RangeError for a key that is not EC P-256
 */
export function publicJwk(key: KeyObject): EcPublicJwk {
  const jwk = createPublicKey(key).export({ format: 'jwk' });
  if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || jwk.x === undefined || jwk.y === undefined) throw new RangeError('the account key must be an EC P-256 key');
  return { crv: 'P-256', kty: 'EC', x: jwk.x, y: jwk.y };
}

/** The JWK thumbprint (RFC 7638 §3): base64url(SHA-256 of `{"crv":…,"kty":"EC","x":…,"y":…}`), members sorted, no whitespace. */
export function jwkThumbprint(jwk: EcPublicJwk): string {
  const canonical = `{"crv":"${jwk.crv}","kty":"${jwk.kty}","x":"${jwk.x}","y":"${jwk.y}"}`;
  return base64url(createHash('sha256').update(canonical).digest());
}

/** The key authorization for a challenge `token` (RFC 8555 §8.1): what the HTTP-01 resource answers (§8.3). */
export function keyAuthorization(token: string, jwk: EcPublicJwk): string {
  return `${token}.${jwkThumbprint(jwk)}`;
}

/**
 * Signs `payload` for `url` with `accountKey` (ES256): the flattened JWS of an ACME POST.
 * @param payload a JSON value, or `''` for a POST-as-GET (RFC 8555 §6.3)
 */
export function signJws(accountKey: KeyObject, signer: JwsSigner, nonce: string, url: string, payload: unknown): FlattenedJws {
  const header = { alg: 'ES256', ...signer, nonce, url };
  const protectedPart = base64url(JSON.stringify(header));
  const payloadPart = payload === '' ? '' : base64url(JSON.stringify(payload));
  const signature = sign('sha256', Buffer.from(`${protectedPart}.${payloadPart}`, 'ascii'), { key: accountKey, dsaEncoding: 'ieee-p1363' });
  return { protected: protectedPart, payload: payloadPart, signature: base64url(signature) };
}
