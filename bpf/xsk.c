//go:build ignore

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The redirect program of the AF_XDP capture mode (afxdp.Open): it
 * hands every frame of a receive queue to the AF_XDP socket bound to that
 * queue, and leaves the frames of queues without a socket to the kernel's
 * network stack. Frames it redirects never reach the stack.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

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

SEC("xdp")
int fd_xsk(struct xdp_md *ctx)
{
	/* XDP_PASS, in the flags, is the action when the queue has no socket. */
	return bpf_redirect_map(&fd_xsks, ctx->rx_queue_index, XDP_PASS);
}

char __license[] SEC("license") = "Dual BSD/GPL";
