/*
 * options.h -- the one options table: parsing from defaults, a config file, KVTIER_* environment
 * variables and --set name=value, in that order of precedence (later wins).
 */
#ifndef KVT_CORE_OPTIONS_H
#define KVT_CORE_OPTIONS_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "options_list.h"

enum kvt_opt_type { KVT_OPT_SIZE, KVT_OPT_U64, KVT_OPT_BOOL, KVT_OPT_STR };

enum kvt_opt_id {
#define KVT_OPT_ENUM(id, name, type, def, min, max, rt, help) KVT_OPT_##id,
	KVT_OPTIONS(KVT_OPT_ENUM)
#undef KVT_OPT_ENUM
	    KVT_OPT__COUNT
};

struct kvt_opt_def {
	const char *name;
	enum kvt_opt_type type;
	const char *def;
	uint64_t min, max;
	bool runtime;
	const char *help;
};

#define KVT_OPT_STR_MAX 256
struct kvt_options {
	uint64_t num[KVT_OPT__COUNT];
	char str[KVT_OPT__COUNT][KVT_OPT_STR_MAX];
	bool set[KVT_OPT__COUNT]; /* given explicitly (not the default) */
};

const struct kvt_opt_def *kvt_opt_def(enum kvt_opt_id id);
/* @return : the option id of name, or -ENOENT. */
int kvt_opt_find(const char *name);
/* Why a set of name (or "name = value") failed with rc, in words: "no such option", "out of
 * range (1.0 MiB to 16.0 TiB)", strerror's text. @return : buf. */
const char *kvt_opts_reason(const char *name, int rc, char *buf, size_t len);
/* Loads the defaults ("auto" stays 0 until kvt_opts_resolve). */
void kvt_opts_defaults(struct kvt_options *o);
/* Sets one option from text; "TIER.policy.PARAM" sets "PARAM=value" in TIER.policy_params
 * (kvt_params_merge). @return : 0, -ENOENT (unknown name), -EINVAL, -ERANGE. */
int kvt_opts_set(struct kvt_options *o, const char *name, const char *value);
/* Merges "k=v" words (space-separated) into the policy_params value dst: a word with a key dst
 * already holds replaces it in place, a new key is appended, and a key given twice keeps the
 * later value. @return : 0, -EINVAL (a word not of the form k=v; dst unchanged), -ERANGE (the
 * result needs cap bytes or more; dst unchanged), -ENOMEM. */
int kvt_params_merge(char *dst, size_t cap, const char *words);
/* Parses "name=value". */
int kvt_opts_set_pair(struct kvt_options *o, const char *pair);
/* Reads a config file of "name = value" lines (# comments). err gets a message on failure. */
int kvt_opts_load_file(struct kvt_options *o, const char *path, char *err, size_t err_len);
/* Applies every KVTIER_<NAME> environment variable. */
int kvt_opts_load_env(struct kvt_options *o, char *err, size_t err_len);
/* name: a KVTIER_ variable kvtier does not read (NUL-terminated, valid during the call); near:
 * the name it reads that is closest, within two edits with case ignored, or NULL. */
typedef void (*kvt_opts_env_fn)(void *arg, const char *name, const char *near);
/* Calls fn for each variable of env ("NAME=value" strings up to a NULL, as environ) whose name
 * starts with KVTIER_ and is neither an option's (kvt_opts_load_env) nor one of the others
 * kvtier reads (KVTIER_SOCKET, the tiers' test knobs: the list in options.c): a mistyped name
 * is otherwise ignored without a word. Not an error: other programs may set KVTIER_ names.
 * @return : how many fn was called for. */
int kvt_opts_env_unknown(char *const *env, kvt_opts_env_fn fn, void *arg);
/* Resolves "auto" sizes against this machine (RAM, free space under data_dir); an nvme file
 * that exists keeps its size. */
void kvt_opts_resolve(struct kvt_options *o, const char *data_dir);
/* The auto size of nvme.bytes and rocksdb.bytes: 1/8 of the free space of data_dir's filesystem
 * (of its nearest existing parent's while it is not made), counting the space the two tiers'
 * files there already take as free, so that it stays the same as they fill; at least 64 MiB. */
uint64_t kvt_opts_tier_share(const struct kvt_options *o, const char *data_dir);
/* Where the nvme (id KVT_OPT_NVME_PATH) or rocksdb (KVT_OPT_ROCKSDB_PATH) tier keeps its data:
 * the option, else DATA_DIR/nvme.dat or DATA_DIR/rocksdb. */
void kvt_opts_tier_path(const struct kvt_options *o, enum kvt_opt_id id, const char *data_dir,
                        char *out, size_t len);
/* Prints every option as "name = value" (a valid config file). */
void kvt_opts_print(const struct kvt_options *o, FILE *f);
/* Prints the table with help text. */
void kvt_opts_help(FILE *f);

static inline uint64_t kvt_opt_u64(const struct kvt_options *o, enum kvt_opt_id id)
{
	return o->num[id];
}
static inline const char *kvt_opt_str(const struct kvt_options *o, enum kvt_opt_id id)
{
	return o->str[id];
}
#endif
