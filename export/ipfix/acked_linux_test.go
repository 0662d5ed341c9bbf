package ipfix_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"testing"

	"github.com/netsampler/goflow2/v2/decoders/netflow"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// TestTCPCountsAcknowledged (issue 21): a collector that reads 1024 bytes
// and closes, with a receive buffer of 4 KiB, takes a few kilobytes of a
// 2 MB export; the exporter counts as sent only the messages whose bytes
// its host acknowledged (TCP_INFO tcpi_bytes_acked), and sends every
// other message again, first, on the next connection: the second
// collector receives exactly the records the first did not acknowledge,
// in order, and in the end every record counts as sent once.
//
// Records are IPv4 sources (one template), so the stream's order is the
// records' order; messages are 1000 bytes (49 records), so that some are
// acknowledged whole before the first collector closes.
func TestTCPCountsAcknowledged(t *testing.T) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	var second []byte
	wg.Add(1)
	go func() {
		defer wg.Done()
		c1, err := ln.Accept()
		if err != nil {
			return
		}
		io.ReadFull(c1, make([]byte, 1024))
		c1.Close() // with data unread: the kernel resets the connection
		c2, err := ln.Accept()
		if err != nil {
			return
		}
		second, _ = io.ReadAll(c2) // until the exporter closes
		c2.Close()
	}()

	clock := newFakeClock()
	e := newDestination(t, ipfix.Config{Network: "tcp", Address: ln.Addr().String(), Kind: flow.KeySrc, MessageSize: 1000, Now: clock.Now})
	rng := rand.New(rand.NewPCG(21, 4))
	recs := randRecords(rng, flow.KeySrc, 100000, 1)
	for i := range recs {
		recs[i].Key = flow.MakeKey(flow.KeySrc, randAddr(rng, false), randAddr(rng, false), 0, 0, 0)
	}
	b := &record.Batch{ID: 1, Records: recs}
	// As a report.Queue does: a batch whose Records failed is given again
	// (it resumes where it stopped), a Flush that failed is retried as a
	// Flush.
	firstAcked := -1
	failed := func(attempt int, err error) {
		t.Helper()
		if errors.Is(err, record.ErrRejected) || attempt == 5 {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		if firstAcked < 0 {
			firstAcked = int(e.Stats().Records)
			t.Logf("the first collector broke the connection: %v; %d records acknowledged", err, firstAcked)
		}
		clock.Advance(ipfix.DefaultReconnectInterval)
	}
	for attempt := 0; ; attempt++ {
		err := e.Records(b)
		if err == nil {
			break
		}
		failed(attempt, err)
		b.Retry = true
	}
	for attempt := 0; ; attempt++ {
		err := e.Flush()
		if err == nil {
			break
		}
		failed(attempt, err)
	}
	// What the first collector's host can have acknowledged: the 1024
	// bytes read and what its receive buffer held (the kernel doubles
	// SO_RCVBUF, 8 KiB), 20 bytes a record, and some slack for the
	// window the kernel advertised before the buffer was set.
	const bound = (1024 + 64<<10) / 20
	if firstAcked < 0 || firstAcked > bound {
		t.Fatalf("records counted as sent when the first connection broke: %d, want at most %d of %d", firstAcked, bound, len(recs))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := e.Stats().Records; got != uint64(len(recs)) {
		t.Errorf("records counted as sent: %d, want %d, each once", got, len(recs))
	}
	msgs := decodeStream(t, second, netflow.CreateTemplateSystem())
	checkSession(t, msgs, 0)
	got := allFlows(msgs)
	want := wantAll(recs[firstAcked:])
	if len(got) != len(want) {
		t.Fatalf("the second collector got %d records, want the %d the first did not acknowledge", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d of the second connection: %+v, want %+v (records %d on, in order)", i, got[i], want[i], firstAcked)
		}
	}
}
