// `npm run testbed`: starts the test bed and stays up until Ctrl-C, printing how to reach it.
// `npm run testbed:smoke`: starts it, runs check (a) (the seed 001 manifest forms a three-voter
// cluster), prints one summary line, stops it, and exits 0 only if the check passed.
//
// Options: --time-factor F (or QUEEN_TESTBED_TIME_FACTOR; default 1, real timings), --dir D (a
// folder to keep everything in; kept after stop), --keep (keep the temporary folder), --sim-fleet
// (the Queen simulators in broker fleets; or QUEEN_TESTBED_SIM_FLEET=1), --verbose.
import { parseArgs } from 'node:util';
import { startTestbed } from './testbed.ts';
import { checkSeedCluster } from './checks.ts';
import { connect } from './client.ts';
import { ToolsError } from './tools.ts';

const { values } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    'time-factor': { type: 'string' },
    dir: { type: 'string' },
    keep: { type: 'boolean', default: false },
    'sim-fleet': { type: 'boolean' },
    verbose: { type: 'boolean', short: 'v', default: false },
  },
});

const timeFactor = Number(values['time-factor'] ?? process.env.QUEEN_TESTBED_TIME_FACTOR ?? '1');
const say = (line: string) => process.stdout.write(line + '\n');
const note = (line: string) => {
  if (values.verbose || line.startsWith('build-tools:')) process.stderr.write(line + '\n');
};

async function main(): Promise<number> {
  let tb;
  try {
    tb = await startTestbed({ dir: values.dir, timeFactor, log: note, keep: values.keep, simFleet: values['sim-fleet'] });
  } catch (e) {
    if (e instanceof ToolsError) {
      process.stderr.write(e.message + '\n');
      return 2;
    }
    process.stderr.write(`the test bed did not start: ${(e as Error).message}\n`);
    return 1;
  }
  const info = tb.info;
  if (!values.smoke) {
    say(`test bed up in ${(info.startupMs / 1000).toFixed(1)} s (time factor ${info.timeFactor}${info.simFleet ? ', Queen simulators in broker fleets' : ''}), folder ${info.dir}`);
    say(`export KUBECONFIG=${info.kubeconfigPath}`);
    say(`export QUEEN_TESTBED=${info.dir}/testbed.json`);
    say(`Temporal: ${info.temporal.address} (namespace ${info.temporal.namespace}), Web UI ${info.temporal.uiUrl}`);
    say(`control API: ${info.controlUrl}   cluster DNS: ${info.dns}   kubectl: ${info.tools.kubectl}`);
    say('Ctrl-C stops it and everything it started.');
    await new Promise(() => {}); // until a signal; startTestbed's handlers stop it and exit
    return 0;
  }
  const began = Date.now();
  let code = 1;
  let keep = false;
  try {
    const client = connect(info);
    const ns = await client.newNamespace('smoke');
    const result = await checkSeedCluster(client, ns, { log: note });
    say(
      `testbed smoke: PASS started in ${(info.startupMs / 1000).toFixed(1)} s; seed 001 in ${ns}: voters [${result.voters.join(',')}] all live lag 0 through ${result.pods.length} pods, all Ready, write committed (${((Date.now() - began) / 1000).toFixed(1)} s)`,
    );
    code = 0;
  } catch (e) {
    keep = true;
    say(`testbed smoke: FAIL started in ${(info.startupMs / 1000).toFixed(1)} s; ${(e as Error).message.split('\n')[0]} (kept for a look: ${info.logs})`);
    if (values.verbose) process.stderr.write(`${(e as Error).stack}\n`);
  } finally {
    await tb.stop({ keep });
  }
  return code;
}

process.exitCode = await main();
