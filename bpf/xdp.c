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
 * With decapsulation (fd_decap, see parse_decap) it builds the key
 * flow.Key.DecodeDecap would build instead, or counts its error class.
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
 * Decapsulation (bpf.Config.Decap): fd_decap is the set of tunnel kinds
 * looked into (FD_DECAP_* bits); 0, the default, is today's parser, the
 * outermost IP header, and the decapsulating one is dead code, pruned.
 * The UDP ports are in network byte order (0: none); fd_segment 1 puts
 * the VNI of the innermost VXLAN or Geneve header crossed into the key.
 */
volatile const __u8 fd_decap = 0;
volatile const __u16 fd_vxlan_ports[2] = {0, 0};
volatile const __u16 fd_geneve_port = 0;
volatile const __u16 fd_gtpu_port = 0;
volatile const __u8 fd_segment = 0;

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

_Static_assert(sizeof(struct fd_key) == 44, "struct fd_key is flow.Key's 44-byte binary form");
_Static_assert(__builtin_offsetof(struct fd_event, key) % 8 == 0, "fd_mask and fd_hash read the key as words");
_Static_assert(sizeof(struct fd_event) == 56, "struct fd_event is bpf.EventSize bytes");
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
 * The decapsulating parser (fd_decap not 0): the key of the innermost IP
 * header reached through the tunnels of fd_decap, at most FD_MAX_TUNNELS
 * of them (see flow.Decap, whose answers it gives). It is a loop over
 * levels, each a link walk (fd_link_d: an inner Ethernet header, VLAN
 * tags, MPLS labels, PPPoE, as for the outer link) to an IP header, then
 * the IP header and its transport (fd_ip_d), which either keys the frame
 * or finds a tunnel (fd_tunnel) and says where its payload is, in struct
 * fd_tun. The functions are global, so that the verifier checks each
 * once, not once per level and path.
 *
 * A frame the tunnels do not concern gets today's answer: a non-first
 * fragment keys its outer header (no tunnel header to read), a protocol
 * or UDP port that is not a listed tunnel keys the header it is in, and
 * where the headers before the transport are cut or too many, a key kind
 * that does not need the transport keeps its key, as without decap. An
 * ICMP error's quoted header is never looked at.
 */
#define PROTO_IPIP 4
#define PROTO_IPV6 41
#define PROTO_GRE 47

#define ETYPE_TEB 0x6558     /* transparent Ethernet bridging */
#define ETYPE_ERSPAN2 0x88be /* ERSPAN type I (no sequence number) and II */
#define ETYPE_ERSPAN3 0x22eb /* ERSPAN type III */

/* fd_tun.etype besides EtherTypes, only ever its initial value for
 * fd_link_d: an Ethernet header comes first, or an IP header told by its
 * version nibble: after MPLS (another version is not IP), or as the
 * payload of GTP-U or ERSPAN III (another version is a payload not read). */
#define FD_ETYPE_ETH 0
#define FD_ETYPE_GUESS 1
#define FD_ETYPE_GUESS_TUN 2

/* Results of the decapsulating parser besides FD_OK and enum fd_err. */
#define FD_TUNNEL (-2) /* a tunnel: struct fd_tun says where its payload is */
#define FD_NONE (-3)   /* not a tunnel fd_decap lists */

#define FD_SEG_VALID (1U << 24) /* fd_tun.vni holds a VNI */

/* Where the payload of a tunnel, or the IP header of a level, is. */
struct fd_tun {
	__u64 off;   /* its offset */
	__u64 lim;   /* the effective end of the frame there */
	__u32 vni;   /* FD_SEG_VALID | VNI of the innermost VXLAN or Geneve header crossed, or 0 */
	__u16 etype; /* what comes: an EtherType (network order), FD_ETYPE_ETH or FD_ETYPE_GUESS */
	__u16 pad;
};

/* PULL_OR is PULL with fail (a statement) in place of the return. */
#define PULL_OR(p, off, n, fail)                                           \
	do {                                                               \
		if ((off) > FD_MAX_OFF || (off) + (n) > lim) {             \
			fail;                                              \
		}                                                          \
		p = (const __u8 *)data + (off);                            \
		if ((const void *)(p + (n)) > data_end) {                  \
			fail;                                              \
		}                                                          \
	} while (0)

/* TPULL: PULL inside a tunnel header, which is cut short when it fails. */
#define TPULL(p, off, n) PULL_OR(p, off, n, return FD_ERR_TUNNEL_TRUNCATED)

/*
 * The link walk of one level, from t->off: an Ethernet header first when
 * t->etype is FD_ETYPE_ETH, else the walk starts at the EtherType
 * t->etype. On FD_OK, t says where the IP header is and what it is
 * (ETYPE_IPV4, ETYPE_IPV6 or FD_ETYPE_GUESS).
 */
__noinline int fd_link_d(struct xdp_md *ctx, struct fd_tun *t)
{
	const void *data = (const void *)(long)ctx->data;
	const void *data_end = (const void *)(long)ctx->data_end;
	__u64 off, lim, end;
	const __u8 *p;
	__u16 etype; /* network byte order */
	int walked, proto;

	if (!t)
		return FD_ERR_BAD_HEADER; /* not reached: the verifier wants the check */
	off = t->off;
	lim = t->lim;
	etype = t->etype;
	if (etype == bpf_htons(FD_ETYPE_GUESS) || etype == bpf_htons(FD_ETYPE_GUESS_TUN))
		return FD_OK;
	if (etype == bpf_htons(FD_ETYPE_ETH)) {
		PULL(p, off, 14);
		etype = LD16(p + 12);
		off += 14;
	}
#pragma clang loop unroll(disable)
	for (walked = 0; walked <= FD_MAX_LINK_HEADERS; walked++) {
		if (etype == bpf_htons(ETYPE_IPV4) || etype == bpf_htons(ETYPE_IPV6))
			goto done;
		if (walked == FD_MAX_LINK_HEADERS)
			return FD_ERR_TOO_MANY_HEADERS;
		switch (etype) {
		case bpf_htons(ETYPE_VLAN):
		case bpf_htons(ETYPE_QINQ):
		case bpf_htons(ETYPE_QINQ_OLD):
			PULL(p, off, 4);
			etype = LD16(p + 2);
			off += 4;
			break;
		case bpf_htons(ETYPE_MPLS_UC):
		case bpf_htons(ETYPE_MPLS_MC):
			PULL(p, off, 4);
			off += 4;
			if (p[2] & 1) {
				etype = bpf_htons(FD_ETYPE_GUESS);
				goto done;
			}
			etype = bpf_htons(ETYPE_MPLS_UC);
			break;
		case bpf_htons(ETYPE_PPPOE_SESSION):
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
done:
	t->off = off;
	t->lim = lim;
	t->etype = etype;
	return FD_OK;
}

/*
 * fd_tunnel looks at the payload of protocol proto at off (the transport
 * of an IP header): FD_NONE when it is no tunnel fd_decap lists, an enum
 * fd_err when it is one whose header is bad, FD_TUNNEL when it is one,
 * with t set to its payload. proto_last is the protocol, and 0x100 when
 * FD_MAX_TUNNELS tunnels were gone through: a tunnel listed is then FD_ERR_TUNNEL_TOO_DEEP, told by its
 * protocol and port alone, before its header is read (as flow does).
 */
__noinline int fd_tunnel(struct xdp_md *ctx, struct fd_tun *t, __u64 off, __u64 lim, __u32 proto_last)
{
	__u32 proto = proto_last & 0xff, last = proto_last >> 8;
	const void *data = (const void *)(long)ctx->data;
	const void *data_end = (const void *)(long)ctx->data_end;
	__u8 decap = fd_decap, nt, ft;
	const __u8 *p;
	__u64 hlen = 0, o, len;
	__u16 flags, gp, sport, dport, gtp = fd_gtpu_port;
	int i;

	if (!t)
		return FD_ERR_BAD_HEADER; /* not reached: the verifier wants the check */
	switch (proto) {
	case PROTO_IPIP:
	case PROTO_IPV6:
		/* IP in IP (RFC 2003, 4213, 2473): the header follows. */
		if (!(decap & FD_DECAP_IPIP))
			return FD_NONE;
		if (last)
			return FD_ERR_TUNNEL_TOO_DEEP;
		t->etype = proto == PROTO_IPIP ? bpf_htons(ETYPE_IPV4) : bpf_htons(ETYPE_IPV6);
		goto inner;
	case PROTO_GRE:
		if (!(decap & (FD_DECAP_GRE | FD_DECAP_ERSPAN)))
			return FD_NONE;
		if (last)
			return FD_ERR_TUNNEL_TOO_DEEP;
		goto gre;
	case PROTO_UDP:
		if (!(decap & (FD_DECAP_VXLAN | FD_DECAP_GENEVE | FD_DECAP_GTPU)))
			return FD_NONE;
		PULL_OR(p, off, 4, return FD_NONE); /* no ports: no tunnel seen */
		sport = LD16(p);
		dport = LD16(p + 2);
		if ((decap & FD_DECAP_VXLAN) && dport != 0 && (dport == fd_vxlan_ports[0] || dport == fd_vxlan_ports[1]))
			i = FD_DECAP_VXLAN;
		else if ((decap & FD_DECAP_GENEVE) && dport != 0 && dport == fd_geneve_port)
			i = FD_DECAP_GENEVE;
		else if ((decap & FD_DECAP_GTPU) && gtp != 0 && (dport == gtp || sport == gtp))
			i = FD_DECAP_GTPU;
		else
			return FD_NONE;
		if (last)
			return FD_ERR_TUNNEL_TOO_DEEP;
		/* The UDP header, then the tunnel's. */
		off += 8;
		if (i == FD_DECAP_VXLAN)
			goto vxlan;
		if (i == FD_DECAP_GENEVE)
			goto geneve;
		goto gtpu;
	}
	return FD_NONE;

gre:
	/*
	 * GRE (RFC 2784, 2890): flags and version, protocol, then the
	 * checksum and reserved word (C), key (K) and sequence number (S),
	 * each present when its bit is. Any version but 0 (1 is PPTP's
	 * enhanced GRE) is a payload not read; the routing bit (RFC 1701) a
	 * bad header. A protocol of a kind not listed ends the walk.
	 */
	TPULL(p, off, 4);
	flags = LD16(p);
	gp = LD16(p + 2);
	if (flags & bpf_htons(0x0007))
		return FD_ERR_TUNNEL_UNKNOWN;
	if (flags & bpf_htons(0x4000))
		return FD_ERR_TUNNEL_BAD_HEADER;
	hlen = 4;
	if (flags & bpf_htons(0x8000))
		hlen += 4;
	if (flags & bpf_htons(0x2000))
		hlen += 4;
	if (flags & bpf_htons(0x1000))
		hlen += 4;
	if (!HAVE(off, hlen))
		return FD_ERR_TUNNEL_TRUNCATED;
	switch (gp) {
	case bpf_htons(ETYPE_IPV4):
	case bpf_htons(ETYPE_IPV6):
	case bpf_htons(ETYPE_MPLS_UC):
		if (!(decap & FD_DECAP_GRE))
			return FD_NONE;
		t->etype = gp;
		goto inner;
	case bpf_htons(ETYPE_TEB):
		if (!(decap & FD_DECAP_GRE))
			return FD_NONE;
		t->etype = bpf_htons(FD_ETYPE_ETH);
		goto inner;
	case bpf_htons(ETYPE_ERSPAN2):
		if (!(decap & FD_DECAP_ERSPAN))
			return FD_NONE;
		/* Type II has the sequence number and an 8-byte header of
		 * version 1; type I neither: the mirrored frame follows (as
		 * Wireshark reads it). */
		if (flags & bpf_htons(0x1000)) {
			o = off + hlen;
			TPULL(p, o, 8);
			if (p[0] >> 4 != 1)
				return FD_ERR_TUNNEL_BAD_HEADER;
			hlen += 8;
		}
		t->etype = bpf_htons(FD_ETYPE_ETH);
		goto inner;
	case bpf_htons(ETYPE_ERSPAN3):
		if (!(decap & FD_DECAP_ERSPAN))
			return FD_NONE;
		/* A 12-byte header of version 2, and the 8-byte platform
		 * specific subheader when its O bit (the last) is set; frame
		 * type 0 is Ethernet, 2 IP. */
		o = off + hlen;
		TPULL(p, o, 12);
		if (p[0] >> 4 != 2)
			return FD_ERR_TUNNEL_BAD_HEADER;
		ft = (p[10] >> 2) & 0x1f;
		hlen += (p[11] & 1) ? 20 : 12;
		if (!HAVE(off, hlen))
			return FD_ERR_TUNNEL_TRUNCATED;
		if (ft == 0)
			t->etype = bpf_htons(FD_ETYPE_ETH);
		else if (ft == 2)
			t->etype = bpf_htons(FD_ETYPE_GUESS_TUN);
		else
			return FD_ERR_TUNNEL_UNKNOWN;
		goto inner;
	}
	return FD_ERR_TUNNEL_UNKNOWN;

vxlan:
	/* VXLAN (RFC 7348): flags (I, 0x08, says the VNI is valid),
	 * reserved, VNI, reserved; Ethernet follows. */
	TPULL(p, off, 8);
	if (!(p[0] & 0x08))
		return FD_ERR_TUNNEL_BAD_HEADER;
	t->vni = FD_SEG_VALID | (__u32)p[4] << 16 | (__u32)p[5] << 8 | p[6];
	t->etype = bpf_htons(FD_ETYPE_ETH);
	hlen = 8;
	goto inner;

geneve:
	/* Geneve (RFC 8926): version (0) and options length in 4-byte
	 * words, flags, protocol, VNI, reserved, then the options. */
	TPULL(p, off, 8);
	if (p[0] >> 6)
		return FD_ERR_TUNNEL_BAD_HEADER;
	hlen = 8 + (__u64)(p[0] & 0x3f) * 4;
	if (!HAVE(off, hlen))
		return FD_ERR_TUNNEL_TRUNCATED;
	gp = LD16(p + 2);
	if (gp == bpf_htons(ETYPE_TEB))
		t->etype = bpf_htons(FD_ETYPE_ETH);
	else if (gp == bpf_htons(ETYPE_IPV4) || gp == bpf_htons(ETYPE_IPV6))
		t->etype = gp;
	else
		return FD_ERR_TUNNEL_UNKNOWN;
	t->vni = FD_SEG_VALID | (__u32)p[4] << 16 | (__u32)p[5] << 8 | p[6];
	goto inner;

gtpu:
	/* GTP-U (3GPP TS 29.281): version 1, protocol type 1 (GTP), flags E,
	 * S, PN; message type; length; TEID; with any of E, S, PN the
	 * sequence number, N-PDU number and next extension header type;
	 * with E the chain of extension headers, each its length in 4-byte
	 * units first and the next type last, at most FD_MAX_GTP_EXT. A
	 * T-PDU (0xff) carries an IP packet; other messages (echo, error
	 * indication) carry none. */
	TPULL(p, off, 8);
	if (p[0] >> 5 != 1 || !(p[0] & 0x10))
		return FD_ERR_TUNNEL_BAD_HEADER;
	if (p[1] != 0xff)
		return FD_ERR_TUNNEL_NOT_DATA;
	hlen = 8;
	if (p[0] & 0x07) {
		TPULL(p, off, 12);
		hlen = 12;
		if (p[0] & 0x04) {
			nt = p[11];
			for (i = 0; i < FD_MAX_GTP_EXT && nt != 0; i++) {
				o = off + hlen;
				TPULL(p, o, 1);
				len = (__u64)p[0] * 4;
				if (len == 0)
					return FD_ERR_TUNNEL_BAD_HEADER;
				if (!HAVE(o, len))
					return FD_ERR_TUNNEL_TRUNCATED;
				o += len - 1;
				/* Opaque to clang, which would otherwise check
				 * the read against o + len, a register the
				 * verifier does not relate to the pointer. */
				asm volatile("" : "+r"(o));
				TPULL(p, o, 1);
				nt = p[0];
				hlen += len;
			}
			if (nt != 0)
				return FD_ERR_TOO_MANY_HEADERS; /* a chain that does not end */
		}
	}
	t->etype = bpf_htons(FD_ETYPE_GUESS_TUN);

inner:
	if (off > FD_MAX_OFF || !HAVE(off, hlen))
		return FD_ERR_TUNNEL_TRUNCATED;
	t->off = off + hlen;
	t->lim = lim;
	return FD_TUNNEL;
}

/*
 * The IP header of one level, at t->off (t->etype says its version, or
 * FD_ETYPE_GUESS): fills in the key (zeroed first: an outer level's is
 * overwritten) and returns FD_OK, or returns FD_TUNNEL with t set by
 * fd_tunnel, or an enum fd_err.
 */
__noinline int fd_ip_d(struct xdp_md *ctx, struct fd_tun *t, struct fd_event *ev, __u32 last)
{
	const void *data = (const void *)(long)ctx->data;
	const void *data_end = (const void *)(long)ctx->data_end;
	__u8 kind = fd_key_kind, next;
	struct fd_key *k;
	const __u8 *p;
	__u64 off, lim, hlen, total, plen;
	__u32 ver = 0;
	int v6, walked, err, r, ah = 0;

	if (!t || !ev)
		return FD_ERR_BAD_HEADER; /* not reached: the verifier wants the check */
	k = &ev->key;
	off = t->off;
	lim = t->lim;
	if (t->etype == bpf_htons(ETYPE_IPV4))
		ver = 4;
	else if (t->etype == bpf_htons(ETYPE_IPV6))
		ver = 6;
	PULL(p, off, 1);
	if (ver == 0) {
		ver = p[0] >> 4;
		if (ver != 4 && ver != 6)
			return t->etype == bpf_htons(FD_ETYPE_GUESS_TUN) ? FD_ERR_TUNNEL_UNKNOWN : FD_ERR_NOT_IP;
	}
	if (p[0] >> 4 != ver)
		return FD_ERR_BAD_HEADER;
	__builtin_memset(k, 0, sizeof(*k));
	if (ver == 6)
		goto ipv6;

	hlen = (__u64)(p[0] & 0x0f) * 4;
	if (hlen < 20)
		return FD_ERR_BAD_HEADER;
	if (!HAVE(off, hlen))
		return FD_ERR_TRUNCATED;
	PULL(p, off, 20);
	total = bpf_ntohs(LD16(p + 2));
	if (total != 0) {
		if (total < hlen)
			return FD_ERR_BAD_HEADER;
		if (off + total < lim)
			lim = off + total;
	}
	if (kind != FD_KIND_DST)
		__builtin_memcpy(k->src, (const __u32 *)(const void *)(p + 12), 4);
	if (kind != FD_KIND_SRC)
		__builtin_memcpy(k->dst, (const __u32 *)(const void *)(p + 16), 4);
	next = p[9];
	if (LD16(p + 6) & bpf_htons(0x1fff)) {
		/* A non-first fragment: no tunnel header in it; the outer key. */
		if (kind == FD_KIND_5TUPLE)
			k->proto = next;
		return FD_OK;
	}
	off += hlen;
	v6 = 0;
	goto transport;

ipv6:
	PULL(p, off, 40);
	k->flags = FD_FLAG_V6;
	if (kind != FD_KIND_DST)
		__builtin_memcpy(k->src, (const __u64 *)(const void *)(p + 8), 16);
	if (kind != FD_KIND_SRC)
		__builtin_memcpy(k->dst, (const __u64 *)(const void *)(p + 24), 16);
	plen = bpf_ntohs(LD16(p + 4));
	if (plen != 0 && off + 40 + plen < lim)
		lim = off + 40 + plen;
	next = p[6];
	off += 40;
	v6 = 1;

transport:
	/* IPsec AH and IPv6 extension headers, as fd_transport walks them;
	 * no tunnel is looked for after an AH header. */
	for (walked = 0; walked <= FD_MAX_IPV6_HEADERS; walked++) {
		if (next == PROTO_AH) {
			ah = 1;
			PULL_OR(p, off, 2, goto cut);
			hlen = ((__u64)p[1] + 2) * 4;
			if (hlen < 12) {
				err = FD_ERR_BAD_HEADER;
				goto failed;
			}
		} else if (v6 && (next == PROTO_HOPOPTS || next == PROTO_ROUTING || next == PROTO_DSTOPTS)) {
			PULL_OR(p, off, 2, goto cut);
			hlen = ((__u64)p[1] + 1) * 8;
		} else if (v6 && next == PROTO_FRAGMENT) {
			hlen = 8;
			PULL_OR(p, off, 8, goto cut);
			if (LD16(p + 2) & bpf_htons(0xfff8)) {
				if (kind == FD_KIND_5TUPLE)
					k->proto = p[0];
				return FD_OK;
			}
		} else {
			goto found;
		}
		if (walked == FD_MAX_IPV6_HEADERS) {
			err = FD_ERR_TOO_MANY_HEADERS;
			goto failed;
		}
		if (!HAVE(off, hlen))
			goto cut;
		next = p[0];
		off += hlen;
	}
	return FD_ERR_TOO_MANY_HEADERS; /* not reached */
cut:
	err = FD_ERR_TRUNCATED;
failed:
	/* Only the 5-tuple needs the transport. */
	return kind == FD_KIND_5TUPLE ? err : FD_OK;

found:
	if (!ah) {
		r = fd_tunnel(ctx, t, off, lim, next | (last ? 0x100 : 0));
		if (r != FD_NONE)
			return r;
	}
	if (kind != FD_KIND_5TUPLE)
		return FD_OK;
	k->proto = next;
	if (!has_ports(next))
		return FD_OK;
	PULL(p, off, 4);
	__builtin_memcpy(&k->sport, (const __u32 *)(const void *)p, 4);
	k->flags |= FD_FLAG_PORTS;
	return FD_OK;
}

/* fd_set_segment puts the VNI into the key (fd_segment): flow.Key's segment. */
static __always_inline void fd_set_segment(struct fd_key *k, __u32 vni)
{
	k->flags |= FD_FLAG_SEGMENT;
	k->seg = bpf_htonl(vni & 0xffffff);
}

/* The decapsulating parse: the levels, outermost first. */
static __always_inline int parse_decap(struct xdp_md *ctx, struct fd_event *ev)
{
	struct fd_tun t = {.off = 0, .lim = ~0ULL, .etype = bpf_htons(FD_ETYPE_ETH)};
	int level, r;

#pragma clang loop unroll(disable)
	for (level = 0; level <= FD_MAX_TUNNELS; level++) {
		r = fd_link_d(ctx, &t);
		if (r != FD_OK)
			return r;
		r = fd_ip_d(ctx, &t, ev, level == FD_MAX_TUNNELS);
		if (r == FD_OK) {
			if (fd_segment && (t.vni & FD_SEG_VALID))
				fd_set_segment(&ev->key, t.vni);
			return FD_OK;
		}
		if (r != FD_TUNNEL)
			return r;
	}
	return FD_ERR_TUNNEL_TOO_DEEP; /* not reached: fd_tunnel says so at the last level */
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
#define H_M5 0xD6E8FEB86659FD93ULL
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
 * fd_hash is a seeded 64-bit hash of the first 40 key bytes (and of the
 * segment of a key that has one, with decapsulation), the five words mixed
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
	/* A key with a segment: the VNI too (a sixth word, the segment's 4
	 * bytes zero-extended); keys without one hash as before. */
	if (fd_segment && (key->flags & FD_FLAG_SEGMENT))
		h += fd_mix(key->seg, seed, H_M5);
	h ^= h >> 32;
	h *= H_F2;
	return h ^ (h >> 32);
}

_Static_assert(__builtin_offsetof(struct fd_key, seg) == 5 * sizeof(__u64), "fd_hash reads the key as five words and the segment");

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

	err = fd_decap ? parse_decap(ctx, &ev) : parse(ctx, &ev);
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
