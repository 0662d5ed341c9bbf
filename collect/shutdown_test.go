//go:build linux

package collect

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/memsink"
	"github.com/flowdedup/flowdedup/pipeline"
)

// burstRecords is the records of each datagram of burst.
const burstRecords = 30

// burst sends n IPFIX datagrams of burstRecords records each (templates in
// every one, so that each decodes on its own) from one loopback socket to
// addr, as fast as it can, and returns how many were sent once each has
// reached the collector's socket or been dropped there. On a loaded
// machine a datagram can still be on its way (the kernel's backlog, worked
// by ksoftirqd) when its write returns; the backlog is a queue per CPU, so
// burst sends from one CPU and, last, a datagram to a socket of its own,
// and waits for that one.
func burst(t *testing.T, addr string, n int) uint64 {
	t.Helper()
	e := collecttest.Exporter{Version: 10, Boot: exportTime.Add(-time.Hour), Absolute: true, TemplateEvery: 1}
	msgs := e.Encode(exportTime, collecttest.Flows(n*burstRecords, 21, exportTime), burstRecords)
	if len(msgs) != n {
		t.Fatalf("%d datagrams encoded, want %d", len(msgs), n)
	}
	marker, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mconn, err := net.Dial("udp", marker.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer mconn.Close()

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	for cpu := range 1 << 10 {
		if all.IsSet(cpu) {
			one.Set(cpu)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &all)
	var sent uint64
	for _, m := range msgs {
		if _, err := conn.Write(m); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	if _, err := mconn.Write([]byte("end")); err != nil {
		t.Fatal(err)
	}
	marker.SetReadDeadline(time.Now().Add(waitLimit))
	if _, _, err := marker.ReadFrom(make([]byte, 16)); err != nil {
		t.Fatalf("the marker after the burst: %v", err)
	}
	return sent
}

// accounts checks that every datagram sent is accounted for exactly
// once, after Close: decoded (its exporter's datagrams), dropped by the
// kernel, or counted as shutdown, and returns the decoded ones and the
// shutdown ones.
func accounts(t *testing.T, c *Collector, sent uint64) (decoded, shutdown uint64) {
	t.Helper()
	drops, err := c.Source().(capture.DropCounter).KernelDrops()
	if err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	for _, o := range st.Observers {
		decoded += o.Datagrams
	}
	shutdown = st.Errors[Shutdown]
	for r, n := range st.Errors {
		if r != Shutdown && n != 0 {
			t.Errorf("errors %s: %d", r, n)
		}
	}
	if drops != st.KernelDrops {
		t.Errorf("KernelDrops %d, Stats.KernelDrops %d", drops, st.KernelDrops)
	}
	if sent != decoded+drops+shutdown || st.Datagrams != decoded+shutdown {
		t.Errorf("sent %d: decoded %d + kernel drops %d + shutdown %d = %d (%d unaccounted); Stats.Datagrams %d",
			sent, decoded, drops, shutdown, decoded+drops+shutdown, int64(sent)-int64(decoded+drops+shutdown), st.Datagrams)
	}
	t.Logf("sent %d: decoded %d, kernel drops %d, shutdown %d", sent, decoded, drops, shutdown)
	return decoded, shutdown
}

// openBurst opens a NetFlow listener with a socket buffer of rcvbuf bytes.
// needDropCount skips a test of the stop's accounting where the kernel's
// drop count cannot be read: under qemu-user (make test-32bit's ARMv7
// run), which knows neither SO_RXQ_OVFL nor SO_MEMINFO, a burst's drops
// are invisible and no identity over them can hold. make test and make
// test-race check it natively.
func needDropCount(t *testing.T) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); err != nil {
		t.Skipf("this platform cannot count the kernel's socket drops (SO_RXQ_OVFL: %v; qemu-user?): the stop's accounting is checked natively", err)
	}
}

func openBurst(t *testing.T, rcvbuf int) *Collector {
	needDropCount(t)
	return open(t, NetFlow, flow.KeySrc, func(cfg *Config) { cfg.Rcvbuf = rcvbuf })
}

// TestCloseCountsWhatIsNotDecoded: a burst of datagrams, of which the
// reader (as a pipeline that stops reading) takes only some records, then
// Close: what the socket held, the batches read and queued, and the rest
// of the batch being decoded are counted as shutdown, so that sent =
// decoded + kernel drops + shutdown.
func TestCloseCountsWhatIsNotDecoded(t *testing.T) {
	for _, stopAfter := range []int64{1, 45, 900} { // in the first datagram, in the second, at the end of the 30th
		c := openBurst(t, 256<<10)
		k := consume(t, c, true, stopAfter)
		sent := burst(t, c.Addrs()[0], 2000)
		k.resume()
		k.wait(t) // it read stopAfter records and stopped
		c.Close()
		decoded, shutdown := accounts(t, c, sent)
		if shutdown == 0 {
			t.Errorf("stop after %d: nothing counted as shutdown", stopAfter)
		}
		// The records read are those of the datagrams begun, the last
		// perhaps in part.
		if n := uint64(k.packets.Load()); n != uint64(stopAfter) || decoded == 0 || n > decoded*burstRecords || n <= (decoded-1)*burstRecords {
			t.Errorf("stop after %d: %d records read of %d datagrams begun", stopAfter, n, decoded)
		}
	}
}

// TestDrainDecodesEverything: a burst while the reader waits (the socket
// buffer full, batches queued), then Drain: every datagram received is
// decoded, whole, and the source ends; the drop count is the kernel's.
func TestDrainDecodesEverything(t *testing.T) {
	c := openBurst(t, 256<<10)
	k := consume(t, c, true, 0)
	sent := burst(t, c.Addrs()[0], 2000)
	c.Drain()
	k.resume()
	k.wait(t)
	c.Close()
	decoded, shutdown := accounts(t, c, sent)
	if shutdown != 0 {
		t.Errorf("%d counted as shutdown, want every datagram decoded", shutdown)
	}
	if n := uint64(k.packets.Load()); n != decoded*burstRecords {
		t.Errorf("%d records read of %d datagrams, want %d", n, decoded, decoded*burstRecords)
	}
	if c.Stats().KernelDrops == 0 {
		t.Error("no kernel drops: the socket was not full when drained, the test tests less than it says")
	}
}

// totals returns the packets and the kernel drops of the summaries.
func totals(s *memsink.Sink) (packets, kernel uint64) {
	for _, w := range s.Windows() {
		packets += w.Packets
		kernel += w.DroppedBy["kernel"]
	}
	return packets, kernel
}

// TestStopThroughPipeline runs collect's pipeline over the collector as
// `flowdedup collect` does: a burst while the pipeline runs, then the
// stop of a SIGTERM, either as collect makes it (Drain: the pipeline
// reads the source to its end) or by cancelling the pipeline (which stops
// reading within 500 ms), then Close. Either way every datagram sent is
// decoded, dropped by the kernel or counted as shutdown; with Drain the
// pipeline's summaries count every record of every datagram decoded, and
// the kernel's drops.
func TestStopThroughPipeline(t *testing.T) {
	for _, drain := range []bool{true, false} {
		c := openBurst(t, 256<<10)
		sink := &memsink.Sink{WindowsOnly: true}
		pl, err := pipeline.New(pipeline.Config{Workers: 1, Filter: "exact", Key: flow.KeySrc, Window: time.Hour,
			Live: true, Wait: true, IdleWallClock: true}, sink)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- pl.Run(ctx, c.Source()) }()
		sent := burst(t, c.Addrs()[0], 2000)
		if drain {
			c.Drain()
		} else {
			cancel()
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(waitLimit):
			t.Fatal("the pipeline did not end")
		}
		cancel()
		c.Close()
		decoded, shutdown := accounts(t, c, sent)
		packets, kernel := totals(sink)
		if !drain {
			continue
		}
		if st := c.Stats(); shutdown != 0 || packets != decoded*burstRecords || kernel != st.KernelDrops {
			t.Errorf("drain: shutdown %d, summaries' packets %d of %d datagrams decoded (want %d), kernel drops %d in summaries, %d counted",
				shutdown, packets, decoded, decoded*burstRecords, kernel, st.KernelDrops)
		}
	}
}
