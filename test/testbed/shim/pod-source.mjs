// Preloaded (NODE_OPTIONS=--import) into the containers the test bed runs from an image, to give
// them what a pod's own network namespace gives on a real pod network, in the machine's one
// network namespace:
// - their TCP connections to this machine's loopback addresses leave from the pod's own address
//   (TESTBED_POD_IP), as a pod's connections leave from its IP; the receiving pods then know who
//   is calling (test/testbed/network.ts);
// - a server that listens on every interface (no host, 0.0.0.0 or ::) listens on the pod's
//   address: in a pod "every interface" is its IP and its own loopback, and here the loopback is
//   the machine's, shared by every pod (two operator replicas would both take 127.0.0.1:9090).
//   A pod's own loopback (what `kubectl port-forward` reaches) has no stand-in here.
// Nothing of the product is changed.
import net from 'node:net';

const podIp = process.env.TESTBED_POD_IP;
if (podIp && net.isIPv4(podIp)) {
  const connect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function (...args) {
    const o = args[0];
    if (o && typeof o === 'object' && !Array.isArray(o) && o.localAddress === undefined && o.path === undefined && o.port !== undefined) {
      const host = o.host ?? 'localhost';
      const loopback = net.isIPv4(host) ? host.startsWith('127.') : !net.isIP(host) && host !== 'localhost';
      if (loopback) args[0] = { ...o, localAddress: podIp, family: 4 };
    }
    return connect.apply(this, args);
  };

  const everyInterface = (host) => host === undefined || host === null || host === '' || host === '0.0.0.0' || host === '::';
  const listen = net.Server.prototype.listen;
  net.Server.prototype.listen = function (...args) {
    const first = args[0];
    if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
      // listen(port[, host][, backlog][, callback])
      if (typeof args[1] === 'string' || args[1] === undefined || args[1] === null) {
        if (everyInterface(args[1])) args[1] = podIp;
      } else {
        args.splice(1, 0, podIp);
      }
    } else if (first && typeof first === 'object' && first.port !== undefined && first.path === undefined && first.handle === undefined && first.fd === undefined) {
      // listen(options[, callback])
      if (everyInterface(first.host)) args[0] = { ...first, host: podIp };
    }
    return listen.apply(this, args);
  };
}
