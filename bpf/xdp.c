//go:build ignore

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * flowdedup's XDP program (see package bpf's documentation and flowdedup.h).
 *
 * For every frame it builds the flow key flow.Parse(frame, LinkEthernet,
 * kind) would build, or counts the error class flow.Parse would return; asks
 * the CPU's prefilter whether the key was seen in the current window; and
 * writes unseen keys to the CPU's ring buffer. It always returns XDP_PASS and
 * never writes the packet.
 *
 * (The go:build line keeps the go command from taking this file for cgo.)
 *
 * It reads no kernel structure but struct xdp_md (the packet bounds), so it
 * needs neither vmlinux.h nor CO-RE relocations: <linux/bpf.h> is enough.
 * It needs Linux 5.8 (ring buffers, bpf_ktime_get_boot_ns). It reads the
 * linear part of the frame only (no xdp.frags): the whole frame, unless
 * the interface uses XDP multi-buffer for frames larger than a page.
 *
 * The parser mirrors flow/parse.go statement for statement; where the Go code
 * shortens its slice (to the PPPoE payload length, the IPv4 total length, the
 * IPv6 payload length), this program lowers lim, the effective end of the
 * frame, which every later read checks besides the real end of the packet.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "flowdedup.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/*
 * Configuration, set by the loader (CollectionSpec.Variables) before the
 * program is loaded. The verifier knows their values (.rodata is frozen), so
 * the code of the other key kinds, of a disabled prefilter and of a single
 * window is dead and pruned.
 */
volatile const __u8 fd_key_kind = FD_KIND_5TUPLE; /* enum fd_kind */
volatile const __u64 fd_hash_seed = 0;
volatile const __u64 fd_window_ns = 0;      /* 0: one window for the whole run */
volatile const __u32 fd_prefilter_rows = 0; /* 0: prefilter off, every key is emitted */

/*
 * Keys by network (flow.Mask, --prefix): with fd_prefix 1, every key's
 * addresses are masked to their networks before the prefilter sees them,
 * and the key says so (FD_FLAG_PREFIX, bits), as flow.Mask.Apply does.
 * fd_prefix_v4 and fd_prefix_v6 are the prefix lengths; fd_mask4 and
 * fd_mask6 the masks the loader computes from them, in the byte order of
 * the key's addresses (network order) read as words.
 */
volatile const __u8 fd_prefix = 0;
volatile const __u8 fd_prefix_v4 = 0;
volatile const __u8 fd_prefix_v6 = 0;
volatile const __u32 fd_mask4 = 0;
volatile const __u64 fd_mask6[2] = {0, 0};

/*
 * The floor of the program's clock, Unix ns, set by user space when it ends
 * a window (bpf.Objects.EndWindow): a frame whose time is earlier is
 * stamped fd_floor_ns, so that no frame is counted in a window user space
 * has ended. It only grows. A global in .bss, which user space writes
 * through a memory mapping with one aligned 8-byte store, so the program
 * never reads half of an update (a map update is a memcpy).
 */
volatile __u64 fd_floor_ns = 0;

/* The per-CPU ring buffers, indexed by CPU number. The loader sets the
 * outer max_entries to the number of possible CPUs and the inner size to
 * Config.RingBytes, and creates the inner maps. */
struct fd_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct fd_ring);
} fd_rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fd_cpu);
} fd_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FD_WINDOW_SLOTS);
	__type(key, __u32);
	__type(value, struct fd_window);
} fd_windows SEC(".maps");

/* max_entries = fd_prefilter_rows, at least 1 (set by the loader). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fd_row);
} fd_prefilter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fd_config);
} fd_config SEC(".maps");

/* EtherTypes, PPP protocols and IP protocols flow.Parse knows. */
#define ETYPE_IPV4 0x0800
#define ETYPE_IPV6 0x86dd
#define ETYPE_VLAN 0x8100
#define ETYPE_QINQ 0x88a8
#define ETYPE_QINQ_OLD 0x9100
#define ETYPE_MPLS_UC 0x8847
#define ETYPE_MPLS_MC 0x8848
#define ETYPE_PPPOE_SESSION 0x8864

#define PPP_IPV4 0x0021
#define PPP_IPV6 0x0057

#define PROTO_HOPOPTS 0
#define PROTO_TCP 6
#define PROTO_UDP 17
#define PROTO_ROUTING 43
#define PROTO_FRAGMENT 44
#define PROTO_AH 51
#define PROTO_DSTOPTS 60
#define PROTO_SCTP 132
#define PROTO_UDPLITE 136

/* The parser's result when it built a key; the errors are enum fd_err. */
#define FD_OK (-1)

/*
 * The largest packet offset the program reads at. XDP's linear buffer is at
 * most a page minus headroom and skb_shared_info, under 64 KiB even with 64 KiB
 * pages, so no frame has a byte at an offset beyond it and calling such a
 * read truncated is exact. The bound lets the verifier prove that
 * data + off + n does not overflow its packet offset range (MAX_PACKET_OFF).
 */
#define FD_MAX_OFF 0xfeff

/*
 * PULL(p, off, n) points p at the n bytes at offset off, or returns
 * FD_ERR_TRUNCATED when they lie past lim (the effective end: the IP or
 * PPPoE length) or past the end of the packet. n is a constant.
 */
#define PULL(p, off, n)                                                    \
	do {                                                               \
		if ((off) > FD_MAX_OFF || (off) + (n) > lim)               \
			return FD_ERR_TRUNCATED;                           \
		p = (const __u8 *)data + (off);                            \
		if ((const void *)(p + (n)) > data_end)                    \
			return FD_ERR_TRUNCATED;                           \
	} while (0)

/* HAVE(off, n): whether off + n bytes (n variable) are within lim and the packet. */
#define HAVE(off, n) ((off) + (n) <= lim && (const __u8 *)data + (off) + (n) <= (const __u8 *)data_end)

#define LD16(p) (*(const __u16 *)(const void *)(p)) /* network byte order */

_Static_assert(sizeof(struct fd_key) == 40, "struct fd_key is flow.Key's 40-byte binary form");
_Static_assert(__builtin_offsetof(struct fd_event, key) % 8 == 0, "fd_mask and fd_hash read the key as words");
_Static_assert(sizeof(struct fd_event) == 48, "struct fd_event is bpf.EventSize bytes");
_Static_assert(sizeof(struct fd_row) == 32, "struct fd_row is bpf.RowBytes bytes");
_Static_assert((FD_WINDOW_SLOTS & (FD_WINDOW_SLOTS - 1)) == 0, "FD_WINDOW_SLOTS is a power of two");

static __always_inline int has_ports(__u8 proto)
{
	return proto == PROTO_TCP || proto == PROTO_UDP || proto == PROTO_SCTP || proto == PROTO_UDPLITE;
}

/*
 * flow's withTransport: completes a 5-tuple key from the payload of the IP
 * header at off, whose protocol (IPv4) or next header (IPv6) is the low byte
 * of next_v6, and bit 8 of it says IPv6.
 *
 * fd_transport and fd_ip are global functions: the verifier checks each once,
 * for any arguments, rather than once for each path of the caller that calls
 * it (stacks of VLAN tags, MPLS labels and PPPoE give many), and the loop over
 * extension headers, whose offsets are unknown, prunes well.
 */
__noinline int fd_transport(struct xdp_md *ctx, __u64 off, __u64 lim, __u32 next_v6, struct fd_event *ev)
{
	const void *data = (const void *)(long)ctx->data;
	const void *data_end = (const void *)(long)ctx->data_end;
	__u8 next = next_v6 & 0xff;
	int v6 = next_v6 >> 8;
	struct fd_key *k;
	const __u8 *p;
	__u64 hlen;
	int walked;

	if (!ev)
		return FD_ERR_BAD_HEADER; /* not reached: the verifier wants the check */
	k = &ev->key;

	for (walked = 0; walked <= FD_MAX_IPV6_HEADERS; walked++) {
		if (next == PROTO_AH) {
			/* Length in 4-byte words minus 2; SPI and sequence number at least. */
			PULL(p, off, 2);
			hlen = ((__u64)p[1] + 2) * 4;
			if (hlen < 12)
				return FD_ERR_BAD_HEADER;
		} else if (v6 && (next == PROTO_HOPOPTS || next == PROTO_ROUTING || next == PROTO_DSTOPTS)) {
			/* Length in 8-byte units, not counting the first. */
			PULL(p, off, 2);
			hlen = ((__u64)p[1] + 1) * 8;
		} else if (v6 && next == PROTO_FRAGMENT) {
			hlen = 8;
			PULL(p, off, 8);
			if (LD16(p + 2) & bpf_htons(0xfff8)) {
				/* Non-first fragment: the fragment's protocol, no ports. */
				k->proto = p[0];
				return FD_OK;
			}
		} else {
			k->proto = next;
			if (!has_ports(next))
				return FD_OK;
			PULL(p, off, 4);
			/* Both ports, in network byte order as the key keeps them. */
			__builtin_memcpy(&k->sport, (const __u32 *)(const void *)p, 4);
			k->flags |= FD_FLAG_PORTS;
			return FD_OK;
		}
		if (walked == FD_MAX_IPV6_HEADERS)
			return FD_ERR_TOO_MANY_HEADERS;
		if (!HAVE(off, hlen))
			return FD_ERR_TRUNCATED;
		next = p[0];
		off += hlen;
	}
	return FD_ERR_TOO_MANY_HEADERS; /* not reached */
}

/*
 * flow's parseIPv4 and parseIPv6 (ver 4 or 6), or its parseIP (ver 0: the
 * version nibble decides, and other versions are not IP), for the IP header
 * at off.
 */
__noinline int fd_ip(struct xdp_md *ctx, __u64 off, __u64 lim, __u32 ver, struct fd_event *ev)
{
	const void *data = (const void *)(long)ctx->data;
	const void *data_end = (const void *)(long)ctx->data_end;
	__u8 kind = fd_key_kind;
	struct fd_key *k;
	const __u8 *p;
	__u64 hlen, total, plen;

	if (!ev)
		return FD_ERR_BAD_HEADER; /* not reached: the verifier wants the check */
	k = &ev->key;
	PULL(p, off, 1);
	if (ver == 0) {
		ver = p[0] >> 4;
		if (ver != 4 && ver != 6)
			return FD_ERR_NOT_IP;
	}
	if (p[0] >> 4 != ver)
		return FD_ERR_BAD_HEADER;
	if (ver == 6)
		goto ipv6;

	hlen = (__u64)(p[0] & 0x0f) * 4;
	if (hlen < 20)
		return FD_ERR_BAD_HEADER;
	if (!HAVE(off, hlen))
		return FD_ERR_TRUNCATED;
	PULL(p, off, 20);
	/* A total length shorter than the header is corrupt, except 0 (TSO);
	 * one shorter than the frame drops the link padding. */
	total = bpf_ntohs(LD16(p + 2));
	if (total != 0) {
		if (total < hlen)
			return FD_ERR_BAD_HEADER;
		if (off + total < lim)
			lim = off + total;
	}
	switch (kind) {
	case FD_KIND_SRC:
		__builtin_memcpy(k->src, (const __u32 *)(const void *)(p + 12), 4);
		return FD_OK;
	case FD_KIND_DST:
		__builtin_memcpy(k->dst, (const __u32 *)(const void *)(p + 16), 4);
		return FD_OK;
	}
	__builtin_memcpy(k->src, (const __u32 *)(const void *)(p + 12), 4);
	__builtin_memcpy(k->dst, (const __u32 *)(const void *)(p + 16), 4);
	if (kind == FD_KIND_PAIR)
		return FD_OK;
	k->proto = p[9];
	if (LD16(p + 6) & bpf_htons(0x1fff))
		return FD_OK; /* non-first fragment: the ports are in the first */
	return fd_transport(ctx, off + hlen, lim, p[9], ev);

ipv6:
	PULL(p, off, 40);
	k->flags = FD_FLAG_V6;
	switch (kind) {
	case FD_KIND_SRC:
		__builtin_memcpy(k->src, (const __u64 *)(const void *)(p + 8), 16);
		return FD_OK;
	case FD_KIND_DST:
		__builtin_memcpy(k->dst, (const __u64 *)(const void *)(p + 24), 16);
		return FD_OK;
	}
	__builtin_memcpy(k->src, (const __u64 *)(const void *)(p + 8), 16);
	__builtin_memcpy(k->dst, (const __u64 *)(const void *)(p + 24), 16);
	if (kind == FD_KIND_PAIR)
		return FD_OK;
	/* A payload length of 0 is a jumbogram or a GSO capture. */
	plen = bpf_ntohs(LD16(p + 4));
	if (plen != 0 && off + 40 + plen < lim)
		lim = off + 40 + plen;
	return fd_transport(ctx, off + 40, lim, 0x100 | p[6], ev);
}

/*
 * flow.Parse(frame, LinkEthernet, kind): fills ev->key (zeroed by the
 * caller) but its kind and returns FD_OK, or returns the enum fd_err of the
 * error flow.Parse returns.
 */
static __always_inline int parse(struct xdp_md *ctx, struct fd_event *ev)
{
	const void *data = (const void *)(long)ctx->data;
	const void *data_end = (const void *)(long)ctx->data_end;
	__u64 off = 14, lim = ~0ULL, end;
	const __u8 *p;
	__u16 etype; /* network byte order */
	int walked, proto;

	if (data + 14 > data_end)
		return FD_ERR_TRUNCATED;
	etype = LD16(data + 12);

	/* VLAN tags, MPLS labels and PPPoE share the walked count. While in an
	 * MPLS label stack, etype stays ETYPE_MPLS_UC. */
#pragma clang loop unroll(disable)
	for (walked = 0; walked <= FD_MAX_LINK_HEADERS; walked++) {
		if (etype == bpf_htons(ETYPE_IPV4))
			goto ipv4;
		if (etype == bpf_htons(ETYPE_IPV6))
			goto ipv6;
		if (walked == FD_MAX_LINK_HEADERS)
			return FD_ERR_TOO_MANY_HEADERS;
		switch (etype) {
		case bpf_htons(ETYPE_VLAN):
		case bpf_htons(ETYPE_QINQ):
		case bpf_htons(ETYPE_QINQ_OLD):
			/* Tag control information, then the next EtherType. */
			PULL(p, off, 4);
			etype = LD16(p + 2);
			off += 4;
			break;
		case bpf_htons(ETYPE_MPLS_UC):
		case bpf_htons(ETYPE_MPLS_MC):
			/* One label stack entry; after the bottom of the
			 * stack, guess IP from the version nibble. */
			PULL(p, off, 4);
			off += 4;
			if (p[2] & 1)
				goto mpls_payload;
			etype = bpf_htons(ETYPE_MPLS_UC);
			break;
		case bpf_htons(ETYPE_PPPOE_SESSION):
			/* Version/type, code, session ID, payload length, then
			 * the PPP protocol, 2 bytes or 1 when compressed (odd
			 * first byte). The length bounds the payload. */
			PULL(p, off, 7);
			end = off + 6 + bpf_ntohs(LD16(p + 4));
			if (end < lim)
				lim = end;
			PULL(p, off, 7);
			proto = p[6];
			if (!(proto & 1)) {
				PULL(p, off, 8);
				proto = proto << 8 | p[7];
				off += 1;
			}
			off += 7;
			if (proto == PPP_IPV4)
				etype = bpf_htons(ETYPE_IPV4);
			else if (proto == PPP_IPV6)
				etype = bpf_htons(ETYPE_IPV6);
			else
				return FD_ERR_NOT_IP;
			break;
		default:
			return FD_ERR_NOT_IP;
		}
	}
	return FD_ERR_TOO_MANY_HEADERS; /* not reached */

mpls_payload:
	return fd_ip(ctx, off, lim, 0, ev);
ipv4:
	return fd_ip(ctx, off, lim, 4, ev);
ipv6:
	return fd_ip(ctx, off, lim, 6, ev);
}

/*
 * flow.Mask.Apply on a key just parsed: its addresses masked to their
 * networks, its prefix length set. An address the kind does not hold is
 * zero and stays zero. k is 8-aligned (see fd_xdp).
 */
static __always_inline void fd_mask(struct fd_key *k)
{
	__u64 *w = (__u64 *)(void *)k;
	__u32 *src4 = (__u32 *)(void *)k->src, *dst4 = (__u32 *)(void *)k->dst;

	if (k->flags & FD_FLAG_V6) {
		w[0] &= fd_mask6[0];
		w[1] &= fd_mask6[1];
		w[2] &= fd_mask6[0];
		w[3] &= fd_mask6[1];
		k->bits = fd_prefix_v6;
	} else {
		*src4 &= fd_mask4;
		*dst4 &= fd_mask4;
		k->bits = fd_prefix_v4;
	}
	k->flags |= FD_FLAG_PREFIX;
}

/* Hash constants: odd multipliers (XXH64's primes and MurmurHash3's fmix64
 * constants). */
#define H_M0 0x9E3779B185EBCA87ULL
#define H_M1 0xC2B2AE3D27D4EB4FULL
#define H_M2 0x165667B19E3779F9ULL
#define H_M3 0x85EBCA77C2B2AE63ULL
#define H_M4 0x27D4EB2F165667C5ULL
#define H_F1 0xFF51AFD7ED558CCDULL
#define H_F2 0xC4CEB9FE1A85EC53ULL

/* A seeded bijection of one key word; m differs per word position. */
static __always_inline __u64 fd_mix(__u64 w, __u64 seed, __u64 m)
{
	w = (w ^ seed) * m;
	w ^= w >> 32;
	w *= H_F1;
	return w ^ (w >> 29);
}

/*
 * fd_hash is a seeded 64-bit hash of the 40 key bytes, the five words mixed
 * independently and summed, then avalanched:
 *
 *	h = F(mix(w0, M0) + mix(w1, M1) + ... + mix(w4, M4))
 *	mix(w, M) = xorshift29(xorshift32((w ^ seed) * M) * F1)
 *	F(x) = xorshift32(xorshift32(x) * F2)
 *
 * Each mix is a bijection of its word (odd multipliers, xorshifts), and so
 * is F: keys that differ in one word never collide, and every key bit
 * matters. The multiplier differs per position, so words cannot swap
 * places unnoticed; the seed makes collisions between keys that differ in
 * several words depend on it. The five mixes do not depend on each other:
 * the CPU overlaps them, and the longest dependency chain holds three
 * multiplications, where hashing the words one after the other would chain
 * at least seven (the program then spent 10 ns more per packet). The row
 * comes from the high 32 bits, the fingerprint from the low 32 bits.
 *
 * bpf/hash_test.go holds a Go twin and checks it against the program.
 */
static __always_inline __u64 fd_hash(const struct fd_key *key, __u64 seed)
{
	const __u64 *w = (const __u64 *)(const void *)key; /* 8-aligned: see fd_xdp */
	__u64 h;

	h = fd_mix(w[0], seed, H_M0) + fd_mix(w[1], seed, H_M1) + fd_mix(w[2], seed, H_M2) +
	    fd_mix(w[3], seed, H_M3) + fd_mix(w[4], seed, H_M4);
	h ^= h >> 32;
	h *= H_F2;
	return h ^ (h >> 32);
}

_Static_assert(sizeof(struct fd_key) == 5 * sizeof(__u64), "fd_hash reads the key as five words");

/* COUNT(field): count the frame in the CPU's totals and its window's slot. */
#define COUNT(field)                                                       \
	do {                                                               \
		pc->total.field++;                                         \
		win->counts.field++;                                       \
	} while (0)

/*
 * fd_clock returns the program's time for a frame, CLOCK_BOOTTIME plus
 * the offset, raised to fd_floor_ns and to the start of the CPU's window,
 * and moves the CPU's window forward when the time is past its end (see
 * struct fd_cpu). Within the CPU's window the time is the clock's: it may
 * go back there, but never across a boundary.
 */
static __always_inline __u64 fd_clock(struct fd_cpu *pc, const struct fd_config *cfg, __u64 window)
{
	__u64 now = bpf_ktime_get_boot_ns() + cfg->clock_offset_ns;
	__u64 floor = fd_floor_ns;

	if (now < floor)
		now = floor;
	if (now < pc->start_ns)
		return pc->start_ns;
	if (now >= pc->end_ns) {
		/* The window before its slot is taken over (fd_xdp): user
		 * space reads a slot, then the window, to tell whether the
		 * slot may have been taken over while it read. */
		pc->window = now / window;
		pc->start_ns = pc->window * window;
		pc->end_ns = pc->start_ns + window;
	}
	return now;
}

/*
 * Per frame: take the time (windows: see fd_clock) and find the CPU's
 * window slot, taking it over for the window if it holds an older one;
 * count the frame; parse it (on failure count the error class, done);
 * mask the key to its networks (keys by network); count the key; look its
 * fingerprint up in the CPU's prefilter row for the window (found: count
 * a hit, done); reserve an event in the CPU's
 * ring (full: count it, done, and the key is not remembered, so that the
 * flow's next packet tries again); fill in the time and the key, submit
 * it, count it; remember the fingerprint in the row. Every count goes to
 * the CPU's totals and to its window's slot alike.
 */
SEC("xdp")
int fd_xdp(struct xdp_md *ctx)
{
	__u32 zero = 0, rows = fd_prefilter_rows, cpu, idx, fp = 0;
	__u64 window = fd_window_ns, now = 0, h;
	struct fd_event ev = {}; /* the event being built: its key is 8-aligned */
	struct fd_cpu *pc;
	struct fd_window *win;
	struct fd_config *cfg;
	struct fd_row *row = NULL;
	struct fd_event *e;
	void *ring;
	int err, i;

	pc = bpf_map_lookup_elem(&fd_cpu, &zero);
	cfg = bpf_map_lookup_elem(&fd_config, &zero);
	if (!pc || !cfg)
		return XDP_PASS; /* not reached: an array has every index */
	if (window)
		now = fd_clock(pc, cfg, window);
	idx = (__u32)pc->window & (FD_WINDOW_SLOTS - 1);
	win = bpf_map_lookup_elem(&fd_windows, &idx);
	if (!win)
		return XDP_PASS; /* not reached */
	if (win->window != pc->window) {
		/* The slot holds an older window: the CPU's window takes
		 * it over. */
		win->window = pc->window;
		__builtin_memset(&win->counts, 0, sizeof(win->counts));
	}
	COUNT(packets);

	err = parse(ctx, &ev);
	if (err != FD_OK) {
		if ((unsigned int)err < FD_NUM_ERRS)
			COUNT(errors[err]);
		return XDP_PASS;
	}
	ev.key.kind = fd_key_kind;
	if (fd_prefix)
		fd_mask(&ev.key);
	COUNT(keyed);

	if (rows) {
		h = fd_hash(&ev.key, fd_hash_seed);
		idx = (__u32)(((h >> 32) * rows) >> 32);
		fp = (__u32)h;
		if (fp == 0)
			fp = 1; /* 0 marks an empty bucket */
		row = bpf_map_lookup_elem(&fd_prefilter, &idx);
		if (row) {
			if (row->epoch != (__u32)pc->window) {
				/* A row of another window is empty. */
				row->epoch = (__u32)pc->window;
#pragma clang loop unroll(full)
				for (i = 0; i < FD_ROW_BUCKETS; i++)
					row->fp[i] = 0;
			} else {
#pragma clang loop unroll(full)
				for (i = 0; i < FD_ROW_BUCKETS; i++) {
					if (row->fp[i] == fp) {
						COUNT(prefilter_hits);
						return XDP_PASS;
					}
				}
			}
		}
	}

	cpu = bpf_get_smp_processor_id();
	ring = bpf_map_lookup_elem(&fd_rings, &cpu);
	if (!ring) {
		COUNT(ring_full); /* not reached: the loader gives every CPU a ring */
		return XDP_PASS;
	}
	e = bpf_ringbuf_reserve(ring, sizeof(*e), 0);
	if (!e) {
		/* Not remembered: the flow's next packet tries again. */
		COUNT(ring_full);
		return XDP_PASS;
	}
	if (!window)
		now = bpf_ktime_get_boot_ns() + cfg->clock_offset_ns;
	ev.time_ns = now;
	*e = ev;
	bpf_ringbuf_submit(e, 0);
	COUNT(emitted);

	if (row) {
		/* The first empty bucket, or a random one when the row is
		 * full (QHT's random replacement). */
#pragma clang loop unroll(full)
		for (i = 0; i < FD_ROW_BUCKETS; i++) {
			if (row->fp[i] == 0) {
				row->fp[i] = fp;
				return XDP_PASS;
			}
		}
		idx = (__u32)(((__u64)bpf_get_prandom_u32() * FD_ROW_BUCKETS) >> 32);
		if (idx < FD_ROW_BUCKETS)
			row->fp[idx] = fp;
	}
	return XDP_PASS;
}
