#!/usr/bin/env bash
# Compares netfold's links in one session, ROUNDS rounds alternating (needs root, iperf3,
# ethtool; a release build of netfold):
#
#   sudo scripts/bench-xdp.sh [NETFOLD] [ROUNDS] [SECONDS]
#
# 1. `netfold serve` against a kernel iperf3 client (iperf3 -c, and -R), the kernel in a
#    namespace at 198.18.49.1:
#    - xdp:     serve --link xdp:VETH   (the kernel's end of the veth with `ethtool -K tx off`:
#                                       XDP sees its frames before checksums are completed)
#    - packet:  serve --link packet:VETH, the same veth settings
#    - packet+: serve --link packet:VETH, the kernel's end with its default offloads (TSO)
#    - tap:     serve --link tap:TAP
# 2. Two namespaces joined by one veth pair (198.18.50.1 client, .2 server), the same pair for
#    every row: netfold at both ends over AF_XDP (`netfold server --link xdp:S`,
#    `netfold stream|rr -H ... --link xdp:C`) against the kernel at both ends
#    (`netfold server` on kernel sockets, `netfold stream|rr -H`), at MTU 1500 and 9000 (frames
#    larger than a UMEM chunk go as multi-buffer frames, XDP_USE_SG).
#
# Prints one line per measurement: `round kind test value unit [cpu...]`.
set -euo pipefail

NETFOLD=${1:-target/release/netfold}
ROUNDS=${2:-3}
SECS=${3:-5}
NETFOLD=$(readlink -f "$NETFOLD")
ID=$$
NS=nfbx$ID
NC=nfbc$ID
NSV=nfbs$ID
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  ip netns del "$NS" 2>/dev/null || true
  ip netns del "$NC" 2>/dev/null || true
  ip netns del "$NSV" 2>/dev/null || true
}
trap cleanup EXIT

ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" link add vk type veth peer name vn
ip -n "$NS" addr add 198.18.49.1/24 dev vk
ip -n "$NS" link set vk up
ip -n "$NS" link set vn up
ip -n "$NS" tuntap add mode tap name nfbt
ip -n "$NS" addr add 198.18.51.1/24 dev nfbt
ip -n "$NS" link set nfbt up

ip netns add "$NC"
ip netns add "$NSV"
ip link add "c$ID" type veth peer name "s$ID"
ip link set "c$ID" netns "$NC"
ip link set "s$ID" netns "$NSV"
ip -n "$NC" link set lo up
ip -n "$NSV" link set lo up
ip -n "$NC" link set "c$ID" up
ip -n "$NSV" link set "s$ID" up

# serve_iperf KIND LINK ADDR: iperf3 both ways against `netfold serve --link LINK`.
serve_iperf() {
  local kind=$1 link=$2 addr=$3 host=${3%/*}
  ip netns exec "$NS" "$NETFOLD" serve --link "$link" --addr "$addr" >/tmp/nfbx-serve-$ID.log 2>&1 &
  local p=$!
  pids+=("$p")
  sleep 1
  for dir in "" "-R"; do
    local out try
    for try in 1 2 3 4 5; do
      # The server takes a moment to finish the previous test ("busy running a test").
      out=$(ip netns exec "$NS" timeout $((SECS + 20)) iperf3 -c "$host" -t "$SECS" -J $dir || true)
      grep -q "server is busy" <<<"$out" || break
      sleep 1
    done
    python3 -c '
import json, sys
v = json.loads(sys.stdin.read())
e = v["end"]
c = e.get("cpu_utilization_percent", {})
print(sys.argv[1], sys.argv[2], "iperf3" + sys.argv[3], "%.0f" % (e["sum_received"]["bits_per_second"] / 1e6), "Mbit/s",
      "client_cpu=%.0f%%" % c.get("host_total", 0), "server_cpu=%.0f%%" % c.get("remote_total", 0))
' "$r" "$kind" "$dir" <<<"$out" || echo "$r $kind iperf3$dir failed: $(head -c 300 <<<"$out")"
  done
  kill -INT "$p"
  wait "$p" || true
  head -1 /tmp/nfbx-serve-$ID.log | sed "s/^/$r $kind # /"
}

# remote KIND TEST [netfold client args...]: `netfold TEST -H 198.18.50.2` from NC.
remote() {
  local kind=$1 test=$2
  shift 2
  local out
  out=$(ip netns exec "$NC" "$NETFOLD" "$test" -H 198.18.50.2 -l "$SECS" --cpu --json "$@" 2>/dev/null || true)
  python3 -c '
import json, sys
v = json.loads(sys.stdin.read())
r = v["results"][0]
if sys.argv[3] == "stream":
    val, unit = "%.0f" % r["throughput_mbps"], "Mbit/s"
else:
    val, unit = "%.0f" % r["trans_per_s"], "trans/s"
d = r["details"]
extra = "client_cpu=%.0f%% server_cpu=%.0f%%" % (100 * d["client_cpu_s"] / r["elapsed_s"], 100 * d["server_cpu_s"] / r["elapsed_s"])
if sys.argv[3] == "rr":
    extra += " p50=%.1fus p99=%.1fus" % (r["latency_us"]["p50"], r["latency_us"]["p99"])
print(sys.argv[1], sys.argv[2], sys.argv[3], val, unit, extra)
' "$r" "$kind" "$test" <<<"$out" || echo "$r $kind $test failed: $(head -c 300 <<<"$out")"
}

for r in $(seq 1 "$ROUNDS"); do
  echo "# round $r: $(uptime)"
  ip netns exec "$NS" ethtool -K vk tx off >/dev/null
  serve_iperf xdp xdp:vn 198.18.49.2/24
  serve_iperf packet packet:vn 198.18.49.2/24
  ip netns exec "$NS" ethtool -K vk tx on tso on >/dev/null
  serve_iperf packet+ packet:vn 198.18.49.2/24
  serve_iperf tap tap:nfbt 198.18.51.2/24

  for mtu in 1500 9000; do
    ip -n "$NC" link set "c$ID" mtu "$mtu"
    ip -n "$NSV" link set "s$ID" mtu "$mtu"
    # netfold at both ends over AF_XDP (no kernel address on the veth).
    ip -n "$NC" addr flush dev "c$ID"
    ip -n "$NSV" addr flush dev "s$ID"
    ip netns exec "$NSV" "$NETFOLD" server --link "xdp:s$ID" --addr 198.18.50.2/24 2>/dev/null &
    sp=$!
    pids+=("$sp")
    sleep 1
    remote "netfold-xdp-$mtu" stream --link "xdp:c$ID" --addr 198.18.50.1/24
    remote "netfold-xdp-$mtu" rr --link "xdp:c$ID" --addr 198.18.50.1/24
    kill -TERM "$sp"
    wait "$sp" || true

    # The kernel at both ends over the same veth pair.
    ip -n "$NC" addr add 198.18.50.1/24 dev "c$ID"
    ip -n "$NSV" addr add 198.18.50.2/24 dev "s$ID"
    ip netns exec "$NSV" "$NETFOLD" server --addr 198.18.50.2 2>/dev/null &
    sp=$!
    pids+=("$sp")
    sleep 1
    remote "kernel-veth-$mtu" stream
    remote "kernel-veth-$mtu" rr
    kill -TERM "$sp"
    wait "$sp" || true
  done
done
