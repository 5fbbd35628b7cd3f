#!/bin/bash
# Profile-guided build of the `netfold` command (LLVM PGO through rustc's -Cprofile-generate /
# -Cprofile-use), into target/pgo/netfold.
#
#   scripts/pgo-build.sh            # build, train, rebuild
#   target/pgo/netfold rr --stack netfold,smoltcp --placement 1cpu
#
# Why: a TCP_RR transaction runs ~10,000 instructions spread over the whole stack (iface,
# TCP input and output, timers, the link). In the plain release build its hot code is ~23 KiB
# of instructions scattered over ~37 KiB of cache lines, more than the 32 KiB L1 instruction
# cache; with a profile LLVM lays the hot blocks out together (24 KiB of lines) and the
# simulated L1i misses per transaction fall ~15x (docs/BENCHMARKS.md, "Header
# prediction, the link's fence, and code layout").
#
# The training runs both stacks of the comparison (netfold and smoltcp, one binary) through
# the same tests, so both get the same treatment; every JSON result (`machine.build`:
# `release+pgo`) and the paper report say which build they measured.
# Code the training does not run (TAP, the C API, loss recovery) is laid out as cold:
# it stays correct, and may be slower than in the plain build.
#
# Needs llvm-profdata of the LLVM that rustc uses (`rustc -vV`: "LLVM version"): rustup's
# llvm-tools component, or Debian's llvm-<major> package (apt-get install llvm-22 for rustc
# 1.95's LLVM 22), or LLVM_PROFDATA=/path/to/llvm-profdata.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/target/pgo
major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata=${LLVM_PROFDATA:-}
if [ -z "$profdata" ]; then
  for c in "$sysroot/lib/rustlib/$host/bin/llvm-profdata" "/usr/lib/llvm-$major/bin/llvm-profdata" \
    "$(command -v "llvm-profdata-$major" || true)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then
      profdata=$c
      break
    fi
  done
fi
if [ -z "$profdata" ]; then
  echo "pgo-build: no llvm-profdata for LLVM $major (rustc's); install one of:" >&2
  echo "  rustup component add llvm-tools" >&2
  echo "  apt-get install llvm-$major" >&2
  echo "or set LLVM_PROFDATA=/path/to/llvm-profdata" >&2
  exit 1
fi
echo "pgo-build: LLVM $major, $profdata"

rm -rf "$out/profiles"
mkdir -p "$out"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$out/profiles" \
  cargo build --release -p netfold-cli --target-dir "$out/gen"
gen=$out/gen/release/netfold

# The training set: request/response, connection churn and bulk transfer, one thread and
# two, IPv4 and IPv6, both stacks where the test has both. A second each.
train() {
  echo "pgo-build: training: netfold $*"
  "$gen" "$@" -l "${PGO_TRAIN_SECONDS:-1}" >/dev/null
}
for t in rr crr; do
  train "$t" --stack netfold,smoltcp --placement 1cpu
  train "$t" --stack netfold --family 6 --placement 1cpu
done
train stream -m 64K --stack netfold,smoltcp --placement 1cpu
train stream --stack netfold,smoltcp --placement 1cpu
train maerts -m 64K --stack netfold --placement 1cpu
train stream -m 64K --stack netfold --threads 2
train rr --stack netfold --threads 2

"$profdata" merge -o "$out/netfold.profdata" "$out/profiles"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$out/netfold.profdata" \
  cargo build --release -p netfold-cli --target-dir "$out/use"
cp "$out/use/release/netfold" "$out/netfold"
echo "pgo-build: $out/netfold"
