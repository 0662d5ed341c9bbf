package collect

import (
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// waitLimit bounds every wait of these tests: a last resort against a
// hang, far beyond what a loaded machine takes.
const waitLimit = 2 * time.Minute

// consumer reads a source in a goroutine of its own, as the pipeline's
// producer does, counting the packets, until the source ends
// (capture.ErrClosed) or it has read stopAfter packets (when not 0).
type consumer struct {
	packets atomic.Int64
	gate    chan struct{} // closed: read; nil: read from the start
	done    chan struct{}
	err     error
}

func consume(t *testing.T, c *Collector, paused bool, stopAfter int64) *consumer {
	k := &consumer{done: make(chan struct{})}
	if paused {
		k.gate = make(chan struct{})
	}
	go func() {
		defer close(k.done)
		if k.gate != nil {
			<-k.gate
		}
		src := c.Source()
		var p capture.Packet
		for stopAfter == 0 || k.packets.Load() < stopAfter {
			err := src.Next(&p)
			switch {
			case err == nil:
				k.packets.Add(1)
			case errors.Is(err, capture.ErrTimeout):
			case errors.Is(err, capture.ErrClosed):
				return
			default:
				k.err = err
				return
			}
		}
	}()
	t.Cleanup(func() {
		k.resume()
		c.Close()
		<-k.done
	})
	return k
}

func (k *consumer) resume() {
	if k.gate != nil {
		select {
		case <-k.gate:
		default:
			close(k.gate)
		}
	}
}

// wait waits for the consumer to end.
func (k *consumer) wait(t *testing.T) {
	t.Helper()
	select {
	case <-k.done:
	case <-time.After(waitLimit):
		t.Fatalf("the source did not end within %s", waitLimit)
	}
	if k.err != nil {
		t.Fatal(k.err)
	}
}

// dialTCP connects to a TCP listener.
func dialTCP(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// stalledHeader is an IPFIX message header that claims 65535 bytes, the
// most a message can have.
var stalledHeader = []byte{0, 10, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}

// closedByPeer reports whether conn was closed by the collector: a read
// ends with EOF or a reset rather than at its deadline.
func closedByPeer(t *testing.T, conn net.Conn) bool {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(waitLimit))
	_, err := conn.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	return err != nil
}

// TestTCPStalledConnectionsHoldNothing: 64 connections each send a header
// that claims 65535 bytes and then nothing. A new exporter is decoded
// while they stay open: they hold no buffer of the listener's (before,
// they held all 64 and every exporter was decoded no more).
func TestTCPStalledConnectionsHoldNothing(t *testing.T) {
	c := open(t, IPFIXTCP, flow.KeySrc, func(cfg *Config) {
		cfg.TCPIdleTimeout, cfg.TCPMessageTimeout = time.Hour, time.Hour // they stay open for the test
	})
	k := consume(t, c, false, 0)
	addr := c.Addrs()[0]
	const stalled = tcpBuffers
	conns := make([]net.Conn, stalled)
	for i := range conns {
		conns[i] = dialTCP(t, addr)
		if _, err := conns[i].Write(stalledHeader); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "the stalled connections accepted", waitLimit, func() bool { return c.Stats().Connections == stalled })

	flows := collecttest.Flows(3000, 11, exportTime)
	e := collecttest.Exporter{Version: 10, Boot: exportTime.Add(-time.Hour), Absolute: true}
	conn := dialTCP(t, addr)
	msgs := e.Encode(exportTime, flows, 30)
	for _, m := range msgs {
		if _, err := conn.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "the new exporter's records decoded", waitLimit, func() bool { return k.packets.Load() == int64(len(flows)) })
	st := c.Stats()
	if st.TCPOpen != stalled+1 || st.TCPStalledClosed != 0 || st.TCPIdleClosed != 0 || st.Connections != stalled+1 {
		t.Errorf("open %d, stalled %d, idle %d, accepted %d; want %d open, none closed", st.TCPOpen, st.TCPStalledClosed, st.TCPIdleClosed, st.Connections, stalled+1)
	}
	if st.Datagrams != uint64(len(msgs)) || st.Records != uint64(len(flows)) {
		t.Errorf("%d messages, %d records; want %d, %d", st.Datagrams, st.Records, len(msgs), len(flows))
	}
	// An old exporter (one of the stalled, now sending its message whole)
	// is decoded too.
	k.packets.Store(0)
	fresh := collecttest.Exporter{Version: 10, Boot: exportTime.Add(-time.Hour), Absolute: true}
	m := fresh.Encode(exportTime, flows[:30], 30)[0]
	if _, err := conns[0].Write(padMessage(m, 65535)[ipfixHeaderLen:]); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the stalled exporter's records decoded", waitLimit, func() bool { return k.packets.Load() == 30 })
	if st := c.Stats(); st.Errors["no_template"] != 1 || st.TCPOpen != stalled+1 {
		t.Errorf("no_template %d (the padding set), open %d; want 1, %d", st.Errors["no_template"], st.TCPOpen, stalled+1)
	}
}

// padMessage returns IPFIX message m made n bytes long with a padding set
// of its own (a set of an unknown template ID, which a collector skips),
// its header's length saying n.
func padMessage(m []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, m)
	pad := n - len(m)
	// Set header: ID 65535 (a data set of a template never sent), length.
	out[len(m)], out[len(m)+1] = 0xff, 0xff
	out[len(m)+2], out[len(m)+3] = byte(pad>>8), byte(pad)
	out[2], out[3] = byte(n>>8), byte(n)
	return out
}

// TestTCPConnectionLimit: connections past the limit (1024 open) are
// closed at once and counted; once one closes, a new exporter is taken
// and decoded.
func TestTCPConnectionLimit(t *testing.T) {
	c := open(t, IPFIXTCP, flow.KeySrc, nil)
	k := consume(t, c, false, 0)
	addr := c.Addrs()[0]
	conns := make([]net.Conn, maxConns)
	for i := range conns {
		conns[i] = dialTCP(t, addr)
	}
	testutil.WaitFor(t, "the connections up to the limit accepted", waitLimit, func() bool { return c.Stats().TCPOpen == maxConns })
	const over = 10
	for i := range over {
		conn := dialTCP(t, addr)
		if !closedByPeer(t, conn) {
			t.Fatalf("connection %d over the limit not closed", i)
		}
	}
	testutil.WaitFor(t, "the refused counted", waitLimit, func() bool { return c.Stats().TCPRefused == over })
	conns[0].Close()
	testutil.WaitFor(t, "a connection closed", waitLimit, func() bool { return c.Stats().TCPOpen == maxConns-1 })
	e := collecttest.Exporter{Version: 10, Boot: exportTime.Add(-time.Hour), Absolute: true}
	flows := collecttest.Flows(90, 12, exportTime)
	conn := dialTCP(t, addr)
	for _, m := range e.Encode(exportTime, flows, 30) {
		if _, err := conn.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "the new exporter's records decoded", waitLimit, func() bool { return k.packets.Load() == int64(len(flows)) })
	if st := c.Stats(); st.TCPRefused != over || st.Connections != maxConns+1 || st.TCPOpen != maxConns {
		t.Errorf("refused %d, accepted %d, open %d; want %d, %d, %d", st.TCPRefused, st.Connections, st.TCPOpen, over, maxConns+1, maxConns)
	}
	want := map[string]float64{
		"flowdedup_collect_connections_refused_total":                  over,
		"flowdedup_collect_connections_open":                           maxConns,
		`flowdedup_collect_connections_closed_total{reason="idle"}`:    0,
		`flowdedup_collect_connections_closed_total{reason="stalled"}`: 0,
	}
	for name, v := range gather(t, c) {
		if w, ok := want[name]; ok && w != v {
			t.Errorf("%s %v, want %v", name, v, w)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("no metric %s", name)
	}
}

// gather returns the values of c's metrics by name and labels, as the
// exposition format names them.
func gather(t *testing.T, c *Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Metrics())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			if len(m.GetLabel()) != 0 {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+`="`+l.GetValue()+`"`)
				}
				name += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestTCPTimeouts: a connection that sends nothing for the idle timeout
// (after a message, or from the start) is closed and counted idle; one
// whose message began and does not come whole within the message timeout
// is closed and counted stalled. A connection that keeps sending within
// the idle timeout is not closed.
func TestTCPTimeouts(t *testing.T) {
	const idle, msgMax = 300 * time.Millisecond, 200 * time.Millisecond
	c := open(t, IPFIXTCP, flow.KeySrc, func(cfg *Config) { cfg.TCPIdleTimeout, cfg.TCPMessageTimeout = idle, msgMax })
	k := consume(t, c, false, 0)
	addr := c.Addrs()[0]
	e := collecttest.Exporter{Version: 10, Boot: exportTime.Add(-time.Hour), Absolute: true}
	flows := collecttest.Flows(30, 13, exportTime)

	start := time.Now() // no connection can be closed before start plus the shorter timeout
	silent := dialTCP(t, addr)
	talked := dialTCP(t, addr)
	if _, err := talked.Write(e.Encode(exportTime, flows, 30)[0]); err != nil {
		t.Fatal(err)
	}
	half := dialTCP(t, addr)
	if _, err := half.Write(stalledHeader); err != nil {
		t.Fatal(err)
	}
	for _, conn := range []net.Conn{silent, talked, half} {
		if !closedByPeer(t, conn) {
			t.Fatal("a connection was not closed")
		}
	}
	if d := time.Since(start); d < msgMax {
		t.Errorf("closed after %s, before any timeout", d)
	}
	testutil.WaitFor(t, "the closes counted", waitLimit, func() bool {
		st := c.Stats()
		return st.TCPIdleClosed == 2 && st.TCPStalledClosed == 1 && st.TCPOpen == 0
	})
	if n := k.packets.Load(); n != 30 {
		t.Errorf("%d records of the connection that talked, want 30", n)
	}
	if st := c.Stats(); st.Errors["truncated"] != 0 {
		t.Errorf("a timeout counted as truncated: %v", st.Errors)
	}
}

// TestTCPDrain: at Drain, the messages a connection sent whole are
// decoded, one that is not whole is counted as shutdown, and the source
// ends.
func TestTCPDrain(t *testing.T) {
	c := open(t, IPFIXTCP, flow.KeySrc, nil)
	k := consume(t, c, false, 0)
	addr := c.Addrs()[0]
	e := collecttest.Exporter{Version: 10, Boot: exportTime.Add(-time.Hour), Absolute: true}
	flows := collecttest.Flows(300, 14, exportTime)
	msgs := e.Encode(exportTime, flows, 30)
	whole := dialTCP(t, addr)
	for _, m := range msgs {
		if _, err := whole.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	half := dialTCP(t, addr)
	if _, err := half.Write(stalledHeader); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the records decoded and both connections accepted", waitLimit, func() bool {
		return k.packets.Load() == int64(len(flows)) && c.Stats().TCPOpen == 2
	})
	c.Drain()
	k.wait(t)
	if !closedByPeer(t, half) {
		t.Error("the stalled connection is open after the drain")
	}
	st := c.Stats()
	if st.Errors[Shutdown] != 1 || st.Datagrams != uint64(len(msgs))+1 || st.TCPStalledClosed != 0 {
		t.Errorf("shutdown %d, messages %d, stalled %d; want 1, %d, 0", st.Errors[Shutdown], st.Datagrams, st.TCPStalledClosed, len(msgs)+1)
	}
}
