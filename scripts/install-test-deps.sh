#!/usr/bin/env bash
# Installs (on Debian or Ubuntu, with apt-get) the programs netfold's tests use besides Rust,
# only those missing: without them the tests that need them print `SKIPPED: ...` and pass.
#
#   sudo scripts/install-test-deps.sh
#
# - TAP/TUN/netns tests (root): ip and ss (iproute2), ping (iputils-ping), python3 (the
#   kernel-side peers), sysctl (procps: IPv6 set-up in a namespace), kill (procps), ethtool
#   (AF_XDP tests: transmit checksumming off on the kernel's end of a veth);
# - packet captures: tshark;
# - `netfold serve`/`server` tests: iperf3, curl, sha256sum and timeout (coreutils);
# - C API tests: gcc, nm (binutils);
# - `netfold run` (the LD_PRELOAD library) tests: redis-server and redis-cli/redis-benchmark
#   (redis-server, redis-tools), nginx (nginx-light), besides curl, iperf3 and python3;
# - the packetdrill conformance suite: unshare (util-linux), gcc, and packetdrill itself, which
#   is not a Debian package (`../shared/tools/packetdrill` beside the checkout, or $PACKETDRILL).
set -euo pipefail

missing=""
need() { # need COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 || case " $missing " in
    *" $2 "*) ;;
    *) missing="$missing $2" ;;
  esac
}
need ip iproute2
need ss iproute2
need ping iputils-ping
need python3 python3
need tshark tshark
need iperf3 iperf3
need curl curl
need sha256sum coreutils
need timeout coreutils
need sysctl procps
need kill procps
need ethtool ethtool
need unshare util-linux
need gcc gcc
need nm binutils
need redis-server redis-server
need redis-cli redis-tools
need redis-benchmark redis-tools
need nginx nginx-light

if [ -z "$missing" ]; then
  echo "install-test-deps: everything the tests use is installed"
  exit 0
fi
echo "install-test-deps: missing:$missing"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: no apt-get here (not Debian/Ubuntu); install the packages above yourself" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-test-deps: needs root to install packages: sudo $0" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; the default (no) is fine for the tests.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections \
  2>/dev/null || true
apt-get update -qq
# shellcheck disable=SC2086 # one word per package
apt-get install -y -qq $missing >/dev/null
echo "install-test-deps: installed$missing"
