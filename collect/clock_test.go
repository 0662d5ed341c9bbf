package collect

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/memsink"
	"github.com/flowdedup/flowdedup/pipeline"
)

// untilIdle is a collector's source that ends (io.EOF) once the
// collector has taken n datagrams and has nothing more: the pipeline
// then closes its windows and returns.
type untilIdle struct {
	capture.Source
	c *Collector
	n uint64
}

func (s *untilIdle) Next(p *capture.Packet) error {
	err := s.Source.Next(p)
	if errors.Is(err, capture.ErrTimeout) && s.c.Stats().Datagrams >= s.n {
		return io.EOF
	}
	return err
}

// runPipeline runs a pipeline of window w (lateness one window) over c's
// records until it has taken n datagrams.
func runPipeline(t *testing.T, c *Collector, w time.Duration, n uint64) *memsink.Sink {
	t.Helper()
	out := new(memsink.Sink)
	pl, err := pipeline.New(pipeline.Config{Workers: 2, Filter: "exact", Key: flow.Key5Tuple, Window: w, Lateness: w}, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Run(t.Context(), &untilIdle{c.Source(), c, n}); err != nil {
		t.Fatal(err)
	}
	return out
}

// startsAt returns an IPFIX message of domain 1 holding a template and
// records 0 to n-1 of layoutA (source 10.s.0.i) starting at start.
func startsAt(s byte, n int, start time.Time) []byte {
	set := layoutA.records(256, s, 0, n)
	// layoutA's flowStartMilliseconds is the last 8 bytes of each record.
	const recLen = 4 + 4 + 1 + 2 + 2 + 8
	for i := range n {
		binary.BigEndian.PutUint64(set[4+i*recLen+recLen-8:], uint64(start.UnixMilli()))
	}
	return ipfixMsg(1, 0, layoutA.template(256), set)
}

// TestFastClock: 10 s windows, one exporter's clock 30 s fast (its
// records start 25 s after they arrive), another's right (issue 25, item
// 9). The fast one's records take their arrival, counted as start_ahead,
// and do not move the windows: the other's on-time records are not late.
// With the limit at the minute it was (--max-clock-ahead 1m) they are:
// the test can tell.
func TestFastClock(t *testing.T) {
	for _, tc := range []struct {
		ahead    time.Duration
		wantLate bool
	}{{0, false}, {time.Minute, true}} {
		c := open(t, NetFlow, flow.Key5Tuple, func(cfg *Config) { cfg.MaxClockAhead = tc.ahead })
		fast := exporterConn(t, "127.0.0.2", c.Addrs()[0])
		right := exporterConn(t, "127.0.0.3", c.Addrs()[0])
		now := time.Now()
		write(t, fast, startsAt(1, 50, now.Add(25*time.Second)))
		write(t, right, startsAt(2, 50, now.Add(-2*time.Second)))
		out := runPipeline(t, c, 10*time.Second, 2)
		var late uint64
		for _, w := range out.Windows() {
			late += w.Late
		}
		st := c.Stats()
		switch {
		case !tc.wantLate && (late != 0 || len(out.Records()) != 100 || st.StartAhead != 50):
			t.Errorf("max ahead %v: %d late, %d records, start_ahead %d; want 0, 100, 50", c.cfg.MaxClockAhead, late, len(out.Records()), st.StartAhead)
		case tc.wantLate && late == 0:
			t.Errorf("max ahead %v: no record late: the test does not show what a fast clock does", c.cfg.MaxClockAhead)
		}
		if !tc.wantLate {
			arrived := time.Now().UnixNano()
			for _, r := range out.Records() {
				if r.TimeNs > arrived || r.TimeNs < now.Add(-3*time.Second).UnixNano() {
					t.Errorf("record %v at %v: after it arrived or before it began", r.Key, time.Unix(0, r.TimeNs))
				}
			}
		}
	}
}

// v5Epoch returns a NetFlow v5 message of header unix_secs 0, sysUptime
// 1, and one record of First 0: it began 1 ms before 1970.
func v5Epoch() []byte {
	b := make([]byte, 24+48)
	binary.BigEndian.PutUint16(b, 5)
	binary.BigEndian.PutUint16(b[2:], 1)
	binary.BigEndian.PutUint32(b[4:], 1)
	copy(b[24:], []byte{10, 7, 0, 1, 10, 7, 0, 2})
	b[24+38] = 6
	return b
}

// TestBadTimes: a v5 record of 1 ms before 1970, an IPFIX record of
// flowStartMilliseconds 2^64-1 and one of 1992 (issue 25, item 1) are
// counted as bad_time and take their arrival; the pipeline's windows
// (1 minute) are all of now, and the records after them are keyed.
func TestBadTimes(t *testing.T) {
	c := open(t, NetFlow, flow.Key5Tuple, nil)
	conn := exporterConn(t, "127.0.0.1", c.Addrs()[0])
	before := time.Now()
	ipfixMax := ipfixMsg(1, 0, layoutA.template(256), layoutA.records(256, 1, 0, 1))
	binary.BigEndian.PutUint64(ipfixMax[len(ipfixMax)-8:], math.MaxUint64)
	write(t, conn, v5Epoch(), ipfixMax, startsAt(3, 1, time.Date(1992, 12, 31, 23, 0, 0, 0, time.UTC)), startsAt(4, 10, before.Add(-time.Second)))
	out := runPipeline(t, c, time.Minute, 4)
	after := time.Now()
	st := c.Stats()
	if st.Errors[BadTime] != 3 || st.Records != 13 || len(out.Records()) != 13 {
		t.Errorf("bad_time %d, records %d, keyed %d; want 3, 13, 13", st.Errors[BadTime], st.Records, len(out.Records()))
	}
	for _, r := range out.Records() {
		if r.TimeNs < before.Add(-time.Second).UnixMilli()*1e6 || r.TimeNs > after.UnixNano() {
			t.Errorf("record %v at %v: not of now", r.Key, time.Unix(0, r.TimeNs).UTC())
		}
		if r.WindowEndNs <= before.Add(-time.Minute).UnixNano() {
			t.Errorf("record %v in the window ending %d", r.Key, r.WindowEndNs)
		}
	}
	for _, w := range out.Windows() {
		if w.EndNs <= before.Add(-time.Minute).UnixNano() || w.Late != 0 {
			t.Errorf("window %v to %v, %d late", time.Unix(0, w.StartNs).UTC(), time.Unix(0, w.EndNs).UTC(), w.Late)
		}
	}
}
