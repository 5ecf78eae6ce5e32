/**
 * Clients for the HTTPS listener tests: the private test CA (test/fixtures/tls, made by
 * scripts/make-test-certificates.sh) trusted and verification on, one request per new TLS
 * connection unless an agent is given, and the served certificate returned with the response.
 */
import https from 'node:https';
import tls, { type PeerCertificate, type TLSSocket } from 'node:tls';
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IncomingHttpHeaders } from 'node:http';

export const TLS_FIXTURES = new URL('../fixtures/tls/', import.meta.url).pathname;
/** The test CA every fixture certificate is signed by (except unknown-ca.pem). */
export const CA = readFileSync(join(TLS_FIXTURES, 'ca.pem'));

/** `tls_cert = CERT KEY` for fixture NAME (NAME.pem, NAME.key), absolute paths. */
/** A temp dir with copies of exact.pem and exact.key (`copy` replaces them or adds others), and the places of the certificate and of an env.ini in it. */
export function certificateDir(prefix: string): { dir: string; copy(from: string, to: string): void; certPath: string; configFile: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const copy = (from: string, to: string): void => copyFileSync(join(TLS_FIXTURES, from), join(dir, to));
  copy('exact.pem', 'exact.pem');
  copy('exact.key', 'exact.key');
  return { dir, copy, certPath: join(dir, 'exact.pem'), configFile: join(dir, 'env.ini') };
}

export function tlsCertLine(name: string, dir = TLS_FIXTURES): string {
  return `tls_cert = ${join(dir, `${name}.pem`)} ${join(dir, `${name}.key`)}`;
}

export interface HttpsResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];
  readonly body: string;
  /** The certificate the server presented. */
  readonly certificate: PeerCertificate;
  readonly socket: TLSSocket;
}

export interface HttpsRequestOptions {
  /** SNI and the name verified; undefined: no SNI (the host is an IP address). */
  readonly servername?: string;
  /**
   * Check that the certificate names `servername` (default true). The chain is always verified
   * against CA; tests of the default certificate for an unknown name turn only the name check off.
   */
  readonly isNameChecked?: boolean;
  readonly path?: string;
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly agent?: https.Agent;
  readonly maxVersion?: tls.SecureVersion;
  readonly ALPNProtocols?: string[];
}

/** One HTTPS request to 127.0.0.1:`port`. Rejects with the TLS error when the handshake fails. */
export function httpsRequest(port: number, options: HttpsRequestOptions = {}): Promise<HttpsResponse> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path: options.path ?? '/',
        method: options.method ?? 'GET',
        headers: { host: options.servername ?? 'localhost', ...options.headers },
        ca: CA,
        rejectUnauthorized: true,
        servername: options.servername ?? '',
        ...(options.isNameChecked === false ? { checkServerIdentity: () => undefined } : {}),
        ...(options.maxVersion === undefined ? {} : { maxVersion: options.maxVersion }),
        ...(options.ALPNProtocols === undefined ? {} : { ALPNProtocols: options.ALPNProtocols }),
        agent: options.agent ?? false,
      },
      (res) => {
        const socket = res.socket as TLSSocket;
        const certificate = socket.getPeerCertificate();
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, body: Buffer.concat(chunks).toString('utf8'), certificate, socket }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** The handshake alone: resolves with the served certificate, or rejects with the TLS error. */
export function handshake(port: number, options: tls.ConnectionOptions = {}): Promise<{ certificate: PeerCertificate; socket: TLSSocket }> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca: CA, ...options });
    socket.once('secureConnect', () => resolve({ certificate: socket.getPeerCertificate(), socket }));
    socket.once('error', reject);
  });
}
