#!/bin/sh
# valgrind-daemon.sh -- runs the daemon-level integration tests with every kvtierd under
# valgrind memcheck and fails on any error or definite leak in the daemon.
# The nvme tier uses its pread/pwrite backend here: valgrind does not model buffers that
# io_uring fills, and reports every byte read that way as uninitialised.
set -eu
BUILD=${1:-build}
LOGS=$(mktemp -d /tmp/kvt-valgrind-XXXXXX)
export KVT_BIN_DIR="$PWD/$BUILD/bin" KVTIER_NVME_BACKEND=pio
export KVT_TEST_DAEMON_WRAPPER="valgrind --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite --log-file=$LOGS/kvtierd.%p.log"
for t in test_ipc test_robust test_tiers test_policyctl test_operator test_record test_daemon_model; do
	"$BUILD/tests/$t" > "$LOGS/$t.out" 2>&1 || { echo "$t failed (see $LOGS/$t.out)"; exit 1; }
done
bad=$(grep -lE "ERROR SUMMARY: [1-9]|definitely lost: [1-9]" "$LOGS"/kvtierd.*.log || true)
n=$(ls "$LOGS"/kvtierd.*.log | wc -l)
if [ -n "$bad" ]; then
	echo "valgrind found errors in: $bad"
	exit 1
fi
echo "valgrind: $n daemon runs, 0 errors, 0 bytes definitely lost (logs in $LOGS)"
