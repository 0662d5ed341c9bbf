package sketch

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/axiomhq/hyperloglog"
)

// encode returns h's binary form, failing the test on an error.
func encode(t testing.TB, h *HLL) []byte {
	t.Helper()
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBinaryLayout checks the header byte by byte against the documented
// layout, and the payload against the library's own decoder after
// decompressing it with compress/flate directly.
func TestBinaryLayout(t *testing.T) {
	h := of(t, 12, 42, million()[:5000])
	b := encode(t, h)
	want := []byte{'f', 'd', 'H', 'L', 1, 12, 1, 0}
	want = binary.BigEndian.AppendUint64(want, Fingerprint(42))
	if !bytes.Equal(b[:16], want) {
		t.Fatalf("header % x, want % x", b[:16], want)
	}
	regs, err := readAllInflate(b[16:])
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 8+1<<12 {
		t.Fatalf("payload of %d bytes, want %d", len(regs), 8+1<<12)
	}
	var sk hyperloglog.Sketch
	if err := sk.UnmarshalBinary(regs); err != nil {
		t.Fatal(err)
	}
	if sk.Estimate() != h.Estimate() {
		t.Errorf("the library decodes the payload to estimate %d, want %d", sk.Estimate(), h.Estimate())
	}
	// The payload may also be stored uncompressed (flag bit 0 clear).
	raw := append(append([]byte(nil), b[:16]...), regs...)
	raw[6] = 0
	var d HLL
	if err := d.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	if !d.Equal(h) {
		t.Error("uncompressed form decodes to other registers")
	}
}

func readAllInflate(b []byte) ([]byte, error) {
	var out bytes.Buffer
	r := flate.NewReader(bytes.NewReader(b))
	if _, err := out.ReadFrom(r); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// TestRoundTrip: decoding the binary form gives an HLL with the same
// precision, fingerprint, registers and estimate, whose own binary form is
// byte-equal; the empty and a full HLL compress to small forms.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		p       uint8
		n       int
		maxSize int // bytes of the binary form
	}{
		{14, 0, 100},       // empty: 16 KiB of zeros
		{14, 10, 200},      // a handful of registers set
		{14, 1e6, 8 << 10}, // 16 KiB of registers: about 3.6 bits each compressed
		{4, 1000, 100},
		{18, 1e5, 200 << 10},
	} {
		h := of(t, tc.p, 3, million()[:tc.n])
		b := encode(t, h)
		t.Logf("precision %d, %d keys: %d bytes", tc.p, tc.n, len(b))
		if len(b) > tc.maxSize {
			t.Errorf("precision %d, %d keys: %d bytes, want at most %d", tc.p, tc.n, len(b), tc.maxSize)
		}
		var d HLL
		if err := d.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if !d.Equal(h) || d.Estimate() != h.Estimate() || d.Precision() != tc.p || d.Fingerprint() != Fingerprint(3) {
			t.Errorf("precision %d, %d keys: decoded HLL differs", tc.p, tc.n)
		}
		if b2 := encode(t, &d); !bytes.Equal(b, b2) {
			t.Errorf("precision %d, %d keys: re-encoding differs", tc.p, tc.n)
		}
		// AppendBinary appends.
		pre := []byte("prefix")
		if b3, err := h.AppendBinary(pre); err != nil || !bytes.Equal(b3[:6], pre) || !bytes.Equal(b3[6:], b) {
			t.Errorf("AppendBinary: %v", err)
		}
	}
}

// deflate compresses b.
func deflate(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestSpeed)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// TestUnmarshalErrors: every malformed form fails with ErrFormat and leaves
// the HLL as it was.
func TestUnmarshalErrors(t *testing.T) {
	h := of(t, 10, 8, million()[:2000])
	good := encode(t, h)
	regs, err := readAllInflate(good[16:])
	if err != nil {
		t.Fatal(err)
	}
	header := good[:16]
	with := func(hdr []byte, payload []byte) []byte { return append(append([]byte(nil), hdr...), payload...) }
	patch := func(i int, v byte) []byte { b := append([]byte(nil), good...); b[i] = v; return b }
	other, _ := hyperloglog.NewSketch(12, false)
	otherRegs, _ := other.MarshalBinary()
	sparse, _ := hyperloglog.NewSketch(10, true)
	sparseRegs, _ := sparse.MarshalBinary()
	badReg := append([]byte(nil), regs...)
	badReg[100] = 64 // beyond 64-p+1
	for name, b := range map[string][]byte{
		"empty":                     nil,
		"short header":              good[:15],
		"magic":                     patch(0, 'x'),
		"version 0":                 patch(4, 0),
		"version 2":                 patch(4, 2),
		"precision 3":               patch(5, 3),
		"precision 19":              patch(5, 19),
		"precision 11 (payload 10)": patch(5, 11),
		"unknown flag":              patch(6, 3),
		"reserved byte":             patch(7, 1),
		"no payload":                header,
		"truncated deflate":         good[:len(good)-2],
		"trailing bytes":            append(append([]byte(nil), good...), 0),
		"not deflate":               with(header, []byte{0xff, 0xff, 0xff, 0xff}),
		"payload too long":          with(header, deflate(t, append(append([]byte(nil), regs...), 0))),
		"payload too short":         with(header, deflate(t, regs[:len(regs)-1])),
		"bomb":                      with(header, deflate(t, make([]byte, 64<<20))),
		"payload precision 12":      with(header, deflate(t, otherRegs)),
		"sparse payload":            with(header, deflate(t, sparseRegs)),
		"register out of range":     with(header, deflate(t, badReg)),
		"raw payload too short": func() []byte {
			b := with(header, regs[:len(regs)-1])
			b[6] = 0
			return b
		}(),
	} {
		d := h.Clone()
		err := d.UnmarshalBinary(b)
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
		if !d.Equal(h) {
			t.Errorf("%s: a failed decoding changed the HLL", name)
		}
	}
}

// FuzzUnmarshalBinary: no input makes decoding panic; what decodes
// re-encodes to a form that decodes to the same HLL, whose estimate and
// merges work.
func FuzzUnmarshalBinary(f *testing.F) {
	for _, tc := range []struct {
		p uint8
		n int
	}{{4, 0}, {4, 100}, {10, 0}, {10, 3000}, {14, 50}} {
		b, err := of(f, tc.p, 1, million()[:tc.n]).MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte("fdHL\x01\x0e\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h HLL
		if err := h.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		est := h.Estimate()
		b2, err := h.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var d HLL
		if err := d.UnmarshalBinary(b2); err != nil {
			t.Fatal(err)
		}
		if !d.Equal(&h) || d.Estimate() != est {
			t.Fatal("re-encoded HLL differs")
		}
		if err := d.Merge(&h); err != nil || !d.Equal(&h) {
			t.Fatalf("merging an HLL into its copy: %v", err)
		}
		var z HLL
		if err := z.Merge(&h); err != nil || z.Estimate() != est {
			t.Fatalf("merge into the zero HLL: %v", err)
		}
	})
}

// PrecisionOf reads the precision of an encoded HLL from its header, and
// refuses what UnmarshalBinary refuses for its header.
func TestPrecisionOf(t *testing.T) {
	for _, p := range []uint8{MinPrecision, DefaultPrecision, MaxPrecision} {
		h, err := New(p, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := h.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := PrecisionOf(b); got != p || err != nil {
			t.Errorf("precision %d: PrecisionOf = %d, %v", p, got, err)
		}
		for name, bad := range map[string][]byte{
			"short":     b[:headerLen-1],
			"magic":     append([]byte("xdHL"), b[4:]...),
			"version":   append(append(append([]byte{}, b[:4]...), 9), b[5:]...),
			"precision": append(append(append([]byte{}, b[:5]...), MaxPrecision+1), b[6:]...),
		} {
			if _, err := PrecisionOf(bad); !errors.Is(err, ErrFormat) {
				t.Errorf("precision %d, %s: %v, want ErrFormat", p, name, err)
			}
		}
	}
}

// Registers, MergeRegisters and FromRegisters give the HLL that decoding
// and Merge give, for sketches of every fill (empty, a few keys, many), in
// one reused buffer; Registers refuses what UnmarshalBinary refuses.
func TestRegistersMerge(t *testing.T) {
	for _, p := range []uint8{MinPrecision, 10, DefaultPrecision} {
		var want *HLL
		var merged []byte
		var buf []byte
		for i, n := range []int{0, 3, 5000, 200} {
			h := mustNew(t, p, 9)
			for j := range n {
				h.InsertHash(uint64(i)<<40 | uint64(j)*0x9e3779b97f4a7c15)
			}
			b, err := h.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			gp, fp, regs, out, err := Registers(b, buf)
			buf = out
			if err != nil || gp != p || fp != h.Fingerprint() || len(regs) != 1<<p {
				t.Fatalf("p %d, sketch %d: Registers = %d, %x, %d registers, %v", p, i, gp, fp, len(regs), err)
			}
			if want == nil {
				want, merged = h.Clone(), slices.Clone(regs)
			} else {
				if err := want.Merge(h); err != nil {
					t.Fatal(err)
				}
				MergeRegisters(merged, regs)
			}
		}
		got, err := FromRegisters(p, want.Fingerprint(), merged)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(want) || got.Estimate() != want.Estimate() {
			t.Errorf("p %d: merged registers estimate %d, Merge %d", p, got.Estimate(), want.Estimate())
		}
		h := mustNew(t, p, 9)
		b, _ := h.MarshalBinary()
		// The DEFLATE reader's source is two small objects; the registers are never allocated.
		if allocs := testing.AllocsPerRun(20, func() { _, _, _, buf, _ = Registers(b, buf) }); allocs > 2 {
			t.Errorf("p %d: Registers allocates %v times into a buffer with room", p, allocs)
		}
	}
	for name, b := range map[string][]byte{"short": []byte("fdHL"), "magic": []byte("xxxxxxxxxxxxxxxxxxxxxxxx")} {
		if _, _, _, _, err := Registers(b, nil); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
	}
}

// FuzzRegisters: Registers accepts exactly what UnmarshalBinary accepts,
// and its registers make the same HLL.
func FuzzRegisters(f *testing.F) {
	for _, tc := range []struct {
		p uint8
		n int
	}{{4, 0}, {4, 100}, {10, 3000}, {14, 50}} {
		b, err := of(f, tc.p, 1, million()[:tc.n]).MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h HLL
		herr := h.UnmarshalBinary(b)
		p, fp, regs, _, err := Registers(b, nil)
		if (err == nil) != (herr == nil) || (err != nil && !errors.Is(err, ErrFormat)) {
			t.Fatalf("Registers: %v; UnmarshalBinary: %v", err, herr)
		}
		if err != nil {
			return
		}
		g, err := FromRegisters(p, fp, regs)
		if err != nil || !g.Equal(&h) {
			t.Fatalf("FromRegisters: %v, or another HLL than UnmarshalBinary's", err)
		}
	})
}
