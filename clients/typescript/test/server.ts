// Starts a real `spool server` for the tests: built from this repository
// with `go build` (or taken from SPOOL_BIN), listening on a free port of
// 127.0.0.1 with a fresh data folder, and stopped by its pid.

import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root: this file is clients/typescript/build-test/test/server.js once compiled. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

let built: string | undefined;

/** The spool binary: SPOOL_BIN, or one built from the repository once per test process. */
export function spoolBinary(): string {
  if (process.env.SPOOL_BIN) return process.env.SPOOL_BIN;
  if (!built) {
    const dir = mkdtempSync(join(tmpdir(), "spool-ts-bin-"));
    built = join(dir, "spool");
    execFileSync("go", ["build", "-o", built, "./cmd/spool"], { cwd: repoRoot, stdio: "inherit" });
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  }
  return built;
}

export interface Server {
  url: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

export interface ServerOptions {
  args?: string[];
  env?: Record<string, string>;
}

/** Starts a server and resolves once it listens. */
export async function startServer(options: ServerOptions = {}): Promise<Server> {
  const bin = spoolBinary();
  if (!existsSync(bin)) throw new Error(`no spool binary at ${bin}`);
  const data = mkdtempSync(join(tmpdir(), "spool-ts-data-"));
  const proc = spawn(bin, ["server", "--addr", "127.0.0.1:0", "--data", data, ...(options.args ?? [])], {
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`spool server did not start within 20 s:\n${log}`)), 20_000);
    proc.stderr!.setEncoding("utf8");
    proc.stderr!.on("data", (chunk: string) => {
      log += chunk;
      const m = /spool listening on (http:\/\/[^\s]+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1]);
      }
    });
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`spool server exited with ${code}:\n${log}`));
    });
  });
  const exited = new Promise<void>((r) => proc.once("exit", () => r()));
  return {
    url,
    proc,
    async stop() {
      if (proc.exitCode === null && proc.pid !== undefined) {
        process.kill(proc.pid, "SIGTERM");
        const timer = setTimeout(() => proc.pid !== undefined && process.kill(proc.pid, "SIGKILL"), 10_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(data, { recursive: true, force: true });
    },
  };
}

/** Polls cond every 50 ms until it holds or timeoutMs passes. */
export async function eventually(cond: () => Promise<boolean> | boolean, timeoutMs = 5_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
