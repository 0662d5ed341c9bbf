package clickhouse

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/report"
)

// endString writes the length of strings of every size, in place, as
// appendString would.
func TestEndString(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 16383, 16384, 70000} {
		s := strings.Repeat("x", n)
		b := []byte("head")
		b, at := beginString(b)
		b = append(b, s...)
		b = endString(b, at)
		want := appendString([]byte("head"), s)
		if !bytes.Equal(b, want) {
			t.Errorf("string of %d bytes: encoded differently from appendString", n)
		}
	}
}

// Rows split back exactly as they were encoded, whatever the key kind.
func TestSplitRowsOfEncodedRecords(t *testing.T) {
	e, err := New(Config{Address: "127.0.0.1:1", Database: "d", Kind: flow.Key5Tuple, Observer: strings.Repeat("o", 200)})
	if err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	batch := &report.Batch{ID: 3}
	for i := range 50 {
		batch.Records = append(batch.Records, pipeline.Record{Key: flow.MakeKey(flow.Key5Tuple, a, b, uint8(i), uint16(i), 2), TimeNs: int64(i) * 1e9})
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
		batch := &report.Batch{ID: 3}
		for i := range 1000 {
			src := a
			if i%2 == 0 {
				src = b
			}
			batch.Records = append(batch.Records, pipeline.Record{Key: flow.MakeKey(kind, src, src, 6, uint16(i), 80), TimeNs: int64(i) * 1e9})
		}
		if allocs := testing.AllocsPerRun(10, func() { e.encode(batch) }); allocs != 0 {
			t.Errorf("%v: %v allocations per batch", kind, allocs)
		}
		// Batches of another observer (spooled by an earlier run) between
		// batches of the Exporter's own: none allocates either.
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
	batch := &report.Batch{ID: 1}
	for i := range 10000 {
		src := v4
		if i%2 == 0 {
			src = v6
		}
		batch.Records = append(batch.Records, pipeline.Record{Key: flow.MakeKey(flow.Key5Tuple, src, src, 6, uint16(i), 443), TimeNs: 1.7e18 + int64(i)*1e6, WindowNs: 1.7e18, WindowEndNs: 1.7e18 + 60e9})
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := e.encode(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch.Records))/b.Elapsed().Seconds(), "rows/s")
}
