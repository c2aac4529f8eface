/* options.c -- the options table of options_list.h and its parsers. */
#include "options.h"
#include "util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static const struct kvt_opt_def defs[KVT_OPT__COUNT] = {
#define KVT_OPT_DEF(id, name, type, def, min, max, rt, help)                                       \
	[KVT_OPT_##id] = {name, KVT_OPT_##type, def, min, max, rt, help},
    KVT_OPTIONS(KVT_OPT_DEF)
#undef KVT_OPT_DEF
};

const struct kvt_opt_def *kvt_opt_def(enum kvt_opt_id id)
{
	return (unsigned)id < KVT_OPT__COUNT ? &defs[id] : NULL;
}

int kvt_opt_find(const char *name)
{
	for (int i = 0; i < KVT_OPT__COUNT; i++)
		if (!strcmp(defs[i].name, name))
			return i;
	return -ENOENT;
}

const char *kvt_opts_reason(const char *name, int rc, char *buf, size_t len)
{
	char n[128];
	size_t k = strcspn(name, "= ");
	snprintf(n, sizeof(n), "%.*s", (int)KVT_MIN(k, sizeof(n) - 1), name);
	int id = kvt_opt_find(n);
	if (rc == -ENOENT)
		snprintf(buf, len, "no such option");
	else if (rc == -ERANGE && id >= 0 && defs[id].type == KVT_OPT_SIZE) {
		char lo[32], hi[32];
		snprintf(buf, len, "out of range (%s to %s)",
		         kvt_fmt_bytes(defs[id].min, lo, sizeof(lo)),
		         kvt_fmt_bytes(defs[id].max, hi, sizeof(hi)));
	} else if (rc == -ERANGE && id >= 0 && defs[id].type == KVT_OPT_U64)
		snprintf(buf, len, "out of range (%llu to %llu)", (unsigned long long)defs[id].min,
		         (unsigned long long)defs[id].max);
	else if (rc == -EINVAL && id >= 0 && defs[id].type == KVT_OPT_U64)
		snprintf(buf, len, "not a whole number (%llu to %llu)",
		         (unsigned long long)defs[id].min, (unsigned long long)defs[id].max);
	else if (rc == -EINVAL && id >= 0 && defs[id].type == KVT_OPT_SIZE)
		snprintf(buf, len,
		         "not a size (a whole number, then B, KiB, MiB, GiB or TiB: 512MiB)");
	else if (rc == -EINVAL && id >= 0 && defs[id].type == KVT_OPT_BOOL)
		snprintf(buf, len, "not true or false (or on, off, yes, no, 1, 0)");
	else
		snprintf(buf, len, "%s", strerror(-rc));
	return buf;
}

static int set_value(struct kvt_options *o, int id, const char *value)
{
	const struct kvt_opt_def *d = &defs[id];
	uint64_t v = 0;
	int rc = 0;
	switch (d->type) {
	case KVT_OPT_STR:
		if (strlen(value) >= KVT_OPT_STR_MAX)
			return -ERANGE;
		strcpy(o->str[id], value);
		return 0;
	case KVT_OPT_BOOL:
		if (!strcasecmp(value, "true") || !strcmp(value, "1") || !strcasecmp(value, "on") ||
		    !strcasecmp(value, "yes"))
			v = 1;
		else if (!strcasecmp(value, "false") || !strcmp(value, "0") ||
		         !strcasecmp(value, "off") || !strcasecmp(value, "no"))
			v = 0;
		else
			return -EINVAL;
		break;
	case KVT_OPT_SIZE:
	case KVT_OPT_U64:
		if (!strcmp(value, "auto") && !strcmp(d->def, "auto")) {
			o->num[id] = 0;
			snprintf(o->str[id], KVT_OPT_STR_MAX, "auto");
			return 0;
		}
		if (d->type == KVT_OPT_SIZE)
			rc = kvt_parse_size(value, &v);
		else {
			char *end;
			errno = 0;
			v = strtoull(value, &end, 10);
			rc = (errno || end == value || *end || *value == '-') ? -EINVAL : 0;
		}
		if (rc)
			return rc;
		if (v < d->min || v > d->max)
			return -ERANGE;
		break;
	}
	o->num[id] = v;
	snprintf(o->str[id], KVT_OPT_STR_MAX, "%s", value);
	return 0;
}

void kvt_opts_defaults(struct kvt_options *o)
{
	memset(o, 0, sizeof(*o));
	for (int i = 0; i < KVT_OPT__COUNT; i++)
		if (set_value(o, i, defs[i].def))
			KVT_PANIC("bad default in options_list.h");
}

/* The key of word w (up to '=') is k of length kl. */
static bool same_key(const char *w, const char *k, size_t kl)
{
	return !strncmp(w, k, kl) && w[kl] == '=';
}

int kvt_params_merge(char *dst, size_t cap, const char *words)
{
	size_t dl = strlen(dst), len = dl + strlen(words) + 2;
	char *all = malloc(len), *out = malloc(len), **w = malloc((len / 2 + 1) * sizeof(*w));
	char *save = NULL;
	size_t n = 0, o = 0;
	int rc = -ENOMEM;
	if (!all || !out || !w)
		goto done;
	snprintf(all, len, "%s %s", dst, words);
	out[0] = 0;
	rc = -EINVAL;
	for (char *t = strtok_r(all, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(t, '=');
		if (!eq || eq == t || !eq[1] || strchr(eq + 1, '='))
			goto done;
		w[n++] = t;
	}
	/* each key once, where it first appears, with the value it was given last */
	for (size_t i = 0; i < n; i++) {
		size_t kl = (size_t)(strchr(w[i], '=') - w[i]), last = i, j;
		for (j = 0; j < i && !same_key(w[j], w[i], kl); j++)
			;
		if (j < i)
			continue;
		for (j = i + 1; j < n; j++)
			last = same_key(w[j], w[i], kl) ? j : last;
		o += (size_t)snprintf(out + o, len - o, "%s%.*s%s", o ? " " : "", (int)kl, w[i],
		                      strchr(w[last], '='));
	}
	rc = -ERANGE;
	if (o < cap) {
		memcpy(dst, out, o + 1);
		rc = 0;
	}
done:
	free(all);
	free(out);
	free(w);
	return rc;
}

/*
 * "TIER.policy.PARAM = VALUE" (one parameter a line in a config file) sets PARAM=VALUE in
 * TIER.policy_params (kvt_params_merge), which the daemon hands to the policy's set_param.
 * @return : 0, -ENOENT (no TIER.policy_params), -EINVAL (a space or '=' in the value), -ERANGE.
 */
static int set_policy_param(struct kvt_options *o, const char *name, const char *value)
{
	const char *dot = strstr(name, ".policy.");
	char opt[64], word[KVT_OPT_STR_MAX];
	if (!dot || !dot[8] || strchr(dot + 8, '.') || (size_t)(dot - name) > 32)
		return -ENOENT;
	snprintf(opt, sizeof(opt), "%.*s.policy_params", (int)(dot - name), name);
	int id = kvt_opt_find(opt);
	if (id < 0)
		return -ENOENT;
	if (!*value || strpbrk(value, " \t="))
		return -EINVAL;
	if ((size_t)snprintf(word, sizeof(word), "%s=%s", dot + 8, value) >= sizeof(word))
		return -ERANGE;
	int rc = kvt_params_merge(o->str[id], KVT_OPT_STR_MAX, word);
	if (!rc)
		o->set[id] = true;
	return rc;
}

int kvt_opts_set(struct kvt_options *o, const char *name, const char *value)
{
	int id = kvt_opt_find(name);
	if (id < 0)
		return set_policy_param(o, name, value);
	int rc = set_value(o, id, value);
	if (!rc)
		o->set[id] = true;
	return rc;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

int kvt_opts_set_pair(struct kvt_options *o, const char *pair)
{
	char buf[2 * KVT_OPT_STR_MAX];
	if (strlen(pair) >= sizeof(buf))
		return -ERANGE;
	strcpy(buf, pair);
	char *eq = strchr(buf, '=');
	if (!eq)
		return -EINVAL;
	*eq = 0;
	return kvt_opts_set(o, trim(buf), trim(eq + 1));
}

/* Where line's comment starts: a '#' that starts the line or follows a blank, so that a value
 * may hold one ("tenant.map = ml#1", a path); it cut the value there. NULL: none. */
static char *comment_of(char *line)
{
	for (char *p = line; (p = strchr(p, '#')); p++)
		if (p == line || *(p - 1) == ' ' || *(p - 1) == '\t')
			return p;
	return NULL;
}

int kvt_opts_load_file(struct kvt_options *o, const char *path, char *err, size_t err_len)
{
	/* a regular file only: a directory read as empty, and a pipe empty at a reload's second
	 * read, took every option back to its default; a FIFO held the daemon's loop in open() */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	FILE *f = NULL;
	int rc = 0;
	if (fd < 0 || fstat(fd, &st))
		rc = -errno;
	else if (!S_ISREG(st.st_mode))
		rc = -EINVAL;
	else if (!(f = fdopen(fd, "r")))
		rc = -errno;
	if (rc) {
		if (fd >= 0)
			close(fd);
		snprintf(err, err_len, "%s: %s", path,
		         rc == -EINVAL ? "not a regular file" : strerror(-rc));
		return rc;
	}
	char line[1024];
	int lineno = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		size_t len = strlen(line);
		if (len == sizeof(line) - 1 && line[len - 1] != '\n' && !feof(f)) {
			/* the rest would be read as a line of its own (a comment's tail as an
			 * option) */
			rc = -E2BIG;
			snprintf(err, err_len, "%s:%d: a line over %zu bytes", path, lineno,
			         sizeof(line) - 2);
			break;
		}
		char *hash = comment_of(line);
		if (hash)
			*hash = 0;
		char *s = trim(line);
		if (!*s)
			continue;
		rc = kvt_opts_set_pair(o, s);
		if (rc) {
			char why[96];
			snprintf(err, err_len, "%s:%d: %s: %s", path, lineno, s,
			         strchr(s, '=') ? kvt_opts_reason(s, rc, why, sizeof(why))
			                        : "not NAME = VALUE");
			break;
		}
	}
	if (!rc && ferror(f)) { /* a read that failed half way is not a shorter file */
		rc = -EIO;
		snprintf(err, err_len, "%s: read failed after line %d", path, lineno);
	}
	fclose(f);
	return rc;
}

/* KVTIER_<NAME> of option i: dots as underscores, upper case. */
static void env_name(int i, char *out, size_t len)
{
	size_t n = (size_t)snprintf(out, len, "KVTIER_");
	for (const char *p = defs[i].name; *p && n + 1 < len; p++)
		out[n++] = *p == '.' ? '_' : (char)toupper((unsigned char)*p);
	out[n] = 0;
}

int kvt_opts_load_env(struct kvt_options *o, char *err, size_t err_len)
{
	for (int i = 0; i < KVT_OPT__COUNT; i++) {
		char env[128];
		env_name(i, env, sizeof(env));
		const char *v = getenv(env);
		if (!v)
			continue;
		char *copy = strdup(v); /* trimmed as --set and the file trim theirs */
		int rc = copy ? set_value(o, i, trim(copy)) : -ENOMEM;
		free(copy);
		if (rc) {
			char why[96];
			snprintf(err, err_len, "%s=%s: %s", env, v,
			         kvt_opts_reason(defs[i].name, rc, why, sizeof(why)));
			return rc;
		}
		o->set[i] = true;
	}
	return 0;
}

/*
 * The KVTIER_* variables kvtier reads that are not options, the one list of them: the daemon
 * warns of every other KVTIER_ name in its environment (kvt_opts_env_unknown), so a variable
 * read somewhere new is added here, or each start warns that it is ignored.
 */
static const char *const env_others[] = {
    "KVTIER_SOCKET",              /* the client and the CLI: the daemon's socket (sockpath.c) */
    "KVTIER_TIMEOUT_MS",          /* the client: how long a call waits for the daemon */
    "KVTIER_GPU",                 /* gpu/runtime_cuda.c: off answers -ENODEV, as without CUDA */
    "KVTIER_GPU_BATCH",           /* gpu/runtime_cuda.c: off copies a batch one piece a call */
    "KVTIER_NVME_BACKEND",        /* tiers/nvme/nvme.c: uring or pio */
    "KVTIER_NVME_FAULT_PPM",      /* tiers/nvme/nvme.c: injected faults, tests only */
    "KVTIER_NVME_NOSPC_PPM",      /* ditto */
    "KVTIER_NVME_READ_DELAY_MS",  /* ditto */
    "KVTIER_NVME_WRITE_DELAY_MS", /* ditto */
    "KVTIER_NVME_FAULT_FILE",     /* ditto */
    "KVTIER_ROCKSDB_FAULT_PPM",   /* tiers/rocksdb/tier.c: injected faults, tests only */
};
#define N_ENV_OTHERS (sizeof(env_others) / sizeof(env_others[0]))

/* The Levenshtein distance of a and b, case ignored, or 3 when it is more than 2. */
static int edits(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int row[128];
	if (la >= 128 || lb >= 128 || (la > lb ? la - lb : lb - la) > 2)
		return 3;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int diag = row[0]; /* row[j - 1] of the line above */
		row[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int same =
			    toupper((unsigned char)a[i - 1]) == toupper((unsigned char)b[j - 1]);
			int best = KVT_MIN(row[j], row[j - 1]) + 1;
			best = KVT_MIN(best, diag + !same);
			diag = row[j];
			row[j] = best;
		}
	}
	return KVT_MIN(row[lb], 3);
}

/* Whether kvtier reads the variable name; else near gets the closest name it reads within two
 * edits (case ignored), or "". */
static bool env_known(const char *name, char *near, size_t near_len)
{
	char opt[128];
	int best = 3;
	*near = 0;
	for (size_t i = 0; i < KVT_OPT__COUNT + N_ENV_OTHERS; i++) {
		const char *k = opt;
		if (i < KVT_OPT__COUNT)
			env_name((int)i, opt, sizeof(opt));
		else
			k = env_others[i - KVT_OPT__COUNT];
		if (!strcmp(name, k))
			return true;
		int e = edits(name, k);
		if (e < best) {
			best = e;
			snprintf(near, near_len, "%s", k);
		}
	}
	return false;
}

int kvt_opts_env_unknown(char *const *env, kvt_opts_env_fn fn, void *arg)
{
	int n = 0;
	for (size_t i = 0; env && env[i]; i++) {
		if (strncmp(env[i], "KVTIER_", 7))
			continue;
		char name[128], near[128];
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(env[i], "="), env[i]);
		if (env_known(name, near, sizeof(near)))
			continue;
		fn(arg, name, *near ? near : NULL);
		n++;
	}
	return n;
}

/*
 * Auto sizes of the tiers under the data directory: 1/8 of the space the filesystem would have
 * free without kvtier's own tier files. Counting the files back in keeps the size the same from
 * one start to the next, where plain free space would shrink the nvme log by an eighth (and
 * truncate it) at every restart, and the rocksdb capacity as it fills. A data directory not
 * made yet counts its nearest existing parent's filesystem.
 */
static int stat_fs_of(const char *dir, struct statvfs *sv, dev_t *dev)
{
	char p[4096];
	int n = snprintf(p, sizeof(p), "%s", dir && *dir ? dir : ".");
	if (n < 0 || (size_t)n >= sizeof(p))
		return -ENAMETOOLONG;
	for (;;) {
		struct stat st;
		if (!statvfs(p, sv) && !stat(p, &st)) {
			*dev = st.st_dev;
			return 0;
		}
		char *slash = strrchr(p, '/');
		if (errno != ENOENT || !slash)
			return -errno;
		if (slash == p)
			slash[1] = 0; /* "/x" -> "/" */
		else
			*slash = 0;
	}
}

/* Bytes allocated to path (a regular file, or the regular files of a directory) on dev. */
static uint64_t allocated_on(const char *path, dev_t dev)
{
	struct stat st;
	if (stat(path, &st) || st.st_dev != dev)
		return 0;
	if (S_ISREG(st.st_mode))
		return (uint64_t)st.st_blocks * 512u;
	if (!S_ISDIR(st.st_mode))
		return 0;
	DIR *dir = opendir(path);
	if (!dir)
		return 0;
	uint64_t sum = 0;
	char f[4096 + 256];
	for (struct dirent *e; (e = readdir(dir));) {
		snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
		if (e->d_name[0] != '.' && !stat(f, &st) && S_ISREG(st.st_mode) && st.st_dev == dev)
			sum += (uint64_t)st.st_blocks * 512u;
	}
	closedir(dir);
	return sum;
}

/* A tier's path: its option, else DATA_DIR/name. */
void kvt_opts_tier_path(const struct kvt_options *o, enum kvt_opt_id id, const char *data_dir,
                        char *out, size_t len)
{
	if (*o->str[id])
		snprintf(out, len, "%s", o->str[id]);
	else
		snprintf(out, len, "%s/%s", data_dir ? data_dir : ".",
		         id == KVT_OPT_NVME_PATH ? "nvme.dat" : "rocksdb");
}

uint64_t kvt_opts_tier_share(const struct kvt_options *o, const char *data_dir)
{
	struct statvfs sv;
	dev_t dev = 0;
	if (stat_fs_of(data_dir, &sv, &dev))
		return 64ull << 20;
	uint64_t room = (uint64_t)sv.f_bavail * sv.f_frsize;
	char p[4096 + 16];
	kvt_opts_tier_path(o, KVT_OPT_NVME_PATH, data_dir, p, sizeof(p));
	room += allocated_on(p, dev);
	/* the index a clean stop saved (tiers/nvme/index.c): there until the tier opens, so a
	 * start after a clean stop would see less room than one after a crash */
	char ix[sizeof(p) + 8];
	snprintf(ix, sizeof(ix), "%s.index", p);
	room += allocated_on(ix, dev);
	if (*o->str[KVT_OPT_NVME_PATH]) { /* a block device's index lives in the data directory */
		snprintf(ix, sizeof(ix), "%s/nvme.index", data_dir ? data_dir : ".");
		room += allocated_on(ix, dev);
	}
	kvt_opts_tier_path(o, KVT_OPT_ROCKSDB_PATH, data_dir, p, sizeof(p));
	room += allocated_on(p, dev);
	snprintf(ix, sizeof(ix), "%s.index", p); /* rocksdb's, as nvme's (tiers/rocksdb/saved.c) */
	room += allocated_on(ix, dev);
	return KVT_MAX(room / 8, 64ull << 20) & ~((1ull << 20) - 1);
}

void kvt_opts_resolve(struct kvt_options *o, const char *data_dir)
{
	if (!o->num[KVT_OPT_HOST_BYTES]) {
		long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
		uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 8ull << 30;
		o->num[KVT_OPT_HOST_BYTES] = KVT_MAX(ram / 8, 64ull << 20) & ~((1ull << 20) - 1);
	}
	if (o->num[KVT_OPT_NVME_BYTES] && o->num[KVT_OPT_ROCKSDB_BYTES])
		return;
	uint64_t share = kvt_opts_tier_share(o, data_dir);
	if (!o->num[KVT_OPT_NVME_BYTES]) {
		/* an nvme file already made keeps its size: the free space moves with whatever else
		 * writes to the filesystem, and a log of another size is rebuilt empty */
		char p[4096];
		struct stat st;
		kvt_opts_tier_path(o, KVT_OPT_NVME_PATH, data_dir, p, sizeof(p));
		bool made = !stat(p, &st) && S_ISREG(st.st_mode) && st.st_size >= (1 << 20);
		o->num[KVT_OPT_NVME_BYTES] = made ? (uint64_t)st.st_size : share;
	}
	if (!o->num[KVT_OPT_ROCKSDB_BYTES])
		o->num[KVT_OPT_ROCKSDB_BYTES] = share;
}

static void print_value(const struct kvt_options *o, int i, FILE *f)
{
	switch (defs[i].type) {
	case KVT_OPT_STR:
		fprintf(f, "%s", o->str[i]);
		break;
	case KVT_OPT_BOOL:
		fprintf(f, "%s", o->num[i] ? "true" : "false");
		break;
	case KVT_OPT_SIZE:
	case KVT_OPT_U64:
		fprintf(f, "%llu", (unsigned long long)o->num[i]);
		break;
	}
}

void kvt_opts_print(const struct kvt_options *o, FILE *f)
{
	for (int i = 0; i < KVT_OPT__COUNT; i++) {
		fprintf(f, "%s = ", defs[i].name);
		print_value(o, i, f);
		fputc('\n', f);
	}
}

void kvt_opts_help(FILE *f)
{
	static const char *tn[] = {"size", "int", "bool", "string"};
	for (int i = 0; i < KVT_OPT__COUNT; i++)
		fprintf(f, "  %-28s %-6s default %-8s %s%s\n", defs[i].name, tn[defs[i].type],
		        defs[i].def, defs[i].help, defs[i].runtime ? " (runtime)" : "");
	fprintf(f, "  %-28s %-6s %-16s %s\n", "TIER.policy.PARAM", "string", "",
	        "one parameter of TIER.policy, added to TIER.policy_params");
}
