/*
 * fuzz_corpus.h -- the ctest form of a fuzz target (built without KVT_LIBFUZZER): replays each
 * file of the corpus `make fuzz` grew, where a crasher found is also kept, through the
 * target's LLVMFuzzerTestOneInput. Included once, by the target's own file.
 */
#ifndef KVT_FUZZ_CORPUS_H
#define KVT_FUZZ_CORPUS_H
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Replays every file of dir (64 KiB of each at most); exits 1 when dir cannot be opened.
 * @return : how many. */
static long fuzz_replay_corpus(const char *dir)
{
	DIR *dp = opendir(dir);
	if (!dp) {
		fprintf(stderr, "corpus %s: cannot open\n", dir);
		exit(1);
	}
	static uint8_t in[1 << 16];
	long n = 0;
	for (struct dirent *e; (e = readdir(dp));) {
		char path[4096];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		FILE *f = fopen(path, "rb");
		if (!f)
			continue;
		size_t len = fread(in, 1, sizeof(in), f);
		fclose(f);
		LLVMFuzzerTestOneInput(in, len);
		n++;
	}
	closedir(dp);
	return n;
}
#endif
