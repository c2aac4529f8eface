#!/bin/bash
# gpu-check.sh -- the checks that need a GPU, on a machine that has one but not the project's
# Debian packages (a lent device machine: CUDA and compute-sanitizer, nothing else of ours).
#
#   tools/gpu-check.sh pack [BUILD] [DIR]  here, after a build with CUDA: copies the GPU tests,
#                                          kvtier-bench-gpu and the two libraries they need
#                                          (cudart, cmocka) into DIR (.dev), which git must
#                                          ignore (.git/info/exclude)
#   DIR/gpu-check.sh run                   there: test_gpu, test_gpu_device (also under
#                                          compute-sanitizer, and with KVTIER_GPU_BATCH=off),
#                                          kvtier bench gpu; outputs under $OUT when set
#
# Exits non-zero when a test fails or the sanitizer finds an error. The H200 run of
# 2026-12-04 is in docs/bench.md ("GPU copies").
set -u
case "${1:-}" in
pack)
	BUILD=${2:-build}
	DIR=${3:-.dev}
	set -e
	mkdir -p "$DIR/lib"
	cp "$BUILD/tests/test_gpu" "$BUILD/tests/test_gpu_device" "$BUILD/bin/kvtier-bench-gpu" "$DIR/"
	for l in libcudart.so.13 libcudart.so.12 libcmocka.so.0; do
		p=$(ldd "$BUILD/tests/test_gpu_device" | awk -v l="$l" '$1 == l { print $3 }')
		[ -n "$p" ] && cp -L "$p" "$DIR/lib/"
	done
	cp "$0" "$DIR/gpu-check.sh"
	echo "packed into $DIR ($(du -sh "$DIR" | cut -f1)); carry it and run: bash $DIR/gpu-check.sh run"
	;;
run)
	cd "$(dirname "$0")" || exit 1
	export LD_LIBRARY_PATH="$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	OUT=${OUT:-$(mktemp -d)}
	fail=0
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	./test_gpu > "$OUT/test_gpu.txt" 2>&1 || { echo "test_gpu failed"; fail=1; }
	./test_gpu_device > "$OUT/test_gpu_device.txt" 2>&1
	rc=$?
	grep -E 'OK|FAILED|PASSED|SKIP' "$OUT/test_gpu_device.txt"
	[ $rc -eq 0 ] || { echo "test_gpu_device: rc $rc"; fail=1; }
	KVTIER_GPU_BATCH=off ./test_gpu_device > "$OUT/test_gpu_device_loop.txt" 2>&1 ||
		{ echo "test_gpu_device, KVTIER_GPU_BATCH=off, failed"; fail=1; }
	if command -v compute-sanitizer > /dev/null; then
		timeout 300 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
			--target-processes all ./test_gpu_device > "$OUT/sanitizer.txt" 2>&1
		grep -E 'SUMMARY' "$OUT/sanitizer.txt"
		grep -q 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.txt" || { echo "sanitizer: errors"; fail=1; }
	fi
	timeout 300 ./kvtier-bench-gpu | tee "$OUT/bench_gpu.txt"
	exit $fail
	;;
*)
	sed -n '2,13p' "$0"
	exit 2
	;;
esac
