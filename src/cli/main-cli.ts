/**
 * The command dispatcher (SPEC 2): parse the arguments, run the command, map errors to exit codes —
 * 0 success, 1 configuration error (printed as `file:line:column: reason`), 2 usage error (one
 * line, `error: REASON; see 'node dist/main.js --help'`).
 * Logs go to stderr; `--check`, `simulate`, `limit-simulate` and `passwd` print their results to stdout. Neither
 * throws when its reader went away (`--check | head -1` exits 0): see src/log/process-log.ts.
 */
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { loadConfigFile } from './load-config-file.js';
import { runCheck } from './check-config.js';
import { exitWithoutWaitingForStalledReaders, logLine, printOutput } from '../log/process-log.js';
import { ConfigFileError, ConfigSyntaxError, ConfigValueError, NoUpstreamToSimulateError, ProxyError, UsageError } from '../errors.js';
import { parseArguments, USAGE } from './arguments.js';
import { reloadOnHangup, startProxy, waitForShutdown } from './run-proxy.js';
import type { ProcessSignals } from '../process/process-signals.js';
import { runDemo } from './run-demo.js';
import { resolveDiscoveryLines, runSimulate } from './simulate.js';
import { runLimitSimulate } from './limit-simulate.js';
import { runPasswd, readPasswordFromTerminal } from './passwd.js';
import { runHeartbeat } from './heartbeat.js';
import { startLocalAdmin, type LocalAdmin } from '../admin/local-admin.js';
import { resolveWorkerCount, runClusterPrimary } from '../process/cluster/cluster-primary.js';
import { upstreamTlsWarnings } from '../upstream/upstream-tls.js';
import { trustedProxyWarnings } from '../gateway/client-address.js';
import { resolverWarnings } from '../discovery/resolver-warnings.js';
import { pathWarnings } from '../gateway/router.js';
import { runClusterWorker } from '../process/cluster/cluster-worker.js';
import { isListenFailure, listenFailure } from '../process/listen-failure.js';
import type { Config } from '../config/config.js';
import type { ReloadSummary } from '../gateway/proxy-server.js';

export const VERSION: string = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** What follows a usage error's reason (curl's `try 'curl --help'`, git's `See 'git --help'`). */
const USAGE_POINTER = "see 'node dist/main.js --help'";

/** The error log (stderr): it drops and counts lines it cannot write (src/log/process-log.ts). */
const log = logLine;

/**
 * Runs the command line; resolves with the process exit code.
 * @param signals the latch main.ts created first: `run` takes its signals, other commands release it
 */
export async function main(argv: readonly string[], signals: ProcessSignals): Promise<number> {
  try {
    const command = parseArguments(argv);
    if (command.kind !== 'run' && command.kind !== 'demo') signals.release();
    switch (command.kind) {
      case 'help':
        printOutput(USAGE);
        return 0;
      case 'version':
        printOutput(`${VERSION}\n`);
        return 0;
      case 'check': {
        const result = runCheck(command.configFile, Date.now());
        for (const message of result.messages) log(message);
        printOutput(result.output);
        return result.exitCode;
      }
      case 'run':
        return await serveThenExit(() => run(command.configFile, signals));
      case 'demo':
        return await serveThenExit(() => runDemo(command.configFile, command.user, command.listen, log, signals));
      case 'simulate': {
        // Discovery lines: the addresses DNS gives now (a line that fails is reported, the rest simulated;
        // none left is NoUpstreamToSimulateError, exit 1).
        const { config, messages } = await resolveDiscoveryLines(loadConfigFile(command.configFile), command.route);
        printOutput(
          messages.map((message) => `${message}\n`).join('') +
          runSimulate(config, command.route, {
            n: command.n,
            ...(command.clientIp === undefined ? {} : { clientIp: command.clientIp }),
            ...(command.key === undefined ? {} : { key: command.key }),
          }),
        );
        return 0;
      }
      case 'limit-simulate':
        printOutput(runLimitSimulate(loadConfigFile(command.configFile), command.route, command.arrivals));
        return 0;
      case 'heartbeat': {
        const { kind: _kind, ...options } = command;
        return await runHeartbeat(options, log);
      }
      case 'passwd':
        printOutput(`${await runPasswd(command.name, { readPassword: readPasswordFromTerminal })}\n`);
        return 0;
    }
  } catch (error) {
    if (error instanceof UsageError) {
      // One line and where the rest is, as git and curl do; the whole usage would bury the reason.
      log(`error: ${error.message}; ${USAGE_POINTER}`);
      return 2;
    }
    if (error instanceof ConfigSyntaxError || error instanceof ConfigValueError || error instanceof ConfigFileError || error instanceof NoUpstreamToSimulateError) {
      log(error.message);
      return 1;
    }
    if (error instanceof ProxyError) {
      log(`error: ${error.message}`);
      return 1;
    }
    if (isListenFailure(error)) {
      log(`error: ${listenFailure(error as NodeJS.ErrnoException)}`);
      return 1;
    }
    throw error;
  }
}

/**
 * `run`: the proxy in this process, or a cluster primary or worker ([server] workers > 1:
 * node:cluster, see src/process/cluster/; a worker runs the config the primary hands it, never the
 * file on disk). Resolves with the exit code once it has shut down.
 */
async function run(configFile: string, signals: ProcessSignals): Promise<number> {
  if (cluster.isWorker) return await runClusterWorker(signals, log);
  const config = loadConfigFile(configFile);
  for (const warning of [...trustedProxyWarnings(config.server), ...resolverWarnings(config.server), ...upstreamTlsWarnings(config), ...pathWarnings(config.routes)]) log(`warning: ${warning}`);
  const workerCount = resolveWorkerCount(config.server.workers);
  if (workerCount > 1) return await runClusterPrimary(signals, configFile, config, workerCount, log);
  // The admin listener opens before the start-up line: a busy [admin] listen is reported alone, and
  // startProxy closes the proxy (do not keep serving after reporting a fatal error). Its line
  // follows the proxy's, as the cluster primary orders them.
  let admin: LocalAdmin | undefined;
  const adminConfig = config.admin;
  const running = await startProxy(config, log, adminConfig === undefined ? undefined : async (proxy, discovery) => {
    admin = await startLocalAdmin(proxy, adminConfig, log, { discovery });
  });
  if (admin !== undefined) log(admin.listeningLine);
  const reload = (next: Config): ReloadSummary => {
    const summary = running.reload(next);
    admin?.registry.reconcile(); // registrations of removed routes, or of addresses a pass line took over, go
    return summary;
  };
  reloadOnHangup(configFile, reload, log, signals);
  const stopped = waitForShutdown(admin === undefined ? [running] : [running, admin], log, signals);
  signals.startUpDone(log); // a SIGHUP or SIGTERM held since the first moment is handled now
  return await stopped;
}

/** Serves until the serving command has shut down, then resolves with its exit code; the process then ends even if a log reader stalls (exitWithoutWaitingForStalledReaders). */
async function serveThenExit(serve: () => Promise<number>): Promise<number> {
  const exitCode = await serve();
  exitWithoutWaitingForStalledReaders();
  return exitCode;
}
