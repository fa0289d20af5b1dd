// e2e `webui`: an upgrade found in the Temporal Web UI the way a user looks for it, in a real
// browser (Debian's Chromium, headless, driven by playwright-core): the query "all upgrades of
// this namespace" by the operator's search attributes lists it, "everything of cluster queen"
// lists its formation, its upgrade and its observer; its page, opened from the query's result,
// shows the summary and the details the watcher gave it, each step by its line in the README, and
// the gates each wait was held by. A screenshot of the page is saved
// under .cache/ for people to look at.
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, expect, it } from 'vitest';
import { formed, patchSpec, scenario, seedSpec, testbed, waitForCluster, type Scenario } from './harness.ts';
import { settledRuns } from './temporal.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = fileURLToPath(new URL('../../.cache/', import.meta.url));

let s: Scenario;
let browser: Browser | undefined;
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

it('webui: the upgrade found by its search attributes, each step by its README line', async () => {
  expect(existsSync(CHROMIUM), `${CHROMIUM}: Debian's chromium is needed (apt-get install chromium; .ci/run installs it)`).toBe(true);
  s = await scenario('webui');
  await formed(s, seedSpec({ minReadySeconds: 2 }));
  const leader = (await waitForCluster(s, 'a leader', (q) => !!q.status?.leader, 10_000)).status!.leader!;
  await patchSpec(s, { version: '2.6.1' });
  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.type === 'RollingUpgrade', 300_000);
  const runs = (await settledRuns(s, `queencluster/${s.ns}/queen`)).filter((r) => r.type === 'rollingUpgrade');
  expect(runs).toHaveLength(1);

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const ui = testbed().temporal.uiUrl;
  const list = async (query: string) => {
    await page.goto(`${ui}/namespaces/default/workflows?query=${encodeURIComponent(query)}`);
    await page.waitForSelector(`a:has-text("queencluster/${s.ns}/queen")`, { timeout: 30_000 });
    const ids = await page.locator('a[href*="/workflows/queencluster"]').allInnerTexts();
    return ids.map((t) => t.trim()).filter((t) => t.startsWith('queencluster'));
  };
  // All upgrades of this namespace: one.
  const upgrades = await list(`QueenNamespace = "${s.ns}" AND QueenOperation = "RollingUpgrade"`);
  expect(upgrades).toEqual([`queencluster/${s.ns}/queen`]);
  // Everything of cluster queen in this namespace: its formation, its upgrade and its observer.
  const everything = await list(`QueenNamespace = "${s.ns}" AND QueenCluster = "queen"`);
  expect(everything.sort()).toEqual([`queencluster-observer/${s.ns}/queen`, `queencluster/${s.ns}/queen`, `queencluster/${s.ns}/queen`].sort());

  // The upgrade's page, opened from the query's result as a user would: its summary, its details,
  // its steps by their README lines.
  await list(`QueenNamespace = "${s.ns}" AND QueenOperation = "RollingUpgrade"`);
  await page.locator(`a[href*="/workflows/queencluster"]:has-text("queencluster/${s.ns}/queen")`).first().click();
  await page.waitForURL(new RegExp(`${runs[0]!.runId}`), { timeout: 30_000 });
  await page.waitForSelector('text=RollingUpgrade', { timeout: 30_000 });
  await page.waitForTimeout(2000);
  const text = await page.locator('body').innerText();
  expect(text).toContain(`RollingUpgrade of ${s.ns}/queen: 2.6.1`);
  // What each wait waited for: the gates that held it and for how long, in its result.
  expect(text).toMatch(/"held":"[a-z-]+ \d+(\.\d+)? s/);
  // The details the watcher gave it, on the run's User Metadata tab.
  await page.locator('text=User Metadata').first().click();
  await page.waitForTimeout(1500);
  // (The Web UI renders a run's markdown in frames of its own.)
  const frames = await Promise.all(page.frames().map((f) => f.locator('body').innerText().catch(() => '')));
  const metadata = frames.join('\n');
  expect(metadata).toMatch(/RollingUpgrade\s+of the QueenCluster\s+\S+\/queen, towards: 2\.6\.1/);
  await page.goBack();
  await page.waitForTimeout(1000);
  const order = [2, 1, 0].filter((o) => o !== leader - 1);
  for (const o of [...order, leader - 1]) expect(text).toContain(`restarting pod ${o}`);
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}webui-upgrade.png`, fullPage: true });
});
