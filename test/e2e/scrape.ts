// The operator's /metrics as a test reads it: the Prometheus text exposition parsed into samples
// (`name{labels}` → value), and the sum of a family's samples.
import type { Scenario } from './harness.ts';

/** The samples of an exposition: `name{labels}` → value. */
export function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^(\S+?(?:\{.*\})?)\s+(\S+)$/.exec(line);
    if (m) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

/** The sum of the samples of a family whose labels contain every `label="value"` given. */
export function sum(m: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const [key, v] of m) {
    const brace = key.indexOf('{');
    if ((brace < 0 ? key : key.slice(0, brace)) !== name) continue;
    if (Object.entries(labels).every(([k, val]) => key.includes(`${k}="${val}"`))) total += v;
  }
  return total;
}

/** The /metrics of the scenario's installed operator pod (the first), where its Prometheus annotations say. */
export async function scrapeInstalled(s: Scenario): Promise<Map<string, number>> {
  const [pod] = await s.installed!.pods(s.core);
  const a = pod!.metadata?.annotations ?? {};
  const res = await fetch(`http://${pod!.status!.podIP}:${a['prometheus.io/port']}${a['prometheus.io/path']}`, { signal: AbortSignal.timeout(10_000) });
  if (res.status !== 200) throw new Error(`/metrics of ${pod!.metadata?.name} answered ${res.status}`);
  return samples(await res.text());
}
