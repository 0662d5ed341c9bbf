//go:build ignore

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * A traffic generator for the throughput benchmarks of capture/ (LoadTrafficGen
 * in trafficgen.go), run by BPF_PROG_TEST_RUN in live-frames mode
 * (BPF_F_TEST_XDP_LIVE_FRAMES, Linux 5.18+): the kernel runs fd_trafficgen
 * on copies of one template frame "received" on a device, and transmits the
 * frames it returns XDP_TX for out of that device. On a veth end they arrive
 * at its peer, as frames from a wire would.
 *
 * fd_trafficgen gives frame number i (counted from load) the IPv4 source
 * address fd_src_base + i % fd_flows, and recomputes the IPv4 header checksum.
 * Live frames are recycled pages that keep what the previous run wrote, so
 * it writes both every time. The frame counter is one global, not per CPU:
 * one thread sends at a time (the kernel runs the repetitions of one
 * BPF_PROG_TEST_RUN call one after the other, possibly moving between CPUs
 * between batches), and the counter gives each frame its exact number, so
 * user space knows how many went out even when the call was interrupted and
 * repeated. Frames past fd_limit are dropped: a repeated call sends nothing
 * twice.
 *
 * fd_pass counts the frames and passes them to the stack. Attached to the
 * receiving veth end, it makes veth run its NAPI receive path, which frames
 * sent with XDP_TX (ndo_xdp_xmit) need, without keying or redirecting
 * anything.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* The number of distinct source addresses (at least 1) and the first one,
 * in host byte order; set by the loader. */
volatile const __u32 fd_flows = 1;
volatile const __u32 fd_src_base = 0;

/* Frames given a number since load, and the number at which to stop. */
__u64 fd_sent = 0;
__u64 fd_limit = 0;

SEC("xdp")
int fd_trafficgen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;
	__u64 i;

	/* The loader checks the template: Ethernet, IPv4, a 20-byte header. */
	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5)
		return XDP_ABORTED;
	i = fd_sent;
	if (i >= fd_limit)
		return XDP_DROP;
	fd_sent = i + 1;

	ip->saddr = bpf_htonl(fd_src_base + (__u32)(i % fd_flows));
	ip->check = 0;
#pragma unroll
	for (int k = 0; k < (int)(sizeof(*ip) / 2); k++)
		sum += w[k];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->check = (__u16)~sum;
	return XDP_TX;
}

/* Frames fd_pass has seen, on every CPU. */
__u64 fd_passed = 0;

SEC("xdp")
int fd_pass(struct xdp_md *ctx)
{
	__sync_fetch_and_add(&fd_passed, 1);
	return XDP_PASS;
}

char __license[] SEC("license") = "Dual BSD/GPL";
