// Runs in every test file of the `testbed` project (vitest.config.ts, setupFiles): a heavy file
// gives the test bed's heavy slot back once its last scenario is done (test/heavy.ts).
import { afterAll } from 'vitest';
import { giveBackFileSlot } from '../heavy.ts';

afterAll(() => giveBackFileSlot());
