#!/usr/bin/env bash
# Opens the admin status page (/status) in headless Chromium while traffic flows, saves a screenshot,
# stops one backend, waits until the page says DOWN, saves a second screenshot, and checks with
# --dump-dom that the rendered table lists both upstreams and a DOWN state.
#
#   scripts/status-page-screenshot.sh [OUT_DIR]     (default docs/; writes status-page.png and status-page-down.png)
#
# Installs Debian's `chromium` with apt-get when it is missing (needs root). Every process it starts
# is stopped by pid on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${1:-docs}"
mkdir -p "$OUT_DIR"

if ! command -v chromium >/dev/null 2>&1; then
  echo "chromium not found: installing Debian's chromium package" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

npx tsc -p tsconfig.json

WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }
B1=$(free_port); B2=$(free_port); PROXY=$(free_port); ADMIN=$(free_port)

backend() { # name port
  node -e "require('http').createServer((q,s)=>setTimeout(()=>s.end('$1\n'),Math.random()*30)).listen($2,'127.0.0.1')" &
  PIDS+=($!)
}
backend web1 "$B1"; B1_PID=$!
backend web2 "$B2"; B2_PID=$!

cat > "$WORK/env.ini" <<INI
[server]
listen = 127.0.0.1:$PROXY
access_log = off

[admin]
listen = 127.0.0.1:$ADMIN
token = screenshot-token

[proxy.app]
path = /
pass = http://127.0.0.1:$B1 weight=3
pass = http://127.0.0.1:$B2 weight=1
strategy = smooth-weighted-round-robin
health_check = on
health_interval = 1s
health_timeout = 500ms
health_fall = 2
INI

node dist/main.js --config "$WORK/env.ini" 2>"$WORK/proxy.log" &
PIDS+=($!)

for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:$ADMIN/status.json" >/dev/null 2>&1 && break; sleep 0.1; done

# Traffic: about 25 requests a second until the script ends.
node -e "
const http = require('http');
setInterval(() => http.get({ host: '127.0.0.1', port: $PROXY, path: '/', agent: false }, (r) => r.resume()).on('error', () => {}), 40);
" &
PIDS+=($!)
sleep 3

shoot() { # output-file [extra flags]
  local out="$1"; shift
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$(mktemp -d -p "$WORK")" "$@" \
    "http://127.0.0.1:$ADMIN/status" 2>/dev/null
}

# --virtual-time-budget lets the page poll status.json a few times, so the sparklines have points.
shoot x --screenshot="$OUT_DIR/status-page.png" --window-size=1200,800 --virtual-time-budget=4000 >/dev/null
echo "saved $OUT_DIR/status-page.png"

kill "$B2_PID"
echo "stopped web2 (127.0.0.1:$B2); waiting for DOWN" >&2
for _ in $(seq 1 100); do
  curl -fs "http://127.0.0.1:$ADMIN/status.json" | grep -q '"state": "DOWN"' && break
  sleep 0.1
done
sleep 1

shoot x --screenshot="$OUT_DIR/status-page-down.png" --window-size=1200,800 --virtual-time-budget=4000 >/dev/null
echo "saved $OUT_DIR/status-page-down.png"

DOM="$(shoot x --dump-dom --virtual-time-budget=2000)"
fail=0
for address in "127.0.0.1:$B1" "127.0.0.1:$B2"; do
  grep -q "$address" <<<"$DOM" || { echo "FAIL: the status table does not list $address" >&2; fail=1; }
done
grep -q 'class="state state-DOWN">DOWN<' <<<"$DOM" || { echo "FAIL: the status table shows no DOWN state" >&2; fail=1; }
grep -q 'class="state state-UP">UP<' <<<"$DOM" || { echo "FAIL: the status table shows no UP state" >&2; fail=1; }
if [ "$fail" = 0 ]; then
  echo "OK: the status table lists 127.0.0.1:$B1 (UP) and 127.0.0.1:$B2 (DOWN)"
fi
echo "--- proxy log ---" >&2
cat "$WORK/proxy.log" >&2
exit "$fail"
