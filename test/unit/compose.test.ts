// docker-compose.yml, which no Docker engine here can run: what it promises is checked as written.
// The operator is built from this checkout's Dockerfile, starts once Temporal answers its health
// check, both restart when they stop, and every variable it gives the operator is one the operator
// reads (a renamed flag would otherwise leave the compose file silently configuring nothing).
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { parse } from 'yaml';
import { operatorCommand } from '../../options.ts';

const compose = parse(readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8'));

it('the operator is built from the Dockerfile and starts once Temporal is healthy; both restart', () => {
  const { temporal, operator } = compose.services;
  expect(operator.build).toBe('.');
  expect(operator.depends_on).toEqual({ temporal: { condition: 'service_healthy' } });
  expect(temporal.healthcheck.test).toEqual(expect.arrayContaining(['temporal', 'operator', 'cluster', 'health']));
  expect(temporal.restart).toBe('unless-stopped');
  expect(operator.restart).toBe('unless-stopped');
  // Temporal's state outlives the container, so operations do too.
  expect(temporal.command).toEqual(expect.arrayContaining(['--db-filename']));
  expect(Object.keys(compose.volumes)).toContain('temporal-data');
});

it('every variable it sets is one the operator reads', () => {
  const read = new Set(operatorCommand().options.map((o) => o.envVar).filter((v): v is string => !!v));
  for (const name of Object.keys(compose.services.operator.environment)) {
    if (name === 'KUBECONFIG') continue; // read by the Kubernetes client itself
    expect(read, `${name} is not a variable of the operator`).toContain(name);
  }
  expect(compose.services.operator.environment.TEMPORAL_ADDRESS).toBe('temporal:7233');
});
