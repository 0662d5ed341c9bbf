package export_test

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export"
	"github.com/flowdedup/flowdedup/record"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/report"
)

// notices collects the Queue's notices.
type notices struct {
	mu sync.Mutex
	b  strings.Builder
}

func (n *notices) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.b.Write(p)
}

func (n *notices) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.b.String()
}

// tcpRecords returns n distinct IPv4 TCP 5-tuple records, a millisecond
// apart, numbered from `from`.
func tcpRecords(from, n int) []record.Record {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	recs := make([]record.Record, n)
	for i := range recs {
		k := from + i
		src := netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)})
		recs[i] = record.Record{
			Key:    flow.MakeKey(flow.Key5Tuple, src, netip.MustParseAddr("192.0.2.7"), 6, uint16(1024+k), 443),
			TimeNs: t0 + int64(k)*int64(time.Millisecond),
		}
	}
	return recs
}

// TestNfcapdDownAtStart exports through a Reporter and an ipfix:// Queue
// to a collector, nfdump's nfcapd, that is not listening when the run
// starts and comes up later: the Queue says the collector is unreachable,
// keeps the records (in memory, or in the spool), says when it is back,
// and in the end nfdump reads every record exactly once.
func TestNfcapdDownAtStart(t *testing.T) {
	for _, spool := range []bool{false, true} {
		t.Run(fmt.Sprintf("spool=%v", spool), func(t *testing.T) {
			port := testutil.FreeUDPPort(t)
			says := &notices{}
			o := export.Options{Kind: flow.Key5Tuple, Notices: says}
			if spool {
				s, err := export.OpenSpool(t.TempDir(), 1<<30)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				o.Spool = s
			}
			q, err := export.Open(fmt.Sprintf("ipfix://127.0.0.1:%d", port), o)
			if err != nil {
				t.Fatal(err)
			}
			r, err := report.New(report.Config{Kind: flow.Key5Tuple, Exports: []record.Export{q}})
			if err != nil {
				t.Fatal(err)
			}
			give := func(recs []record.Record) {
				for i := range recs {
					if err := r.Record(&recs[i]); err != nil {
						t.Fatal(err)
					}
				}
				if err := r.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			before := tcpRecords(0, 3000)
			give(before)
			testutil.WaitFor(t, "the Queue finding the collector down", 60*time.Second, func() bool { return !q.Stats().Up })

			col := servers.StartNfcapdAt(t, port)
			testutil.WaitFor(t, "the records kept while the collector was down delivered", 60*time.Second, func() bool {
				st := q.Stats()
				return st.Up && st.Sent == uint64(len(before))
			})
			// nfcapd's socket holds about 200 KiB (WaitRead): the kept
			// records and the new ones together are more, and UDP drops
			// what does not fit while nfcapd is slow to read (a loaded
			// machine). The new ones go once it has read the first burst.
			col.WaitRead(t)
			after := tcpRecords(3000, 2000)
			give(after)
			testutil.WaitFor(t, "every record delivered", 60*time.Second, func() bool {
				st := q.Stats()
				return st.Up && st.Sent == 5000
			})
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if st := q.Stats(); st.Spooled != 0 || len(st.Dropped) == 0 || st.Dropped[export.DropQueueFull]+st.Dropped[export.DropShutdown] != 0 {
				t.Errorf("queue stats %+v", st)
			}
			n := says.String()
			if strings.Count(n, ": unreachable: ") != 1 || strings.Count(n, ": reachable again") != 1 {
				t.Errorf("notices: want the fall and the return, once each:\n%s", n)
			}
			want := make(map[servers.NfdumpFlow]int)
			for _, rec := range append(before, after...) {
				k := rec.Key
				want[servers.NfdumpFlow{Src: k.Src(), Dst: k.Dst(), Proto: k.Proto(), SrcPort: k.SrcPort(), DstPort: k.DstPort(),
					First: time.Unix(0, rec.TimeNs).UTC()}]++
			}
			got := col.Flows(t)
			missing := len(want)
			for _, f := range got {
				switch want[f] {
				case 1:
					missing--
				case 0:
					t.Errorf("nfdump shows a flow never exported (or twice): %+v", f)
				}
				want[f]--
			}
			if missing != 0 || len(got) != 5000 {
				t.Errorf("nfdump shows %d flows; %d of the 5000 records are missing", len(got), missing)
			}
			t.Logf("notices:\n%s", n)
		})
	}
}

// TestNfcapdSpoolKeepsDomain: a run with --observation-domain 7 whose
// ipfix:// collector, nfdump's nfcapd, is not listening spools its
// records and ends; the next run, with --observation-domain 9, finds the
// collector up and sends them with its own. nfcapd keys what it collects
// by exporter address and observation domain: nfdump lists two exporters,
// domain 7 with the first run's records and domain 9 with the second's,
// each record once, and neither counts a sequence failure. (nfcapd takes
// the sequence number of an exporter's first message as its start, and the
// spooled batches all go before the second run's own: that each domain
// counts from 0, interleaved, ipfix.TestBatchDomain asserts.)
func TestNfcapdSpoolKeepsDomain(t *testing.T) {
	port := testutil.FreeUDPPort(t)
	dir := t.TempDir()
	run := func(domain uint32, recs []record.Record, drain time.Duration) record.ExportStats {
		t.Helper()
		spool, err := export.OpenSpool(dir, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		defer spool.Close()
		q, err := export.Open(fmt.Sprintf("ipfix://127.0.0.1:%d", port), export.Options{
			Kind: flow.Key5Tuple, ObservationDomain: domain, Spool: spool, DrainTimeout: drain,
		})
		if err != nil {
			t.Fatal(err)
		}
		r, err := report.New(report.Config{Kind: flow.Key5Tuple, Exports: []record.Export{q}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			if err := r.Record(&recs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		return q.Stats()
	}
	first, second := tcpRecords(0, 1500), tcpRecords(1500, 700)

	// Nobody listens on port: ICMP port unreachable, the Queue spools.
	if st := run(7, first, time.Second); st.Sent != 0 || st.Spooled != len(first) {
		t.Fatalf("first run, the collector down: %+v; want its %d records spooled", st, len(first))
	}
	col := servers.StartNfcapdAt(t, port)
	st := run(9, second, 30*time.Second)
	var lost uint64
	for _, n := range st.Dropped {
		lost += n
	}
	if st.Sent != uint64(len(first)+len(second)) || st.Spooled != 0 || lost != 0 {
		t.Errorf("second run: %+v; want both runs' %d records sent, nothing left or lost", st, len(first)+len(second))
	}

	exps := col.Exporters(t)
	if cst := col.Stop(t); cst.SequenceErrors != 0 || cst.BadPackets != 0 || cst.Dropped != 0 {
		t.Errorf("nfcapd counted %+v; want no errors", cst)
	}
	want := map[uint32][]record.Record{7: first, 9: second}
	if len(exps) != len(want) {
		var domains []uint32
		for _, e := range exps {
			domains = append(domains, e.Domain)
		}
		t.Errorf("nfdump lists %d exporters, of domains %v; want 2 (127.0.0.1 in domains 7 and 9)", len(exps), domains)
	}
	for _, e := range exps {
		recs, ok := want[e.Domain]
		if !ok {
			t.Errorf("nfdump lists an exporter of domain %d: %+v", e.Domain, e)
			continue
		}
		delete(want, e.Domain)
		if e.Version != 10 || e.SequenceFailures != 0 || e.FlowCount != uint64(len(recs)) {
			t.Errorf("domain %d: version %d, %d sequence failures, %d flows; want IPFIX (10), none, %d",
				e.Domain, e.Version, e.SequenceFailures, e.FlowCount, len(recs))
		}
		count := make(map[servers.NfdumpFlow]int)
		for _, rec := range recs {
			k := rec.Key
			count[servers.NfdumpFlow{Src: k.Src(), Dst: k.Dst(), Proto: k.Proto(), SrcPort: k.SrcPort(), DstPort: k.DstPort(),
				First: time.Unix(0, rec.TimeNs).UTC()}]++
		}
		bad := 0
		for _, f := range e.Flows {
			if count[f] != 1 {
				bad++
			}
			count[f]--
		}
		if bad != 0 || len(e.Flows) != len(recs) {
			t.Errorf("domain %d: nfdump shows %d flows, %d of them not its run's or not once; want its run's %d",
				e.Domain, len(e.Flows), bad, len(recs))
		}
	}
	for d := range want {
		t.Errorf("nfdump lists no exporter of domain %d", d)
	}
}
