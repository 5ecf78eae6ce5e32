// The baseline the benchmark compares against: the "typical Node proxy" of Step 4 — a node:http
// server, a node:http client with a keep-alive Agent, bodies piped both ways. Nothing else.
//   node scripts/baseline-proxy.mjs LISTEN_PORT UPSTREAM_PORT
import http from 'node:http';

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

http
  .createServer((clientReq, clientRes) => {
    const upstreamReq = http.request(
      { host: '127.0.0.1', port: upstreamPort, method: clientReq.method, path: clientReq.url, headers: clientReq.headers, agent },
      (upstreamRes) => {
        clientRes.writeHead(upstreamRes.statusCode, upstreamRes.headers);
        upstreamRes.pipe(clientRes);
      },
    );
    upstreamReq.on('error', () => {
      clientRes.statusCode = 502;
      clientRes.end();
    });
    clientReq.pipe(upstreamReq);
  })
  .listen(listenPort, '127.0.0.1', () => process.stderr.write(`baseline proxy listening on 127.0.0.1:${listenPort}\n`));
