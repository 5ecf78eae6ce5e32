// The limit for a Node proxy on one core, as a peer in the benchmark: a zero-work node:net relay.
// Each client connection gets one upstream connection to the backend, opened at once, and the bytes
// are copied both ways unparsed (stream pipe with backpressure): no HTTP parsing, no routing, no
// headers, no pooling. Whatever a real proxy does costs time on top of this.
//   node scripts/relay-proxy.mjs LISTEN_PORT UPSTREAM_PORT
import net from 'node:net';

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);

net
  .createServer({ noDelay: true }, (client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: upstreamPort, noDelay: true });
    // Either side failing or closing ends both (pipe ends the other side only on a clean end).
    const closeBoth = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', closeBoth).on('close', closeBoth);
    upstream.on('error', closeBoth).on('close', closeBoth);
    client.pipe(upstream);
    upstream.pipe(client);
  })
  .listen(listenPort, '127.0.0.1', () => process.stderr.write(`node:net relay listening on 127.0.0.1:${listenPort}\n`));
