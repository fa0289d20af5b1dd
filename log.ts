// The operator's log: pino's JSON lines, one per event, for the pods (a log collector reads them),
// or pino-pretty's readable lines when a person watches a terminal (`npm start`). --log-format
// chooses; `auto` is readable when stdout is a terminal and JSON otherwise, so a pod, whose
// stdout is a pipe to the container runtime, keeps JSON.
import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { LogFormat, LogLevel } from './options.ts';

/** Whether lines are written for a person: `pretty`, or `auto` on a terminal. */
export function readableLog(format: LogFormat, stream: { isTTY?: boolean }): boolean {
  return format === 'pretty' || (format === 'auto' && stream.isTTY === true);
}

/** The process's logger on stdout, in the format asked for. */
export function operatorLogger(level: LogLevel, format: LogFormat, stdout: NodeJS.WriteStream = process.stdout): Logger {
  const options = { level, base: { component: 'queen-operator' } };
  if (!readableLog(format, stdout)) return pino(options);
  // Written in the process (sync), not by a worker thread: a line is out before a fatal exit.
  return pino(options, pretty({ destination: stdout, sync: true, colorize: stdout.isTTY === true, singleLine: true, translateTime: 'HH:MM:ss', ignore: 'pid,hostname,component' }));
}
