// vitest global setup of the `testbed` project: one test bed for the whole run. If QUEEN_TESTBED
// names the testbed.json of a running test bed (`npm run testbed` in another terminal), the tests
// use it; otherwise one is started here (time factor QUEEN_TESTBED_TIME_FACTOR, default 0.2; the
// Queen simulators in broker fleets with QUEEN_TESTBED_SIM_FLEET=1) and stopped at the end. Tests read it with inject('testbed') or through ./client.ts.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { request } from 'undici';
import { startTestbed, type TestbedInfo } from './testbed.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    testbed: TestbedInfo;
  }
}

/** The time factor of the test bed the tests start, and the one their timings are set for. */
const DEFAULT_TIME_FACTOR = '0.2';

async function alive(info: TestbedInfo): Promise<boolean> {
  try {
    const res = await request(info.controlUrl, { headersTimeout: 3000, bodyTimeout: 3000 });
    await res.body.text();
    return res.statusCode === 200;
  } catch {
    return false;
  }
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const existing = process.env.QUEEN_TESTBED;
  if (existing && existsSync(existing)) {
    const info = JSON.parse(readFileSync(existing, 'utf8')) as TestbedInfo;
    if (!(await alive(info))) throw new Error(`QUEEN_TESTBED=${existing}: that test bed does not answer (is \`npm run testbed\` still running?)`);
    console.log(`test bed: using the running one in ${info.dir}`);
    // The scenarios' timings (a store's replay, a snapshot's crossing) are set for the time factor
    // of the test bed they start themselves; `npm run testbed` runs real timings by default.
    const expected = Number(process.env.QUEEN_TESTBED_TIME_FACTOR ?? DEFAULT_TIME_FACTOR);
    if (info.timeFactor !== expected) {
      console.log(
        `test bed: WARNING: it runs at time factor ${info.timeFactor}, the tests' timings are set for ${expected} (at real timings a scenario with a large store times out) ` +
          `(start it with \`npm run testbed -- --time-factor ${expected}\`, or set QUEEN_TESTBED_TIME_FACTOR=${info.timeFactor} if that is meant)`,
      );
    }
    project.provide('testbed', info);
    return undefined;
  }
  const timeFactor = Number(process.env.QUEEN_TESTBED_TIME_FACTOR ?? DEFAULT_TIME_FACTOR);
  const tb = await startTestbed({
    timeFactor,
    log: (line) => {
      if (line.startsWith('build-tools:')) console.log(line);
    },
  });
  console.log(`test bed: started in ${(tb.info.startupMs / 1000).toFixed(1)} s (time factor ${timeFactor}${tb.info.simFleet ? ', Queen simulators in broker fleets' : ''}) in ${tb.dir}`);
  // Test workers are forked after this, so they inherit it (client.ts reads it).
  process.env.QUEEN_TESTBED = join(tb.dir, 'testbed.json');
  project.provide('testbed', tb.info);
  return async () => {
    delete process.env.QUEEN_TESTBED;
    await tb.stop();
  };
}
