#!/usr/bin/env bash
# The same unmodified programs on the kernel's sockets and on netfold (`netfold run`), in one
# run: iperf3 (server and client), redis-server with redis-benchmark, nginx with wrk.
#
#   sudo scripts/bench-preload.sh [SECONDS]      (default 5 s per iperf3/wrk run)
#
# MODES: the `netfold run --poll` modes measured, in this order (default "thread inline";
# alternate the order between runs, e.g. MODES="inline thread"). OFFLOADS0=0 skips the
# NETFOLD_OFFLOADS=0 iperf3 row.
#
# Every row ends with the TCP segments retransmitted during it, "tools / program": the kernel
# of the namespace running the tools (nstat's TcpRetransSegs in nfbA), then the program's
# side: its kernel's (nfbB) on the kernel rows, netfold's own counters (fast retransmits plus
# RTO retransmits, from NETFOLD_VERBOSE=1's report at exit) on the netfold rows.
#
# Layout (two throw-away namespaces, removed on exit):
#   nfbA: the kernel-side tools; a TAP nfb0 at 198.18.29.1/24 whose other end is the program
#         under `netfold run` at 198.18.29.2; one end of a veth at 198.18.30.1/24.
#   nfbB: the other veth end at 198.18.30.2/24: the same program on the kernel's sockets.
# So "kernel" is kernel-to-kernel over a veth between two namespaces, "netfold" is netfold over
# a TAP to the kernel. Needs root, a release build (cargo build --release -p netfold-preload
# -p netfold-cli), iperf3, redis-server, redis-tools, nginx, wrk, python3.
set -euo pipefail
secs=${1:-5}
modes=${MODES:-thread inline}
root=$(cd "$(dirname "$0")/.." && pwd)
nf="$root/target/release/netfold"
[ -x "$nf" ] && [ -f "$root/target/release/libnetfold_preload.so" ] || {
  echo "build first: cargo build --release -p netfold-preload -p netfold-cli" >&2
  exit 1
}
A=nfbA$$
B=nfbB$$
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.5
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip -n "$A" link set lo up
ip -n "$B" link set lo up
ip -n "$A" tuntap add mode tap name nfb0
ip -n "$A" addr add 198.18.29.1/24 dev nfb0
ip -n "$A" link set nfb0 up
ip -n "$A" link add vnfa type veth peer name vnfb netns "$B"
ip -n "$A" addr add 198.18.30.1/24 dev vnfa
ip -n "$B" addr add 198.18.30.2/24 dev vnfb
ip -n "$A" link set vnfa up
ip -n "$B" link set vnfb up

inA() { ip netns exec "$A" "$@"; }
inB() { ip netns exec "$B" "$@"; }
# netfold run in A (its program is 198.18.29.2 on the TAP); NETFOLD_OFFLOADS as given.
onnf() { ip netns exec "$A" env NETFOLD_OFFLOADS="${OFF:-1}" NETFOLD_VERBOSE=1 "$nf" run --link tap:nfb0 \
  --addr 198.18.29.2/24 --poll "${POLL:-thread}" -- "$@"; }
# bg A|B|nf PROGRAM ARGS: in the background; `ip netns exec`, env and `netfold run` exec
# the program, so $! is its pid.
bg() {
  local where=$1; shift
  case $where in
    A) ip netns exec "$A" "$@" >"$work/bg.log" 2>&1 & ;;
    B) ip netns exec "$B" "$@" >"$work/bg.log" 2>&1 & ;;
    nf) ip netns exec "$A" env NETFOLD_OFFLOADS="${OFF:-1}" NETFOLD_VERBOSE=1 "$nf" run --link tap:nfb0 \
      --addr 198.18.29.2/24 --poll "${POLL:-thread}" -- "$@" >"$work/bg.log" 2>&1 & ;;
  esac
  pids+=($!)
}
stop_bg() { kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; sleep 0.5; }

# Retransmitted segments: a namespace's kernel (absolute, nstat without its history file), and
# netfold's from a NETFOLD_VERBOSE=1 report (only counters that moved are printed).
kretr() { ip netns exec "$1" nstat -asz TcpRetransSegs | awk '$1 == "TcpRetransSegs" {print $2}'; }
nfretr() { awk '$1 == "tcp" && ($2 == "retransmits_fast" || $2 == "retransmits_rto") {n += $3}
  /counters at exit/ {seen = 1} END {print seen ? n + 0 : "?"}' "$1"; }
# retr_start; ...; retr_cell B|nf [LOG]: "tools / program" for the row.
retr_start() { r0A=$(kretr "$A"); r0B=$(kretr "$B"); }
retr_cell() {
  local a=$(( $(kretr "$A") - r0A )) p
  case $1 in
    B) p=$(( $(kretr "$B") - r0B )) ;;
    *) p=$(nfretr "$2") ;;
  esac
  echo "$a / $p"
}

gbps() { python3 -c 'import json,sys; d=json.load(sys.stdin); e=d.get("error")
print("error: "+e if e else "%.2f" % (d["end"]["sum_received"]["bits_per_second"]/1e9))'; }

echo "# $(date -u '+%F %T') UTC, commit $(git -C "$root" rev-parse --short HEAD), modes: $modes"
echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs; $(uptime | sed 's/.*load/load/')"
echo "# $(iperf3 --version | head -1); redis $(redis-server --version | awk '{print $3}'); $(nginx -v 2>&1); wrk $(wrk --version 2>&1 | head -1 | awk '{print $2}')"
echo

echo "## iperf3, ${secs} s each, Gbit/s (received)"
echo "| server | client | client sends | server sends (-R) | retrans. (tools / program) |"
echo "|---|---|---|---|---|"
row_server() { # LABEL ADDR A|B|nf
  local label=$1 addr=$2 where=$3
  bg "$where" iperf3 -s -p 5201
  sleep 1.5
  retr_start
  local up down
  up=$(inA iperf3 -c "$addr" -p 5201 -t "$secs" -J | gbps)
  down=$(inA iperf3 -c "$addr" -p 5201 -t "$secs" -R -J | gbps)
  stop_bg
  echo "| $label | kernel (nfbA) | $up | $down | $(retr_cell "$where" "$work/bg.log") |"
}
row_server "kernel (veth, nfbB)" 198.18.30.2 B
for m in $modes; do
  POLL=$m OFF=1 row_server "netfold run --poll $m (TAP, offloads)" 198.18.29.2 nf
done
if [ "${OFFLOADS0:-1}" != 0 ]; then
  for m in $modes; do
    POLL=$m OFF=0 row_server "netfold run --poll $m (TAP, NETFOLD_OFFLOADS=0)" 198.18.29.2 nf
  done
fi
# The client on netfold, the server the kernel's (nfbA, on the TAP's kernel side).
bg A iperf3 -s -p 5202 -B 198.18.29.1
sleep 1
for m in $modes; do
  retr_start
  up=$(POLL=$m OFF=1 onnf iperf3 -c 198.18.29.1 -p 5202 -t "$secs" -J 2>"$work/c1.log" | gbps)
  down=$(POLL=$m OFF=1 onnf iperf3 -c 198.18.29.1 -p 5202 -t "$secs" -R -J 2>"$work/c2.log" | gbps)
  a=$(( $(kretr "$A") - r0A ))
  p1=$(nfretr "$work/c1.log"); p2=$(nfretr "$work/c2.log")
  if [ "$p1" = "?" ] || [ "$p2" = "?" ]; then p="?"; else p=$((p1 + p2)); fi
  echo "| kernel (nfbA) | netfold run --poll $m (TAP, offloads) | $up | $down | $a / $p |"
done
stop_bg
echo

echo "## redis-benchmark -n 200000 -c 50 -t set,get, requests/s (p50 ms)"
echo "| redis-server | SET | GET | retrans. (tools / program) |"
echo "|---|---|---|---|"
redis_row() { # LABEL ADDR A|B|nf
  local label=$1 addr=$2 where=$3
  bg "$where" redis-server --port 6379 --bind "$addr" --save "" --appendonly no \
    --protected-mode no --dir "$work"
  sleep 1.5
  retr_start
  inA redis-benchmark -h "$addr" -p 6379 -n 200000 -c 50 -t set,get --csv >"$work/r.csv"
  stop_bg
  python3 - "$label" "$work/r.csv" "$(retr_cell "$where" "$work/bg.log")" <<'EOF'
import csv, sys
rows = {r[0]: r for r in csv.reader(open(sys.argv[2])) if r and r[0] != "test"}
cell = lambda t: "%.0f (%s)" % (float(rows[t][1]), rows[t][4]) if t in rows else "-"
print("| %s | %s | %s | %s |" % (sys.argv[1], cell("SET"), cell("GET"), sys.argv[3]))
EOF
}
redis_row "kernel (veth, nfbB)" 198.18.30.2 B
for m in $modes; do
  POLL=$m OFF=1 redis_row "netfold run --poll $m (TAP)" 198.18.29.2 nf
done
echo

echo "## nginx (one process, sendfile on) and wrk -t1 -c10 -d${secs}s --latency, 1 KiB file"
echo "| nginx | requests/s | p50 | p90 | p99 | retrans. (tools / program) |"
echo "|---|---|---|---|---|---|"
mkdir -p "$work/www"
head -c 1024 /dev/urandom >"$work/www/small"
nginx_row() { # LABEL ADDR A|B|nf
  local label=$1 addr=$2 where=$3
  cat >"$work/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1; error_log stderr warn;
pid $work/nginx.pid;
events { worker_connections 256; }
http { access_log off; client_body_temp_path $work/b; proxy_temp_path $work/p;
  fastcgi_temp_path $work/f; uwsgi_temp_path $work/u; scgi_temp_path $work/s;
  server { listen $addr:8084; root $work/www; sendfile on; } }
EOF
  bg "$where" nginx -c "$work/nginx.conf" -e stderr
  sleep 1.5
  retr_start
  inA wrk -t1 -c10 -d"${secs}s" --latency "http://$addr:8084/small" >"$work/wrk.txt"
  stop_bg
  python3 - "$label" "$work/wrk.txt" "$(retr_cell "$where" "$work/bg.log")" <<'EOF'
import re, sys
t = open(sys.argv[2]).read()
rps = re.search(r"Requests/sec:\s+([\d.]+)", t).group(1)
pct = {m.group(1): m.group(2) for m in re.finditer(r"^\s+(50|90|99)%\s+(\S+)", t, re.M)}
print("| %s | %.0f | %s | %s | %s | %s |" % (sys.argv[1], float(rps), pct.get("50"), pct.get("90"), pct.get("99"), sys.argv[3]))
EOF
}
nginx_row "kernel (veth, nfbB)" 198.18.30.2 B
for m in $modes; do
  POLL=$m OFF=1 nginx_row "netfold run --poll $m (TAP)" 198.18.29.2 nf
done
