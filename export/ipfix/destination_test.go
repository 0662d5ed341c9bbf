package ipfix_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/netsampler/goflow2/v2/decoders/netflow"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

var kinds = []flow.KeyKind{flow.KeySrc, flow.KeyDst, flow.KeyPair, flow.Key5Tuple}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url, network, addr string
	}{
		{"ipfix://127.0.0.1:4739", "udp", "127.0.0.1:4739"},
		{"ipfix+tcp://collector.example:4739", "tcp", "collector.example:4739"},
		{"ipfix://[2001:db8::1]:2055", "udp", "[2001:db8::1]:2055"},
		{"ipfix://127.0.0.1:4739/", "udp", "127.0.0.1:4739"},
	} {
		cfg, err := ipfix.ParseURL(c.url)
		if err != nil || cfg.Network != c.network || cfg.Address != c.addr {
			t.Errorf("ParseURL(%q) = %q %q, %v; want %q %q", c.url, cfg.Network, cfg.Address, err, c.network, c.addr)
		}
	}
	for _, bad := range []string{
		"ipfix://127.0.0.1",          // no port
		"ipfix://127.0.0.1:",         // empty port
		"ipfix://:4739",              // no host
		"ipfix://127.0.0.1:0",        // port 0
		"ipfix://127.0.0.1:65536",    // port too big
		"ipfix://127.0.0.1:http",     // named port
		"ipfix+udp://127.0.0.1:4739", // unknown scheme
		"ipfix+sctp://127.0.0.1:4739",
		"clickhouse://127.0.0.1:8123/db",
		"127.0.0.1:4739",
		"ipfix://user:pw@127.0.0.1:4739",
		"ipfix://127.0.0.1:4739/path",
		"ipfix://127.0.0.1:4739?x=1",
		"ipfix://2001:db8::1:4739", // IPv6 without brackets
		"ipfix://%zz",
		"",
	} {
		if _, err := ipfix.ParseURL(bad); !errors.Is(err, ipfix.ErrURL) {
			t.Errorf("ParseURL(%q): %v, want an ErrURL", bad, err)
		} else {
			t.Logf("%q: %v", bad, err)
		}
	}
}

func TestNewConfigErrors(t *testing.T) {
	good := ipfix.Config{Network: "udp", Address: "127.0.0.1:4739", Kind: flow.Key5Tuple}
	for name, mod := range map[string]func(*ipfix.Config){
		"network":        func(c *ipfix.Config) { c.Network = "sctp" },
		"no port":        func(c *ipfix.Config) { c.Address = "127.0.0.1" },
		"kind":           func(c *ipfix.Config) { c.Kind = 0 },
		"small message":  func(c *ipfix.Config) { c.MessageSize = ipfix.MinMessageSize - 1 },
		"huge message":   func(c *ipfix.Config) { c.MessageSize = 65536 },
		"refresh":        func(c *ipfix.Config) { c.TemplateRefresh = -time.Second },
		"refresh msgs":   func(c *ipfix.Config) { c.TemplateRefreshMessages = -1 },
		"reconnect":      func(c *ipfix.Config) { c.ReconnectInterval = -time.Second },
		"timeout":        func(c *ipfix.Config) { c.Timeout = -time.Second },
		"empty address":  func(c *ipfix.Config) { c.Address = "" },
		"bad port":       func(c *ipfix.Config) { c.Address = "127.0.0.1:99999" },
		"empty network":  func(c *ipfix.Config) { c.Network = "" },
		"unix":           func(c *ipfix.Config) { c.Network = "unix" },
		"zero port":      func(c *ipfix.Config) { c.Address = "127.0.0.1:0" },
		"no host":        func(c *ipfix.Config) { c.Address = ":4739" },
		"tcp small msg":  func(c *ipfix.Config) { c.Network, c.MessageSize = "tcp", 100 },
		"invalid kind 9": func(c *ipfix.Config) { c.Kind = 9 },
	} {
		cfg := good
		mod(&cfg)
		if e, err := ipfix.New(cfg); !errors.Is(err, ipfix.ErrConfig) {
			t.Errorf("%s: New(%+v) = %v, %v; want an ErrConfig", name, cfg, e, err)
		}
	}
}

// newDestination makes an exporter for t, closed at cleanup.
func newDestination(t testing.TB, cfg ipfix.Config) *ipfix.Destination {
	t.Helper()
	e, err := ipfix.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// sendBatches gives recs to e in batches of random sizes, flushing now and
// then, as the Reporter and a Queue would; after each batch it calls after,
// if not nil.
func sendBatches(t testing.TB, e *ipfix.Destination, rng *rand.Rand, recs []record.Record, after func()) {
	t.Helper()
	id := uint64(1000)
	for len(recs) > 0 {
		n := min(len(recs), 1+rng.IntN(300))
		id++
		if err := e.Records(&record.Batch{ID: id, Records: recs[:n]}); err != nil {
			t.Fatalf("Records(batch %d): %v", id, err)
		}
		recs = recs[n:]
		if rng.IntN(4) == 0 {
			if err := e.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
		}
		if after != nil {
			after()
		}
	}
}

// TestUDP exports records of every kind over UDP and decodes the datagrams
// with goflow2: every field of every record, the templates, sequence
// numbers, export time, observation domain and datagram sizes.
func TestUDP(t *testing.T) {
	for _, kind := range kinds {
		for _, size := range []int{0, ipfix.MinMessageSize, 1400} {
			t.Run(fmt.Sprintf("%v/size=%d", kind, size), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(kind), uint64(size)))
				col := newUDPCollector(t, "udp4", "127.0.0.1:0")
				clock := newFakeClock()
				e := newDestination(t, ipfix.Config{
					Network: "udp", Address: col.addr(), Kind: kind,
					ObservationDomain: 0xdeadbeef, MessageSize: size, Now: clock.Now,
				})
				limit := e.MessageSize()
				if size != 0 && limit != size {
					t.Fatalf("MessageSize() = %d, configured %d", limit, size)
				}
				recs := randRecords(rng, kind, 3000, 3)
				sendBatches(t, e, rng, recs, nil)
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				st := e.Stats()
				dgrams := col.waitDatagrams(t, int(st.Messages))
				if len(dgrams) != int(st.Messages) || st.Records != uint64(len(recs)) {
					t.Errorf("%d datagrams, Stats %+v; want %d records", len(dgrams), st, len(recs))
				}
				msgs := decodeDatagrams(t, dgrams)
				checkSession(t, msgs, 0xdeadbeef)
				for i, m := range msgs {
					if m.Length > limit {
						t.Errorf("message %d: %d bytes, limit %d", i, m.Length, limit)
					}
					if want := uint32(clock.Now().Unix()); m.ExportTime != want {
						t.Errorf("message %d: export time %d, want %d", i, m.ExportTime, want)
					}
				}
				sameFlows(t, "goflow2", allFlows(msgs), wantAll(recs))
			})
		}
	}
}

// TestTCP exports over TCP; goflow2 splits the stream into messages by
// their length fields.
func TestTCP(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(kind), 7))
			col := newTCPCollector(t, "127.0.0.1:0")
			e := newDestination(t, ipfix.Config{Network: "tcp", Address: col.addr(), Kind: kind, ObservationDomain: 7})
			if got := e.MessageSize(); got != 65535 {
				t.Errorf("TCP MessageSize() = %d, want 65535", got)
			}
			recs := randRecords(rng, kind, 20000, 5)
			sendBatches(t, e, rng, recs, nil)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			streams := col.waitStreams(t, "the exporter to close", func(s [][]byte, ended []bool) bool {
				return len(ended) == 1 && ended[0]
			})
			msgs := decodeStream(t, streams[0], netflow.CreateTemplateSystem())
			if len(msgs) != int(e.Stats().Messages) {
				t.Errorf("%d messages decoded, Stats %+v", len(msgs), e.Stats())
			}
			checkSession(t, msgs, 7)
			// TCP: each template once per connection (RFC 7011 section 8.3).
			seen := map[uint16]int{}
			for _, m := range msgs {
				for _, id := range m.Templates {
					seen[id]++
				}
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("template %d sent %d times on one connection", id, n)
				}
			}
			sameFlows(t, "goflow2", allFlows(msgs), wantAll(recs))
		})
	}
}

// TestMessagesFilled: a full message leaves less room than one more record
// and its template set: UDP messages are as large as the path allows.
func TestMessagesFilled(t *testing.T) {
	col := newUDPCollector(t, "udp4", "127.0.0.1:0")
	e := newDestination(t, ipfix.Config{Network: "udp", Address: col.addr(), Kind: flow.Key5Tuple, MessageSize: 1000})
	rng := rand.New(rand.NewPCG(1, 2))
	recs := randRecords(rng, flow.Key5Tuple, 5000, 1)
	if err := e.Records(&record.Batch{ID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	// Messages sent so far were sent because they were full; those left
	// go with Flush.
	full := int(e.Stats().Messages)
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	msgs := decodeDatagrams(t, col.waitDatagrams(t, int(e.Stats().Messages)))
	// Worst case: an IPv6 5-tuple record (16+16+1+2+2+8+8 = 53 bytes) and
	// its template set (4 + 4 + 7*4 = 36 bytes).
	const slack = 53 + 36
	for i, m := range msgs[:full] {
		if m.Length > 1000 || m.Length <= 1000-slack {
			t.Errorf("full message %d: %d bytes, want %d < n <= 1000", i, m.Length, 1000-slack)
		}
	}
	sameFlows(t, "goflow2", allFlows(msgs), wantAll(recs))
}

// TestTemplateRefreshUDP: on UDP a template goes out again every
// TemplateRefreshMessages messages of its records, and with the first
// message after TemplateRefresh has passed.
func TestTemplateRefreshUDP(t *testing.T) {
	col := newUDPCollector(t, "udp4", "127.0.0.1:0")
	clock := newFakeClock()
	e := newDestination(t, ipfix.Config{
		Network: "udp", Address: col.addr(), Kind: flow.KeySrc, MessageSize: ipfix.MinMessageSize,
		TemplateRefresh: 10 * time.Second, TemplateRefreshMessages: 4, Now: clock.Now,
	})
	rng := rand.New(rand.NewPCG(3, 4))
	recs := randRecords(rng, flow.KeySrc, 1000, 1)
	for i := range recs {
		recs[i].Key = flow.MakeKey(flow.KeySrc, randAddr(rng, false), randAddr(rng, false), 0, 0, 0) // one template
	}
	// One message per Flush: 20 IPv4 src records (4+8+8 = 20 bytes each)
	// and a template set (4+4+3*4 = 20 bytes) fit in 16+20+4+20*20 = 440
	// <= 464 bytes.
	perMsg := 20
	var withTemplate []int
	var all []record.Record
	for i := 0; i < 10; i++ {
		if i == 6 {
			clock.Advance(10 * time.Second) // message 6 is due by time
		}
		batch := recs[i*perMsg : (i+1)*perMsg]
		all = append(all, batch...)
		if err := e.Records(&record.Batch{ID: uint64(i), Records: batch}); err != nil {
			t.Fatal(err)
		}
		if err := e.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	msgs := decodeDatagrams(t, col.waitDatagrams(t, 10))
	if len(msgs) != 10 {
		t.Fatalf("%d messages, want 10 (20 records each)", len(msgs))
	}
	for i, m := range msgs {
		if len(m.Templates) > 0 {
			withTemplate = append(withTemplate, i)
		}
	}
	// 0: first; 4: 4th message since; 6: 10 s passed; later 6+4 = 10 is
	// beyond the end.
	if want := []int{0, 4, 6}; !slices.Equal(withTemplate, want) {
		t.Errorf("templates in messages %v, want %v", withTemplate, want)
	}
	checkSession(t, msgs, 0)
	sameFlows(t, "goflow2", allFlows(msgs), wantAll(all))
}

// TestRejects: records the exporter cannot encode reject the whole batch
// for good, before any of it is taken.
func TestRejects(t *testing.T) {
	col := newUDPCollector(t, "udp4", "127.0.0.1:0")
	e := newDestination(t, ipfix.Config{Network: "udp", Address: col.addr(), Kind: flow.KeyPair})
	good := randRecords(rand.New(rand.NewPCG(5, 6)), flow.KeyPair, 10, 1)
	for name, bad := range map[string]record.Record{
		"zero key":    {TimeNs: good[0].TimeNs},
		"other kind":  {Key: flow.MakeKey(flow.KeySrc, good[0].Key.Src(), good[0].Key.Dst(), 0, 0, 0), TimeNs: good[0].TimeNs},
		"before 1970": {Key: good[0].Key, TimeNs: -1},
	} {
		batch := append(slices.Clone(good), bad)
		err := e.Records(&record.Batch{ID: 1, Records: batch})
		if !errors.Is(err, record.ErrRejected) {
			t.Errorf("%s: Records = %v, want record.ErrRejected", name, err)
		}
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Messages != 0 || st.Records != 0 {
		t.Errorf("rejected batches sent something: %+v", st)
	}
}

func TestUseAfterClose(t *testing.T) {
	col := newUDPCollector(t, "udp4", "127.0.0.1:0")
	e := newDestination(t, ipfix.Config{Network: "udp", Address: col.addr(), Kind: flow.KeySrc})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	recs := randRecords(rand.New(rand.NewPCG(1, 1)), flow.KeySrc, 1, 1)
	for name, err := range map[string]error{
		"Records": e.Records(&record.Batch{Records: recs}),
		"Window":  e.Window(&record.Summary{}),
		"Flush":   e.Flush(),
		"Close":   e.Close(),
	} {
		if !errors.Is(err, ipfix.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// freePort returns a loopback port no one listens on now.
func freePort(t *testing.T, network string) string {
	t.Helper()
	switch network {
	case "tcp":
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	default:
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().String()
	}
}

// transient checks that err is a send failure a Queue retries.
func transient(t *testing.T, what string, err error, target error) {
	t.Helper()
	if err == nil || errors.Is(err, record.ErrRejected) || (target != nil && !errors.Is(err, target)) {
		t.Fatalf("%s: %v; want a transient error (not record.ErrRejected) wrapping %v", what, err, target)
	}
	t.Logf("%s: %v", what, err)
}

// TestTCPUnreachableAtStart: a collector that is down when the exporter
// starts is not an error of New; sending fails until it is up, at most one
// connection attempt per ReconnectInterval, and then every record arrives,
// once, including those of a batch that failed part way and was retried.
func TestTCPUnreachableAtStart(t *testing.T) {
	addr := freePort(t, "tcp")
	clock := newFakeClock()
	e := newDestination(t, ipfix.Config{
		Network: "tcp", Address: addr, Kind: flow.Key5Tuple, MessageSize: ipfix.MinMessageSize, Now: clock.Now,
	})
	if st := e.Stats(); st.Dials != 0 {
		t.Errorf("New dialled TCP: %+v", st)
	}
	recs := randRecords(rand.New(rand.NewPCG(8, 9)), flow.Key5Tuple, 2000, 2)
	batch := &record.Batch{ID: 77, Records: recs}
	transient(t, "Records, collector down", e.Records(batch), syscall.ECONNREFUSED)
	batch.Retry = true
	transient(t, "Records again at once", e.Records(batch), ipfix.ErrNotConnected)
	if st := e.Stats(); st.Dials != 1 {
		t.Errorf("%d connection attempts within ReconnectInterval, want 1", st.Dials)
	}
	col := newTCPCollector(t, addr)
	clock.Advance(59 * time.Second)
	transient(t, "Records 59 s later", e.Records(batch), ipfix.ErrNotConnected)
	clock.Advance(time.Second) // DefaultReconnectInterval, a minute, has passed
	if err := e.Records(batch); err != nil {
		t.Fatalf("Records once the collector is up: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	streams := col.waitStreams(t, "one whole connection", func(s [][]byte, ended []bool) bool {
		return len(ended) == 1 && ended[0]
	})
	msgs := decodeStream(t, streams[0], netflow.CreateTemplateSystem())
	checkSession(t, msgs, 0)
	sameFlows(t, "goflow2", allFlows(msgs), wantAll(recs))
}

// waitCloseWait waits until the TCP socket bound to local has received
// its peer's FIN (state CLOSE_WAIT in /proc/net/tcp).
func waitCloseWait(t *testing.T, local string) {
	t.Helper()
	ap, err := netipAddrPort(local)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !tcpStateIs(ap, "08") {
		if time.Now().After(deadline) {
			t.Fatalf("socket %s not in CLOSE_WAIT after 10 s", local)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTCPCollectorCloses: a collector that closes the connection makes the
// next send fail with ErrPeerClosed (transient); the records stay, and the
// next connection carries them after its templates, so that every record
// arrives once.
func TestTCPCollectorCloses(t *testing.T) {
	col := newTCPCollector(t, "127.0.0.1:0")
	clock := newFakeClock()
	e := newDestination(t, ipfix.Config{Network: "tcp", Address: col.addr(), Kind: flow.Key5Tuple, Now: clock.Now})
	rng := rand.New(rand.NewPCG(10, 11))
	first := randRecords(rng, flow.Key5Tuple, 500, 1)
	second := randRecords(rng, flow.Key5Tuple, 700, 1)
	if err := e.Records(&record.Batch{ID: 1, Records: first}); err != nil {
		t.Fatal(err)
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	sent := int(e.Stats().Messages)
	// The collector reads what was sent, then closes its end.
	col.waitStreams(t, "the first messages", func(s [][]byte, _ []bool) bool {
		return len(s) == 1 && len(decodeStreamQuiet(s[0])) == sent
	})
	col.mu.Lock()
	server := col.conns[0]
	col.mu.Unlock()
	client := server.RemoteAddr().String()
	server.Close()
	waitCloseWait(t, client)

	if err := e.Records(&record.Batch{ID: 2, Records: second}); err != nil {
		t.Fatalf("Records (buffered, nothing sent): %v", err)
	}
	transient(t, "Flush after the collector closed", e.Flush(), ipfix.ErrPeerClosed)
	clock.Advance(ipfix.DefaultReconnectInterval)
	if err := e.Flush(); err != nil {
		t.Fatalf("Flush on a new connection: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	streams := col.waitStreams(t, "the second connection to end", func(s [][]byte, ended []bool) bool {
		return len(ended) == 2 && ended[1]
	})
	var flows []wireFlow
	for i, s := range streams {
		msgs := decodeStream(t, s, netflow.CreateTemplateSystem()) // a new session knows no templates
		checkSession(t, msgs, 0)
		flows = append(flows, allFlows(msgs)...)
		t.Logf("connection %d: %d messages", i, len(msgs))
	}
	sameFlows(t, "goflow2, both connections", flows, wantAll(append(first, second...)))
}

// decodeStreamQuiet counts the whole messages at the head of a stream.
func decodeStreamQuiet(b []byte) []int {
	var lens []int
	for len(b) >= 4 {
		n := int(b[2])<<8 | int(b[3])
		if n < 16 || n > len(b) {
			break
		}
		lens = append(lens, n)
		b = b[n:]
	}
	return lens
}

// TestUDPPortUnreachable: on UDP, the ICMP port unreachable a closed
// collector port returns makes a send fail with ECONNREFUSED, a transient
// error (on loopback the first, which waits for it: Config.RefusalWait);
// the records of that send are kept and arrive once the collector listens,
// and the sequence number tells the collector how many records were lost
// before.
func TestUDPPortUnreachable(t *testing.T) {
	addr := freePort(t, "udp")
	e := newDestination(t, ipfix.Config{Network: "udp", Address: addr, Kind: flow.KeyDst})
	rng := rand.New(rand.NewPCG(12, 13))
	var lost int
	var kept []record.Record
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("100 sends to a closed UDP port and none failed")
		}
		recs := randRecords(rng, flow.KeyDst, 5, 1)
		for j := range recs { // IPv4 only: one message per Flush
			recs[j].Key = flow.MakeKey(flow.KeyDst, netip.Addr{}, randAddr(rng, false), 0, 0, 0)
		}
		if err := e.Records(&record.Batch{ID: uint64(i), Records: recs}); err != nil {
			t.Fatal(err) // buffered only
		}
		err := e.Flush()
		if err == nil {
			lost += len(recs) // sent to a closed port
			continue
		}
		transient(t, "Flush to a closed port", err, syscall.ECONNREFUSED)
		kept = recs
		break
	}
	col := newUDPCollector(t, "udp4", addr)
	if err := e.Flush(); err != nil {
		t.Fatalf("Flush once the collector listens: %v", err)
	}
	msgs := decodeDatagrams(t, col.waitDatagrams(t, 1))
	if len(msgs) != 1 || msgs[0].Seq != uint32(lost) {
		t.Fatalf("got %d messages, the first with sequence number %d; want 1 with %d (records sent before)", len(msgs), msgs[0].Seq, lost)
	}
	sameFlows(t, "goflow2", msgs[0].Flows, wantAll(kept))
}

// TestUDPDownKeepsEveryRecord: while a UDP collector's port is closed,
// every send is refused and keeps its records (not one datagram in two
// lost between a refusal and the next), and once it listens they all
// arrive, once, from sequence number 0.
func TestUDPDownKeepsEveryRecord(t *testing.T) {
	addr := freePort(t, "udp")
	e := newDestination(t, ipfix.Config{Network: "udp", Address: addr, Kind: flow.KeyDst})
	rng := rand.New(rand.NewPCG(16, 17))
	var all []record.Record
	for i := range 4 {
		recs := randRecords(rng, flow.KeyDst, 5, 1)
		for j := range recs { // IPv4 only: one message
			recs[j].Key = flow.MakeKey(flow.KeyDst, netip.Addr{}, randAddr(rng, false), 0, 0, 0)
		}
		all = append(all, recs...)
		if err := e.Records(&record.Batch{ID: uint64(i), Records: recs}); err != nil {
			t.Fatal(err)
		}
		transient(t, fmt.Sprintf("Flush %d to a closed port", i), e.Flush(), syscall.ECONNREFUSED)
	}
	col := newUDPCollector(t, "udp4", addr)
	if err := e.Flush(); err != nil {
		t.Fatalf("Flush once the collector listens: %v", err)
	}
	msgs := decodeDatagrams(t, col.waitDatagrams(t, 1))
	if len(msgs) != 1 || msgs[0].Seq != 0 {
		t.Fatalf("got %d messages, the first with sequence number %d; want 1 with 0", len(msgs), msgs[0].Seq)
	}
	sameFlows(t, "goflow2", msgs[0].Flows, wantAll(all))
}

// TestWindowFlushes: a window's close sends its records.
func TestWindowFlushes(t *testing.T) {
	col := newUDPCollector(t, "udp4", "127.0.0.1:0")
	e := newDestination(t, ipfix.Config{Network: "udp", Address: col.addr(), Kind: flow.Key5Tuple})
	recs := randRecords(rand.New(rand.NewPCG(14, 15)), flow.Key5Tuple, 50, 1)
	if err := e.Records(&record.Batch{ID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Messages != 0 {
		t.Fatalf("50 records sent before the window closed: %+v", st)
	}
	if err := e.Window(&record.Summary{}); err != nil {
		t.Fatal(err)
	}
	msgs := decodeDatagrams(t, col.waitDatagrams(t, int(e.Stats().Messages)))
	sameFlows(t, "goflow2", allFlows(msgs), wantAll(recs))
}

// TestPathMTULoopback: the UDP message size fills a packet of the path MTU:
// loopback's MTU less 28 bytes of IPv4 and UDP headers (the IPv4 total
// length, 16 bits, caps the packet at 65535), or less 48 for IPv6 (whose
// payload length excludes its header).
func TestPathMTULoopback(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		testutil.SkipOrFail(t, "no lo interface: %v", err)
	}
	col := newUDPCollector(t, "udp4", "127.0.0.1:0")
	e := newDestination(t, ipfix.Config{Network: "udp", Address: col.addr(), Kind: flow.KeySrc})
	if want := min(lo.MTU, 65535) - 28; e.MessageSize() != want {
		t.Errorf("IPv4 loopback (MTU %d): MessageSize() = %d, want %d", lo.MTU, e.MessageSize(), want)
	}
	big := newDestination(t, ipfix.Config{Network: "udp", Address: col.addr(), Kind: flow.KeySrc, MessageSize: 65535})
	if got := big.MessageSize(); got != 65535-28 {
		t.Errorf("UDP with MessageSize 65535: MessageSize() = %d, want %d (the largest IPv4 UDP payload)", got, 65535-28)
	}
	c6, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Logf("no IPv6 loopback: %v", err)
		return
	}
	c6.Close()
	e6 := newDestination(t, ipfix.Config{Network: "udp", Address: c6.LocalAddr().String(), Kind: flow.KeySrc})
	if want := min(lo.MTU-48, 65535); e6.MessageSize() != want {
		t.Errorf("IPv6 loopback (MTU %d): MessageSize() = %d, want %d", lo.MTU, e6.MessageSize(), want)
	}
}
