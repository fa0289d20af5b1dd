// The operator's flags and environment: a bad value of each kind is refused at start with the flag
// (and the variable it came from) named and what it takes; a flag wins over its variable; every
// duration keeps within the bounds that make it work.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OptionsError, parseOptions, type Options } from '../../options.ts';

const parse = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseOptions(argv, env) as Options;
const refusal = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
  try {
    parseOptions(argv, env);
  } catch (err) {
    expect(err).toBeInstanceOf(OptionsError);
    return (err as Error).message;
  }
  throw new Error(`${argv.join(' ')} ${JSON.stringify(env)} was taken`);
};

describe('a bad value is refused, naming the flag and what it takes', () => {
  it.each<[string, string[], RegExp]>([
    ['a port that is no number', ['--health-port=abc'], /^option '--health-port <port>' argument 'abc' is invalid\. a port is a number from 1 to 65535 \(0 turns it off\)$/],
    ['a port above 65535', ['--metrics-port=70000'], /^option '--metrics-port <port>' argument '70000' is invalid\. a port is a number/],
    ['a negative port', ['--health-port=-1'], /^option '--health-port <port>' argument '-1' is invalid/],
    ['a duration without a unit', ['--poll-interval=5'], /^option '--poll-interval <duration>' argument '5' is invalid\. not a duration: use a number and a unit, such as 500ms, 2s, 1m30s or 1h$/],
    ['a duration of 0s (a tight loop)', ['--poll-interval=0s'], /^option '--poll-interval <duration>' argument '0s' is invalid\. must be at least 100ms$/],
    ['a poll longer than a heartbeat allows', ['--poll-interval=1m'], /^option '--poll-interval <duration>' argument '1m' is invalid\. must be at most 10s: a waiting step heartbeats at each look/],
    ['an observe interval longer than a status may be old', ['--observe-interval=10m'], /^option '--observe-interval <duration>' argument '10m' is invalid\. must be at most 5m/],
    ['a probe interval below 1s', ['--probe-interval=500ms'], /^option '--probe-interval <duration>' argument '500ms' is invalid\. must be at least 1s$/],
    ['a duration past what a timer holds', ['--settle-timeout=1000h'], /^option '--settle-timeout <duration>' argument '1000h' is invalid\. must be at most 24h/],
    ['a negative duration', ['--shutdown-grace=-1s'], /^option '--shutdown-grace <duration>' argument '-1s' is invalid\. not a duration/],
    ['a log level that does not exist', ['--log-level=verbose'], /^option '--log-level <level>' argument 'verbose' is invalid\. Allowed choices are trace, debug, info, warn, error, fatal, silent\.$/],
    ['a namespace name in capitals', ['--namespace=Queen'], /^option '--namespace <ns,\.\.\.>' argument 'Queen' is invalid\. "Queen" is not a namespace name/],
    ['an empty namespace list', ['--namespace='], /^option '--namespace <ns,\.\.\.>' argument '' is invalid\. takes namespace names separated by commas; leave it out to watch every namespace$/],
    ['an address without a port', ['--temporal-address=temporal'], /^option '--temporal-address <host:port>' argument 'temporal' is invalid\. use host:port/],
    ['a resolver port of 0', ['--resolver=10.0.0.10:0'], /^option '--resolver <host:port>' argument '10\.0\.0\.10:0' is invalid\. use host:port/],
    ['a bind address that is no IP', ['--bind-address=localhost'], /^option '--bind-address <ip>' argument 'localhost' is invalid\. not an IP address/],
    ['a part the process does not have', ['--run=both'], /^option '--run <parts>' argument 'both' is invalid\. takes worker, watcher or worker,watcher$/],
    ['a broker access mode that does not exist', ['--broker-access=ip'], /^option '--broker-access <mode>' argument 'ip' is invalid\. Allowed choices are dns, pod-ip\.$/],
    ['a boolean that is not one', ['--temporal-tls=maybe'], /^option '--temporal-tls \[bool\]' argument 'maybe' is invalid\. takes true or false$/],
    ['an empty task queue', ['--task-queue='], /^option '--task-queue <name>' argument '' is invalid\. must not be empty$/],
    ['an empty Temporal namespace', ['--temporal-namespace='], /^option '--temporal-namespace <name>' argument '' is invalid\. must not be empty$/],
    ['a file that cannot be read', ['--temporal-tls-ca=/nonexistent/ca.pem'], /^option '--temporal-tls-ca <file>' argument '\/nonexistent\/ca\.pem' is invalid\. cannot read \/nonexistent\/ca\.pem: ENOENT$/],
    ['a flag that does not exist', ['--poll=1s'], /^unknown option '--poll=1s'/],
    ['an argument that is no flag', ['worker'], /too many arguments/],
  ])('%s', (_name, argv, message) => {
    expect(refusal(argv)).toMatch(message);
  });

  it('a bad value from the environment names the variable and its flag', () => {
    expect(refusal([], { QUEEN_HEALTH_PORT: 'x' })).toBe(
      "option '--health-port <port>' value 'x' from env 'QUEEN_HEALTH_PORT' is invalid. a port is a number from 1 to 65535 (0 turns it off)",
    );
    expect(refusal([], { LOG_LEVEL: 'verbose' })).toMatch(/^option '--log-level <level>' value 'verbose' from env 'LOG_LEVEL' is invalid\. Allowed choices are/);
    expect(refusal([], { QUEEN_POLL_INTERVAL: '0s' })).toBe("option '--poll-interval <duration>' value '0s' from env 'QUEEN_POLL_INTERVAL' is invalid. must be at least 100ms");
  });

  it('values that go together are refused apart', () => {
    const dir = mkdtempSync(join(tmpdir(), 'queen-options-'));
    const cert = join(dir, 'cert.pem');
    writeFileSync(cert, 'x');
    expect(refusal([`--temporal-tls-cert=${cert}`])).toMatch(/^--temporal-tls-cert and --temporal-tls-key \(TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY\) go together/);
    const empty = join(dir, 'key');
    writeFileSync(empty, '\n');
    expect(refusal([`--temporal-api-key-file=${empty}`])).toBe(`--temporal-api-key-file ${empty} is empty`);
  });
});

describe('what is taken', () => {
  it('the defaults', () => {
    const o = parse([]);
    expect(o.run).toEqual(new Set(['worker', 'watcher']));
    expect(o.temporal).toMatchObject({ address: 'localhost:7233', namespace: 'default', taskQueue: 'queen-operator', tls: false });
    expect(o.namespaces).toEqual([]);
    expect(o.healthPort).toBe(8081);
    expect(o.metricsPort).toBe(9090);
    expect(o.logLevel).toBe('info');
    expect(o.shutdownGraceMs).toBe(20_000);
    expect(o.unhealthyAfterMs).toBe(120_000);
    expect(o.settings).toMatchObject({ brokerAccess: 'dns', pollMs: 2000, observeIntervalMs: 10_000, probeIntervalMs: 60_000, stallAfterMs: 10_000, settleTimeoutMs: 600_000 });
  });

  it('a flag wins over its variable; a variable over the default', () => {
    expect(parse(['--poll-interval=500ms'], { QUEEN_POLL_INTERVAL: '3s' }).settings.pollMs).toBe(500);
    expect(parse([], { QUEEN_POLL_INTERVAL: '3s' }).settings.pollMs).toBe(3000);
    expect(parse(['--log-level=debug'], { LOG_LEVEL: 'warn' }).logLevel).toBe('debug');
    expect(parse([], { LOG_LEVEL: 'warn' }).logLevel).toBe('warn');
    expect(parse(['--namespace=a'], { QUEEN_NAMESPACES: 'b,c' }).namespaces).toEqual(['a']);
    expect(parse([], { QUEEN_NAMESPACES: 'b, c,b' }).namespaces).toEqual(['b', 'c']);
    expect(parse([], { TEMPORAL_ADDRESS: 'temporal-frontend.temporal.svc:7233' }).temporal.address).toBe('temporal-frontend.temporal.svc:7233');
  });

  it('durations as Go and kubectl write them, at their bounds', () => {
    expect(parse(['--stall-after=1m30s']).settings.stallAfterMs).toBe(90_000);
    expect(parse(['--probe-interval=1.5s']).settings.probeIntervalMs).toBe(1500);
    expect(parse(['--poll-interval=100ms']).settings.pollMs).toBe(100);
    expect(parse(['--poll-interval=10s']).settings.pollMs).toBe(10_000);
    expect(parse(['--shutdown-grace=0s']).shutdownGraceMs).toBe(0);
    expect(parse(['--settle-timeout=24h']).settings.settleTimeoutMs).toBe(86_400_000);
  });

  it('ports: 0 turns an endpoint off; namespaces repeat and add up', () => {
    expect(parse(['--health-port=0', '--metrics-port=0'])).toMatchObject({ healthPort: null, metricsPort: null });
    expect(parse(['--namespace=a,b', '--namespace=c']).namespaces).toEqual(['a', 'b', 'c']);
    expect(parse(['--run=worker']).run).toEqual(new Set(['worker']));
  });

  it('TLS turns on by itself with an API key', () => {
    expect(parse([], { TEMPORAL_API_KEY: 'k' }).temporal).toMatchObject({ tls: true, apiKey: 'k' });
    expect(parse(['--temporal-tls']).temporal.tls).toBe(true);
    expect(parse([], { TEMPORAL_TLS: 'false' }).temporal.tls).toBe(false);
  });

  it('--help gives the usage with every flag', () => {
    const help = parseOptions(['--help'], {});
    expect(help).toHaveProperty('help');
    expect((help as { help: string }).help).toMatch(/--poll-interval <duration>/);
  });
});
