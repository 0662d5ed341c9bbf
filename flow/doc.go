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
// # Key layout
//
// A Key is 44 bytes, in memory and in its binary form ([Key.AppendBinary],
// [KeySize]), which the XDP program writes into its rings:
//
//	offset  size  field
//	0       16    source address (IPv4: bytes 0-3, the rest zero)
//	16      16    destination address (likewise)
//	32      2     source port, network byte order
//	34      2     destination port, network byte order
//	36      1     IP protocol (5-tuple keys)
//	37      1     KeyKind (1 src, 2 dst, 3 pair, 4 5tuple)
//	38      1     flags: 0x01 IPv6, 0x02 ports, 0x04 network (Mask.Apply),
//	              0x08 segment
//	39      1     prefix length (with 0x04), else 0
//	40      4     segment: VNI as a big-endian uint32, 0 to 2^24-1, with
//	              flag 0x08; all zero without a segment
//
// The segment needs 24 bits and a flag. An IPv6 5-tuple uses every byte of
// the 40 the key had before (36 of addresses and ports, then protocol,
// kind, flags and prefix length), so there was no room without dropping
// information: the key grew by 4 bytes. A key without a segment has its
// former 40 bytes unchanged and zero in the other four; its hash is
// unchanged too (see [Key.Hash]). UnmarshalBinary still reads the former
// 40-byte form ([KeySizeNoSegment]).
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
// are keyed by the outer header ([Key.DecodeDecap] opens tunnels: see
// Tunnels below). Ports are read for TCP, UDP, SCTP and
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
// # Tunnels
//
// [Key.DecodeDecap] with a [Decap] (the CLI's --decap) keys a packet by
// its innermost IP header instead, reached through the tunnels the Decap
// lists ([Tunnels]); with no tunnels it is Decode. From each IP header
// (outer first) it looks for a tunnel:
//
//   - IPv4 protocol, or IPv6 next header after the Hop-by-Hop, Routing,
//     Destination Options and Fragment headers (at most MaxIPv6Headers;
//     a chain cut short or too long is no tunnel): 4 or 41 with TunnelIPIP
//     (IPv4 or IPv6 follows), 47 with TunnelGRE or TunnelERSPAN (GRE), 17
//     (UDP, 8-byte header) with a destination port in VXLANPorts
//     (TunnelVXLAN), then GenevePort (TunnelGeneve), then a destination or
//     source port of GTPUPort (TunnelGTPU), the first that matches (the
//     UDP length field is not looked at: the IP lengths bound it). A UDP
//     header too short for its ports (under 4 bytes) is no tunnel; one of a
//     tunnel's port under 8 bytes is ErrTunnelTruncated. IPsec AH is not
//     walked here: what follows it is no tunnel.
//   - An IP header that is invalid or cut short (Decode's conditions) is
//     no tunnel: it is keyed, and fails as Decode fails. The IPv4 total
//     length and IPv6 payload length bound the payload looked into (link
//     padding is not a tunnel header); an inner header of the wrong
//     version (4in4 whose inner nibble is 6, GRE 0x0800 carrying IPv6) is
//     ErrBadHeader, as on a link of that version.
//   - A non-first fragment (IPv4 fragment offset not 0, or an IPv6
//     Fragment header of offset not 0) holds no inner header: it is keyed
//     by its own (outer) header, as Decode keys it, with no error. A first
//     fragment is decapsulated like a whole packet.
//   - GRE, checked in this order: the 4-byte header (else
//     ErrTunnelTruncated); version (low 3 bits of byte 1) 0, any other is
//     ErrTunnelUnknown; the routing bit (0x4000) set is ErrTunnelBadHeader;
//     the checksum (C, 0x8000, 4 bytes with the reserved word), key (K,
//     0x2000, 4 bytes) and sequence number (S, 0x1000, 4 bytes) that
//     follow must fit (else ErrTunnelTruncated); then the protocol:
//     0x0800 IPv4, 0x86DD IPv6, 0x8847 an MPLS label stack (the IP
//     version nibble after the bottom label, as for
//     the outer link; anything else ErrNotIP), 0x6558 an Ethernet frame
//     (TunnelGRE); 0x88BE ERSPAN type II with S set (an 8-byte ERSPAN
//     header of version 1, then Ethernet), type I without S (Ethernet
//     right after the GRE header, as Wireshark reads it), 0x22EB ERSPAN
//     type III (a 12-byte header of version 2, 8 bytes more when its O
//     flag, bit 0 of byte 11, is set, then Ethernet for frame type 0, IP by
//     its version nibble for frame type 2, ErrTunnelUnknown for others)
//     (TunnelERSPAN). A protocol of a kind not listed in the Decap ends the
//     walk: the header holding the GRE is keyed. Any other protocol is
//     ErrTunnelUnknown. An ERSPAN header of another version is
//     ErrTunnelBadHeader.
//   - VXLAN: 8 bytes (else ErrTunnelTruncated); the I flag (0x08 in byte
//     0) clear is ErrTunnelBadHeader; the VNI is bytes 4-6; an Ethernet
//     frame follows. Other flags and reserved bytes are not looked at.
//   - Geneve, in this order: 8 bytes (else ErrTunnelTruncated); version
//     (byte 0's top 2 bits) not 0 is ErrTunnelBadHeader; the options
//     (byte 0's low 6 bits, in 4-byte words) must fit (else
//     ErrTunnelTruncated); protocol (bytes 2-3) 0x6558 (Ethernet), 0x0800 or
//     0x86DD, else ErrTunnelUnknown; the VNI is bytes 4-6. The O and C
//     flags are not looked at.
//   - GTP-U, in this order: 8 bytes (else ErrTunnelTruncated); version
//     (top 3 bits) 1 and PT (0x10) set, else ErrTunnelBadHeader; message
//     type (byte 1) 0xFF (T-PDU) only, any other (echo, error indication,
//     end marker, ...) is ErrTunnelNotData; the length field is not
//     checked (a snap length may cut the packet); with E, S or
//     PN (0x04, 0x02, 0x01) 4 more bytes, whose last is the next extension
//     header type; with E, extension headers while that type is not 0, each
//     of its first byte's length in 4-byte words (0 is ErrTunnelBadHeader)
//     and ending with the next type, at most MaxGTPUExtHeaders of them
//     (more is ErrTooManyHeaders); then an IP packet by its version nibble
//     (else ErrTunnelUnknown).
//   - An Ethernet frame inside a tunnel (GRE 0x6558, ERSPAN, VXLAN,
//     Geneve) is walked as the outer link is: VLAN tags, MPLS labels and
//     PPPoE, MaxLinkHeaders of them per level; no IP in it is ErrNotIP.
//
// A header of a listed tunnel, from its UDP header to its last option or
// extension, cut short is ErrTunnelTruncated; inner Ethernet, VLAN, MPLS and
// IP headers cut short are ErrTruncated as outer ones are. At most
// MaxDecapLevels tunnels are decapsulated: an IP header reached through
// that many that holds another listed tunnel (by protocol and port, before
// its header is read) is ErrTunnelTooDeep. ICMP and ICMPv6 are no tunnels:
// the header an ICMP error quotes is never keyed. The innermost IP header is
// then keyed as Decode keys an outer one.
//
// Where DecodeDecap recognises no tunnel it is Decode, key and error
// (FuzzDecap checks it). A non-first fragment is not counted apart from
// the packets keyed: it is an ordinary key of its outer header.
//
// A key taken inside a VXLAN or Geneve tunnel, however deep and through
// whatever tunnels after it, carries the VNI of the innermost VXLAN or Geneve
// header crossed as its segment ([Key.Segment]), unless Decap.NoSegment.
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
