// The operator's image, built the way `docker build` would build it from the project's Dockerfile
// and .dockerignore, into a folder: each stage's files in a folder of its own, COPY honouring the
// .dockerignore list, RUN executed in the stage's working folder (with the Node.js 24 of the
// project, as node:24-slim has it), and the final stage's ENV, USER, WORKDIR and ENTRYPOINT kept
// for the kubelet stand-in, which runs operator pods from that folder (test/testbed/container.ts).
// One Dockerfile and one list of files: what the tests run is what the image holds.
//
// Only the instructions the Dockerfile uses are understood (FROM ... AS, WORKDIR, COPY [--from],
// RUN, ENV, USER, EXPOSE, ENTRYPOINT, CMD); anything else is an error that says so. The result is
// cached by a hash of the Dockerfile, the list and every file it lets in.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const PROJECT_DIR = fileURLToPath(new URL('../..', import.meta.url));
/** The Node.js 24 of the project (the `node` devDependency), which RUN lines and the image use. */
export const NODE_24 = join(PROJECT_DIR, 'node_modules', 'node', 'bin', 'node');

export interface BuiltImage {
  /** The final stage's files: the folder that is `/` of the image, apart from its base. */
  rootfs: string;
  /** The base image of the final stage, and where its Node.js lives in it. */
  base: string;
  nodePath: string;
  entrypoint: string[];
  cmd: string[];
  env: Record<string, string>;
  workdir: string;
  user: { uid: number; gid: number } | null;
  /** The files the image holds under its working folder, relative to it (from the list). */
  files: string[];
  key: string;
}

/** Where the bases this project builds on keep node, and which user they run as. */
const BASES: Array<{ match: RegExp; nodePath: string; user: { uid: number; gid: number } | null }> = [
  { match: /^gcr\.io\/distroless\/nodejs\d+-debian\d+(:nonroot|:latest)?(@.*)?$/, nodePath: '/nodejs/bin/node', user: null },
  { match: /^node:\d+(-slim|-bookworm.*)?(@.*)?$/, nodePath: '/usr/local/bin/node', user: null },
];

interface Instruction {
  op: string;
  args: string;
  line: number;
}

interface Stage {
  name: string;
  from: string;
  instructions: Instruction[];
}

/** The Dockerfile's stages and their instructions (continuation lines joined, comments dropped). */
export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i]!;
    const start = i + 1;
    if (/^\s*(#.*)?$/.test(line)) continue;
    while (/\\\s*$/.test(line) && i + 1 < lines.length) line = line.replace(/\\\s*$/, ' ') + lines[++i]!;
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`Dockerfile line ${start}: cannot read "${line}"`);
    const op = m[1]!.toUpperCase();
    const args = m[2]!.trim();
    if (op === 'FROM') {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!f) throw new Error(`Dockerfile line ${start}: FROM ${args}`);
      stages.push({ from: f[1]!, name: f[2] ?? String(stages.length), instructions: [] });
      continue;
    }
    if (!stages.length) throw new Error(`Dockerfile line ${start}: ${op} before FROM`);
    stages.at(-1)!.instructions.push({ op, args, line: start });
  }
  return stages;
}

/** A .dockerignore as Docker reads it: the last pattern matching a path (or a folder above it) decides. */
export function dockerignoreMatcher(text: string): (path: string) => boolean {
  const patterns = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const p = (negate ? l.slice(1) : l).replace(/^\/+/, '').replace(/\/+$/, '');
      const re = p
        .split('/')
        .map((seg) => (seg === '**' ? '.*' : seg.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')))
        .join('/')
        .replace(/\.\*\//g, '(?:.*/)?');
      return { negate, re: new RegExp(`^${re}$`) };
    });
  return (path: string) => {
    const parts = path.split('/');
    let excluded = false;
    for (const p of patterns) {
      for (let n = 1; n <= parts.length; n++) {
        if (p.re.test(parts.slice(0, n).join('/'))) {
          // A pattern matching a folder decides for everything below it, unless a later one says otherwise.
          if (n === parts.length || !p.negate) excluded = !p.negate;
          break;
        }
      }
    }
    return !excluded;
  };
}

/** The files of the build context that the .dockerignore lets in, relative to the project. */
export function contextFiles(projectDir = PROJECT_DIR): string[] {
  const included = dockerignoreMatcher(readFileSync(join(projectDir, '.dockerignore'), 'utf8'));
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(projectDir, dir), { withFileTypes: true })) {
      const rel = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        if (['.git', 'node_modules', '.cache'].includes(rel)) continue;
        walk(rel);
      } else if (entry.isFile() && included(rel)) {
        out.push(rel);
      }
    }
  };
  walk('');
  return out.sort();
}

function jsonOrShell(args: string): string[] {
  if (args.startsWith('[')) return JSON.parse(args) as string[];
  return ['/bin/sh', '-c', args];
}

function parseEnv(args: string): Record<string, string> {
  const env: Record<string, string> = {};
  const re = /([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g;
  let m: RegExpExecArray | null;
  let any = false;
  while ((m = re.exec(args))) {
    any = true;
    env[m[1]!] = m[2]!.startsWith('"') ? (JSON.parse(m[2]!) as string) : m[2]!;
  }
  if (!any) {
    const legacy = /^(\S+)\s+(.*)$/.exec(args);
    if (legacy) env[legacy[1]!] = legacy[2]!;
  }
  return env;
}

/** The build's cache key: the Dockerfile, the list, and every file the list lets in. */
export function imageKey(projectDir = PROJECT_DIR, files = contextFiles(projectDir)): string {
  const hash = createHash('sha256');
  hash.update(readFileSync(join(projectDir, 'Dockerfile'))).update(readFileSync(join(projectDir, '.dockerignore')));
  for (const f of files) hash.update(f).update('\0').update(readFileSync(join(projectDir, f))).update('\0');
  return hash.digest('hex').slice(0, 16);
}

export function imageCacheDir(): string {
  return process.env.QUEEN_IMAGE_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'queen-operator', 'images');
}

/** A build whose folder holds both its root and its image.json (published whole). */
const built = (dir: string) => existsSync(join(dir, 'image.json')) && existsSync(join(dir, 'rootfs'));

/** A build used (pulled) within this time is not evicted by another checkout's build. */
const RECENTLY_USED_MS = 6 * 3600_000;

/**
 * Builds the operator's image (or finds it built): the final stage's folder and how it runs.
 * `log` hears what the build does.
 */
export async function buildOperatorImage(opts: { projectDir?: string; cacheDir?: string; log?: (line: string) => void } = {}): Promise<BuiltImage> {
  const projectDir = opts.projectDir ?? PROJECT_DIR;
  const cacheDir = opts.cacheDir ?? imageCacheDir();
  const log = opts.log ?? (() => undefined);
  const dockerfile = readFileSync(join(projectDir, 'Dockerfile'), 'utf8');
  const stages = parseDockerfile(dockerfile);
  const files = contextFiles(projectDir);
  const key = imageKey(projectDir, files);
  const dir = join(cacheDir, `operator-${key}`);
  const metaPath = join(dir, 'image.json');
  if (built(dir)) {
    // A pull marks the build as in use: builds are evicted only after hours without one.
    const now = new Date();
    utimesSync(dir, now, now);
    return JSON.parse(readFileSync(metaPath, 'utf8')) as BuiltImage;
  }

  log(`building the operator image ${key} from the Dockerfile (${files.length} files let in by .dockerignore)`);
  const began = Date.now();
  mkdirSync(cacheDir, { recursive: true });
  const work = `${dir}.partial-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  const stageRoots = new Map<string, string>();
  let final: Omit<BuiltImage, 'files' | 'key' | 'rootfs'> | null = null;
  for (const [i, stage] of stages.entries()) {
    const rootfs = join(work, `stage-${i}`);
    mkdirSync(rootfs, { recursive: true });
    stageRoots.set(stage.name, rootfs);
    const base = BASES.find((b) => b.match.test(stage.from));
    if (!base) throw new Error(`Dockerfile: the test bed does not know the base image ${stage.from} (test/testbed/image.ts, BASES)`);
    let workdir = '/';
    const env: Record<string, string> = {};
    let user: { uid: number; gid: number } | null = base.user;
    let entrypoint: string[] = [];
    let cmd: string[] = [];
    for (const ins of stage.instructions) {
      const where = `Dockerfile line ${ins.line}`;
      switch (ins.op) {
        case 'WORKDIR':
          workdir = ins.args.startsWith('/') ? ins.args : join(workdir, ins.args);
          mkdirSync(join(rootfs, workdir), { recursive: true });
          break;
        case 'COPY': {
          const m = /^(?:--from=(\S+)\s+)?(\S+)\s+(\S+)$/.exec(ins.args);
          if (!m) throw new Error(`${where}: COPY ${ins.args} (one source and one destination)`);
          const [, from, src, dst] = m as unknown as [string, string | undefined, string, string];
          const target = join(rootfs, dst.startsWith('/') ? dst : join(workdir, dst));
          if (from !== undefined) {
            const other = stageRoots.get(from);
            if (!other) throw new Error(`${where}: no stage ${from}`);
            cpSync(join(other, src), target, { recursive: true, dereference: false });
          } else {
            if (src !== '.') throw new Error(`${where}: COPY from the context takes "." (the .dockerignore chooses the files)`);
            for (const f of files) {
              mkdirSync(dirname(join(target, f)), { recursive: true });
              cpSync(join(projectDir, f), join(target, f));
            }
          }
          break;
        }
        case 'RUN': {
          const argv = jsonOrShell(ins.args);
          log(`  RUN ${ins.args.slice(0, 100)}`);
          const r = await run(argv, join(rootfs, workdir), { ...process.env, ...env, PATH: `${dirname(NODE_24)}:${process.env.PATH ?? ''}`, npm_config_update_notifier: 'false' });
          if (r.code !== 0) throw new Error(`${where}: RUN ${ins.args} failed (${r.code}):\n${r.output.slice(-3000)}`);
          break;
        }
        case 'ENV':
          Object.assign(env, parseEnv(ins.args));
          break;
        case 'USER': {
          const m = /^(\d+)(?::(\d+))?$/.exec(ins.args);
          if (!m) throw new Error(`${where}: USER takes uid[:gid] numbers here`);
          user = { uid: Number(m[1]), gid: Number(m[2] ?? m[1]) };
          break;
        }
        case 'ENTRYPOINT':
          entrypoint = jsonOrShell(ins.args);
          break;
        case 'CMD':
          cmd = jsonOrShell(ins.args);
          break;
        case 'EXPOSE':
          break;
        default:
          throw new Error(`${where}: the test bed's image builder does not know ${ins.op}`);
      }
    }
    final = { base: stage.from, nodePath: base.nodePath, entrypoint, cmd, env, workdir, user };
  }
  const last = stages.length - 1;
  const image: BuiltImage = { ...final!, rootfs: join(dir, 'rootfs'), files, key };
  // Published whole, by one rename of a folder that holds the root and image.json: two test beds
  // that build the same image at once (npm run chaos beside npm run e2e) each finish theirs, the
  // first one published is kept and the other dropped. Removing the folder and filling it again
  // took the root from under a test bed that had just started from it (its pods failed to mount).
  const staged = join(work, 'image');
  mkdirSync(staged);
  renameSync(join(work, `stage-${last}`), join(staged, 'rootfs'));
  writeFileSync(join(staged, 'image.json'), JSON.stringify(image, null, 2) + '\n');
  if (existsSync(dir) && !built(dir)) rmSync(dir, { recursive: true, force: true });
  try {
    renameSync(staged, dir);
  } catch (err) {
    if (!built(dir)) throw err;
  }
  rmSync(work, { recursive: true, force: true });
  log(`built the operator image ${key} in ${((Date.now() - began) / 1000).toFixed(1)} s`);
  evictOldBuilds(cacheDir, key);
  return image;
}

/**
 * Removes builds no test bed has pulled lately (several test beds, of several checkouts, may share
 * the cache and run their builds at the same time), keeping the three newest anyway.
 */
function evictOldBuilds(cacheDir: string, keep: string): void {
  const builds = readdirSync(cacheDir)
    .filter((d) => /^operator-[0-9a-f]{16}$/.test(d) && d !== `operator-${keep}`)
    .map((d) => ({ d, t: statSync(join(cacheDir, d)).mtimeMs }))
    .sort((a, b) => b.t - a.t);
  for (const old of builds.slice(3)) {
    if (Date.now() - old.t > RECENTLY_USED_MS) rmSync(join(cacheDir, old.d), { recursive: true, force: true });
  }
}

/** Runs a command (without blocking the test bed's event loop), its output kept for an error. */
function run(argv: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | string; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (d: Buffer) => {
      output = (output + d.toString()).slice(-20_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', (err) => resolve({ code: err.message, output }));
    child.on('close', (code, signal) => resolve({ code: code ?? signal ?? 'killed', output }));
  });
}

/**
 * The one name under which the test bed's registry holds the operator's image: the chart's
 * (charts/queen-operator: image.repository, and its tag or the chart's appVersion), which the
 * manifests render and the release workflow pushes. Another name, even one that looks like the
 * operator's, is not there: a manifest that names it fails to pull, as it would on a cluster.
 */
export function operatorImageName(projectDir = PROJECT_DIR): string {
  const chart = join(projectDir, 'charts', 'queen-operator');
  const values = parse(readFileSync(join(chart, 'values.yaml'), 'utf8')) as { image: { repository: string; tag?: string } };
  const meta = parse(readFileSync(join(chart, 'Chart.yaml'), 'utf8')) as { appVersion: string };
  return `${values.image.repository}:${values.image.tag || meta.appVersion}`;
}

/** The images the kubelet stand-in runs from a folder: the operator's, built from the checkout as it is. */
export class ImageStore {
  readonly #building = new Map<string, Promise<BuiltImage>>();
  readonly #built = new Set<string>();
  readonly #log: (line: string) => void;
  constructor(log: (line: string) => void = () => undefined) {
    this.#log = log;
  }
  /**
   * An image named as the operator's, under any registry and tag (ghcr.io/queen-mq/queen-operator:0.1.0,
   * ...): run as an image, never as a Queen simulator. Only operatorImageName() is there to pull.
   */
  static isOperator(image: string): boolean {
    return /(^|\/)queen-operator(:|@|$)/.test(image);
  }
  /**
   * The image of the checkout as it is now (a pull): built when the files changed since the last
   * build, found in the cache otherwise; one build at a time per content.
   */
  async prepare(): Promise<BuiltImage> {
    const key = imageKey();
    let p = this.#building.get(key);
    if (p && this.#built.has(key)) {
      // A build found earlier: marked as used, or made again if its folder is gone (removed by
      // hand, or by the eviction of an older checkout).
      const dir = join(imageCacheDir(), `operator-${key}`);
      if (existsSync(join(dir, 'image.json'))) {
        const now = new Date();
        utimesSync(dir, now, now);
      } else {
        this.#built.delete(key);
        p = undefined;
      }
    }
    if (!p) {
      p = buildOperatorImage({ log: this.#log });
      this.#building.set(key, p);
      p.then(() => this.#built.add(key), () => undefined);
      // A failed build is tried again at the next pull.
      p.catch(() => this.#building.delete(key));
    }
    return p;
  }
  async resolve(image: string): Promise<BuiltImage | null> {
    if (!ImageStore.isOperator(image)) return null;
    const name = operatorImageName();
    if (image !== name) throw new Error(`rpc error: code = NotFound desc = ${image}: not found (the test bed's registry has the operator's image only as ${name}, the chart's image.repository and version)`);
    return this.prepare();
  }
}

/** The files of the image's working folder, for a test to compare with the list. */
export function imageFiles(image: BuiltImage): string[] {
  const root = join(image.rootfs, image.workdir);
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else out.push(relative(root, p));
    }
  };
  walk(root);
  return out.sort();
}
