package clickhouse

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// TestAppendRecordMatchesText: the row of every kind of key, IPv4 and
// IPv6 (IPv4-mapped too), with and without ports, named and numbered
// protocols, edge addresses, of hosts and of networks (--prefix, every
// length), outside and inside segments (VNIs), is the row written the
// plain way: the key's text from
// flow.Key.AppendText and the addresses (or networks) from net/netip, each
// as a RowBinary String.
func TestAppendRecordMatchesText(t *testing.T) {
	addrs := []netip.Addr{
		netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("255.255.255.255"), netip.MustParseAddr("10.0.200.9"),
		netip.MustParseAddr("::"), netip.MustParseAddr("::1"), netip.MustParseAddr("2001:db8::1:0:0:1"),
		netip.MustParseAddr("::ffff:192.0.2.1"), netip.MustParseAddr("fe80::1:2:3:4"),
		netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), netip.MustParseAddr("1:0:0:1:0:0:0:1"),
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 2000 {
		var b4 [4]byte
		var b16 [16]byte
		for i := range b4 {
			b4[i] = byte(rng.IntN(256))
		}
		for i := range b16 {
			if rng.IntN(3) > 0 { // runs of zeros, for the :: forms
				b16[i] = byte(rng.IntN(256))
			}
		}
		addrs = append(addrs, netip.AddrFrom4(b4), netip.AddrFrom16(b16))
	}
	f := flowRow{observer: appendString(nil, "obs")}
	for i := 0; i+1 < len(addrs); i++ {
		a, c := addrs[i], addrs[i+1]
		if a.Is4() != c.Is4() {
			c = addrs[(i+2)%len(addrs)]
			if a.Is4() != c.Is4() {
				continue
			}
		}
		for _, kind := range []flow.KeyKind{flow.KeySrc, flow.KeyDst, flow.KeyPair, flow.Key5Tuple} {
			for _, proto := range []uint8{6, 17, 1, 58, 132, 200, 0, 255} {
				host := flow.MakeKey(kind, a, c, proto, uint16(rng.IntN(65536)), uint16(rng.IntN(65536)))
				net := host
				m, err := flow.MakeMask(rng.IntN(33), rng.IntN(129))
				if err != nil {
					t.Fatal(err)
				}
				m.Apply(&net)
				// In segments too (--decap's VXLAN and Geneve keys): VNI
				// 0, the largest, and one between.
				vni := []uint32{0, flow.MaxSegment, uint32(rng.IntN(flow.MaxSegment))}[rng.IntN(3)]
				for _, k := range []flow.Key{host, net, host.WithSegment(vni), net.WithSegment(vni)} {
					f.kind = appendString(nil, kind.String())
					r := record.Record{Key: k, TimeNs: 1.7e18 + int64(i), WindowNs: 1.7e18}
					got, err := f.appendRecord(nil, &r, 9)
					if err != nil {
						t.Fatal(err)
					}
					if want := plainRow(k, r.TimeNs, r.WindowNs); !bytes.Equal(got, want) {
						t.Fatalf("%v (%s): row\n%q\nwant\n%q", kind, k, got, want)
					}
				}
			}
		}
	}
}

// appendIPv6 writes every kind of IPv6 address as net/netip does: zero
// runs of every length at every place (the first of the longest as ::),
// IPv4-mapped addresses, and random ones.
func TestAppendIPv6(t *testing.T) {
	check := func(a [16]byte) {
		t.Helper()
		if got, want := string(appendIPv6(nil, a[:])), netip.AddrFrom16(a).String(); got != want {
			t.Fatalf("%x: %q, want %q", a, got, want)
		}
	}
	// Every pattern of zero and non-zero groups, the non-zero ones of
	// every width.
	for mask := range 1 << 8 {
		for _, v := range []uint16{1, 0xa, 0xab, 0xabc, 0xabcd, 0xffff} {
			var a [16]byte
			for i := range 8 {
				if mask&(1<<i) != 0 {
					binary.BigEndian.PutUint16(a[2*i:], v)
				}
			}
			check(a)
			a[10], a[11] = 0xff, 0xff // IPv4-mapped when the first 5 groups are zero
			check(a)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		var a [16]byte
		for i := range a {
			if rng.IntN(2) == 0 {
				a[i] = byte(rng.IntN(256))
			}
		}
		check(a)
	}
}

// appendPort writes every port as strconv does.
func TestAppendPort(t *testing.T) {
	for p := range 1 << 16 {
		if got, want := string(appendPort([]byte("x"), uint16(p))), "x"+strconv.Itoa(p); got != want {
			t.Fatalf("port %d: %q, want %q", p, got, want)
		}
	}
}

// plainRow is the flows row of key k, observer "obs" and batch 9, written
// the plain way.
func plainRow(k flow.Key, ts, win int64) []byte {
	b := appendString(nil, "obs")
	b = appendU32(b, uint32(win/1e9))
	b = appendU32(b, uint32(ts/1e9))
	b = appendU32(b, uint32(ts%1e9))
	text, _ := k.AppendText(nil)
	b = appendString(b, string(text))
	str := func(a netip.Prefix) string {
		switch {
		case !a.IsValid():
			return ""
		case k.Bits() < 0:
			return a.Addr().String()
		}
		return a.String() // a network: CIDR text
	}
	b = appendString(b, str(k.SrcPrefix()))
	b = appendString(b, str(k.DstPrefix()))
	b = append(b, k.Proto())
	b = appendU16(b, k.SrcPort())
	b = appendU16(b, k.DstPort())
	b = appendString(b, k.Kind().String())
	b = appendU64(b, 9)
	vni, seg := k.Segment()
	b = appendU32(b, vni)
	if seg {
		return append(b, 1)
	}
	return append(b, 0)
}

// Rows split back exactly as they were encoded, whatever the key kind.
func TestSplitRowsOfEncodedRecords(t *testing.T) {
	e, err := New(Config{Address: "127.0.0.1:1", Database: "d", Kind: flow.Key5Tuple, Observer: strings.Repeat("o", 200)})
	if err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	batch := &record.Batch{ID: 3}
	for i := range 50 {
		batch.Records = append(batch.Records, record.Record{Key: flow.MakeKey(flow.Key5Tuple, a, b, uint8(i), uint16(i), 2), TimeNs: int64(i) * 1e9})
	}
	if err := e.encode(batch); err != nil {
		t.Fatal(err)
	}
	rows, err := splitRows(e.buf, flowsColumns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(e.ends) {
		t.Fatalf("%d rows, want %d", len(rows), len(e.ends))
	}
	start := 0
	for i, r := range rows {
		if !bytes.Equal(r, e.buf[start:e.ends[i]]) {
			t.Fatalf("row %d differs", i)
		}
		start = e.ends[i]
	}
	if _, err := splitRows(e.buf[:len(e.buf)-1], flowsColumns, nil); err == nil {
		t.Error("a row cut short split without error")
	}
}

// FuzzSplitRows: any answer splits into whole rows that make up the
// input, or is an error; never a panic.
func FuzzSplitRows(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x80})                                                        // a length that does not end
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})  // a length of 2^64-1
	f.Add(append(binary.AppendUvarint(nil, 1<<62), 'x'))                       // a length past the end
	f.Add([]byte("\x01r\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")) // a row cut in its key
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, cols := range [][]column{flowsColumns, windowsColumns} {
			rows, err := splitRows(data, cols, nil)
			if err != nil {
				continue
			}
			if n := len(bytes.Join(rows, nil)); n != len(data) {
				t.Fatalf("rows hold %d bytes of %d", n, len(data))
			}
		}
	})
}

// Encoding a batch allocates nothing once the buffers have grown.
func TestEncodeAllocs(t *testing.T) {
	for _, kind := range []flow.KeyKind{flow.KeySrc, flow.Key5Tuple} {
		e, err := New(Config{Address: "127.0.0.1:1", Database: "d", Kind: kind, Observer: "r"})
		if err != nil {
			t.Fatal(err)
		}
		a, b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("10.0.0.1")
		batch := &record.Batch{ID: 3}
		for i := range 1000 {
			src := a
			if i%2 == 0 {
				src = b
			}
			batch.Records = append(batch.Records, record.Record{Key: flow.MakeKey(kind, src, src, 6, uint16(i), 80), TimeNs: int64(i) * 1e9})
		}
		if allocs := testing.AllocsPerRun(10, func() { e.encode(batch) }); allocs != 0 {
			t.Errorf("%v: %v allocations per batch", kind, allocs)
		}
		// Batches of another observer (spooled by an earlier run) between
		// batches of the Destination's own: none allocates either.
		spooled := *batch
		spooled.Observer = "edge-fra1-before-the-rename"
		if allocs := testing.AllocsPerRun(10, func() { e.encode(&spooled); e.encode(batch) }); allocs != 0 {
			t.Errorf("%v: %v allocations per two batches of two observers", kind, allocs)
		}
	}
}

// BenchmarkEncode: encoding a batch of 10000 5-tuple records (IPv4 and
// IPv6) into RowBinary, without sending it.
func BenchmarkEncode(b *testing.B) {
	e, err := New(Config{Address: "127.0.0.1:1", Database: "d", Kind: flow.Key5Tuple, Observer: "router-1"})
	if err != nil {
		b.Fatal(err)
	}
	v4, v6 := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("2001:db8::1:2:3")
	batch := &record.Batch{ID: 1}
	for i := range 10000 {
		src := v4
		if i%2 == 0 {
			src = v6
		}
		batch.Records = append(batch.Records, record.Record{Key: flow.MakeKey(flow.Key5Tuple, src, src, 6, uint16(i), 443), TimeNs: 1.7e18 + int64(i)*1e6, WindowNs: 1.7e18, WindowEndNs: 1.7e18 + 60e9})
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := e.encode(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch.Records))/b.Elapsed().Seconds(), "rows/s")
}

// streamBatch returns a batch of n 5-tuple records, IPv4 and IPv6, a
// third of them in segments.
func streamBatch(n int) *record.Batch {
	b := &record.Batch{ID: 77}
	v4, v6 := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("2001:db8::1:2:3")
	for i := range n {
		src := v4
		if i%2 == 0 {
			src = v6
		}
		k := flow.MakeKey(flow.Key5Tuple, src, src, 6, uint16(i), 443)
		if i%3 == 0 {
			k = k.WithSegment(uint32(i))
		}
		b.Records = append(b.Records, record.Record{Key: k, TimeNs: 1.7e18 + int64(i)*1e6, WindowNs: 1.7e18, WindowEndNs: 1.7e18 + 60e9})
	}
	return b
}

// A rowStream gives the bytes encode writes, whatever the sizes of the
// reads, and fails every read after stop.
func TestRowStreamMatchesEncode(t *testing.T) {
	e, err := New(Config{Address: "127.0.0.1:1", Database: "d", Kind: flow.Key5Tuple, Observer: "router-1"})
	if err != nil {
		t.Fatal(err)
	}
	b := streamBatch(5000) // about 600 KB: several chunks
	if err := e.encode(b); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(e.buf)
	for _, size := range []int{1, 7, 4096, streamChunk + 1, 1 << 20} {
		s := &rowStream{f: &e.flows, recs: b.Records, id: b.ID}
		var got []byte
		p := make([]byte, size)
		for range len(want) + 2 { // at most a byte a read, and the EOF
			n, err := s.Read(p)
			got = append(got, p[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("reads of %d bytes: %d bytes, want the %d of encode", size, len(got), len(want))
		}
		if n, _ := s.stop(); n != int64(len(want)) {
			t.Errorf("stop says %d bytes given, want %d", n, len(want))
		}
		if n, err := s.Read(p); n != 0 || !errors.Is(err, errStreamStopped) {
			t.Errorf("a read after stop: %d, %v", n, err)
		}
	}
	// Stopped in the middle: the next read fails too.
	s := &rowStream{f: &e.flows, recs: b.Records, id: b.ID}
	if _, err := s.Read(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	s.stop()
	if _, err := s.Read(make([]byte, 100)); !errors.Is(err, errStreamStopped) {
		t.Errorf("a read after stop in the middle: %v", err)
	}
}

// Streaming a batch allocates nothing per row: with a chunk buffer that
// has grown, reading a whole stream allocates nothing.
func TestRowStreamAllocs(t *testing.T) {
	e, err := New(Config{Address: "127.0.0.1:1", Database: "d", Kind: flow.Key5Tuple, Observer: "router-1"})
	if err != nil {
		t.Fatal(err)
	}
	b := streamBatch(3000)
	s := &rowStream{f: &e.flows, recs: b.Records, id: b.ID}
	p := make([]byte, 32<<10)
	read := func() {
		s.next, s.off, s.chunk = 0, 0, s.chunk[:0]
		for range 1 << 20 {
			if _, err := s.Read(p); err != nil {
				break
			}
		}
	}
	read() // grows the chunk
	if allocs := testing.AllocsPerRun(10, read); allocs != 0 {
		t.Errorf("%v allocations per stream of %d rows", allocs, len(b.Records))
	}
}
