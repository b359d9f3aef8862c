// A pass-through HTTP proxy that adds `Authorization: Bearer <key>` to every request.
// The conformance suite's server scenarios cannot send credentials, and Continuity
// requires them on /mcp; everything else (method, path, Host, Origin, every other
// header, the body, streamed responses such as SSE) passes through unchanged.
//
// Usage: node auth-proxy.mjs LISTEN_PORT TARGET_PORT KEY
import http from "node:http";

const [listenPort, targetPort, key] = process.argv.slice(2);
const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${key}` };
  const upstream = http.request(
    { host: "127.0.0.1", port: Number(targetPort), method: req.method, path: req.url, headers },
    (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    },
  );
  upstream.on("error", (e) => {
    res.writeHead(502, { "content-type": "text/plain" });
    res.end(`proxy: ${e.message}`);
  });
  req.pipe(upstream);
});
server.listen(Number(listenPort), "127.0.0.1", () => console.log(`proxy on ${listenPort} -> ${targetPort}`));
