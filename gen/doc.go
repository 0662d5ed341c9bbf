// Package gen writes synthetic packet captures: a known number of packets
// over a known number of distinct flows, with controlled popularity, address
// families, VLAN tags, timing and broken frames. The project's tests, its
// testdata/pcaps and `flowdedup gen` use it; because the generator knows the
// ground truth, [Stats] reports the distinct keys of every kind the capture
// holds, so a replay of the file can be checked against exact numbers.
//
// # Flow model
//
// F flows are laid over a two-level host model, so that the distinct source,
// destination, pair and 5-tuple counts all differ:
//
//   - P = ceil(F/3) host pairs, each carrying up to three flows (flow i
//     belongs to pair i mod P);
//   - C = ceil(P/4) clients, the sources, each talking to about four
//     servers, and S = max(ceil(P/10), ceil(P/C)) servers, the
//     destinations. Pair p joins client p mod C to a server picked so that
//     no two pairs are alike.
//   - Hosts are dual-stack: client c is 10.x.y.z and 2001:db8:0:c::/64,
//     server s is 172.16-31.x.y and 2001:db8:0:5::/64, the host parts drawn
//     by a seeded bijection. Each flow is IPv4 or IPv6; exactly
//     round(IPv6×F) flows, chosen at random, are IPv6, and a flow uses the
//     addresses of its family. A source is therefore a (client, family) and
//     a pair a (pair, family).
//   - The flows of a pair differ by source port (an ephemeral port from
//     32768 up); the first flow of about one pair in ten is an ICMP or
//     ICMPv6 echo (no ports), the others are TCP (70%) or UDP (30%) to a
//     well-known service port. Hence every flow is a distinct 5-tuple.
//
// # Packets
//
// Every packet that is not malformed carries one flow. Exactly F of them
// introduce the flows, in random order, at positions spread uniformly over
// the capture (selection sampling), so new flows keep arriving throughout;
// every other packet draws its flow by popularity: uniformly, or by a Zipf
// law of exponent s > 0 over popularity ranks assigned to the flows at
// random (P(rank k) ∝ k^-s, sampled exactly by Walker's alias method). The
// flow of rank k therefore appears 1 + Binomial(Packets-Malformed-F, p_k)
// times.
//
// Frames are Ethernet II, optionally with an 802.1Q tag (about one client in
// four behind an 802.1ad QinQ stack instead), then IPv4 with a valid header
// checksum or IPv6, then TCP, UDP or ICMP(v6) echo with valid checksums and
// a few bytes of payload. With Fragments > 0, that fraction of the IPv4 UDP
// packets (never a flow's introducing packet) is written as a non-first
// fragment, which flow.Parse keys without ports: each IPv4 UDP pair that
// gets one adds one 5-tuple key to Stats.FiveTuples.
//
// Timestamps start exactly at Config.Start and are the order statistics of
// uniform points over Config.Duration: non-decreasing, never past
// Start+Duration (unless a messy option below moves them back).
//
// # Messy captures
//
// Real captures are not that tidy, and the readers of captures must cope;
// three options make the mess on purpose, each from a random stream of its
// own, so that turning one on changes nothing but what it is for:
//
//   - Jitter: each packet's time moves back by a uniform amount in
//     [0, Jitter], so time goes backwards by up to Jitter between packets
//     (several capture rings merged, a clock stepped back);
//   - Interfaces and InterfaceSkew (pcapng): the file describes several
//     interfaces, each packet goes out on one drawn at random, and
//     interface i's clock runs i×InterfaceSkew/(Interfaces-1) behind the
//     first's, as when dumpcap writes interfaces whose clocks differ;
//   - CutShort: the file ends inside one more record, as a capture whose
//     writer was killed leaves.
//
// Files given out of time order need no option: two captures with
// different Start values, named in the wrong order. Stats.Backward counts
// the packets stamped before the one written ahead of them.
//
// # Malformed frames
//
// Exactly round(Malformed×Packets) frames, at random positions, carry no
// flow key; each is one of three kinds, equally likely:
//
//   - truncated: a flow's frame cut inside its IP header, before the
//     addresses (flow.ErrTruncated);
//   - bad version: an IPv4 EtherType whose header says version 5
//     (flow.ErrBadHeader);
//   - ARP: a well-formed ARP request, not IP at all (flow.ErrNotIP).
//
// The first two are malformed in the sense of flow.IsMalformed; ARP is
// traffic flowdedup does not key. Stats counts each kind.
//
// # Determinism and cost
//
// The output is a function of the Config alone: the same Config gives the
// same bytes (the pcapng section header names no host, the gzip header no
// time). The generator holds about 30 bytes per flow (the flow table and,
// with Zipf, its alias table), so Flows is capped at [MaxFlows]; the
// per-packet work allocates nothing.
package gen
