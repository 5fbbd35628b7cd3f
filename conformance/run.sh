#!/usr/bin/env bash
# netfold's TCP conformance suite: runs every conformance/scripts/*.pkt with packetdrill against
# netfold through the --so_filename shim (conformance/shim/nf_packetdrill.c), each inside its own
# network namespace (`unshare -n`) so that nothing can leave the machine.
#
# Usage: conformance/run.sh [--kernel] [SCRIPT...]
#   (no args)  every script in conformance/scripts/
#   --kernel   run the scripts against this machine's Linux kernel instead (packetdrill's tun
#              mode, still inside `unshare -n`): checks that a script describes what Linux does.
# Environment:
#   PACKETDRILL     packetdrill binary (default: ../shared/tools/packetdrill beside the repo)
#   NETFOLD_LIBDIR  directory holding a built libnetfold.so (default: build it with cargo)
#   PD_TIMEOUT      seconds per script (default 300)
#   PD_ARGS         more packetdrill arguments (e.g. the -D definitions Linux's scripts expect)
#
# Output: one line per script, then "N passed, M failed". Scripts listed in
# conformance/known-failures.txt (netfold defects being fixed) may fail without failing the
# run; they are listed loudly, and a listed script that passes is reported. Exit status: 0 if
# no unlisted script failed, 1 otherwise, 77 if the suite cannot run here (skipped).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"

kernel=0
if [ "${1:-}" = "--kernel" ]; then kernel=1; shift; fi

skip() { echo "conformance: SKIPPED: $*" >&2; exit 77; }

pd="${PACKETDRILL:-$repo/../shared/tools/packetdrill}"
[ -x "$pd" ] || skip "no packetdrill binary at $pd"
command -v unshare >/dev/null 2>&1 || skip "no unshare (util-linux)"
[ "$(id -u)" = 0 ] || skip "not root (unshare -n needs CAP_SYS_ADMIN)"
unshare -n true 2>/dev/null || skip "unshare -n not permitted here"

# The addresses: netfold (local) 198.18.0.1, packetdrill's remote peer 198.18.0.2, both in
# 198.18.0.0/15 (RFC 2544 benchmarking range), the only range this project uses.
addrs=(--local_ip=198.18.0.1 --remote_ip=198.18.0.2)

preload=""
if [ "$kernel" = 1 ]; then
  [ -c /dev/net/tun ] || skip "no /dev/net/tun for --kernel"
  # packetdrill routes the remote address via a gateway on tun0's subnet.
  # No --strict_segments: the kernel sends TSO bursts through the tun device, so its segment
  # sizes cannot be compared in this mode.
  mode=("${addrs[@]}" --gateway_ip=198.18.0.3 --netmask_ip=255.255.255.0)
else
  command -v gcc >/dev/null 2>&1 || skip "no gcc to build the shim"
  libdir="${NETFOLD_LIBDIR:-}"
  if [ -z "$libdir" ]; then
    (cd "$repo" && cargo build -q -p netfold-ffi --lib) || { echo "conformance: cargo build failed" >&2; exit 1; }
    libdir="$repo/target/debug"
  fi
  [ -f "$libdir/libnetfold.so" ] || { echo "conformance: no libnetfold.so in $libdir" >&2; exit 1; }
  out="$libdir/conformance"
  mkdir -p "$out"
  shim="$out/libnf_packetdrill.so"
  gcc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$shim" "$here/shim/nf_packetdrill.c" \
    -I"$repo/include" -L"$libdir" -lnetfold -lpthread -Wl,-rpath,"$libdir" \
    || { echo "conformance: building the shim failed" >&2; exit 1; }
  # --strict_segments: every segment netfold sends must match one script line (without it
  # packetdrill merges consecutive segments as if they were one TSO burst, hiding segment sizes
  # and extra pure ACKs).
  # NF_STRICT_SEGMENTS=0 drops it, for scripts written against Linux with TSO (one line per
  # burst).
  strict=(--strict_segments)
  if [ "${NF_STRICT_SEGMENTS:-1}" = 0 ]; then strict=(); fi
  # --send_omit_free: packetdrill frees a send's buffer when the call returns, which Linux
  # allows for MSG_ZEROCOPY (it pins the pages); netfold reads a lent buffer in place until
  # its notification, so the buffers are kept for the run.
  mode=("${addrs[@]}" "${strict[@]}" --send_omit_free --so_filename="$shim")
  # Preloaded too, so that the getsockopt calls of `%{ }%` code blocks (TCP_INFO, ...) reach
  # netfold's sockets instead of the host's (see the shim's getsockopt).
  preload="$shim"
  # The library just built, not another libnetfold.so an outer LD_LIBRARY_PATH points at
  # (`cargo test` puts target/<profile>/deps first, which may hold an older build).
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# shellcheck disable=SC2206 # PD_ARGS is split into words on purpose.
extra=(${PD_ARGS:-})
mode+=("${extra[@]}")

if [ $# -gt 0 ]; then scripts=("$@"); else scripts=("$here"/scripts/*.pkt); fi

# known-failures.txt: "<script>.pkt  <defect>" per line; '#' starts a comment.
declare -A known=()
if [ "$kernel" = 0 ] && [ -f "$here/known-failures.txt" ]; then
  while read -r name why; do
    case "$name" in ''|'#'*) continue ;; esac
    known["$name"]="$why"
  done < "$here/known-failures.txt"
fi

pass=0; fail=0; kfail=0; kpass=0
unexpected=(); fixed=()
for s in "${scripts[@]}"; do
  name="$(basename "$s")"
  log="$(cd "$(dirname "$s")" && timeout "${PD_TIMEOUT:-300}" unshare -n env ${preload:+LD_PRELOAD="$preload"} "$pd" "${mode[@]}" "$(basename "$s")" 2>&1)"
  rc=$?
  first="$(printf '%s' "$log" | grep -v '^$' | head -n 3 | tr '\n' ' ' | cut -c1-300)"
  if [ $rc = 0 ]; then
    pass=$((pass + 1))
    if [ -n "${known[$name]:-}" ]; then
      kpass=$((kpass + 1)); fixed+=("$name")
      echo "PASS   $name   (listed in known-failures.txt: now passes, remove it)"
    else
      echo "PASS   $name"
    fi
  else
    fail=$((fail + 1))
    if [ -n "${known[$name]:-}" ]; then
      kfail=$((kfail + 1))
      echo "KNOWN  $name   [${known[$name]}]   $first"
    else
      unexpected+=("$name")
      echo "FAIL   $name   (rc $rc) $first"
    fi
  fi
done

echo "$pass passed, $fail failed ($kfail known failures from known-failures.txt, ${#unexpected[@]} unexpected; $kpass listed scripts now pass)"
[ ${#fixed[@]} -gt 0 ] && echo "listed in known-failures.txt but passing: ${fixed[*]}"
[ ${#unexpected[@]} -gt 0 ] && { echo "UNEXPECTED FAILURES: ${unexpected[*]}"; exit 1; }
exit 0
