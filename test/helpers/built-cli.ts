/**
 * The command line as users run it, `node dist/main.js …`, from a private build of src/ (tsc into a
 * temp dir next to a copy of package.json, which main-cli.js reads for --version). Test files run in
 * parallel, so none of them rebuilds the shared dist/ that another one may be executing.
 *
 * The build is named by a hash of what it is built from (src/, package.json, tsconfig.json, the
 * compiler's version), so the test files of one run, which are separate processes, share one build
 * instead of running tsc once each, and a later run with the same sources reuses it. A build is
 * moved into place only when whole and never changes afterwards; builds unused for a day are removed.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const REPO = new URL('../../', import.meta.url).pathname;

/** Where the builds live, one directory per source hash. */
const BUILDS = join(tmpdir(), 'ini-proxy-cli-builds');
/** A build unused for this long is removed by the next fresh build, ms. */
const UNUSED_BUILD_MS = 24 * 60 * 60 * 1000;

let built: Promise<string> | undefined;

/** Hex SHA-256 over the path and content of every file under src/, package.json, tsconfig.json and the compiler's package.json (its version). */
function sourceHash(): string {
  const hash = createHash('sha256');
  const files = ['package.json', 'tsconfig.json', join('node_modules', 'typescript', 'package.json'), ...(readdirSync(join(REPO, 'src'), { recursive: true }) as string[]).map((name) => join('src', name)).sort()];
  for (const file of files) {
    if (!statSync(join(REPO, file)).isFile()) continue;
    hash.update(`${file}\0`).update(readFileSync(join(REPO, file))).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

/** Removes the builds of other sources that no run has used for UNUSED_BUILD_MS. */
function removeUnusedBuilds(kept: string): void {
  for (const name of readdirSync(BUILDS)) {
    const dir = join(BUILDS, name);
    if (dir !== kept && Date.now() - statSync(dir).mtimeMs > UNUSED_BUILD_MS) rmSync(dir, { recursive: true, force: true });
  }
}

/** Builds once per source hash (shared by all test processes); resolves with the path of the built `main.js`. */
export function buildCli(): Promise<string> {
  built ??= new Promise<string>((resolve, reject) => {
    mkdirSync(BUILDS, { recursive: true });
    const buildDir = join(BUILDS, sourceHash());
    const mainJs = join(buildDir, 'dist', 'main.js');
    if (existsSync(buildDir)) {
      const now = new Date();
      utimesSync(buildDir, now, now); // used: not removed as unused
      resolve(mainJs);
      return;
    }
    const fresh = mkdtempSync(join(BUILDS, 'building-'));
    copyFileSync(join(REPO, 'package.json'), join(fresh, 'package.json'));
    const tsc = join(REPO, 'node_modules', '.bin', 'tsc');
    execFile(tsc, ['-p', join(REPO, 'tsconfig.json'), '--outDir', join(fresh, 'dist')], { cwd: REPO }, (error, stdout, stderr) => {
      if (error !== null) {
        rmSync(fresh, { recursive: true, force: true });
        reject(new Error(`tsc failed: ${stdout}${stderr}`));
        return;
      }
      try {
        renameSync(fresh, buildDir);
      } catch (renameError) {
        rmSync(fresh, { recursive: true, force: true });
        if (!existsSync(mainJs)) {
          reject(renameError);
          return;
        } // else another test process moved the same build into place first
      }
      removeUnusedBuilds(buildDir);
      resolve(mainJs);
    });
  });
  return built;
}

/** A running `node main.js …` with its stderr collected. */
export interface RunningCli {
  readonly child: ChildProcess;
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Resolves with the port of the first `listening on HOST:PORT` line. */
  readonly port: Promise<number>;
  /** Resolves with the exit code. */
  readonly exited: Promise<number | null>;
  /** SIGKILL if still running (cleanup). */
  kill(): void;
}

/** Starts `node <built main.js> ...args` (cwd = the repo). */
export async function startCli(args: readonly string[]): Promise<RunningCli> {
  const mainJs = await buildCli();
  const child = spawn(process.execPath, [mainJs, ...args], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stdout!.resume();
  const port = new Promise<number>((resolve, reject) => {
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = /proxy listening on [^\s]+:(\d+)/.exec(stderr);
      if (match) resolve(Number(match[1]));
    });
    child.once('exit', () => reject(new Error(`exited before listening: ${stderr}`)));
  });
  port.catch(() => {});
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    stderr: () => stderr,
    port,
    exited,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}
