#!/usr/bin/env bash
# CI for the fuzz targets: installs cargo-fuzz if missing (pinned), builds every target and runs
# each for FUZZ_SECONDS (default 10) from its corpus directory; any crash fails the script (the
# crashing input is left in fuzz/artifacts/<target>/). cargo-fuzz needs nightly flags; on a
# stable toolchain RUSTC_BOOTSTRAP=1 enables them.
set -euo pipefail
cd "$(dirname "$0")"

CARGO_FUZZ_VERSION=0.13.1
SECONDS_PER_TARGET=${FUZZ_SECONDS:-10}
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  cargo install --locked "cargo-fuzz@$CARGO_FUZZ_VERSION"
fi

cargo fuzz build -O
failed=""
for t in $(cargo fuzz list); do
  mkdir -p "corpus/$t"
  echo "== fuzz $t (${SECONDS_PER_TARGET} s)"
  # -timeout: one input taking more than 10 s is a hang, reported as a failure.
  log="$(mktemp)"
  rc=0
  cargo fuzz run -O "$t" "corpus/$t" -- \
    -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
    >"$log" 2>&1 || rc=$?
  grep -E '^(#[0-9]+ +DONE|Done|DIFF |==[0-9]+==|SUMMARY|thread .* panicked)' "$log" || true
  if [ "$rc" != 0 ]; then
    tail -40 "$log"
    failed="$failed $t"
  fi
  rm -f "$log"
done
if [ -n "$failed" ]; then
  echo "fuzz: crashes in:$failed (inputs in fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz: all targets ran clean"
