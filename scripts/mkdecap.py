#!/usr/bin/python3
"""Write the tunnel captures of flow's --decap tests (flow/testdata/decap).

Run from the repository root with Debian's scapy (python3-scapy):

    /usr/bin/python3 scripts/mkdecap.py

Every file is an Ethernet pcap. The files of good cases (gre, erspan, vxlan,
geneve, gtpu, ipip, nested, around) are checked frame by frame against
tshark's innermost addresses and VNI (flow/decap_test.go,
TestDecapMatchesTshark); bad.pcap holds cut and invalid tunnel headers, one a
frame, in the order of the table of reasons in TestDecapBadCaptures: keep the
two in step. The output is deterministic (fixed timestamps), so that running
the script again gives the committed files.
"""

import os
import struct

from scapy.all import (
    ARP,
    GRE,
    ICMP,
    IP,
    TCP,
    UDP,
    Dot1AD,
    Dot1Q,
    Ether,
    IPv6,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    ICMPv6EchoRequest,
    PcapWriter,
    Raw,
)
from scapy.contrib.erspan import ERSPAN_II, ERSPAN_III, ERSPAN_PlatformSpecific
from scapy.contrib.geneve import GENEVE, GeneveOptions
from scapy.contrib.gtp import GTP_U_Header, GTPEchoRequest, GTPPDUSessionContainer
from scapy.contrib.mpls import MPLS
from scapy.layers.vxlan import VXLAN

OUT = os.path.join("flow", "testdata", "decap")

MAC_A = "02:00:00:00:00:01"
MAC_B = "02:00:00:00:00:02"


def eth(etype=None):
    if etype is None:
        return Ether(src=MAC_A, dst=MAC_B)
    return Ether(src=MAC_A, dst=MAC_B, type=etype)


def tcp4(src, dst):
    """An inner IPv4 TCP packet with a small payload."""
    return IP(src=src, dst=dst) / TCP(sport=40000, dport=443) / Raw(b"inner")


def tcp6(src, dst):
    return IPv6(src=src, dst=dst) / TCP(sport=40001, dport=443) / Raw(b"inner6")


def udp4(src, dst):
    return IP(src=src, dst=dst) / UDP(sport=5000, dport=53) / Raw(b"q")


def write(name, frames):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    w = PcapWriter(path, linktype=1, sync=True)
    for i, f in enumerate(frames):
        f.time = 1700000000 + i
        w.write(f)
    w.close()
    print(path, len(frames), "frames")


def gre_files():
    outer = IP(src="192.0.2.1", dst="192.0.2.2")
    outer6 = IPv6(src="2001:db8:ffff::1", dst="2001:db8:ffff::2")
    frames = [
        # GRE carrying IPv4, IPv6, MPLS (one and two labels), Ethernet.
        eth() / outer / GRE(proto=0x0800) / tcp4("10.1.0.1", "10.1.0.2"),
        eth() / outer / GRE(proto=0x86DD) / tcp6("2001:db8:1::1", "2001:db8:1::2"),
        eth() / outer / GRE(proto=0x8847) / MPLS(label=100, s=1) / tcp4("10.1.1.1", "10.1.1.2"),
        eth() / outer / GRE(proto=0x8847) / MPLS(label=100, s=0) / MPLS(label=200, s=1) / tcp6("2001:db8:1:1::1", "2001:db8:1:1::2"),
        eth() / outer / GRE(proto=0x6558) / eth() / tcp4("10.1.2.1", "10.1.2.2"),
        # Every optional field: checksum, key, sequence number.
        eth() / outer / GRE(chksum_present=1, key_present=1, seqnum_present=1, key=7, seqence_number=9, proto=0x0800) / tcp4("10.1.3.1", "10.1.3.2"),
        eth() / outer / GRE(key_present=1, key=1, proto=0x6558) / eth() / Dot1Q(vlan=30) / tcp4("10.1.4.1", "10.1.4.2"),
        # IPv6 outer.
        eth() / outer6 / GRE(proto=0x0800) / tcp4("10.1.5.1", "10.1.5.2"),
        eth() / outer6 / GRE(proto=0x86DD) / tcp6("2001:db8:1:5::1", "2001:db8:1:5::2"),
        # A VLAN tag and an MPLS label around the tunnel.
        eth() / Dot1Q(vlan=10) / outer / GRE(proto=0x0800) / udp4("10.1.6.1", "10.1.6.2"),
        eth(0x8847) / MPLS(label=16, s=1) / outer / GRE(proto=0x86DD) / tcp6("2001:db8:1:6::1", "2001:db8:1:6::2"),
        # A non-first fragment of a GRE packet: no inner header, the outer is keyed.
        eth() / IP(src="192.0.2.9", dst="192.0.2.10", proto=47, frag=100) / Raw(b"\x00" * 40),
    ]
    write("gre.pcap", frames)


def erspan_files():
    outer = IP(src="192.0.2.11", dst="192.0.2.12")
    frames = [
        # Type I: GRE 0x88BE without a sequence number, the frame at once.
        eth() / outer / GRE(proto=0x88BE) / eth() / tcp4("10.2.0.1", "10.2.0.2"),
        # Type II: with a sequence number and the 8-byte header.
        eth() / outer / GRE(seqnum_present=1, seqence_number=1, proto=0x88BE) / ERSPAN_II(ver=1, session_id=5) / eth() / tcp4("10.2.1.1", "10.2.1.2"),
        eth() / outer / GRE(seqnum_present=1, seqence_number=2, proto=0x88BE) / ERSPAN_II(ver=1, session_id=5, vlan=20) / eth() / Dot1Q(vlan=20) / tcp6("2001:db8:2:1::1", "2001:db8:2:1::2"),
        # Type III, without and with the platform-specific subheader.
        eth() / outer / GRE(seqnum_present=1, seqence_number=3, proto=0x22EB) / ERSPAN_III(session_id=6) / eth() / tcp4("10.2.2.1", "10.2.2.2"),
        eth() / outer / GRE(seqnum_present=1, seqence_number=4, proto=0x22EB) / ERSPAN_III(session_id=6, o=1) / ERSPAN_PlatformSpecific(platf_id=3) / eth() / tcp4("10.2.3.1", "10.2.3.2"),
        # IPv6 outer, QinQ around it.
        eth() / Dot1AD(vlan=100) / Dot1Q(vlan=200) / IPv6(src="2001:db8:ffff::11", dst="2001:db8:ffff::12") / GRE(seqnum_present=1, proto=0x88BE) / ERSPAN_II(ver=1, session_id=7) / eth() / udp4("10.2.4.1", "10.2.4.2"),
    ]
    write("erspan.pcap", frames)


def vxlan_files():
    outer = IP(src="192.0.2.21", dst="192.0.2.22")
    frames = [
        eth() / outer / UDP(sport=50000, dport=4789) / VXLAN(vni=100) / eth() / tcp4("10.3.0.1", "10.3.0.2"),
        # The same inner addresses in another VNI.
        eth() / outer / UDP(sport=50001, dport=4789) / VXLAN(vni=200) / eth() / tcp4("10.3.0.1", "10.3.0.2"),
        # Linux's port.
        eth() / outer / UDP(sport=50002, dport=8472) / VXLAN(vni=16777215) / eth() / tcp4("10.3.1.1", "10.3.1.2"),
        eth() / outer / UDP(sport=50003, dport=4789) / VXLAN(vni=1) / eth() / Dot1Q(vlan=5) / tcp6("2001:db8:3::1", "2001:db8:3::2"),
        eth() / IPv6(src="2001:db8:ffff::21", dst="2001:db8:ffff::22") / UDP(sport=50004, dport=4789) / VXLAN(vni=300) / eth() / tcp4("10.3.2.1", "10.3.2.2"),
        eth() / Dot1Q(vlan=7) / outer / UDP(sport=50005, dport=8472) / VXLAN(vni=0) / eth() / tcp6("2001:db8:3:1::1", "2001:db8:3:1::2"),
        # An IPv6 outer with a Hop-by-Hop header before UDP.
        eth() / IPv6(src="2001:db8:ffff::23", dst="2001:db8:ffff::24") / IPv6ExtHdrHopByHop() / UDP(sport=50006, dport=4789) / VXLAN(vni=42) / eth() / udp4("10.3.3.1", "10.3.3.2"),
        # UDP to another port is no tunnel.
        eth() / outer / UDP(sport=50007, dport=4790) / Raw(b"\x08" + b"\x00" * 20),
    ]
    write("vxlan.pcap", frames)


def geneve_files():
    outer = IP(src="192.0.2.31", dst="192.0.2.32")
    opt = GeneveOptions(classid=0x0102, type=0x80, data=b"\x00\x01\x02\x03")
    opt2 = GeneveOptions(classid=0x0103, type=0x01, data=b"\x00" * 8)
    frames = [
        eth() / outer / UDP(sport=40000, dport=6081) / GENEVE(vni=500, proto=0x6558) / eth() / tcp4("10.4.0.1", "10.4.0.2"),
        eth() / outer / UDP(sport=40001, dport=6081) / GENEVE(vni=501, proto=0x6558, options=[opt]) / eth() / tcp4("10.4.1.1", "10.4.1.2"),
        eth() / outer / UDP(sport=40002, dport=6081) / GENEVE(vni=502, proto=0x6558, options=[opt, opt2]) / eth() / tcp6("2001:db8:4::1", "2001:db8:4::2"),
        eth() / outer / UDP(sport=40003, dport=6081) / GENEVE(vni=503, proto=0x0800) / tcp4("10.4.2.1", "10.4.2.2"),
        eth() / IPv6(src="2001:db8:ffff::31", dst="2001:db8:ffff::32") / UDP(sport=40004, dport=6081) / GENEVE(vni=504, proto=0x86DD, options=[opt]) / tcp6("2001:db8:4:1::1", "2001:db8:4:1::2"),
    ]
    write("geneve.pcap", frames)


def gtpu_files():
    outer = IP(src="192.0.2.41", dst="192.0.2.42")
    frames = [
        eth() / outer / UDP(sport=2152, dport=2152) / GTP_U_Header(teid=1, gtp_type=255) / tcp4("10.5.0.1", "10.5.0.2"),
        # With a sequence number (S), no extension.
        eth() / outer / UDP(sport=2152, dport=2152) / GTP_U_Header(teid=2, gtp_type=255, S=1, seq=7) / tcp6("2001:db8:5::1", "2001:db8:5::2"),
        # With a PDU session container extension header (5G).
        eth() / outer / UDP(sport=2152, dport=2152) / GTP_U_Header(teid=3, gtp_type=255, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=1, QFI=9) / tcp4("10.5.1.1", "10.5.1.2"),
        # Only the source port is GTP-U's.
        eth() / outer / UDP(sport=2152, dport=33333) / GTP_U_Header(teid=4, gtp_type=255) / udp4("10.5.2.1", "10.5.2.2"),
        eth() / IPv6(src="2001:db8:ffff::41", dst="2001:db8:ffff::42") / UDP(sport=2152, dport=2152) / GTP_U_Header(teid=5, gtp_type=255) / tcp4("10.5.3.1", "10.5.3.2"),
        eth(0x8847) / MPLS(label=17, s=0) / MPLS(label=18, s=1) / outer / UDP(sport=2152, dport=2152) / GTP_U_Header(teid=6, gtp_type=255) / tcp4("10.5.4.1", "10.5.4.2"),
    ]
    write("gtpu.pcap", frames)


def ipip_files():
    o4 = dict(src="192.0.2.51", dst="192.0.2.52")
    o6 = dict(src="2001:db8:ffff::51", dst="2001:db8:ffff::52")
    frames = [
        eth() / IP(**o4) / tcp4("10.6.0.1", "10.6.0.2"),  # 4in4
        eth() / IP(**o4) / tcp6("2001:db8:6::1", "2001:db8:6::2"),  # 6in4
        eth() / IPv6(**o6) / tcp4("10.6.1.1", "10.6.1.2"),  # 4in6
        eth() / IPv6(**o6) / tcp6("2001:db8:6:1::1", "2001:db8:6:1::2"),  # 6in6
        eth() / Dot1Q(vlan=3) / IP(**o4) / IP(src="198.51.100.1", dst="198.51.100.2") / tcp4("10.6.2.1", "10.6.2.2"),  # 4in4in4
        # A first fragment of an IPv6 tunnel: decapsulated.
        eth() / IPv6(**o6) / IPv6ExtHdrFragment(offset=0, m=1, nh=4) / tcp4("10.6.3.1", "10.6.3.2"),
        # ICMPv6 inside is keyed, not what it quotes.
        eth() / IP(**o4) / IPv6(src="2001:db8:6:2::1", dst="2001:db8:6:2::2") / ICMPv6EchoRequest(),
    ]
    write("ipip.pcap", frames)


def nested_files():
    outer = IP(src="192.0.2.61", dst="192.0.2.62")
    vx = lambda vni, inner: IP(src="198.51.100.61", dst="198.51.100.62") / UDP(sport=1, dport=4789) / VXLAN(vni=vni) / eth() / inner
    frames = [
        # VXLAN in GRE.
        eth() / outer / GRE(proto=0x0800) / vx(700, tcp4("10.7.0.1", "10.7.0.2")),
        # GTP-U in VXLAN: the key carries the VXLAN VNI.
        eth() / outer / UDP(sport=2, dport=4789) / VXLAN(vni=701) / eth() / IP(src="198.51.100.63", dst="198.51.100.64") / UDP(sport=2152, dport=2152) / GTP_U_Header(teid=9, gtp_type=255) / tcp4("10.7.1.1", "10.7.1.2"),
        # VXLAN in VXLAN: the innermost VNI.
        eth() / outer / UDP(sport=3, dport=4789) / VXLAN(vni=702) / eth() / vx(703, tcp4("10.7.2.1", "10.7.2.2")),
        # Four levels: IP-in-IP, GRE, VXLAN, Geneve.
        eth() / outer / IP(src="198.51.100.71", dst="198.51.100.72") / GRE(proto=0x0800) / vx(704,
            IP(src="198.51.100.73", dst="198.51.100.74") / UDP(sport=4, dport=6081) / GENEVE(vni=705, proto=0x0800) / tcp4("10.7.3.1", "10.7.3.2")),
        # An ICMP error quoting a VXLAN packet: the ICMP packet is keyed.
        eth() / IP(src="192.0.2.63", dst="192.0.2.64") / ICMP(type=3, code=3) / IP(src="192.0.2.64", dst="192.0.2.65") / UDP(sport=5, dport=4789) / VXLAN(vni=706) / eth() / tcp4("10.7.4.1", "10.7.4.2"),
        # ICMP inside a tunnel quoting a tunnel packet: the ICMP packet inside.
        eth() / outer / GRE(proto=0x0800) / IP(src="10.7.5.1", dst="10.7.5.2") / ICMP(type=11) / IP(src="10.7.5.2", dst="10.7.5.3") / GRE(proto=0x0800) / tcp4("10.7.5.4", "10.7.5.5"),
    ]
    write("nested.pcap", frames)


def raw_udp(dport, payload, sport=7):
    """An IPv4 UDP packet to dport with payload bytes as they are."""
    return eth() / IP(src="192.0.2.81", dst="192.0.2.82") / UDP(sport=sport, dport=dport) / Raw(payload)


def raw_gre(gre):
    return eth() / IP(src="192.0.2.83", dst="192.0.2.84", proto=47) / Raw(gre)


def cut(pkt, n):
    """The frame's first n bytes, as a snap length would leave it."""
    return Ether(bytes(pkt)[:n])


def bad_files():
    inner = bytes(eth() / tcp4("10.8.0.1", "10.8.0.2"))
    gtp_hdr = lambda flags, typ, rest=b"": bytes([flags, typ]) + struct.pack(">HI", 0, 1) + rest
    ext = lambda nxt: bytes([1, 0, 0, nxt])  # a 4-byte extension header, then type nxt
    five = tcp4("10.8.9.1", "10.8.9.2")
    for i in range(5):
        five = IP(src="198.51.100.%d" % (90 + i), dst="198.51.100.%d" % (100 + i)) / five
    frames = [
        # 1 GRE cut after 2 bytes.
        raw_gre(b"\x00\x00"),
        # 2 GRE with C, K and S, cut inside the optional fields.
        raw_gre(struct.pack(">HH", 0xB000, 0x0800) + b"\x00" * 8),
        # 3 GRE with the routing bit.
        raw_gre(struct.pack(">HH", 0x4000, 0x0800) + b"\x00" * 30),
        # 4 GRE version 1 (PPTP).
        raw_gre(struct.pack(">HH", 0x3001, 0x880B) + b"\x00" * 30),
        # 5 GRE of an unknown protocol.
        raw_gre(struct.pack(">HH", 0x0000, 0x1234) + b"\x00" * 30),
        # 6 VXLAN with the I flag clear.
        raw_udp(4789, b"\x00\x00\x00\x00\x00\x00\x64\x00" + inner),
        # 7 VXLAN cut inside its header.
        raw_udp(4789, b"\x08\x00\x00\x00"),
        # 8 A UDP header to 4789 cut at 6 bytes.
        cut(raw_udp(4789, b""), 14 + 20 + 6),
        # 9 Geneve whose options (63 words) run past the packet.
        raw_udp(6081, bytes([0x3F, 0, 0x65, 0x58, 0, 0, 1, 0]) + b"\x00" * 16),
        # 10 Geneve version 1.
        raw_udp(6081, bytes([0x40, 0, 0x65, 0x58, 0, 0, 1, 0]) + inner),
        # 11 Geneve of an unknown protocol.
        raw_udp(6081, bytes([0x00, 0, 0x12, 0x34, 0, 0, 1, 0]) + inner),
        # 12 GTP-U echo request.
        eth() / IP(src="192.0.2.85", dst="192.0.2.86") / UDP(sport=2152, dport=2152) / GTP_U_Header(gtp_type=1, S=1) / GTPEchoRequest(),
        # 13 GTP-U end marker (254).
        raw_udp(2152, gtp_hdr(0x30, 254)),
        # 14 GTP-U extension chain that does not end before the frame does.
        raw_udp(2152, gtp_hdr(0x34, 255, b"\x00\x00\x00\x85" + ext(0x85) * 3)),
        # 15 GTP-U extension chain longer than the bound (9 headers).
        raw_udp(2152, gtp_hdr(0x34, 255, b"\x00\x00\x00\x85" + ext(0x85) * 8 + ext(0) + bytes(tcp4("10.8.1.1", "10.8.1.2")))),
        # 16 GTP-U extension header of length 0.
        raw_udp(2152, gtp_hdr(0x34, 255, b"\x00\x00\x00\x85" + b"\x00\x00\x00\x00" + bytes(tcp4("10.8.2.1", "10.8.2.2")))),
        # 17 GTP version 2 (GTPv2-C) on the GTP-U port.
        raw_udp(2152, bytes([0x48, 255]) + b"\x00" * 10),
        # 18 GTP-U T-PDU that is not IP.
        raw_udp(2152, gtp_hdr(0x30, 255, b"\x00" * 20)),
        # 19 ERSPAN II header cut.
        raw_gre(struct.pack(">HHI", 0x1000, 0x88BE, 1) + b"\x10\x00\x00"),
        # 20 ERSPAN II of version 2.
        raw_gre(struct.pack(">HHI", 0x1000, 0x88BE, 1) + b"\x20\x00\x00\x01\x00\x00\x00\x00" + inner),
        # 21 ERSPAN III with the O flag, its subheader cut.
        raw_gre(struct.pack(">HHI", 0x1000, 0x22EB, 1) + b"\x20\x00\x00\x01" + b"\x00" * 7 + b"\x01" + b"\x00" * 4),
        # 22 IP-in-IP nested five deep.
        eth() / IP(src="192.0.2.87", dst="192.0.2.88") / five,
        # 23 Inner IPv4 header cut (10 bytes of it inside VXLAN).
        cut(eth() / IP(src="192.0.2.89", dst="192.0.2.90") / UDP(sport=9, dport=4789) / VXLAN(vni=1) / eth() / tcp4("10.8.3.1", "10.8.3.2"), 14 + 20 + 8 + 8 + 14 + 10),
        # 24 ARP inside VXLAN.
        eth() / IP(src="192.0.2.91", dst="192.0.2.92") / UDP(sport=9, dport=4789) / VXLAN(vni=1) / eth() / ARP(),
        # 25 GTP-U cut inside its optional fields.
        raw_udp(2152, bytes([0x32, 255]) + b"\x00\x00\x00\x00\x00\x01" + b"\x00\x00"),
        # 26 ERSPAN III of frame type 3.
        raw_gre(struct.pack(">HHI", 0x1000, 0x22EB, 1) + b"\x20\x00\x00\x01" + b"\x00" * 6 + b"\x0c\x00" + inner),
    ]
    write("bad.pcap", frames)


def main():
    gre_files()
    erspan_files()
    vxlan_files()
    geneve_files()
    gtpu_files()
    ipip_files()
    nested_files()
    bad_files()


if __name__ == "__main__":
    main()
