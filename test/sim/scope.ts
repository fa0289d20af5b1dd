// What one simulated node holds in the process that runs it: its timers, its listening servers and
// their connections, its outgoing requests. Everything a node schedules goes through its scope, so
// that a node that ends (an exit, or a SIGKILL of a node in a fleet) ends as abruptly as a killed
// process: every timer cancelled, every server and socket closed at once, every outgoing call
// abandoned (its promise never settles), and nothing written afterwards (the store and the logger
// ask `dead` before they write).

import * as fs from 'node:fs';
import type * as http from 'node:http';
import type * as net from 'node:net';
import * as path from 'node:path';

const NEVER: Promise<never> = new Promise<never>(() => {});

export class NodeScope {
  /** The node ended: nothing of it runs, writes or sends any more. */
  dead = false;
  private timers = new Set<NodeJS.Timeout>();
  private immediates = new Set<NodeJS.Immediate>();
  private cleanups = new Set<() => void>();
  /**
   * An exception thrown by one of the node's callbacks. Unset (a node alone in its process), it is
   * rethrown and ends the process as an uncaught exception does; a fleet ends that node only.
   */
  onError: ((e: unknown) => void) | null = null;

  private run(fn: () => void): void {
    if (this.dead) return;
    if (!this.onError) {
      fn();
      return;
    }
    try {
      fn();
    } catch (e) {
      this.onError(e);
    }
  }

  setTimeout(fn: () => void, ms: number): NodeJS.Timeout | null {
    if (this.dead) return null;
    const t = setTimeout(() => {
      this.timers.delete(t);
      this.run(fn);
    }, ms);
    this.timers.add(t);
    return t;
  }

  setInterval(fn: () => void, ms: number): NodeJS.Timeout | null {
    if (this.dead) return null;
    const t = setInterval(() => this.run(fn), ms);
    this.timers.add(t);
    return t;
  }

  setImmediate(fn: () => void): void {
    if (this.dead) return;
    const i = setImmediate(() => {
      this.immediates.delete(i);
      this.run(fn);
    });
    this.immediates.add(i);
  }

  /** Cancels a timeout or an interval of this scope. */
  clear(t: NodeJS.Timeout | null | undefined): void {
    if (!t) return;
    clearTimeout(t);
    this.timers.delete(t);
  }

  /** Resolves after `ms`; never, once the node is dead. */
  sleep(ms: number): Promise<void> {
    if (this.dead) return NEVER;
    return new Promise<void>((resolve) => {
      this.setTimeout(resolve, ms);
    });
  }

  /** A promise that never settles (what a dead node's call gets). */
  never<T>(): Promise<T> {
    return NEVER;
  }

  /** Settles as `p` settles, unless the node died first: then never (the call is abandoned). */
  guard<T>(p: Promise<T>): Promise<T> {
    if (this.dead) return NEVER;
    return new Promise<T>((resolve, reject) => {
      p.then(
        (v) => {
          if (!this.dead) resolve(v);
        },
        (e: unknown) => {
          if (!this.dead) reject(e);
        },
      );
    });
  }

  /** Runs `fn` when the node ends (at once if it has ended). Returns a function that forgets it. */
  onKill(fn: () => void): () => void {
    if (this.dead) {
      fn();
      return () => {};
    }
    this.cleanups.add(fn);
    return () => this.cleanups.delete(fn);
  }

  /**
   * Binds a server of this node. Its connections are tracked, and when the node ends the server
   * stops listening (new connections are refused) and every connection is destroyed (its peers
   * see it reset or closed), as when the kernel closes a killed process's sockets.
   */
  listen(server: http.Server, port: number, ip: string, onError: (e: Error) => void): Promise<void> {
    if (this.dead) return NEVER;
    const sockets = new Set<net.Socket>();
    server.on('connection', (s: net.Socket) => {
      if (this.dead) {
        s.destroy();
        return;
      }
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
    });
    let listening = false;
    const close = () => {
      if (listening) {
        try {
          server.close();
        } catch {
          // closed already
        }
      }
      server.closeAllConnections();
      for (const s of sockets) s.destroy();
      sockets.clear();
    };
    this.onKill(close);
    return new Promise<void>((resolve) => {
      server.once('error', (e) => {
        if (!this.dead) onError(e);
      });
      server.listen(port, ip, () => {
        listening = true;
        // Ended while the port was being bound: it must not stay open.
        if (this.dead) {
          close();
          return;
        }
        resolve();
      });
    });
  }

  /**
   * Calls `onChange` when `file` may have changed: at once when its folder reports it (the test
   * bed writes these files whole, then renames them into place), and every `pollMs` anyway (a
   * change the folder watch missed, or a file system without one). A node at rest then costs
   * nothing here; without a folder watch it polls every `fallbackMs`.
   */
  watchFile(file: string, onChange: () => void, pollMs: number, fallbackMs: number): void {
    if (this.dead) return;
    const base = path.basename(file);
    let queued = false;
    const fire = () => {
      if (queued) return;
      queued = true;
      this.setImmediate(() => {
        queued = false;
        onChange();
      });
    };
    let poll = this.setInterval(onChange, pollMs);
    const fallBack = () => {
      this.clear(poll);
      poll = this.setInterval(onChange, fallbackMs);
    };
    try {
      const w = fs.watch(path.dirname(file), { persistent: false }, (_event, name) => {
        if (name === null || name === base) fire();
      });
      w.on('error', () => {
        w.close();
        fallBack();
      });
      this.onKill(() => w.close());
    } catch {
      fallBack();
    }
  }

  /** Ends the node: cancels every timer, runs the cleanups (servers, sockets, requests). */
  kill(): void {
    if (this.dead) return;
    this.dead = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const i of this.immediates) clearImmediate(i);
    this.immediates.clear();
    for (const fn of this.cleanups) {
      try {
        fn();
      } catch {
        // a cleanup that fails does not keep the others from running
      }
    }
    this.cleanups.clear();
  }
}
