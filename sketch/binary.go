package sketch

import (
	"bytes"
	"compress/flate"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/axiomhq/hyperloglog"
)

var (
	_ encoding.BinaryMarshaler   = (*HLL)(nil)
	_ encoding.BinaryAppender    = (*HLL)(nil)
	_ encoding.BinaryUnmarshaler = (*HLL)(nil)
)

// The binary form, version 1:
//
//	offset  size  field
//	0       4     magic "fdHL"
//	4       1     format version: 1 (keys hashed by KeyHash, xxh3 of flow's key encoding)
//	5       1     precision p, in [MinPrecision, MaxPrecision]
//	6       1     flags: bit 0 set when the payload is DEFLATE-compressed (RFC 1951); other bits zero
//	7       1     zero
//	8       8     seed fingerprint (Fingerprint), big endian
//	16      -     payload: the registers in github.com/axiomhq/hyperloglog's dense binary form
//	              (its version 2: 8 header bytes, then 2^p register bytes), compressed when flagged
//
// The seed itself is never written. The registers are compressed because a
// window of a few keys has nearly all of them zero: 16 KiB become a few
// dozen bytes, and a summary line stays small even for 1-second windows;
// a saturated HLL of precision 14 compresses to about 7.5 KiB.
const (
	headerLen     = 16
	formatVersion = 1
	flagDeflate   = 1 << 0
	magic         = "fdHL"
	// payloadHeaderLen is the header of the library's dense form.
	payloadHeaderLen = 8
)

// encoders keeps what an encoding needs besides its output, for reuse: a
// DEFLATE compressor, which is large (about 600 KiB), and a buffer for the
// uncompressed registers.
var encoders = sync.Pool{New: func() any {
	w, err := flate.NewWriter(nil, flate.BestSpeed)
	if err != nil {
		panic(err) // only for an invalid level
	}
	return &encoder{w: w}
}}

type encoder struct {
	w    *flate.Writer
	regs []byte       // uncompressed
	out  bytes.Buffer // compressed
}

// readers keeps DEFLATE decompressors for reuse across decodings.
var readers = sync.Pool{New: func() any { return flate.NewReader(emptyReader) }}

var emptyReader = bytes.NewReader(nil)

// AppendBinary implements encoding.BinaryAppender: it appends the binary
// form of h (see above) to b, growing b once. It fails for the zero HLL.
func (h *HLL) AppendBinary(b []byte) ([]byte, error) {
	if h.sk == nil {
		return b, fmt.Errorf("%w: the zero HLL has no binary form", ErrFormat)
	}
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	regs, err := h.sk.AppendBinary(e.regs[:0])
	if err != nil {
		return b, fmt.Errorf("sketch: %w", err)
	}
	e.regs = regs
	e.out.Reset()
	e.w.Reset(&e.out)
	if _, err := e.w.Write(regs); err != nil {
		return b, fmt.Errorf("sketch: compress: %w", err)
	}
	if err := e.w.Close(); err != nil {
		return b, fmt.Errorf("sketch: compress: %w", err)
	}
	b = slices.Grow(b, headerLen+e.out.Len())
	b = append(b, magic...)
	b = append(b, formatVersion, h.p, flagDeflate, 0)
	b = binary.BigEndian.AppendUint64(b, h.fp)
	return append(b, e.out.Bytes()...), nil
}

// MarshalBinary implements encoding.BinaryMarshaler (see AppendBinary).
func (h *HLL) MarshalBinary() ([]byte, error) { return h.AppendBinary(nil) }

// UnmarshalBinary implements encoding.BinaryUnmarshaler: it replaces h with
// the HLL of the binary form b, or fails with an error wrapping ErrFormat
// and leaves h unchanged. b may come from anywhere: every field is checked
// before it is used, the decompressed payload is never read past the size
// its precision allows (at most 256 KiB), and no input makes it panic. The
// decoded HLL knows its seed's fingerprint, not the seed (see HLL).
func (h *HLL) UnmarshalBinary(b []byte) error {
	p, err := PrecisionOf(b)
	if err != nil {
		return err
	}
	if b[6]&^flagDeflate != 0 || b[7] != 0 {
		return fmt.Errorf("%w: unknown flags %#02x %#02x", ErrFormat, b[6], b[7])
	}
	fp := binary.BigEndian.Uint64(b[8:16])
	payload := b[headerLen:]
	if b[6]&flagDeflate != 0 {
		var err error
		if payload, err = inflate(payload, payloadHeaderLen+1<<p); err != nil {
			return err
		}
	}
	// The library's decoder checks its own header, lengths and register
	// values; ours requires the dense form of the header's precision, which
	// is all AppendBinary writes.
	if len(payload) < payloadHeaderLen || payload[0] != 2 || payload[1] != p || payload[3] != 0 {
		return fmt.Errorf("%w: payload is not dense registers of precision %d", ErrFormat, p)
	}
	sk := new(hyperloglog.Sketch)
	if err := sk.UnmarshalBinary(payload); err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	*h = HLL{sk: sk, p: p, fp: fp}
	return nil
}

// inflate decompresses a DEFLATE stream that must hold exactly n bytes and
// end where data ends.
func inflate(data []byte, n int) ([]byte, error) {
	out := make([]byte, n)
	if err := inflateInto(data, out); err != nil {
		return nil, err
	}
	return out, nil
}

// inflateInto decompresses a DEFLATE stream that must hold exactly
// len(out) bytes, and end where data ends, into out.
func inflateInto(data, out []byte) error {
	n := len(out)
	src := bytes.NewReader(data)
	r := readers.Get().(io.ReadCloser)
	defer func() {
		_ = r.(flate.Resetter).Reset(emptyReader, nil) // do not keep data alive in the pool
		readers.Put(r)
	}()
	if err := r.(flate.Resetter).Reset(src, nil); err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if _, err := io.ReadFull(r, out); err != nil {
		return fmt.Errorf("%w: payload shorter than %d bytes: %w", ErrFormat, n, err)
	}
	// The stream must end here: no more data, and nothing after it (a
	// bytes.Reader is an io.ByteReader, so flate reads no further than its
	// stream's end).
	var one [1]byte
	if k, err := r.Read(one[:]); k != 0 || !errors.Is(err, io.EOF) {
		if k != 0 || err == nil {
			return fmt.Errorf("%w: payload longer than %d bytes", ErrFormat, n)
		}
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if src.Len() != 0 {
		return fmt.Errorf("%w: %d bytes after the compressed payload", ErrFormat, src.Len())
	}
	return nil
}

// PrecisionOf returns the precision of the binary form b (see
// AppendBinary) from its header, without decoding the registers, so that a
// caller can refuse a sketch that would take more memory than it allows
// (2^p bytes) before decoding it. It fails with ErrFormat for bytes that do
// not begin as an HLL of a known version and precision; the rest of b is
// checked by UnmarshalBinary.
func PrecisionOf(b []byte) (uint8, error) {
	switch {
	case len(b) < headerLen:
		return 0, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrFormat, len(b), headerLen)
	case string(b[:4]) != magic:
		return 0, fmt.Errorf("%w: bad magic %q", ErrFormat, b[:4])
	case b[4] != formatVersion:
		return 0, fmt.Errorf("%w: unknown version %d", ErrFormat, b[4])
	case b[5] < MinPrecision || b[5] > MaxPrecision:
		return 0, fmt.Errorf("%w: precision %d not in [%d, %d]", ErrFormat, b[5], MinPrecision, MaxPrecision)
	}
	return b[5], nil
}

// Registers decodes the binary form b (see AppendBinary) into buf, reused
// when it has room, and returns the precision, the seed fingerprint and
// the 2^p registers (a subslice of the returned buffer), checked as
// UnmarshalBinary checks them. Once buf has room for 8 + 2^p bytes it
// allocates no registers (two small objects for the decompressor): a caller that merges many sketches (MergeRegisters) keeps
// one buffer instead of decoding each into an HLL.
func Registers(b, buf []byte) (p uint8, fp uint64, regs, out []byte, err error) {
	if p, err = PrecisionOf(b); err != nil {
		return 0, 0, nil, buf, err
	}
	if b[6]&^flagDeflate != 0 || b[7] != 0 {
		return 0, 0, nil, buf, fmt.Errorf("%w: unknown flags %#02x %#02x", ErrFormat, b[6], b[7])
	}
	fp = binary.BigEndian.Uint64(b[8:16])
	n := payloadHeaderLen + 1<<p
	buf = slices.Grow(buf[:0], n)[:n]
	if b[6]&flagDeflate != 0 {
		if err = inflateInto(b[headerLen:], buf); err != nil {
			return 0, 0, nil, buf, err
		}
	} else if copy(buf, b[headerLen:]) != n || len(b) != headerLen+n {
		return 0, 0, nil, buf, fmt.Errorf("%w: payload of %d bytes, want %d", ErrFormat, len(b)-headerLen, n)
	}
	// The library's dense form, version 2: version, p, bias 0, dense, the
	// register count, then the registers, none above 65-p.
	if buf[0] != 2 || buf[1] != p || buf[2] != 0 || buf[3] != 0 || binary.BigEndian.Uint32(buf[4:8]) != 1<<p {
		return 0, 0, nil, buf, fmt.Errorf("%w: payload is not dense registers of precision %d", ErrFormat, p)
	}
	regs = buf[payloadHeaderLen:]
	maxRho := 65 - p
	for i, r := range regs {
		if r > maxRho {
			return 0, 0, nil, buf, fmt.Errorf("%w: register %d = %d, max %d", ErrFormat, i, r, maxRho)
		}
	}
	return p, fp, regs, buf, nil
}

// MergeRegisters makes each register of dst the larger of it and src's:
// the registers of the union of both key sets, as Merge computes them.
// dst and src are registers of one precision, from Registers.
func MergeRegisters(dst, src []byte) {
	for i, r := range src[:len(dst)] {
		dst[i] = max(dst[i], r)
	}
}

// FromRegisters returns the HLL of precision p, seed fingerprint fp and
// registers regs (2^p of them, as Registers returns), which it copies.
func FromRegisters(p uint8, fp uint64, regs []byte) (*HLL, error) {
	if p < MinPrecision || p > MaxPrecision || len(regs) != 1<<p {
		return nil, fmt.Errorf("%w: %d registers of precision %d", ErrFormat, len(regs), p)
	}
	payload := make([]byte, payloadHeaderLen, payloadHeaderLen+len(regs))
	payload[0], payload[1] = 2, p
	binary.BigEndian.PutUint32(payload[4:], uint32(len(regs)))
	sk := new(hyperloglog.Sketch)
	if err := sk.UnmarshalBinary(append(payload, regs...)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return &HLL{sk: sk, p: p, fp: fp}, nil
}
