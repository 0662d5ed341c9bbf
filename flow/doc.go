// Package flow reduces packets to flow keys and hashes them.
//
// It is the first step of the flowdedup data path: a frame read from a pcap
// file or an AF_PACKET socket goes through [Parse] to become a [Key], the
// key is hashed with a per-run secret seed by [Key.Hash], and the hash picks a
// pipeline shard through [ShardOf] before the shard's duplicate filter
// observes it. The XDP program in bpf/ applies the same parsing rules in the
// kernel, so a flow is keyed alike whichever way its packets arrive.
//
// # Keys
//
// A [Key] is a fixed-size comparable value, like [net/netip.Addr]: it holds
// no pointers, can be copied freely, compared with ==, and used as a map key.
// Its [KeyKind] says which fields it carries: the source address
// ([KeySrc]), the destination address ([KeyDst]), both ([KeyPair]), or the
// protocol, both addresses and both ports ([Key5Tuple]). Fields outside the
// kind are zero, so every packet of a flow yields an equal key. The zero Key
// is invalid.
//
// # Networks
//
// A [Mask] (the CLI's --prefix 24,64) keys addresses by their networks:
// [Mask.Apply], after Parse, clears the host bits of a key's addresses and
// records the prefix length in the key ([Key.Bits]), so that every host of
// 10.1.2.0/24 gives one key, which prints as "10.1.2.0/24" and never equals
// a host key. [KeySpec] names a kind and a Mask together ("src/24,64").
//
// # Parsing rules
//
// [Parse] understands the link types listed with [LinkType]: Ethernet, Linux
// cooked captures (SLL and SLL2), raw IPv4/IPv6 and BSD loopback. It walks
// through 802.1Q/802.1ad VLAN stacks, MPLS label stacks and PPPoE session
// headers, and keys the packet by its outermost IPv4 or IPv6 header: tunnels
// (GRE, IP-in-IP, VXLAN, Teredo) and the inner headers quoted by ICMP errors
// are keyed by the outer header. Ports are read for TCP, UDP, SCTP and
// UDP-Lite after IPv6 extension headers and IPsec AH; non-first fragments,
// ESP and every other protocol give a 5-tuple key without ports
// ([Key.HasPorts] is false).
//
// A frame only has to hold the headers its key kind needs. Captures are often
// cut at a snap length, so an IP length claiming more bytes than were captured
// is not an error; a frame cut inside a needed header is ([ErrTruncated]).
// Source, destination and pair keys need the link headers and the complete
// IPv4 header (options included) or the fixed IPv6 header; 5-tuple keys also
// need the IPv6 extension headers and the first four bytes of the transport
// header.
//
// Parse fails with one of the exported sentinel errors; [Reason] maps each to
// a short label for metrics. [ErrNotIP] marks frames that are well formed but
// carry no IP packet (ARP, LLDP, ...): count them apart from the malformed
// ones ([IsMalformed]).
//
// # Hashing and sharding
//
// [Key.Hash] is xxh3 keyed by a seed over a canonical encoding of the key.
// Filters may use all 64 bits of the hash. A pipeline that spreads hashes
// over shards must not reuse those bits: [ShardOf] remixes the hash before
// reducing it to a shard index.
//
// # Lifecycle and cost
//
// Everything in the package is stateless and safe for concurrent use. Parse
// neither retains nor modifies the frame: the caller keeps ownership and may
// reuse the buffer as soon as Parse returns. Parse, Mask.Apply, Key.Hash and
// ShardOf allocate nothing, and Parse never panics, whatever the input.
package flow
