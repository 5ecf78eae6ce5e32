/**
 * `--check` (SPEC 2, like `nginx -t`): the config file loaded and validated, the `access_log`
 * path opened, and every `tls_cert` pair read (certificates are configuration: a missing file, a
 * key that does not match, an expired certificate are errors at the pair's file:line:column; one
 * expiring within 14 days is a warning). Then the summary of describe-config.ts, with each pair's
 * names and expiry.
 */
import { loadConfigFile } from './load-config-file.js';
import { checkAccessLogPath } from '../gateway/access-log.js';
import { describeConfig } from '../config/describe-config.js';
import { checkCertificates } from '../tls/certificate-pair.js';

/** What `--check` prints and how it exits. */
export interface CheckResult {
  /** 0: valid (warnings allowed); 1: a certificate problem. */
  readonly exitCode: 0 | 1;
  /** For stdout: the summary and the verdict; empty when invalid. */
  readonly output: string;
  /** For stderr, one line each: `warning: env.ini:4:12: …` lines, then the errors. */
  readonly messages: readonly string[];
}

/**
 * Checks `configFile` as `--check` does.
 * @param nowMs wall clock, ms since the epoch, for certificate validity (tests choose it)
 * @throws ConfigFileError, ConfigSyntaxError, ConfigValueError for the config itself and its access_log path
 */
export function runCheck(configFile: string, nowMs: number): CheckResult {
  const config = loadConfigFile(configFile);
  checkAccessLogPath(config.server.accessLog, config.server.accessLogPlace);
  const checks = checkCertificates(config.server.tlsCertificates, { minVersion: config.server.tlsMinVersion, nowMs });
  const warnings = checks.flatMap((check) => check.warnings.map((warning) => `warning: ${warning}`));
  const errors = checks.flatMap((check) => check.errors.map((error) => error.message));
  if (errors.length > 0) return { exitCode: 1, output: '', messages: [...warnings, ...errors] };
  const summary = describeConfig(config, checks.map((check) => check.pair!));
  return { exitCode: 0, output: `${summary}configuration file ${configFile} is valid\n`, messages: warnings };
}
