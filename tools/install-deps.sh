#!/bin/sh
# install-deps.sh -- installs the Debian 12 packages kvtier builds and tests with.
# Idempotent: packages already present are not downloaded again. Needs root (or sudo).
set -eu
PKGS="build-essential cmake pkg-config liburing-dev librocksdb-dev libjemalloc-dev libcmocka-dev
libxxhash-dev libhiredis-dev libzstd-dev redis-server redis-tools fio python3 valgrind"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "kvtier: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
