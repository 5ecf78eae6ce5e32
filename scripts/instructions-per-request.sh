#!/usr/bin/env bash
# Instructions (user space) this proxy runs per proxied request, counted by valgrind's callgrind:
# repeatable within about 1% whatever else the machine does, where req/s on a shared VM moves 2-3x
# between runs (docs/performance.md, "Counting instructions"). For comparing two builds, not peers.
#
#   scripts/instructions-per-request.sh [DIST] [get|post] [N]      (defaults: ./dist get 3000)
#
# nginx (one worker) answers on 127.0.0.1 as the backend; the proxy runs under
# `valgrind --tool=callgrind --instr-atstart=no` with `node --single-threaded`; a client in its own
# process sends WARM requests (default 6000) over 8 keep-alive connections, then counting is
# switched on (`callgrind_control -i on`) for N more on one connection, one at a time (so that
# every request costs the same reads and writes). Printed: instructions per request
# without V8's compiler (under valgrind it still compiles in the counted window; a real run settles
# in its first second), and the totals. KEEP=FILE keeps the profile for callgrind_annotate. Needs valgrind and nginx (apt-get install valgrind nginx-light).
set -euo pipefail
DIST=$(realpath "${1:-dist}"); MODE=${2:-get}; N=${3:-3000}; WARM=${WARM:-6000}
BACKEND_PORT=${BACKEND_PORT:-18190}; PORT=${PORT:-18191}
for tool in valgrind callgrind_control callgrind_annotate nginx; do
  command -v "$tool" >/dev/null || { echo "$0: $tool is not installed" >&2; exit 1; }
done
WORK=$(mktemp -d)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

cat > "$WORK/nginx.conf" <<CONF
worker_processes 1; daemon off; pid $WORK/nginx.pid; error_log $WORK/error.log;
events { worker_connections 1024; }
http { access_log off; keepalive_requests 1000000; client_body_temp_path $WORK/body;
  server { listen 127.0.0.1:$BACKEND_PORT; location / { return 200 "hello world\n"; } }
}
CONF
nginx -c "$WORK/nginx.conf" >/dev/null 2>&1 & PIDS+=($!)
printf '[server]\nlisten = 127.0.0.1:%s\naccess_log = off\nkeepalive_timeout = 120s\n[proxy.all]\npath = /\npass = http://127.0.0.1:%s\n' "$PORT" "$BACKEND_PORT" > "$WORK/proxy.ini"

cat > "$WORK/client.mjs" <<'JS'
// N requests over C keep-alive connections, each one at a time; exits when done. args: port N C get|post
import net from 'node:net';
const [port, total, connections, mode] = [Number(process.argv[2]), Number(process.argv[3]), Number(process.argv[4]), process.argv[5]];
const request = mode === 'post'
  ? Buffer.concat([Buffer.from('POST /post HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\nContent-Length: 65536\r\n\r\n'), Buffer.alloc(65536, 'p')])
  : Buffer.from('GET /small HTTP/1.1\r\nHost: localhost\r\nUser-Agent: counter\r\n\r\n');
let left = total;
let open = connections;
for (let c = 0; c < connections; c++) {
  let received = '';
  const socket = net.connect(port, '127.0.0.1', next);
  function next() { if (left-- > 0) socket.write(request); else socket.end(); }
  socket.setEncoding('latin1');
  socket.on('data', (text) => {
    received += text;
    for (;;) {
      const end = received.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = Number(/content-length: *(\d+)/i.exec(received.slice(0, end))?.[1] ?? 0);
      if (received.length < end + 4 + length) return;
      received = received.slice(end + 4 + length);
      next();
    }
  });
  socket.on('close', () => { if (--open === 0) process.exit(0); });
  socket.on('error', (error) => { console.error(error.message); process.exit(1); });
}
JS
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/callgrind.out" --dump-instr=no \
  node --single-threaded "$DIST/main.js" --config "$WORK/proxy.ini" > "$WORK/proxy.log" 2>&1 & VALGRIND=$!
PIDS+=($VALGRIND)
for _ in $(seq 1 240); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.5; done
node "$WORK/client.mjs" "$PORT" "$WARM" 8 "$MODE"
callgrind_control -i on "$VALGRIND" >/dev/null
node "$WORK/client.mjs" "$PORT" "$N" 1 "$MODE"
callgrind_control -i off "$VALGRIND" >/dev/null
callgrind_control -d "$VALGRIND" >/dev/null
kill -INT "$VALGRIND"; wait "$VALGRIND" || true
[ -n "${KEEP:-}" ] && cp "$WORK/callgrind.out.1" "$KEEP" # the profile, for callgrind_annotate
callgrind_annotate --inclusive=no --threshold=100 "$WORK/callgrind.out.1" 2>/dev/null | awk -v n="$N" -v dist="$DIST" -v mode="$MODE" '
  /PROGRAM TOTALS/ { next }
  match($0, /^ *[0-9,]+ \(/) { count = substr($0, RSTART, RLENGTH - 2); gsub(/[ ,]/, "", count); total += count
    if ($0 ~ /compiler::|maglev|Compiler|Turbofan/) compile += count }
  END { printf "%s %s: %d instructions per request without the JIT compiler (total %d, compiler %d; %d requests)\n", dist, mode, (total - compile) / n, total / n, compile / n, n }'
