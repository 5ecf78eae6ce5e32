/**
 * What the ACME certificate manager keeps on disk, under `[acme] storage` (SPEC 1.2): the account
 * key, the certificate's key and the certificate chain, each a PEM file. A file is written
 * atomically — to a temporary file in the same directory, fsync'd, then renamed over the old one
 * (rename(2) replaces a name in one step; a crash leaves the old file or the new one, never half of
 * one), and the directory is fsync'd so the rename itself survives a crash. Private keys are mode
 * 0600, the directory 0700, as certbot and Caddy keep theirs.
 *
 *   STORAGE/account.key       P-256 private key, PKCS#8 PEM: the ACME account (RFC 8555 §7.3)
 *   STORAGE/certificate.key   P-256 private key of the certificate, PKCS#8 PEM
 *   STORAGE/certificate.pem   the chain as the ACME server sent it, leaf first
 *   STORAGE/certificate.directory  the directory URL it was issued through, one line
 *
 * The key is written before the chain, and the directory last; a crash between two of them leaves
 * a chain whose key does not match, or a directory that is not the chain's, which the manager
 * reads as "no certificate" and orders a new one. The directory is kept because a certificate
 * from Let's Encrypt's staging directory (or a test CA) must not be served on after `directory`
 * moved to production: Caddy keeps its certificates apart by issuer for the same reason.
 */
import { createPrivateKey, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';

/** A certificate chain with its private key, both PEM. */
export interface StoredCertificate {
  readonly certPem: string;
  readonly keyPem: string;
}

/** A stored certificate and the directory URL it was issued through (undefined when not recorded). */
export interface StoredCertificateFiles extends StoredCertificate {
  readonly directoryUrl: string | undefined;
}

/** A new P-256 private key as PKCS#8 PEM (account and certificate keys alike, RFC 7518 §3.4 for ES256). */
export function generateP256KeyPem(): string {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}

export class AcmeStorage {
  readonly #directory: string;

  constructor(directory: string) {
    this.#directory = directory;
  }

  /**
   * Creates the directory (mode 0700) when missing, then reads the account key, creating and
   * storing a new one the first time.
   * @throws the file system's error (EACCES…) or the key parser's, for the caller to report
   */
  async loadAccountKey(): Promise<KeyObject> {
    await mkdir(this.#directory, { recursive: true, mode: 0o700 });
    const file = join(this.#directory, 'account.key');
    let pem = await readIfExists(file);
    if (pem === undefined) {
      pem = generateP256KeyPem();
      await writeFileAtomic(file, pem, 0o600);
    }
    return createPrivateKey(pem);
  }

  /** The stored certificate chain, key and directory, or undefined when the chain or the key is missing. */
  async readCertificate(): Promise<StoredCertificateFiles | undefined> {
    const [certPem, keyPem, directory] = await Promise.all(
      ['certificate.pem', 'certificate.key', 'certificate.directory'].map((name) => readIfExists(join(this.#directory, name))),
    );
    return certPem === undefined || keyPem === undefined ? undefined : { certPem, keyPem, directoryUrl: directory?.trim() };
  }

  /** Stores a new certificate: the key (0600), the chain (0644), then the directory it came from, each atomically. */
  async writeCertificate(certificate: StoredCertificate, directoryUrl: string): Promise<void> {
    await writeFileAtomic(join(this.#directory, 'certificate.key'), certificate.keyPem, 0o600);
    await writeFileAtomic(join(this.#directory, 'certificate.pem'), certificate.certPem, 0o644);
    await writeFileAtomic(join(this.#directory, 'certificate.directory'), `${directoryUrl}\n`, 0o644);
  }
}

async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Replaces `file` with `data` atomically: a temporary file beside it (created with `mode`, never
 * readable by others on the way), fsync, rename, fsync of the directory.
 */
export async function writeFileAtomic(file: string, data: string, mode: number): Promise<void> {
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    const handle = await open(temporary, 'wx', mode);
    try {
      await handle.writeFile(data);
      await handle.chmod(mode); // the umask may have narrowed it; 0600 stays 0600 either way
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
  const directory = await open(join(file, '..'), 'r');
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
}
