/**
 * `--check` (SPEC 2, like `nginx -t`): the config file loaded and validated, the `access_log`
 * path opened, the routes' `tls_ca` and `tls_client_cert` files read as start-up reads them, with
 * the validity rules of a `tls_cert` pair (a client certificate out of date, or a `tls_ca` with no
 * certificate valid now, is an error; one expiring within 14 days a warning: upstream-tls.ts), and a
 * warning for each route with `tls_verify = off` or a `tls_*` line that only `http://` upstreams have, for `access` lines with host bits set or
 * after an `all`, for a `trusted_proxies` item that trusts every peer or has host bits set, for a
 * bare IPv6 `resolver` item whose last group could be a port (resolver-warnings.ts), for a prefix `path` that reads differently
 * normalised (router.ts `pathWarnings`), and for `pass` lines
 * that name this config's own `listen` or `tls_listen`: own-listener-warnings.ts), the `[acme]` files (directory_ca, and the
 * storage when it exists: acme-manager.ts `checkAcmeFiles`), and every `tls_cert` pair read (certificates are configuration: a missing file, a
 * key that does not match, an expired certificate are errors at the pair's file:line:column; one
 * expiring within 14 days is a warning). Then the summary of describe-config.ts, with each pair's
 * names and expiry, and a note on the discovery lines (`resolve`, `service=`, SPEC 7): their flags
 * were checked by the loader, but nothing is looked up (`nginx -t` does not resolve `resolve`
 * servers either), so `--check` passes while the DNS server is away; they are looked up at start-up.
 */
import type { Config } from '../config/config.js';
import { loadConfigFile } from './load-config-file.js';
import { checkAccessLogPath } from '../gateway/access-log.js';
import { describeConfig } from '../config/describe-config.js';
import { checkCertificates } from '../tls/certificate-pair.js';
import { buildRouteTls, upstreamTlsWarnings } from '../upstream/upstream-tls.js';
import { checkAcmeFiles } from '../tls/acme/acme-manager.js';
import { accessRuleWarnings } from '../limits/access-list.js';
import { weightWarnings } from '../upstream/balancer/strategies.js';
import { trustedProxyWarnings } from '../gateway/client-address.js';
import { ownListenerWarnings } from '../upstream/own-listener-warnings.js';
import { resolverWarnings } from '../discovery/resolver-warnings.js';
import { pathWarnings } from '../gateway/router.js';

/** What `--check` prints and how it exits. */
export interface CheckResult {
  /** 0: valid (warnings allowed); 1: a certificate or [acme] file problem. */
  readonly exitCode: 0 | 1;
  /** For stdout: the summary and the verdict; empty when invalid. */
  readonly output: string;
  /** For stderr, one line each: `warning: env.ini:4:12: …` lines, then the errors. */
  readonly messages: readonly string[];
}

/**
 * Checks `configFile` as `--check` does.
 * @param nowMs wall clock, ms since the epoch, for certificate validity (tests choose it)
 * @throws ConfigFileError, ConfigSyntaxError, ConfigValueError for the config itself, its access_log
 *   path and the routes' TLS files
 */
export function runCheck(configFile: string, nowMs: number): CheckResult {
  const config = loadConfigFile(configFile);
  checkAccessLogPath(config.server.accessLog, config.server.accessLogPlace);
  const routeTls = buildRouteTls(config.routes, { nowMs });
  const checks = checkCertificates(config.server.tlsCertificates, { minVersion: config.server.tlsMinVersion, nowMs });
  const warnings = [
    ...trustedProxyWarnings(config.server),
    ...resolverWarnings(config.server),
    ...upstreamTlsWarnings(config),
    ...routeTls.warnings,
    ...accessRuleWarnings(config.routes),
    ...weightWarnings(config.routes),
    ...ownListenerWarnings(config),
    ...pathWarnings(config.routes),
    ...checks.flatMap((check) => check.warnings),
  ].map(
    (warning) => `warning: ${warning}`,
  );
  const acmeProblems = config.acme === undefined ? [] : checkAcmeFiles(config.acme);
  const errors = [...checks.flatMap((check) => check.errors.map((error) => error.message)), ...acmeProblems.map((problem) => problem.message)];
  if (errors.length > 0) return { exitCode: 1, output: '', messages: [...warnings, ...errors] };
  const summary = describeConfig(config, checks.map((check) => check.pair!));
  return { exitCode: 0, output: `${summary}${discoveryNote(config)}configuration file ${configFile} is valid\n`, messages: warnings };
}

/** `note: …` naming every name the discovery lines look up, or '' without discovery lines. */
function discoveryNote(config: Config): string {
  const names = config.routes.flatMap((route) =>
    route.upstreams.flatMap(({ discovery }) =>
      discovery === undefined ? [] : [`${discovery.name} (${discovery.kind === 'resolve' ? 'A/AAAA' : 'SRV'}, route ${route.name})`],
    ),
  );
  if (names.length === 0) return '';
  return `note: not looked up now, the proxy resolves them at start-up and as their TTLs run out: ${names.join(', ')}\n`;
}
