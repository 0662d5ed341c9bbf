//go:build ignore

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The programs of the AF_XDP capture mode (afxdp.Open).
 *
 * fd_xsk hands every frame of a receive queue to the AF_XDP socket bound
 * to that queue, and leaves the frames of queues without a socket to the
 * kernel's network stack. Frames it redirects never reach the stack.
 *
 * fd_xsk_prefilter (afxdp.Config.Prefilter) first takes the frame's time
 * and window from its queue's clock (fd_xsk_clock: CLOCK_BOOTTIME plus
 * xdp.c's fd_config offset, raised to xdp.c's fd_floor_ns, as fd_xdp's
 * CPUs do, but per receive queue: a queue's frames are received one at a
 * time, in order, whichever CPU runs its NAPI), then keys it as the XDP
 * fast path does (xdp.c's parser and hash, included below) and looks the
 * key up in the queue's prefilter, fd_xsk_seen: a key found there, learnt
 * in the frame's window, was already handed to user space in that window,
 * so the frame is counted in the queue's hits and in its window's slot, and
 * dropped. Any other frame goes to the socket as with fd_xsk, with its
 * time, and for a frame with a key the key's prefilter row and
 * fingerprint, in front of it as XDP metadata (struct fd_xsk_meta). The
 * reader inserts a key, tagged with the window of the frame's time, once
 * it holds the frame, so that a frame the socket drops after the redirect
 * (no free UMEM frame) leaves its key out, and the flow's next frame
 * crosses again; the program inserts it itself only when the socket is
 * sure to take the frame (fd_xsk_learn). Only the plain parser is used
 * (fd_decap 0, no prefix masks).
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
 * queue q's rows from q * fd_xsk_rows. Written by user space (8-byte
 * stores through a memory mapping), and here only by fd_xsk_learn. A bucket is the window
 * it was learnt in (its low 32 bits) above the fingerprint, never 0; 0
 * marks an empty bucket (see flowdedup.h).
 */
volatile const __u32 fd_xsk_rows = 1;
volatile const __u64 fd_xsk_window_ns = 0; /* 0: one window for the whole run */
/*
 * The program learns a key itself (fd_xsk_learn) only for a frame the
 * socket is sure to take: at most fd_xsk_max_len bytes (what a UMEM frame
 * holds, less the metadata), and while the queue's redirected frames plus
 * fd_xsk_margin stay below the room user space last set (0: never).
 */
volatile const __u32 fd_xsk_max_len = 0;
volatile const __u32 fd_xsk_margin = 0;

struct fd_xsk_row {
	__u64 b[FD_XSK_ROW_BUCKETS];
};

/* max_entries = queues * fd_xsk_rows (set by the loader). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fd_xsk_row);
} fd_xsk_seen SEC(".maps");

/*
 * Per receive queue (max_entries = queues): the frames fd_xsk_prefilter
 * dropped because their key was in the prefilter, since load, and the
 * queue's clock: its window, the newest one it has counted a frame in,
 * with its start and end (Unix ns). A queue's clock never goes back across
 * a window boundary: a frame whose time falls before start_ns is stamped
 * start_ns. Read by user space through a memory mapping; one cache line
 * each. With fd_xsk_window_ns 0 the window stays 0.
 */
struct fd_xsk_queue {
	__u64 hits;
	__u64 window;
	__u64 start_ns;
	__u64 end_ns;
	/* Room in the socket (see fd_xsk_learn): the frames the program
	 * redirected, and the bound user space sets. */
	__u64 redirected;
	__u64 room;
	__u64 pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fd_xsk_queue);
} fd_xsk_hits SEC(".maps");

/*
 * The hits by window (max_entries = queues * FD_WINDOW_SLOTS): queue q
 * counts a frame it drops in slot q * FD_WINDOW_SLOTS + window %
 * FD_WINDOW_SLOTS, tagged with the window, which a newer window of the
 * queue's clock takes over (the tag first, then the count zeroed), as
 * fd_xdp's CPUs do with fd_windows. Read by user space through a memory
 * mapping: the tag, the count, the tag again.
 */
struct fd_xsk_window {
	__u64 window;
	__u64 hits;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fd_xsk_window);
} fd_xsk_windows SEC(".maps");

SEC("xdp")
int fd_xsk(struct xdp_md *ctx)
{
	/* XDP_PASS, in the flags, is the action when the queue has no socket. */
	return bpf_redirect_map(&fd_xsks, ctx->rx_queue_index, XDP_PASS);
}

/*
 * fd_xsk_clock returns the frame's time, CLOCK_BOOTTIME plus the offset,
 * raised to fd_floor_ns and to the start of the queue's window, and moves
 * the queue's window forward when the time is past its end (fd_clock's
 * rule, per queue).
 */
static __always_inline __u64 fd_xsk_clock(struct fd_xsk_queue *hq, const struct fd_config *cfg, __u64 window)
{
	__u64 now = bpf_ktime_get_boot_ns() + cfg->clock_offset_ns;
	__u64 floor = fd_floor_ns;

	if (now < floor)
		now = floor;
	if (now < hq->start_ns)
		return hq->start_ns;
	if (now >= hq->end_ns) {
		hq->window = now / window;
		hq->start_ns = hq->window * window;
		hq->end_ns = hq->start_ns + window;
	}
	return now;
}

/*
 * fd_xsk_learn inserts tag into the row, in the first bucket empty or of
 * another window, else in a random one, as the reader does: a frame the
 * socket is sure to take need not wait for its reader to learn its key, so
 * the frames of its key that follow stay in the kernel even while the
 * reader is descheduled. The socket takes the frame when its fill ring
 * holds a free UMEM frame; user space bounds from below how many it holds:
 * room is the frames it has put in the fill ring plus the frames redirected
 * when it looked minus the frames the RX ring had received then, so
 * room - redirected is at most the free frames now, less the frames
 * received but not yet in the RX ring (at most a NAPI poll's, which
 * fd_xsk_margin covers). A frame with a key of its own, written by both
 * sides, loses at worst a bucket to the other: that key crosses again.
 */
static __always_inline void fd_xsk_learn(struct fd_xsk_row *row, __u64 tag, __u32 window)
{
	__u32 i, j;

#pragma clang loop unroll(full)
	for (i = 0; i < FD_XSK_ROW_BUCKETS; i++) {
		__u64 b = row->b[i];
		if (b == 0 || (__u32)(b >> 32) != window) {
			row->b[i] = tag;
			return;
		}
	}
	j = (__u32)(((__u64)bpf_get_prandom_u32() * FD_XSK_ROW_BUCKETS) >> 32);
	if (j < FD_XSK_ROW_BUCKETS)
		row->b[j] = tag;
}

SEC("xdp")
int fd_xsk_prefilter(struct xdp_md *ctx)
{
	__u32 q = ctx->rx_queue_index, rows = fd_xsk_rows, zero = 0, idx = 0, fp = 0;
	__u64 window = fd_xsk_window_ns, now = 0, h, tag;
	struct fd_event ev = {};
	struct fd_xsk_row *row;
	struct fd_xsk_queue *hq;
	struct fd_xsk_window *win;
	struct fd_config *cfg;
	struct fd_xsk_meta *m;
	void *data;
	__u64 r;
	int i;

	hq = bpf_map_lookup_elem(&fd_xsk_hits, &q);
	cfg = bpf_map_lookup_elem(&fd_config, &zero);
	if (!hq || !cfg)
		goto redirect; /* a queue beyond the maps: no prefilter */
	if (window)
		now = fd_xsk_clock(hq, cfg, window);

	if (parse(ctx, &ev) != FD_OK)
		goto meta; /* user space parses it again and counts why */
	ev.key.kind = fd_key_kind;
	h = fd_hash(&ev.key, fd_hash_seed);
	idx = q * rows + (__u32)(((h >> 32) * rows) >> 32);
	fp = (__u32)h;
	if (fp == 0)
		fp = 1;
	row = bpf_map_lookup_elem(&fd_xsk_seen, &idx);
	if (!row) {
		fp = 0; /* not reached: the queue's rows exist */
		goto meta;
	}
	tag = ((__u64)(__u32)hq->window << 32) | fp;
#pragma clang loop unroll(full)
	for (i = 0; i < FD_XSK_ROW_BUCKETS; i++) {
		if (row->b[i] == tag) {
			idx = q * FD_WINDOW_SLOTS + ((__u32)hq->window & (FD_WINDOW_SLOTS - 1));
			win = bpf_map_lookup_elem(&fd_xsk_windows, &idx);
			if (!win) {
				fp = 0; /* not reached */
				goto meta;
			}
			if (win->window != hq->window) {
				/* The slot holds an older window: the
				 * queue's window takes it over. */
				win->window = hq->window;
				asm volatile("" ::: "memory");
				win->hits = 0;
			}
			__sync_fetch_and_add(&win->hits, 1);
			__sync_fetch_and_add(&hq->hits, 1);
			return XDP_DROP;
		}
	}
	/* Not found: the frame crosses. Learnt here when the socket is sure
	 * to take it. */
	r = __sync_fetch_and_add(&hq->redirected, 1);
	if (fd_xsk_margin && r + fd_xsk_margin < hq->room &&
	    (__u64)(ctx->data_end - ctx->data) <= fd_xsk_max_len)
		fd_xsk_learn(row, tag, (__u32)hq->window);
	goto meta_only;
meta:
	if (hq)
		__sync_fetch_and_add(&hq->redirected, 1);
meta_only:
	if (!window) /* one window: only the frames that cross need the time */
		now = bpf_ktime_get_boot_ns() + cfg->clock_offset_ns;
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*m)) == 0) {
		m = (void *)(long)ctx->data_meta;
		data = (void *)(long)ctx->data;
		if ((void *)(m + 1) <= data) {
			m->time_ns = now;
			m->row = idx;
			m->fp = fp;
		}
	}
redirect:
	return bpf_redirect_map(&fd_xsks, q, XDP_PASS);
}
