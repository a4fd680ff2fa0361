// Preloaded into third-party Node servers (node -r ./loopback.cjs ...): every listen() that
// names no host binds 127.0.0.1 instead of all interfaces, so tests never expose a port.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || typeof args[0] === "string") {
    const port = args[0];
    const rest = typeof args[1] === "string" ? args.slice(2) : args.slice(1);
    return listen.call(this, port, "127.0.0.1", ...rest);
  }
  if (args[0] && typeof args[0] === "object" && args[0].host === undefined && args[0].path === undefined) {
    args[0] = { ...args[0], host: "127.0.0.1" };
  }
  return listen.apply(this, args);
};
