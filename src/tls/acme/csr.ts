/**
 * A PKCS#10 certificate signing request (RFC 2986 §4), the `csr` an ACME client sends to finalize an
 * order (RFC 8555 §7.4): "these names, this public key, signed by its private key". Written in DER
 * (der.ts) for one P-256 key and a list of DNS names. The ASN.1 written, top to bottom:
 *
 *   CertificationRequest ::= SEQUENCE {                         -- RFC 2986 §4.2
 *     certificationRequestInfo SEQUENCE {                       -- RFC 2986 §4.1, what is signed
 *       version        INTEGER 0,                               -- v1
 *       subject        SEQUENCE {                               -- Name (RFC 5280 §4.1.2.4)
 *                        SET { SEQUENCE { OID 2.5.4.3,          -- commonName
 *                                         UTF8String first-domain } } },
 *                                                               -- (an empty SEQUENCE when the first domain is
 *                                                               --  longer than 64 characters, ub-common-name)
 *       subjectPKInfo  SubjectPublicKeyInfo,                    -- the key's SPKI DER, as node exports it
 *       attributes [0] IMPLICIT SET OF {                        -- 0xa0
 *         SEQUENCE { OID 1.2.840.113549.1.9.14,                 -- extensionRequest (PKCS#9, RFC 2985 §5.4.2)
 *                    SET { SEQUENCE OF {                        -- Extensions (RFC 5280 §4.1)
 *                      SEQUENCE { OID 2.5.29.17,                -- subjectAltName (RFC 5280 §4.2.1.6)
 *                                 [BOOLEAN TRUE,]               -- critical, only with an empty subject
 *                                 OCTET STRING { SEQUENCE {     -- GeneralNames
 *                                   [2] IMPLICIT IA5String domain, ... } } } } } } } },  -- dNSName, 0x82
 *     signatureAlgorithm SEQUENCE { OID 1.2.840.10045.4.3.2 }, -- ecdsa-with-SHA256, no parameters (RFC 5758 §3.2)
 *     signature          BIT STRING { ECDSA-Sig-Value DER } }   -- SEQUENCE { INTEGER r, INTEGER s } (RFC 3279 §2.2.3)
 *
 * The names go into the subjectAltName, which is what a certificate's names are (RFC 6125 §6.4.4:
 * clients look there first); the commonName is kept for old clients, as certbot and Caddy do.
 */
import { createPublicKey, sign, type KeyObject } from 'node:crypto';
import { bitString, boolean, contextConstructed, contextPrimitive, integer, objectIdentifier, octetString, sequence, setOf, utf8String } from './der.js';

const OID_COMMON_NAME = '2.5.4.3';
const OID_EXTENSION_REQUEST = '1.2.840.113549.1.9.14';
const OID_SUBJECT_ALT_NAME = '2.5.29.17';
const OID_ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2';
/** ub-common-name (RFC 5280 Appendix A.1): a longer first name is left out of the subject (it is in the SAN anyway). */
const MAX_COMMON_NAME_LENGTH = 64;

/**
 * The `certificationRequestInfo` (the part that is signed) for `domains` and the public key in
 * `spkiDer` (SubjectPublicKeyInfo DER). Exported for the exact-bytes test.
 * @throws RangeError for an empty list, or a name that is not a printable ASCII DNS name
 */
export function certificationRequestInfo(domains: readonly string[], spkiDer: Uint8Array): Buffer {
  if (domains.length === 0) throw new RangeError('a certificate request needs at least one domain');
  for (const domain of domains) {
    if (!/^[A-Za-z0-9.-]+$/.test(domain)) throw new RangeError(`'${domain}' is not a DNS name`);
  }
  const first = domains[0]!;
  const subject = first.length <= MAX_COMMON_NAME_LENGTH ? sequence(setOf(sequence(objectIdentifier(OID_COMMON_NAME), utf8String(first)))) : sequence();
  const generalNames = sequence(...domains.map((domain) => contextPrimitive(2, Buffer.from(domain, 'ascii'))));
  // With an empty subject the subjectAltName must be critical (RFC 5280 §4.2.1.6); DER leaves out a FALSE default.
  const critical = first.length <= MAX_COMMON_NAME_LENGTH ? [] : [boolean(true)];
  const extensions = sequence(sequence(objectIdentifier(OID_SUBJECT_ALT_NAME), ...critical, octetString(generalNames)));
  const extensionRequest = sequence(objectIdentifier(OID_EXTENSION_REQUEST), setOf(extensions));
  return sequence(integer(0), subject, spkiDer, contextConstructed(0, extensionRequest));
}

/**
 * The DER of a PKCS#10 request for `domains` (first = subject commonName, all = subjectAltName
 * dNSNames), signed ecdsa-with-SHA256 by `certificateKey`, a P-256 private key.
 * @throws RangeError as `certificationRequestInfo`, or for a key that is not EC P-256
 */
export function createCsr(domains: readonly string[], certificateKey: KeyObject): Buffer {
  if (certificateKey.asymmetricKeyType !== 'ec' || certificateKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new RangeError('the certificate key must be an EC P-256 key');
  }
  const spkiDer = createPublicKey(certificateKey).export({ type: 'spki', format: 'der' });
  const info = certificationRequestInfo(domains, spkiDer);
  // node's default ECDSA encoding is the DER ECDSA-Sig-Value that X.509 wants (JWS wants r||s instead, jws.ts).
  const signature = sign('sha256', info, certificateKey);
  return sequence(info, sequence(objectIdentifier(OID_ECDSA_WITH_SHA256)), bitString(signature));
}

/** PEM text of a DER request (`-----BEGIN CERTIFICATE REQUEST-----`, RFC 7468 §7), for openssl and logs. */
export function csrPem(der: Uint8Array): string {
  const base64 = Buffer.from(der).toString('base64').replace(/.{64}/g, '$&\n').replace(/\n$/, '');
  return `-----BEGIN CERTIFICATE REQUEST-----\n${base64}\n-----END CERTIFICATE REQUEST-----\n`;
}
