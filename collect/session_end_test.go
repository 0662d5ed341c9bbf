package collect

import (
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
)

// narrow is a template layout of 15 fields of 4 bytes no decoder reads:
// its template record (ID, field count, 15 specifiers of 4 bytes) is
// 4 + 15*4 = 64 bytes.
var narrow = unreadFields(15, 2000)

// narrowCost is what the budget counts for a template of narrow, by hand
// (docs/collect.md: its record, its compiled fields and a fixed
// overhead). Its record is kept in a slice of 64 bytes (a size class of
// Go's allocator: no rounding); a template of fixed-length fields keeps
// no compiled fields; the overhead is the template structure plus 64
// bytes. The structure (netflow.template) on a 64-bit machine: two bools
// (2, padded to 8), two ints (16), 18 locations of two uint16 (72), two
// slices (48), a pointer (8), a key of uint32 and two uint16 (8), an
// int64 and an int (16): 176 bytes, so 176 + 64 + 64 = 304. On a 32-bit
// one: bools 4, ints 8, locations 72, slices 24, pointer 4, key 8, int64
// 8 (aligned to 4), int 4: 132 bytes, so 132 + 64 + 64 = 260.
var narrowCost = map[int]int64{64: 304, 32: 260}[strconv.IntSize]

// ids returns n template IDs from 256 on.
func ids(n int) []uint16 {
	out := make([]uint16, n)
	for i := range out {
		out[i] = uint16(256 + i)
	}
	return out
}

// TestTCPClosedSessionsFreeTemplateMemory: the templates of an
// IPFIX-over-TCP connection are the connection's (RFC 7011 scopes them to
// the transport session): when it closes, their bytes leave
// --template-memory at once, counted, not once something evicts them
// (issue 25, item 10). 8 connections define 20 templates each beside a
// UDP exporter's 5, and close: the budget holds the UDP exporter's 5
// again, to the byte, and a new connection can then define templates up
// to the budget without an eviction.
func TestTCPClosedSessionsFreeTemplateMemory(t *testing.T) {
	if narrowCost == 0 {
		t.Fatalf("no hand-computed template cost for %d-bit ints", strconv.IntSize)
	}
	const budget = 64 << 10 // the least a budget can be
	c := open(t, NetFlow, flow.Key5Tuple, func(cfg *Config) {
		cfg.TemplateMemory = budget
		cfg.Listeners = append(cfg.Listeners, Listener{Protocol: IPFIXTCP, Addr: "127.0.0.1:0"})
	})
	udpAddr, tcpAddr := c.Addrs()[0], c.Addrs()[1]

	// The UDP exporter's templates: they stay.
	const kept = 5
	write(t, exporterConn(t, "127.0.4.1", udpAddr), ipfixMsg(1, 0, narrow.templates(ids(kept)...)))
	pump(t, c, taken(1))
	base := kept * narrowCost
	if st := c.Stats(); st.TemplateMemory != base {
		t.Fatalf("%d bytes of templates, want %d (%d of %d bytes)", st.TemplateMemory, base, kept, narrowCost)
	}

	const sessions, each = 8, 20
	conns := make([]net.Conn, sessions)
	for i := range conns {
		conns[i] = dialTCP(t, tcpAddr)
		write(t, conns[i], ipfixMsg(uint32(i), 0, narrow.templates(ids(each)...))) // the same IDs: each connection's own
	}
	pump(t, c, taken(1+sessions))
	st := c.Stats()
	if want := base + sessions*each*narrowCost; st.TemplateMemory != want {
		t.Fatalf("%d bytes of templates with the connections open, want %d", st.TemplateMemory, want)
	}
	for _, conn := range conns {
		conn.Close()
	}
	// No connection open, the source idle: every closed one's session
	// was dropped (a connection counts as open until its session's end
	// is queued).
	pump(t, c, func(s Stats) bool { return s.TCPOpen == 0 })
	st = c.Stats()
	if st.TemplateMemory != base || st.TemplatesSessionClosed != sessions*each || st.TemplateMemoryEvicted != 0 {
		t.Fatalf("after the connections closed: %d bytes of templates, %d released, %d evicted; want %d, %d, 0",
			st.TemplateMemory, st.TemplatesSessionClosed, st.TemplateMemoryEvicted, base, sessions*each)
	}

	// A new connection fills the budget: as many templates as fit beside
	// the UDP exporter's, none evicted (had the closed connections'
	// 160 templates stayed, 48,640 bytes on a 64-bit machine, most of
	// these could not have fit without evictions).
	fit := int((budget - base) / narrowCost)
	if rest := budget - base - int64(fit)*narrowCost; rest < 0 || rest >= narrowCost || sessions*each*narrowCost <= budget/2 {
		t.Fatalf("bad test: %d templates leave %d bytes", fit, rest)
	}
	fresh := dialTCP(t, tcpAddr)
	write(t, fresh, ipfixMsg(100, 0, narrow.templates(ids(fit)...)))
	pump(t, c, taken(1+sessions+1))
	st = c.Stats()
	if want := base + int64(fit)*narrowCost; st.TemplateMemory != want || st.TemplateMemoryEvicted != 0 || st.TemplatesEvicted != 0 {
		t.Fatalf("%d templates on a new connection: %d bytes, %d evicted (%d by the per-session limit); want %d bytes, none evicted",
			fit, st.TemplateMemory, st.TemplateMemoryEvicted, st.TemplatesEvicted, want)
	}
	// The budget is full: one more evicts one.
	write(t, fresh, ipfixMsg(100, 0, narrow.templates(uint16(256+fit))))
	pump(t, c, taken(1+sessions+2))
	st = c.Stats()
	if want := base + int64(fit)*narrowCost; st.TemplateMemory != want || st.TemplateMemoryEvicted != 1 {
		t.Errorf("one template past the budget: %d bytes, %d evicted; want %d, 1", st.TemplateMemory, st.TemplateMemoryEvicted, want)
	}
	m := gather(t, c)
	if v := m[`flowdedup_collect_templates_released_total{reason="session_closed"}`]; v != sessions*each {
		t.Errorf("templates_released_total{session_closed} %v, want %d", v, sessions*each)
	}
	if v, ok := m[`flowdedup_collect_templates_released_total{reason="session_evicted"}`]; !ok || v != 0 {
		t.Errorf("templates_released_total{session_evicted} %v (present %v), want 0", v, ok)
	}
}

// TestUDPEvictedSessionsFreeTemplateMemory: a UDP exporter's session
// (address, port) dropped for room, as idle by the exporter table's CLOCK
// or as its address's least recently heard, gives its templates' bytes
// back to --template-memory at once, counted.
func TestUDPEvictedSessionsFreeTemplateMemory(t *testing.T) {
	if narrowCost == 0 {
		t.Fatalf("no hand-computed template cost for %d-bit ints", strconv.IntSize)
	}
	t.Run("idle", func(t *testing.T) {
		c := open(t, NetFlow, flow.Key5Tuple, func(cfg *Config) { cfg.MaxExporters = 4 })
		addr := c.Addrs()[0]
		// 4 exporters of 10 templates fill the table; 4 new ones of 2
		// templates each push them out, the CLOCK finding the old ones
		// silent since.
		for i := range 4 {
			write(t, exporterConn(t, fmt.Sprintf("127.0.5.%d", i+1), addr), ipfixMsg(1, 0, narrow.templates(ids(10)...)))
		}
		pump(t, c, taken(4))
		if st := c.Stats(); st.TemplateMemory != 40*narrowCost {
			t.Fatalf("%d bytes of templates, want %d", st.TemplateMemory, 40*narrowCost)
		}
		for i := range 4 {
			write(t, exporterConn(t, fmt.Sprintf("127.0.5.%d", i+11), addr), ipfixMsg(1, 0, narrow.templates(ids(2)...)))
		}
		pump(t, c, taken(8))
		st := c.Stats()
		if st.TemplateMemory != 8*narrowCost || st.ExportersEvicted != 4 || st.TemplatesSessionEvicted != 40 || st.TemplateMemoryEvicted != 0 {
			t.Errorf("%d bytes of templates, %d exporters evicted, %d templates released, %d evicted for memory; want %d, 4, 40, 0",
				st.TemplateMemory, st.ExportersEvicted, st.TemplatesSessionEvicted, st.TemplateMemoryEvicted, 8*narrowCost)
		}
	})
	t.Run("per-address", func(t *testing.T) {
		c := open(t, NetFlow, flow.Key5Tuple, nil)
		addr := c.Addrs()[0]
		// 17 ports of one address, 3 templates each: the 17th session
		// takes the place of the address's least recently heard.
		for i := range maxSessionsPerAddr + 1 {
			write(t, exporterConn(t, "127.0.6.1", addr), ipfixMsg(1, 0, narrow.templates(ids(3)...)))
			pump(t, c, taken(uint64(i+1))) // one by one: each heard after the one before
		}
		st := c.Stats()
		if want := maxSessionsPerAddr * 3 * narrowCost; st.TemplateMemory != want || st.ExportersEvicted != 1 || st.TemplatesSessionEvicted != 3 {
			t.Errorf("%d bytes of templates, %d exporters evicted, %d templates released; want %d, 1, 3",
				st.TemplateMemory, st.ExportersEvicted, st.TemplatesSessionEvicted, want)
		}
	})
}
