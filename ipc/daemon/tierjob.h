/*
 * tierjob.h -- what the daemon's lower-tier files share (design: tiers.c): a job, a tier's
 * worker, and the calls between the loop's side (tiers.c queues jobs, tierdone.c takes them back
 * finished) and the workers' (tierwork.c). Private to ipc/daemon.
 */
#ifndef KVT_DAEMON_TIERJOB_H
#define KVT_DAEMON_TIERJOB_H

#include "daemon.h"
#include "tiers/tier.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum job_kind {
	JOB_DEMOTE,
	JOB_PROMOTE,
	JOB_REMOVE,
	JOB_DROPPED,
	JOB_MOVED,
	JOB_CASCADED,
	JOB_DONE, /* kvt_done: the tier's policy offers the record first */
	JOB_AGAIN /* read again at host after JOB_DONE: the hint was wrong */
};

struct kvd_job {
	struct kvd_job *next;
	uint8_t kind, tier, tries;
	uint32_t entry;
	uint64_t again_since; /* a demotion: when the tier first pushed it back (-EAGAIN), or 0 */
	uint64_t from_loc;    /* a queued hand-over: where the tier above still keeps it */
	uint8_t from_tier;
	bool from_kept; /* ... until kvd_handover_free tells it (kvt_tier_nvme_handover_landed) */
	uint64_t seq;   /* the entry version this job belongs to */
	struct kvt_tier_id id;
	uint64_t loc;
	uint64_t moved_to; /* JOB_MOVED: the record at loc is now here */
	uint8_t *buf;      /* the host record (demote: source; promote: destination) */
	uint64_t off;
	size_t rec_len, buf_len;
	ssize_t result;
	struct kvt_tier_wreq wr; /* a demotion in a write stream */
	struct kvt_tier_rreq rd; /* a promotion riding a write stream */
};

/* How long a demotion the tier pushes back (-EAGAIN: a RocksDB write stall) is tried again
 * before it counts as failed. The chunk stays at host meanwhile, its bytes in host.dirty_pct's
 * share, so a long stall slows puts (demote.wait_ms, then -EAGAIN) instead of dropping chunks. */
#define DEMOTE_STALL_NS ((uint64_t)10 * 1000 * 1000 * 1000)

/* The worker thread of one lower tier: its jobs, and the finished ones for the loop. */
struct kvd_worker {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct kvd_job *promote_head, **promote_tail;
	_Atomic unsigned promotes; /* in promote_head (a write stream looks without the lock) */
	struct kvd_job *handover_head, **handover_tail; /* JOB_CASCADED with their copies */
	struct kvd_job *other_head, **other_tail;
	struct kvd_job *done;
	bool stop;
	bool started;
	uint8_t tier;                    /* d->lower[tier] */
	_Atomic uint64_t handover_bytes; /* copies handed to this tier, not yet written */
	struct kvd *d;
};
/* tierwork.c: a job for its tier's worker, from the loop (jobs are made once every worker
 * runs). */
void kvd_job_submit(struct kvd *d, struct kvd_job *j);
/* Frees a hand-over's copy (JOB_CASCADED's buf). */
void kvd_handover_free(struct kvd_worker *w, struct kvd_job *j);
/* The tier callbacks of lower tier k (env->dropped, moved and, when it cascades, evicted), which
 * bring a tier's news to the loop through its worker. */
void kvd_work_env(struct kvd *d, uint8_t k, bool cascade, struct kvt_tier_env *env);
/* A worker per lower tier. @return : 0, -ENOMEM, -EAGAIN. */
int kvd_workers_start(struct kvd *d);
/* Stops the workers (each finishes what a graceful stop owes the next start) and frees them. */
void kvd_workers_close(struct kvd *d);

/* tierdone.c: the entry a job was made for, if it is still the same version. */
struct kvd_entry *kvd_job_entry(struct kvd *d, const struct kvd_job *j);
/* The entry whose version a hand-over's record is, or NULL (gone, or another version now). */
struct kvd_entry *kvd_handover_entry(struct kvd *d, const struct kvd_job *j, uint32_t *id);

#endif
