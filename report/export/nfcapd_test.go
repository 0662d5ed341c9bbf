package export_test

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/report"
	"github.com/flowdedup/flowdedup/report/export"
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
func tcpRecords(from, n int) []pipeline.Record {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	recs := make([]pipeline.Record, n)
	for i := range recs {
		k := from + i
		src := netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)})
		recs[i] = pipeline.Record{
			Key:    flow.MakeKey(flow.Key5Tuple, src, netip.MustParseAddr("192.0.2.7"), 6, uint16(1024+k), 443),
			TimeNs: t0 + int64(k)*int64(time.Millisecond),
		}
	}
	return recs
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
				s, err := report.OpenSpool(t.TempDir(), 1<<30)
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
			r, err := report.New(report.Config{Kind: flow.Key5Tuple, Exports: []*report.Queue{q}})
			if err != nil {
				t.Fatal(err)
			}
			give := func(recs []pipeline.Record) {
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
			waitFor(t, "the Queue finding the collector down", func() bool { return !q.Stats().Up })

			col := testutil.StartNfcapdAt(t, port)
			after := tcpRecords(3000, 2000)
			give(after)
			waitFor(t, "every record delivered", func() bool {
				st := q.Stats()
				return st.Up && st.Sent == 5000
			})
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if st := q.Stats(); st.Spooled != 0 || len(st.Dropped) == 0 || st.Dropped[report.DropQueueFull]+st.Dropped[report.DropShutdown] != 0 {
				t.Errorf("queue stats %+v", st)
			}
			n := says.String()
			if strings.Count(n, ": unreachable: ") != 1 || strings.Count(n, ": reachable again") != 1 {
				t.Errorf("notices: want the fall and the return, once each:\n%s", n)
			}
			want := make(map[testutil.NfdumpFlow]int)
			for _, rec := range append(before, after...) {
				k := rec.Key
				want[testutil.NfdumpFlow{Src: k.Src(), Dst: k.Dst(), Proto: k.Proto(), SrcPort: k.SrcPort(), DstPort: k.DstPort(),
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
