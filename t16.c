#include "h.h"
static void lc(const char *tag) { char cmd[256]; snprintf(cmd, sizeof cmd, "/tmp/snap/bin/kvtier --socket /tmp/h1/s/x.sock stats | grep -E '^leases' | sed 's/^/   [%s] /'", tag); system(cmd); }
int main(void) {
	kvt_client_t *c = NULL; R(kvt_connect("/tmp/h1/s/x.sock", &c));
	kvt_model_t m = small_model("t16"); m.dtype = KVT_DTYPE_BF16; m.n_layers = 16; m.n_kv_heads = 8; m.head_dim = 64; m.tokens_per_chunk = 32; /* 1 MiB */
	kvt_id_t ns; R(kvt_namespace(c, &m, &ns)); size_t cb = kvt_chunk_bytes(&m);
	enum { N = 70 };
	uint8_t *data = malloc(N * cb); const void *ptr[N]; for (int i = 0; i < N; i++) { memset(data + i * cb, i + 1, cb); ptr[i] = data + i * cb; }
	kvt_id_t keys[N]; mkkeys(ns, keys, N, 16);
	R(kvt_put(c, ns, NULL, keys, 4, ptr, cb));
	kvt_lease_t l[4];
	P("--- revoked by timeout, bytes not reused");
	R(kvt_acquire(c, ns, keys, 1, l)); usleep(400000); lc("after 400ms");
	R(kvt_release(c, l, 1)); P("status %d", l[0].status);
	P("--- revoked by timeout, then deleted and bytes reused");
	R(kvt_acquire(c, ns, keys, 1, l)); usleep(400000); lc("after 400ms");
	R(kvt_delete(c, ns, keys, 4));
	kvt_id_t k2[N]; mkkeys(ns, k2, N, 17); R(kvt_put(c, ns, NULL, k2, 62, ptr, cb));
	P("lease data byte now 0x%x (was 0x01)", ((const uint8_t*)l[0].data)[100]);
	R(kvt_release(c, l, 1)); P("status %d", l[0].status);
	P("--- delete while leased (not revoked) then put more: bytes must NOT be reused");
	R(kvt_acquire(c, ns, k2, 1, l));
	R(kvt_delete(c, ns, k2, 1));
	kvt_id_t k3[N]; mkkeys(ns, k3, N, 18); R(kvt_put(c, ns, NULL, k3, 10, ptr + 30, cb));
	P("lease data byte 0x%x (expect 0x01)", ((const uint8_t*)l[0].data)[100]);
	R(kvt_release(c, l, 1)); P("status %d", l[0].status);
	P("--- kvt_get writes exactly cb bytes");
	uint8_t *out = malloc(cb + 64); memset(out, 0xEE, cb + 64); void *d[1] = {out};
	R(kvt_get(c, ns, &k2[1], 1, d, cb + 64)); P("out[0]=0x%x out[cb-1]=0x%x out[cb]=0x%x (0xee untouched expected)", out[0], out[cb-1], out[cb]);
	kvt_close(c);
	return 0;
}
