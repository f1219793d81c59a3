// spool-stream/1 on Node: the API's calls as binary frames of one multiplexed
// TCP connection ("Stream transport" in docs/protocol.md). Each frame carries
// exactly the request and the answer HTTP would exchange, so the client
// decodes answers and errors as it does over HTTP; the stream only saves the
// per-request work of HTTP, which is most of what a busy worker spends on a
// call. It needs node:net, loaded when first used, and no types from Node.

const PROTOCOL = "spool-stream/1";
/**
 * Statuses of a refused upgrade that say the server (or a proxy in front of
 * it) does not serve the stream at all: the client then speaks HTTP for good.
 */
export const UNKNOWN_STREAM: ReadonlySet<number> = new Set([400, 404, 405, 426, 501, 505]);
/** Bounds: one answer frame; the head and body of a refused upgrade; the dial and upgrade. */
const MAX_ANSWER = 1 << 30;
const MAX_REFUSAL = 64 << 10;
const DIAL_TIMEOUT_MS = 10_000;

/** What this file uses of a node:net socket. */
interface Socket {
  write(data: Uint8Array): boolean;
  cork(): void;
  uncork(): void;
  setNoDelay(noDelay?: boolean): void;
  setKeepAlive(enable?: boolean, initialDelay?: number): void;
  on(event: "data", fn: (chunk: Uint8Array) => void): void;
  on(event: "close", fn: () => void): void;
  on(event: "error", fn: (err: Error) => void): void;
  once(event: "connect", fn: () => void): void;
  destroy(): void;
  ref(): void;
  unref(): void;
}

interface Net {
  connect(options: { host: string; port: number }): Socket;
}

/** The server answered the upgrade with `status`, not 101. */
export class StreamRefusedError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`upgrade to ${PROTOCOL} refused: ${status}`);
    this.name = "StreamRefusedError";
  }
}

/**
 * Whether the stream can reach baseUrl: on Node, http://, and no proxy of
 * the environment covers it.
 */
export function streamable(baseUrl: string): boolean {
  const proc = (globalThis as { process?: { versions?: { node?: string }; env?: Record<string, string | undefined> } }).process;
  if (!proc?.versions?.node) return false;
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return false;
  }
  if (url.protocol !== "http:" || !url.hostname) return false;
  const env = proc.env ?? {};
  const proxy = env.HTTP_PROXY || env.http_proxy || env.ALL_PROXY || env.all_proxy;
  if (!proxy) return true;
  const noProxy = (env.NO_PROXY || env.no_proxy || "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean);
  const host = url.hostname.toLowerCase();
  return noProxy.some((p) => p === "*" || host === p.replace(/^\./, "") || host.endsWith(p.startsWith(".") ? p : "." + p));
}

/** A transport failure, as fetch gives one: a TypeError, with its cause. */
function transportError(message: string, cause?: unknown): TypeError {
  const err = new TypeError(message, cause === undefined ? undefined : { cause });
  return err;
}

interface Call {
  resolve: (a: { status: number; body: string }) => void;
  reject: (err: unknown) => void;
  /** The caller gave up: the answer is dropped when it comes. */
  abandoned: boolean;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** One stream connection: the upgrade, then frames. */
class Connection {
  private buf = new Uint8Array(64 << 10);
  private len = 0;
  private readonly calls = new Map<number, Call>();
  private nextId = 0;
  private corked = false;
  private upgradedOk = false;
  closed = false;
  readonly upgraded: Promise<void>;
  private settleUpgrade!: (err?: unknown) => void;

  constructor(private readonly socket: Socket) {
    this.upgraded = new Promise<void>((resolve, reject) => {
      this.settleUpgrade = (err?: unknown) => (err === undefined ? resolve() : reject(err));
    });
    socket.on("data", (chunk) => this.received(chunk));
    socket.on("error", () => {}); // "close" follows, which fails what waits
    socket.on("close", () => this.lost());
  }

  private received(chunk: Uint8Array): void {
    if (this.len + chunk.length > this.buf.length) {
      const grown = new Uint8Array(Math.max(this.buf.length * 2, this.len + chunk.length));
      grown.set(this.buf.subarray(0, this.len));
      this.buf = grown;
    }
    this.buf.set(chunk, this.len);
    this.len += chunk.length;
    if (!this.upgradedOk) {
      this.readUpgrade(false);
      if (!this.upgradedOk) return;
    }
    this.readFrames();
  }

  private lost(): void {
    if (this.closed) return;
    this.closed = true;
    if (!this.upgradedOk) this.readUpgrade(true);
    this.settleUpgrade(transportError("stream closed before its upgrade was answered"));
    const err = transportError("stream closed");
    for (const c of this.calls.values()) if (!c.abandoned) c.reject(err);
    this.calls.clear();
  }

  /** Reads the answer to the upgrade: 101 opens the stream; another status is a refusal, read with its body. */
  private readUpgrade(ended: boolean): void {
    const text = decoder.decode(this.buf.subarray(0, Math.min(this.len, MAX_REFUSAL * 2)));
    const end = text.indexOf("\r\n\r\n");
    if (end < 0) {
      if (ended || this.len > MAX_REFUSAL) this.failUpgrade(transportError("bad answer to the stream upgrade"));
      return;
    }
    const lines = text.slice(0, end).split("\r\n");
    const status = Number(lines[0].split(" ")[1]);
    const headers = new Map<string, string>();
    for (const line of lines.slice(1)) {
      const i = line.indexOf(":");
      if (i > 0) headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
    }
    const headLength = encoder.encode(text.slice(0, end + 4)).length;
    if (status === 101) {
      if ((headers.get("upgrade") ?? "").toLowerCase() !== PROTOCOL) {
        this.failUpgrade(transportError(`server switched to ${headers.get("upgrade")}, not ${PROTOCOL}`));
        return;
      }
      this.buf.copyWithin(0, headLength, this.len);
      this.len -= headLength;
      this.upgradedOk = true;
      this.settleUpgrade();
      if (this.calls.size === 0) this.socket.unref();
      return;
    }
    if (!Number.isInteger(status)) {
      this.failUpgrade(transportError(`bad answer to the stream upgrade: ${lines[0]}`));
      return;
    }
    const body = decoder.decode(this.buf.subarray(headLength, this.len));
    const length = Number(headers.get("content-length") ?? NaN);
    if (Number.isFinite(length) ? body.length >= Math.min(length, MAX_REFUSAL) : ended || body.length >= MAX_REFUSAL) {
      this.failUpgrade(new StreamRefusedError(status, body.slice(0, MAX_REFUSAL)));
    } else if (ended) {
      this.failUpgrade(new StreamRefusedError(status, body));
    }
  }

  private failUpgrade(err: unknown): void {
    this.settleUpgrade(err);
    this.close();
  }

  private readFrames(): void {
    const view = new DataView(this.buf.buffer, this.buf.byteOffset, this.len);
    let at = 0;
    while (this.len - at >= 4) {
      const length = view.getUint32(at);
      if (length < 6 || length > MAX_ANSWER) {
        this.close();
        return;
      }
      if (this.len - at - 4 < length) break;
      const id = view.getUint32(at + 4);
      const status = view.getUint16(at + 8);
      const body = decoder.decode(this.buf.subarray(at + 10, at + 4 + length));
      at += 4 + length;
      const call = this.calls.get(id);
      if (call) {
        this.calls.delete(id);
        if (!call.abandoned) call.resolve({ status, body });
      }
    }
    if (at > 0) {
      this.buf.copyWithin(0, at, this.len);
      this.len -= at;
    }
    if (this.calls.size === 0) this.socket.unref(); // an idle stream keeps no process alive
  }

  /** Sends one request frame; its answer settles the returned promise. */
  send(method: string, target: string, body: string | undefined, signal?: AbortSignal): Promise<{ status: number; body: string }> {
    if (this.closed) return Promise.reject(Object.assign(transportError("stream closed"), { notSent: true }));
    let id = this.nextId;
    while (this.calls.has(id)) id = (id + 1) >>> 0;
    this.nextId = (id + 1) >>> 0;
    return new Promise((resolve, reject) => {
      const call: Call = { resolve, reject, abandoned: false };
      this.calls.set(id, call);
      if (this.calls.size === 1) this.socket.ref();
      this.write(id, method, target, body === undefined ? new Uint8Array(0) : encoder.encode(body));
      if (signal) {
        const onAbort = () => {
          // The id stays taken until the answer comes; the server is told to stop.
          call.abandoned = true;
          if (!this.closed && this.calls.has(id)) this.write(id, "CANCEL", "", new Uint8Array(0));
          reject(signal.reason);
        };
        if (signal.aborted) onAbort();
        else {
          signal.addEventListener("abort", onAbort, { once: true });
          const done = () => signal.removeEventListener("abort", onAbort);
          call.resolve = (a) => (done(), resolve(a));
          call.reject = (e) => (done(), reject(e));
        }
      }
    });
  }

  /** Writes a frame; the frames of one tick share a system call. */
  private write(id: number, method: string, target: string, body: Uint8Array): void {
    const m = encoder.encode(method);
    const t = encoder.encode(target);
    const frame = new Uint8Array(4 + 4 + 1 + m.length + 2 + t.length + body.length);
    const view = new DataView(frame.buffer);
    view.setUint32(0, frame.length - 4);
    view.setUint32(4, id);
    view.setUint8(8, m.length);
    frame.set(m, 9);
    view.setUint16(9 + m.length, t.length);
    frame.set(t, 11 + m.length);
    frame.set(body, 11 + m.length + t.length);
    if (!this.corked) {
      this.corked = true;
      this.socket.cork();
      queueMicrotask(() => {
        this.corked = false;
        this.socket.uncork();
      });
    }
    this.socket.write(frame);
  }

  close(): void {
    this.socket.destroy();
    this.lost();
  }
}

/**
 * The stream of one client: dialled on the first call, and again on the
 * call after it breaks; every call of the client shares it.
 */
export class StreamClient {
  private readonly host: string;
  private readonly port: number;
  private readonly upgrade: Uint8Array;
  private conn: Connection | undefined;
  private dialing: Promise<Connection> | undefined;

  constructor(baseUrl: string, headers: Record<string, string>) {
    const url = new URL(baseUrl);
    this.host = url.hostname.replace(/^\[|\]$/g, "");
    this.port = Number(url.port || 80);
    const head = [
      `GET ${url.pathname.replace(/\/+$/, "")}/v1/stream HTTP/1.1`,
      `Host: ${url.host}`,
      "Connection: Upgrade",
      `Upgrade: ${PROTOCOL}`,
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    this.upgrade = encoder.encode(head.join("\r\n") + "\r\n\r\n");
  }

  /**
   * Sends one call and resolves with the status and body of its answer.
   * Rejects with a StreamRefusedError when the server refuses the upgrade,
   * with a TypeError when the stream cannot carry the call (as fetch does
   * for a network failure), and with signal's reason when it aborts.
   */
  async call(method: string, target: string, body: string | undefined, signal?: AbortSignal): Promise<{ status: number; body: string }> {
    for (let attempt = 1; ; attempt++) {
      const conn = await this.connection(signal);
      try {
        return await conn.send(method, target, body, signal);
      } catch (err) {
        // A call that never left a connection that broke goes once more on a new one.
        if (attempt === 1 && (err as { notSent?: boolean }).notSent) continue;
        throw err;
      }
    }
  }

  private async connection(signal?: AbortSignal): Promise<Connection> {
    if (this.conn && !this.conn.closed) return this.conn;
    if (!this.dialing) {
      const dialing = this.dial();
      this.dialing = dialing;
      const clear = () => {
        if (this.dialing === dialing) this.dialing = undefined;
      };
      dialing.then(clear, clear);
    }
    if (!signal) return this.dialing;
    // Shared by every call waiting for it: one giving up does not end it.
    return await new Promise<Connection>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      this.dialing!.then(
        (c) => (signal.removeEventListener("abort", onAbort), resolve(c)),
        (e) => (signal.removeEventListener("abort", onAbort), reject(e)),
      );
    });
  }

  private async dial(): Promise<Connection> {
    const name: string = "node:net";
    const net = (await import(name)) as Net;
    const socket = net.connect({ host: this.host, port: this.port });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 30_000);
    const conn = new Connection(socket);
    socket.once("connect", () => socket.write(this.upgrade));
    const timer = setTimeout(() => conn.close(), DIAL_TIMEOUT_MS);
    try {
      await conn.upgraded; // rejects when the connection closes first
    } catch (err) {
      conn.close();
      throw err;
    } finally {
      clearTimeout(timer);
    }
    this.conn = conn;
    return conn;
  }

  /** Closes the stream; calls in flight fail, and later calls dial a new one. */
  close(): void {
    const conn = this.conn;
    this.conn = undefined;
    conn?.close();
  }
}
