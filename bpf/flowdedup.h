/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The contract between the XDP program (xdp.c) and user space (package bpf,
 * fastpath/). Every struct here has a Go twin in bpf/bpf.go; a test checks
 * that their sizes and offsets agree with the BTF of the compiled object.
 */
#ifndef FLOWDEDUP_H
#define FLOWDEDUP_H

#include <linux/types.h>

/* The bounds of flow.Parse (flow.MaxLinkHeaders, flow.MaxIPv6Headers). */
#define FD_MAX_LINK_HEADERS 16
#define FD_MAX_IPV6_HEADERS 8

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
	FD_NUM_ERRS = 4,
};

/*
 * A flow key in flow.Key's binary form (flow.Key.AppendBinary): 40 bytes,
 * fields outside the kind zero, IPv4 addresses in the first 4 bytes of
 * src/dst, ports in network byte order.
 */
struct fd_key {
	__u8 src[16];
	__u8 dst[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 kind;
	__u8 flags;
	__u8 zero;
};

/* One record of a per-CPU ring buffer: a key the CPU's prefilter had not seen
 * in the current window. */
struct fd_event {
	__u64 time_ns; /* Unix ns: CLOCK_BOOTTIME + fd_config.clock_offset_ns */
	struct fd_key key;
};

/*
 * Per-CPU counters (fd_counters map, one entry), cumulative since load:
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

#endif
