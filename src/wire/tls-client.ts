/**
 * TLS to `https://` upstreams, as the wire sees it: which settings a connection is made with, the
 * options `tls.connect` gets from them, and how a TLS failure is worded. Verification is on unless
 * the settings say otherwise (Caddy, HAProxy and Traefik verify by default; nginx's
 * `proxy_ssl_verify off` default is the mistake not to copy).
 *
 * The names follow RFC 6125 and RFC 6066: the *verified name* is what the certificate must show
 * (a DNS name in its subjectAltName, or, for an IP address, an IP SAN); *SNI* (RFC 6066 section 3)
 * is the name the client asks for, and "Literal IPv4 and IPv6 addresses are not permitted in
 * HostName", so an IP host is checked against the certificate's IP SANs but no SNI is sent. Node's
 * `tls.connect` sends SNI only when `servername` is set, and checks the name against
 * `servername || host` (`tls.checkServerIdentity`).
 *
 * The settings are built once per route setting from the config (src/upstream/upstream-tls.ts);
 * the pool keys its idle lists and TLS sessions by origin and `identity`, so two routes whose
 * settings differ never share a connection or a session.
 */
import net from 'node:net';
import tls from 'node:tls';

/** How connections to a route's `https://` upstreams are made (its `tls_*` keys, files read). */
export interface TlsClientSettings {
  /**
   * Names the settings and the contents of their files: connections and sessions are pooled per
   * origin and identity. Equal settings with equal files have equal identities (also across a reload).
   */
  readonly identity: string;
  /** The trusted CAs (`tls_ca`, or the system store) and the client certificate, built once. */
  readonly secureContext: tls.SecureContext;
  /** `tls_server_name`: SNI and the verified name; undefined = the URL's host. */
  readonly serverName: string | undefined;
  /** `tls_verify`: check the chain and the name. False only with a `--check` warning. */
  readonly isVerified: boolean;
}

/** The part of `tls.connect`'s options the settings decide. */
export interface TlsConnectOptions {
  readonly secureContext: tls.SecureContext;
  /** The SNI; `''` for none (an IP address, RFC 6066 section 3). */
  readonly servername: string;
  readonly rejectUnauthorized: boolean;
  /** The name check (see `checkVerifiedName`); node's own is skipped when `rejectUnauthorized` is false. */
  readonly checkServerIdentity: (hostname: string, cert: tls.PeerCertificate) => Error | undefined;
}

/**
 * A DNS name is checked against the certificate's subjectAltName DNS entries only. Node's
 * `tls.checkServerIdentity` falls back to the subject CN when there is no DNS entry (none at all,
 * or only IP, URI or email entries); RFC 9525 §6.3 (and RFC 6125 before it) retires that
 * fallback, and Go (since 1.15), browsers, Caddy and Traefik refuse such a certificate. (An IP
 * address node already checks against the IP entries only.)
 */
export const NO_DNS_SUBJECT_ALT_NAME = 'the certificate names no DNS name: its subjectAltName has no DNS entry (IP, URI or email entries cannot match a name, and the subject CN is not used, RFC 9525 section 6.3)';

/** `name` against `cert`: its subjectAltName DNS entries for a name, IP entries for an address. */
function checkVerifiedName(name: string, cert: tls.PeerCertificate): Error | undefined {
  if (net.isIP(name) === 0 && !/(?:^|, )DNS:/.test(cert.subjectaltname ?? '')) return new Error(NO_DNS_SUBJECT_ALT_NAME);
  return tls.checkServerIdentity(name, cert);
}

/**
 * `tls.connect` options for a connection to an upstream called `host`: the URL's host without
 * brackets, or for a discovered address its line's host (`UpstreamConfig.tlsName`: the certificate
 * names the service, not the address). SNI and the verified name are `serverName` when set, else
 * `host`; no SNI for an IP address.
 */
export function tlsConnectOptions(settings: TlsClientSettings, host: string): TlsConnectOptions {
  const name = settings.serverName ?? host;
  const isAddress = net.isIP(name) !== 0;
  return {
    secureContext: settings.secureContext,
    servername: isAddress ? '' : name,
    rejectUnauthorized: settings.isVerified,
    // Node would check `servername || host`; the verified name is `name` in every case.
    checkServerIdentity: (_hostname, cert) => checkVerifiedName(name, cert),
  };
}

/**
 * The one-line reason of a TLS failure, in OpenSSL's or node's words: `certificate has expired`,
 * `unable to verify the first certificate`, `Hostname/IP does not match certificate's altnames: …`,
 * `tlsv13 alert certificate required` (an alert from the upstream), `wrong version number` (it does
 * not speak TLS).
 */
export function tlsFailureReason(error: Error): string {
  const { code, reason } = error as NodeJS.ErrnoException & { reason?: unknown };
  // OpenSSL errors (`ERR_SSL_…`) carry a long message with file and line; `reason` is the words.
  if (code?.startsWith('ERR_SSL_') === true && typeof reason === 'string' && reason !== '') return reason;
  return error.message.split('\n', 1)[0] ?? error.message;
}

/** True for an error raised by the TLS layer of an established connection (an alert from the upstream). */
export function isTlsAlert(error: Error): boolean {
  return (error as NodeJS.ErrnoException).code?.startsWith('ERR_SSL_') === true;
}
