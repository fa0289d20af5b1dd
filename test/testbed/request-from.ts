// For tests of the network rules (NetworkPolicies, partitions, cut-off nodes): one request from a
// chosen source address, as a pod at that address would send it.
import { request } from 'node:http';

/**
 * A request from `source` to ip:port (a POST on the raft port 7400, a GET elsewhere): the HTTP
 * status, 'timeout' when nothing answers in time, or the socket error's code (ECONNREFUSED...).
 */
export function requestFrom(source: string, ip: string, port: number, path: string, timeoutMs = 2000): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request({ host: ip, port, path, method: port === 7400 ? 'POST' : 'GET', localAddress: source, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.setTimeout(timeoutMs, () => {
      req.destroy();
      resolve('timeout');
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    req.end();
  });
}
