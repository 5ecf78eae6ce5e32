/**
 * The command line as users run it, `node dist/main.js …`, from a private build of src/ (tsc into a
 * temp dir next to a copy of package.json, which main-cli.js reads for --version). Test files run in
 * parallel, so none of them rebuilds the shared dist/ that another one may be executing.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const REPO = new URL('../../', import.meta.url).pathname;

let built: Promise<string> | undefined;
let buildDir = '';

/** Builds once per test process; resolves with the path of the built `main.js`. */
export function buildCli(): Promise<string> {
  built ??= new Promise<string>((resolve, reject) => {
    buildDir = mkdtempSync(join(tmpdir(), 'proxy-cli-build-'));
    copyFileSync(join(REPO, 'package.json'), join(buildDir, 'package.json'));
    const tsc = join(REPO, 'node_modules', '.bin', 'tsc');
    execFile(tsc, ['-p', join(REPO, 'tsconfig.json'), '--outDir', join(buildDir, 'dist')], { cwd: REPO }, (error, stdout, stderr) =>
      error === null ? resolve(join(buildDir, 'dist', 'main.js')) : reject(new Error(`tsc failed: ${stdout}${stderr}`)),
    );
  });
  return built;
}

/** Removes the private build (call from `after`). */
export function removeBuild(): void {
  if (buildDir !== '') rmSync(buildDir, { recursive: true, force: true });
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
