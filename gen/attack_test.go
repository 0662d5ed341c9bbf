package gen

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TestScannerVictim: the scanner's and victim's frames decode by gopacket
// as TCP SYNs with valid checksums; gopacket's addresses give the scanner
// Scanner distinct destinations and the victim Victim distinct sources;
// Stats count them; the frames before them are the file without them,
// byte for byte, and the same seed gives the same file.
func TestScannerVictim(t *testing.T) {
	for _, cfg := range []Config{
		{Packets: 2000, Flows: 300, Scanner: 250, Victim: 700, Seed: 3},
		{Packets: 2000, Flows: 300, IPv6: 0.5, VLAN: true, Scanner: 1, Victim: 0, Seed: 4, Format: FormatPcapNG},
		{Packets: 500, Flows: 50, Victim: 3000, Seed: 5, Malformed: 0.1},
	} {
		file, st := write(t, cfg)
		again, _ := write(t, cfg)
		if !bytes.Equal(file, again) {
			t.Fatalf("%+v: not reproducible", cfg)
		}
		plain := cfg
		plain.Scanner, plain.Victim = 0, 0
		_, pst := write(t, plain)
		pkts := readAll(t, file, cfg)
		plainPkts := readAll(t, func() []byte { b, _ := write(t, plain); return b }(), plain)
		if len(pkts) != cfg.Packets+cfg.Scanner+cfg.Victim || st.Packets != len(pkts) {
			t.Fatalf("%d packets, Stats %d, want %d", len(pkts), st.Packets, cfg.Packets+cfg.Scanner+cfg.Victim)
		}
		for i := range plainPkts {
			if !bytes.Equal(pkts[i].data, plainPkts[i].data) || !pkts[i].ci.Timestamp.Equal(plainPkts[i].ci.Timestamp) {
				t.Fatalf("packet %d differs from the file without scanner and victim", i+1)
			}
		}
		last := plainPkts[len(plainPkts)-1].ci.Timestamp
		dsts, srcs := map[string]bool{}, map[string]bool{}
		for i, p := range pkts[len(plainPkts):] {
			if !p.ci.Timestamp.Equal(last) {
				t.Fatalf("attack packet %d at %v, want the last packet's time %v", i, p.ci.Timestamp, last)
			}
			pkt := gopacket.NewPacket(p.data, layers.LayerTypeEthernet, gopacket.Default)
			ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
			if ip == nil || tcp == nil || !tcp.SYN || tcp.ACK || pkt.ErrorLayer() != nil {
				t.Fatalf("attack packet %d: not a TCP SYN: %v", i, pkt)
			}
			tcp.SetNetworkLayerForChecksum(ip)
			if err, res := tcp.VerifyChecksum(); err != nil || !res.Valid {
				t.Fatalf("attack packet %d: TCP checksum %#x, want %#x", i, res.Actual, res.Correct)
			}
			switch {
			case ip.SrcIP.String() == "203.0.113.66" && tcp.DstPort == 22:
				dsts[ip.DstIP.String()] = true
			case ip.DstIP.String() == "203.0.113.80" && tcp.DstPort == 80:
				srcs[ip.SrcIP.String()] = true
			default:
				t.Fatalf("attack packet %d: %v > %v:%d", i, ip.SrcIP, ip.DstIP, tcp.DstPort)
			}
		}
		if len(dsts) != cfg.Scanner || len(srcs) != cfg.Victim {
			t.Fatalf("the scanner reached %d destinations, the victim had %d sources; want %d and %d", len(dsts), len(srcs), cfg.Scanner, cfg.Victim)
		}
		k := cfg.Scanner + cfg.Victim
		want := pst
		want.Packets += k
		want.Pairs += k
		want.FiveTuples += k
		want.Destinations += cfg.Scanner + min(cfg.Victim, 1)
		want.Sources += cfg.Victim + min(cfg.Scanner, 1)
		if st != want {
			t.Errorf("Stats %+v, want %+v", st, want)
		}
	}
	for _, bad := range []Config{{Packets: 1, Flows: 1, Scanner: -1}, {Packets: 1, Flows: 1, Victim: MaxAttackHosts + 1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: valid", bad)
		}
	}
}
