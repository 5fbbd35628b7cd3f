#!/bin/bash
# Instructions, simulated L1i misses and branch mispredicts per transaction of a netperf-style
# test, from valgrind (deterministic: no hardware counters needed). The difference between a
# long and a short run removes start-up (kernel calibration, handshake).
#
#   scripts/per-transaction-counts.sh [BINARY] [TEST] [STACK]
#   scripts/per-transaction-counts.sh target/release/netfold rr netfold
#   scripts/per-transaction-counts.sh target/release/netfold crr smoltcp
#
# valgrind has no AVX-512, so the kernels are pinned to AVX2 (the counts of the kernels
# themselves differ from a native run; the stack's do not).
set -euo pipefail
B=${1:-target/release/netfold}
T=${2:-rr}
S=${3:-netfold}
case $T in
  crr) SHORT=10000; LONG=30000 ;;
  *) SHORT=50000; LONG=150000 ;;
esac
run() {
  NETFOLD_KERNELS=copy=avx2,csum=avx2,fused=avx2 valgrind --tool=cachegrind --cache-sim=yes \
    --branch-sim=yes --cachegrind-out-file=/dev/null "$B" "$T" --stack "$S" --placement 1cpu \
    --transactions "$1" 2>&1 >/dev/null | python3 -c '
import sys
d = {}
for l in sys.stdin:
    for k, pat in (("ir", "I   refs:"), ("i1", "I1  misses:"), ("mp", "Mispredicts:")):
        if pat in l:
            d[k] = int(l.split(pat)[1].split()[0].replace(",", ""))
print(d["ir"], d["i1"], d["mp"])'
}
read -r a_ir a_i1 a_mp < <(run $SHORT)
read -r b_ir b_i1 b_mp < <(run $LONG)
n=$((LONG - SHORT))
echo "$S $T per transaction: instructions $(((b_ir - a_ir) / n))  L1i misses $(((b_i1 - a_i1) / n))  mispredicts $(((b_mp - a_mp) / n))"
