package e2e

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil/servers"
)

// nfdumpView is what nfdump must show for a record exported over IPFIX:
// its key's fields, zero where the key has none (nfdump shows ports 0 for
// ICMP and non-first fragments, which the exporter sends without ports,
// and the unspecified address of the family for the side a src or dst key
// lacks; a network of a key by network, 10.1.2.0/24, as its address and
// its prefix length), and its time to the millisecond.
func nfdumpView(tb testing.TB, r *record) servers.NfdumpFlow {
	tb.Helper()
	addr := func(s string, other string) (netip.Addr, uint8) {
		if s == "" {
			if strings.Contains(other, ":") {
				return netip.IPv6Unspecified(), 0
			}
			return netip.IPv4Unspecified(), 0
		}
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				tb.Fatalf("record network %q: %v", s, err)
			}
			return p.Addr(), uint8(p.Bits())
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			tb.Fatalf("record address %q: %v", s, err)
		}
		return a, 0
	}
	f := servers.NfdumpFlow{Proto: r.Proto, SrcPort: r.Sport, DstPort: r.Dport, First: r.TS.UTC().Truncate(time.Millisecond)}
	f.Src, f.SrcMask = addr(r.Src, r.Dst)
	f.Dst, f.DstMask = addr(r.Dst, r.Src)
	return f
}

// sameFlows fails tb unless nfdump's flows are the records, one for one.
func sameFlows(tb testing.TB, got []servers.NfdumpFlow, recs []record) {
	tb.Helper()
	want := make(map[servers.NfdumpFlow]int, len(recs))
	for i := range recs {
		want[nfdumpView(tb, &recs[i])]++
	}
	bad := 0
	for _, f := range got {
		if want[f] == 0 {
			if bad++; bad <= 5 {
				tb.Errorf("nfdump shows a flow that is not a record (or more often): %+v", f)
			}
			continue
		}
		want[f]--
	}
	for f, n := range want {
		if n != 0 {
			if bad++; bad <= 10 {
				tb.Errorf("a record nfdump does not show (%d times): %+v", n, f)
			}
		}
	}
	if len(got) != len(recs) {
		tb.Errorf("nfdump shows %d flows for %d records", len(got), len(recs))
	}
}

// Each testdata capture replayed as `flowdedup replay --filter exact --key
// 5tuple --export ipfix://HOST:PORT` to nfdump's nfcapd: the flows nfdump
// reads back are the jsonl records the same run wrote, exactly
// (addresses, protocol, ports, start time to the millisecond), IPv4 and
// IPv6, and nfcapd counts no sequence error, bad packet or drop.
func TestIPFIXRecordsReachNfdump(t *testing.T) {
	t.Parallel()
	var v4, v6 int
	for _, name := range []string{"small.pcap", "small.pcapng", "vlan.pcap", "ipv6.pcap", "malformed.pcap", "fragments.pcap", "windows.pcap", "zipf.pcap.gz"} {
		t.Run(name, func(t *testing.T) {
			col := servers.StartNfcapd(t)
			out := filepath.Join(t.TempDir(), "out.jsonl")
			r := mustRun(t, "replay", "--filter", "exact", "--key", "5tuple", "--window", "1m",
				"--export", "ipfix://"+col.Addr, "--observation-domain", "7", "--out", out, pcap(name))
			recs := readRecords(t, out)
			if len(recs) == 0 {
				t.Fatal("no records")
			}
			if !strings.Contains(r.stderr, "export ipfix://"+col.Addr+": sent ") || strings.Contains(r.stderr, "unreachable") {
				t.Errorf("stderr:\n%s", r.stderr)
			}
			st := col.Stop(t)
			if st.Flows != uint64(len(recs)) || st.SequenceErrors != 0 || st.BadPackets != 0 || st.Dropped != 0 {
				t.Errorf("nfcapd counted %+v; want %d flows and no errors", st, len(recs))
			}
			sameFlows(t, col.Flows(t), recs)
			for _, rec := range recs {
				if strings.Contains(rec.Src, ":") {
					v6++
				} else {
					v4++
				}
			}
		})
	}
	if v4 == 0 || v6 == 0 {
		t.Errorf("%d IPv4 and %d IPv6 records: want both", v4, v6)
	}
}
