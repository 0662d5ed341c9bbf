//go:build ignore

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The programs of the AF_XDP capture mode (afxdp.Open).
 *
 * fd_xsk hands every frame of a receive queue to the AF_XDP socket bound
 * to that queue, and leaves the frames of queues without a socket to the
 * kernel's network stack. Frames it redirects never reach the stack.
 *
 * fd_xsk_prefilter (afxdp.Config.Prefilter) first keys the frame as the
 * XDP fast path does (xdp.c's parser and hash, included below) and looks
 * its fingerprint up in the queue's prefilter, fd_xsk_seen: a key found
 * there was already handed to user space, so the frame is counted in the
 * queue's hits and dropped. Any other frame goes to the socket as with
 * fd_xsk, with the key's prefilter row and fingerprint in front of it as
 * XDP metadata (struct fd_xsk_meta); frames without a key go without
 * metadata. The program never writes the prefilter: the reader inserts a
 * key once it holds the frame, so that a frame the socket drops after the
 * redirect (no free UMEM frame) leaves its key out, and the flow's next
 * frame crosses again. Only the plain parser is used (fd_decap 0, no
 * prefix masks) and there is one window: the prefilter is never emptied.
 */
#include "xdp.c"

/*
 * The AF_XDP sockets by receive queue. The loader sets max_entries to the
 * interface's number of receive queues and inserts each socket's fd at its
 * queue id.
 */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} fd_xsks SEC(".maps");

/*
 * The prefilter of fd_xsk_prefilter: fd_xsk_rows rows per receive queue,
 * queue q's rows from q * fd_xsk_rows. Written only by user space (4-byte
 * stores through a memory mapping), read only here. A fingerprint is never
 * 0 (0 marks an empty bucket).
 */
volatile const __u32 fd_xsk_rows = 1;

struct fd_xsk_row {
	__u32 fp[FD_XSK_ROW_BUCKETS];
};

/* max_entries = queues * fd_xsk_rows (set by the loader). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fd_xsk_row);
} fd_xsk_seen SEC(".maps");

/* Per receive queue (max_entries = queues): the frames fd_xsk_prefilter
 * dropped because their key was in the prefilter. Read by user space
 * through a memory mapping; one cache line each. */
struct fd_xsk_queue {
	__u64 hits;
	__u64 pad[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fd_xsk_queue);
} fd_xsk_hits SEC(".maps");

SEC("xdp")
int fd_xsk(struct xdp_md *ctx)
{
	/* XDP_PASS, in the flags, is the action when the queue has no socket. */
	return bpf_redirect_map(&fd_xsks, ctx->rx_queue_index, XDP_PASS);
}

SEC("xdp")
int fd_xsk_prefilter(struct xdp_md *ctx)
{
	__u32 q = ctx->rx_queue_index, rows = fd_xsk_rows, idx, fp;
	struct fd_event ev = {};
	struct fd_xsk_row *row;
	struct fd_xsk_queue *hq;
	struct fd_xsk_meta *m;
	void *data;
	__u64 h;
	int i;

	if (parse(ctx, &ev) != FD_OK)
		goto redirect; /* user space parses it again and counts why */
	ev.key.kind = fd_key_kind;
	h = fd_hash(&ev.key, fd_hash_seed);
	idx = q * rows + (__u32)(((h >> 32) * rows) >> 32);
	fp = (__u32)h;
	if (fp == 0)
		fp = 1;
	row = bpf_map_lookup_elem(&fd_xsk_seen, &idx);
	if (!row)
		goto redirect; /* a queue beyond the map: no prefilter */
#pragma clang loop unroll(full)
	for (i = 0; i < FD_XSK_ROW_BUCKETS; i++) {
		if (row->fp[i] == fp) {
			hq = bpf_map_lookup_elem(&fd_xsk_hits, &q);
			if (hq) {
				__sync_fetch_and_add(&hq->hits, 1);
				return XDP_DROP;
			}
			goto redirect; /* not reached: the rows exist, so does q's counter */
		}
	}
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*m)) == 0) {
		m = (void *)(long)ctx->data_meta;
		data = (void *)(long)ctx->data;
		if ((void *)(m + 1) <= data) {
			m->row = idx;
			m->fp = fp;
		}
	}
redirect:
	return bpf_redirect_map(&fd_xsks, q, XDP_PASS);
}
