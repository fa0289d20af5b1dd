// Preloaded (NODE_OPTIONS=--import) into the containers the test bed runs from an image: their TCP
// connections to this machine's loopback addresses leave from the pod's own address
// (TESTBED_POD_IP), as a pod's connections leave from its IP on a real pod network. The receiving
// pods then know who is calling (test/testbed/network.ts). Nothing of the product is changed.
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
}
