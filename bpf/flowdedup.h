/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The contract between the XDP program (xdp.c) and user space (package bpf,
 * capture/xdp). Every struct here has a Go twin in bpf/bpf.go; a test checks
 * that their sizes and offsets agree with the BTF of the compiled object.
 */
#ifndef FLOWDEDUP_H
#define FLOWDEDUP_H

#include <linux/types.h>

/* The bounds of flow.Parse (flow.MaxLinkHeaders, flow.MaxIPv6Headers). */
#define FD_MAX_LINK_HEADERS 16
#define FD_MAX_IPV6_HEADERS 8

/*
 * Decapsulation (fd_decap, bpf.Config.Decap): the tunnel kinds the program
 * looks into, as bits, and its bounds. FD_MAX_TUNNELS tunnel headers are
 * walked; a frame with one more is counted FD_ERR_TUNNEL_TOO_DEEP.
 * FD_MAX_GTP_EXT bounds a GTP-U extension header chain.
 */
#define FD_DECAP_GRE (1 << 0)
#define FD_DECAP_ERSPAN (1 << 1)
#define FD_DECAP_VXLAN (1 << 2)
#define FD_DECAP_GENEVE (1 << 3)
#define FD_DECAP_GTPU (1 << 4)
#define FD_DECAP_IPIP (1 << 5)
#define FD_MAX_TUNNELS 4
#define FD_MAX_GTP_EXT 8

/* flow.KeyKind values. */
enum fd_kind {
	FD_KIND_SRC = 1,
	FD_KIND_DST = 2,
	FD_KIND_PAIR = 3,
	FD_KIND_5TUPLE = 4,
};

/* flow.Key flag bits. */
#define FD_FLAG_V6 (1 << 0)
#define FD_FLAG_PORTS (1 << 1)
#define FD_FLAG_PREFIX (1 << 2) /* addresses are networks of prefix length bits */
#define FD_FLAG_SEGMENT (1 << 3) /* seg holds a VNI */

/*
 * Why a frame gave no key: the flow.Parse errors an Ethernet frame can
 * produce, as indexes of fd_counters.errors. FD_ERR_NOT_IP is not malformed
 * (flow.IsMalformed is false): user space counts it as skipped.
 */
enum fd_err {
	FD_ERR_TRUNCATED = 0,        /* flow.ErrTruncated */
	FD_ERR_NOT_IP = 1,           /* flow.ErrNotIP */
	FD_ERR_BAD_HEADER = 2,       /* flow.ErrBadHeader */
	FD_ERR_TOO_MANY_HEADERS = 3, /* flow.ErrTooManyHeaders */
	/* With decapsulation only (fd_decap not 0): */
	FD_ERR_TUNNEL_TRUNCATED = 4,  /* "tunnel_truncated": a tunnel header cut short */
	FD_ERR_TUNNEL_UNKNOWN = 5,    /* "tunnel_unknown": GRE/Geneve/ERSPAN payload of an unknown protocol */
	FD_ERR_TUNNEL_NOT_DATA = 6,   /* "tunnel_not_data": a GTP-U message other than a T-PDU */
	FD_ERR_TUNNEL_TOO_DEEP = 7,   /* "tunnel_too_deep": more than FD_MAX_TUNNELS tunnels */
	FD_ERR_TUNNEL_BAD_HEADER = 8, /* "tunnel_bad_header": an invalid tunnel header */
	FD_NUM_ERRS = 9,
};

/*
 * A flow key in flow.Key's binary form (flow.Key.AppendBinary): 44 bytes,
 * fields outside the kind zero, IPv4 addresses in the first 4 bytes of
 * src/dst, ports in network byte order; keys by network have the host bits
 * of their addresses zero, FD_FLAG_PREFIX set and their prefix length in
 * bits (zero in host keys); keys taken inside a VXLAN or Geneve tunnel
 * (with decapsulation) have FD_FLAG_SEGMENT set and its 24-bit VNI in seg,
 * big-endian; seg is zero in other keys.
 */
struct fd_key {
	__u8 src[16];
	__u8 dst[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 kind;
	__u8 flags;
	__u8 bits;
	__be32 seg;
};

/* One record of a per-CPU ring buffer: a key the CPU's prefilter had not seen
 * in the current window. */
struct fd_event {
	__u64 time_ns; /* Unix ns: CLOCK_BOOTTIME + fd_config.clock_offset_ns */
	struct fd_key key;
};

/*
 * Counters of one CPU, for the whole run (struct fd_cpu) or for one window
 * (struct fd_window):
 *   packets = keyed + errors[0] + ... + errors[FD_NUM_ERRS-1]
 *   keyed   = prefilter_hits + emitted + ring_full
 */
struct fd_counters {
	__u64 packets;        /* frames the program ran on */
	__u64 keyed;          /* frames that gave a key */
	__u64 prefilter_hits; /* keys the prefilter had seen in this window: not emitted */
	__u64 emitted;        /* keys written to the CPU's ring buffer */
	__u64 ring_full;      /* keys lost because the ring buffer was full (not inserted in the prefilter) */
	__u64 errors[FD_NUM_ERRS];
};

/*
 * What each CPU keeps (fd_cpu map, one per-CPU entry): its counters since
 * load, and its clock's window, the newest window it has counted a frame
 * in. A CPU's clock never goes back across a window boundary: a frame whose
 * time (CLOCK_BOOTTIME + fd_config.clock_offset_ns, raised to fd_floor_ns)
 * falls before start_ns is stamped start_ns, and so counted, keyed and
 * emitted in the CPU's window. With fd_window_ns 0 the window stays 0 and
 * start_ns and end_ns are not used.
 */
struct fd_cpu {
	/* The clock first: with the counters every frame moves (packets,
	 * keyed, prefilter_hits) it fills one 64-byte line, however many
	 * error classes follow. */
	__u64 window;   /* the CPU's window: time / fd_window_ns */
	__u64 start_ns; /* its start and end, Unix ns */
	__u64 end_ns;
	struct fd_counters total;
};

/*
 * Per-window counters (fd_windows map, FD_WINDOW_SLOTS per-CPU entries): a
 * CPU counts each frame in the slot of its window, window %
 * FD_WINDOW_SLOTS, as well as in fd_cpu.total. The slot is tagged with the
 * window it counts; when the CPU's clock enters a window whose slot holds
 * an older one, the slot is zeroed and retagged. A CPU's window only grows
 * (see struct fd_cpu), so a slot is only ever taken by a newer window, no
 * frame is counted in a slot of another window, and the counts of window i
 * stay in their slot until the CPU counts a frame in window
 * i + k * FD_WINDOW_SLOTS. FD_WINDOW_SLOTS is a power of two, and at least
 * twice the windows the pipeline keeps open (64), so that a pipeline as
 * many windows behind as it keeps open still finds its counts.
 */
#define FD_WINDOW_SLOTS 128
struct fd_window {
	__u64 window; /* the window counted here (0 in a slot never used) */
	struct fd_counters counts;
};

/* Settings user space may change while the program runs (fd_config map, one entry). */
struct fd_config {
	__s64 clock_offset_ns; /* Unix time minus CLOCK_BOOTTIME, refreshed by user space */
};

/*
 * One row of the per-CPU prefilter (fd_prefilter map, fd_prefilter_rows
 * entries): a QHT row of FD_ROW_BUCKETS 32-bit fingerprints (0 = empty),
 * valid only while epoch equals the current window index (truncated to 32
 * bits): a row of an older window reads as empty, so windows are cleared
 * without touching the map.
 */
#define FD_ROW_BUCKETS 7
struct fd_row {
	__u32 epoch;
	__u32 fp[FD_ROW_BUCKETS];
};

/*
 * The AF_XDP prefilter (xsk.c, fd_xsk_prefilter): the buckets of a row of
 * fd_xsk_seen, and the metadata the program puts in front of every frame
 * it redirects. A bucket holds a key's fingerprint (never 0) in its low 32
 * bits and the low 32 bits of the window it was learnt in above them, so
 * that a key learnt in one window is not found in the next; 0 is empty.
 * The metadata holds the frame's time (Unix ns, the program's clock: the
 * time its window is reckoned from), and for a frame with a key the key's
 * row (an index of fd_xsk_seen, in the frame's queue's rows) and its
 * fingerprint; fp 0 there is a frame without a key.
 */
#define FD_XSK_ROW_BUCKETS 8
struct fd_xsk_meta {
	__u64 time_ns;
	__u32 row;
	__u32 fp;
};

#endif
