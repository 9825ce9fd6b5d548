#!/usr/bin/env bash
# The README's curl walkthrough, run against `npm start` on a free loopback port, with
# every status (and the additions' key fields) checked. Stops the server it started (its
# whole process group) on exit. `bash scripts/walkthrough.sh --env sharded` runs it on the
# four databases of the `sharded` environment (npm start and session:create both get --env).
set -euo pipefail
cd "$(dirname "$0")/.."
env_args=()
if [ "${1:-}" = "--env" ]; then env_args=(--env "$2"); fi

port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
base="http://127.0.0.1:$port"
log=$(mktemp)
body=$(mktemp)
setsid npm start -- ${env_args[@]+"${env_args[@]}"} --ip 127.0.0.1 --port "$port" >"$log" 2>&1 &
server=$!
trap 'kill -- -"$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -f "$log" "$body"' EXIT

for _ in $(seq 1 120); do
  curl -s -o /dev/null "$base/" && break
  sleep 0.5
done
curl -s -o /dev/null "$base/" || { cat "$log"; echo "walkthrough: server did not start"; exit 1; }

expect_status() { # expected, then curl arguments; the body is left in $body
  local expected=$1 status
  shift
  status=$(curl -s -o "$body" -w '%{http_code}' "$@") || true
  if [ "$status" != "$expected" ]; then
    echo "walkthrough: expected $expected, got $status for: curl $*"
    cat "$body"
    exit 1
  fi
  echo "  $expected  curl $*"
}

expect_body() { # a JavaScript expression over `b`, the last JSON body
  node -e 'const b = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    if (!eval(process.argv[2])) { console.error("walkthrough: body fails " + process.argv[2], b); process.exit(1); }' "$body" "$1"
  echo "       body: $1"
}

token_of() { node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(0, "utf8"))[process.argv[1]])' "$1"; }

user="walkthrough-$(date +%s%N)"
laptop=$(npm run --silent session:create -- ${env_args[@]+"${env_args[@]}"} --user "$user" --country DE --city Berlin --user-agent "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36" 2>/dev/null)
phone=$(npm run --silent session:create -- ${env_args[@]+"${env_args[@]}"} --user "$user" --ip 198.51.100.4 2>/dev/null)
tablet=$(npm run --silent session:create -- ${env_args[@]+"${env_args[@]}"} --user "$user" --ttl 3600 2>/dev/null)
TOKEN=$(token_of token <<<"$laptop")
PHONE_ID=$(token_of id <<<"$phone")
PHONE_TOKEN=$(token_of token <<<"$phone")
TABLET_TOKEN=$(token_of token <<<"$tablet")

expect_status 200 "$base/auth/sessions" -H "Authorization: Bearer $TOKEN"
expect_body 'b.sessions.length === 3 && b.sessions[2].name === "Chrome 131 on macOS · 127.0.0.1" && b.sessions[2].location === "Berlin, DE" && b.sessions[2].device.type === "desktop" && b.sessions[2].last_active_at'
expect_status 200 -X DELETE "$base/auth/sessions/$PHONE_ID" -H "Authorization: Bearer $TOKEN"
expect_status 401 "$base/auth/sessions" -H "Authorization: Bearer $PHONE_TOKEN"
expect_status 405 "$base/auth/logout" -H "Authorization: Bearer $TOKEN"
expect_status 200 -X DELETE "$base/auth/logout?scope=others" -H "Authorization: Bearer $TOKEN"
expect_body 'b.message === "Logged out of 1 other session"'
expect_status 401 "$base/auth/sessions" -H "Authorization: Bearer $TABLET_TOKEN"
expect_status 200 "$base/auth/events" -H "Authorization: Bearer $TOKEN"
expect_body 'JSON.stringify(b.events.map((e) => e.type)) === JSON.stringify(["logout_others", "deleted", "created", "created", "created"])'
expect_status 200 -X POST "$base/auth/logout" -H "Cookie: __Host-session=$TOKEN"
TOKEN=$(npm run --silent session:create -- ${env_args[@]+"${env_args[@]}"} --user "$user" 2>/dev/null | token_of token)
expect_status 200 -X DELETE "$base/auth/logout" -H "Authorization: Bearer $TOKEN"
expect_status 401 "$base/auth/sessions" -H "Authorization: Bearer $TOKEN"
expect_status 200 "$base/openapi.json"
expect_body 'b.openapi === "3.1.0"'
# Rate limiting: refused tokens from one client IP, past 30 a minute, become 429. The IP is
# a fresh one (wrangler dev keeps a client's CF-Connecting-IP, and its limiter counts
# persist in .wrangler/state), so reruns and the browser test start from zero.
client_ip="2001:db8::$(printf '%x:%x' $((RANDOM)) $((RANDOM)))"
for _ in $(seq 1 30); do
  curl -s -o /dev/null "$base/auth/sessions" -H "Authorization: Bearer $TOKEN" -H "CF-Connecting-IP: $client_ip"
done
expect_status 429 "$base/auth/sessions" -H "Authorization: Bearer $TOKEN" -H "CF-Connecting-IP: $client_ip"
echo "walkthrough: ok"
