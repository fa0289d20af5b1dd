// e2e `backup-webui`: a cluster's backup Schedule as a user finds it in the Temporal Web UI, in a
// real browser (Debian's Chromium, headless, driven by playwright-core): listed on the Schedules
// page under its id, its page naming the workflow it starts (takeBackup) and its note; paused there
// once the cluster's pause annotation is set. A screenshot of its page is saved under .cache/.
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, expect, it } from 'vitest';
import { backupScheduleId } from '../../watcher/backups.ts';
import { deleteScheduleAtClose, schedule } from './backups.ts';
import { annotate, formed, scenario, seedSpec, testbed, waitFor, type Scenario } from './harness.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = fileURLToPath(new URL('../../.cache/', import.meta.url));

let s: Scenario;
let browser: Browser | undefined;
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

it('backup-webui: the backup Schedule on the Web UI\'s Schedules page, paused with the cluster', async () => {
  expect(existsSync(CHROMIUM), `${CHROMIUM}: Debian's chromium is needed (apt-get install chromium; .ci/run installs it)`).toBe(true);
  s = await scenario('backupui');
  deleteScheduleAtClose(s);
  await formed(s, seedSpec({ replicas: 1, backup: { schedule: '0 3 * * *', keep: 3 } }));
  const id = backupScheduleId(s.ns, 'queen');
  await waitFor('the backup Schedule', () => schedule(s).catch(() => undefined), 30_000);

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const ui = testbed().temporal.uiUrl;
  await page.goto(`${ui}/namespaces/default/schedules`);
  await page.waitForSelector(`text=${id}`, { timeout: 30_000 });
  await page.locator(`text=${id}`).first().click();
  await page.waitForSelector('text=takeBackup', { timeout: 30_000 });
  await page.waitForTimeout(1500);
  const text = await page.locator('body').innerText();
  expect(text).toContain(id);
  expect(text).toContain('takeBackup');
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}webui-backup-schedule.png`, fullPage: true });

  // Paused with the cluster: the page says so, with the note that names why.
  await annotate(s, { 'queenmq.com/pause': 'true' });
  await waitFor('the Schedule paused', async () => (await schedule(s)).state.paused === true, 30_000);
  await page.reload();
  await page.waitForSelector('text=takeBackup', { timeout: 30_000 });
  await page.waitForTimeout(1500);
  const paused = await page.locator('body').innerText();
  expect(paused).toMatch(/paused/i);
  expect(paused).toContain(`paused by the queenmq.com/pause annotation of the QueenCluster ${s.ns}/queen`);
});
