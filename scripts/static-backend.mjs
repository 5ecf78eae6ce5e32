// Fallback benchmark backend when nginx cannot be installed: 12 bytes at /small, 1 MiB at /big,
// and /upload reads a POST body and answers. node scripts/static-backend.mjs PORT
import http from 'node:http';

const small = Buffer.from('hello world\n');
const big = Buffer.alloc(1024 * 1024, 'b');
http
  .createServer((req, res) => {
    if (req.url === '/upload') {
      req.resume();
      req.on('end', () => res.end('uploaded\n'));
      return;
    }
    const body = req.url === '/big' ? big : small;
    res.writeHead(200, { 'Content-Length': body.length, 'Content-Type': 'application/octet-stream' });
    res.end(body);
  })
  .listen(Number(process.argv[2]), '127.0.0.1');
