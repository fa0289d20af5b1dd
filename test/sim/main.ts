// Entry point of one simulated Queen node in an OS process of its own (one process per pod). The
// node itself is test/sim/node.ts; this wrapper gives it the process's environment, stdout as its
// log, the process's signals, and exits with the node's exit code.

import { startSimNode } from './node.ts';

const node = startSimNode(process.env, {
  id: process.pid,
  log: (line) => process.stdout.write(line + '\n'),
});
void node.exited.then((e) => process.exit(e.code ?? 137));
process.on('SIGTERM', () => node.signal('SIGTERM'));
process.on('SIGINT', () => node.signal('SIGINT'));

// Test-bed safety net: exit when the process that started us is gone (never in production).
const parentPid = Number(process.env.QUEEN_SIM_EXIT_WITH_PARENT ?? '');
if (Number.isInteger(parentPid) && parentPid > 1) {
  setInterval(() => {
    try {
      process.kill(parentPid, 0);
    } catch {
      node.exit(137, 'the test process that started this node is gone; exiting');
    }
  }, 1000).unref();
}
