package collect

import (
	"fmt"
	"net"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
)

// wide is a template layout of 60 fields no decoder reads: 4 + 240 bytes
// of template record, the kind a flood sends.
var wide = unreadFields(60, 1000)

// TestTemplateMemory: a template flood over UDP (8 addresses, 4 source
// ports each) and TCP (4 connections) into a collector of 256 KiB of
// template memory (issue 25, item 10): the memory the templates take, as
// counted, never exceeds it, evictions are counted, and a router's
// template, used all along, survives: each of its records is keyed.
func TestTemplateMemory(t *testing.T) {
	const budget = 256 << 10
	udp := open(t, NetFlow, flow.Key5Tuple, func(cfg *Config) {
		cfg.TemplateMemory = budget
		cfg.Listeners = append(cfg.Listeners, Listener{Protocol: IPFIXTCP, Addr: "127.0.0.1:0"})
	})
	var flood []net.Conn
	for a := range 8 {
		for range 4 {
			flood = append(flood, exporterConn(t, fmt.Sprintf("127.0.1.%d", a+1), udp.Addrs()[0]))
		}
	}
	for range 4 {
		conn, err := net.Dial("tcp", udp.Addrs()[1])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		flood = append(flood, conn)
	}
	router := exporterConn(t, "127.0.0.9", udp.Addrs()[0])
	const rounds, perRound = 40, 4
	sent, records := uint64(0), 0
	peak := int64(0)
	for r := range rounds {
		for i, c := range flood {
			var sets [][]byte
			for k := range perRound {
				sets = append(sets, wide.template(uint16(256+r*perRound+k)))
			}
			write(t, c, ipfixMsg(uint32(i), uint32(r), sets...))
			sent++
		}
		msg := ipfixMsg(7, uint32(r*10), layoutA.records(256, 9, r%20*10, 10))
		if r%10 == 0 {
			msg = ipfixMsg(7, uint32(r*10), layoutA.template(256), layoutA.records(256, 9, r%20*10, 10))
		}
		write(t, router, msg)
		sent++
		records += 10
		pump(t, udp, taken(sent))
		st := udp.Stats()
		peak = max(peak, st.TemplateMemory)
		if st.TemplateMemory > budget {
			t.Fatalf("round %d: templates of %d bytes, budget %d", r, st.TemplateMemory, budget)
		}
	}
	st := udp.Stats()
	// The flood's templates alone, 244 bytes of record each, are 1.5 MB:
	// six times the budget.
	floodBytes := len(flood) * rounds * perRound * (4 + 4*len(wide))
	if st.TemplateMemoryEvicted == 0 || peak < budget/2 || floodBytes < 4*budget {
		t.Errorf("%d evicted, peak %d bytes of %d, flood of %d bytes", st.TemplateMemoryEvicted, peak, budget, floodBytes)
	}
	if st.Errors["no_template"] != 0 || st.Records != uint64(records) {
		t.Errorf("no_template %d, records %d; want 0 and %d: the router's template was evicted", st.Errors["no_template"], st.Records, records)
	}
	t.Logf("flood of %d bytes of templates: peak %d bytes counted, budget %d, %d evicted", floodBytes, peak, budget, st.TemplateMemoryEvicted)
}
