package eval

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/mix"
)

// ErrStreamSpec is wrapped by every stream spec error.
var ErrStreamSpec = errors.New("bad stream spec")

// Elements is one run's materialised stream.
type Elements struct {
	Hashes []uint64 // keyed hash of each element, in stream order
	Dup    []bool   // Dup[i]: element i equals an earlier element
}

// Stream produces the elements of one run.
type Stream interface {
	// Materialize generates (or reads) the stream. seed keys the hashes and
	// drives random streams, so two runs with different seeds differ.
	Materialize(seed uint64) (*Elements, error)
	// String is the canonical spec, parseable by ParseStream.
	String() string
}

// maxElements bounds synthetic streams: 9 bytes of memory per element are
// held at once, so 2^31 elements is already 18 GiB.
const maxElements = 1 << 31

// ParseStream parses a stream spec: distinct:n=N, uniform:n=N,universe=U,
// zipf:n=N,universe=U,s=S, file:PATH or
// pcap:PATH[,key=KIND][,prefix=V4LEN[,V6LEN]][,decap=LIST] (key src by
// default, as replay; prefix= keys by network, as replay's --prefix, and
// decap= through tunnels, as replay's --decap: see ParsePcapSpec).
func ParseStream(spec string) (Stream, error) {
	kind, rest, _ := strings.Cut(strings.TrimSpace(spec), ":")
	switch strings.ToLower(kind) {
	case "file":
		if rest == "" {
			return nil, fmt.Errorf("eval: %q: %w: file needs a path (file:PATH)", spec, ErrStreamSpec)
		}
		return fileStream{path: rest}, nil
	case "pcap":
		return parsePcapStream(spec, rest)
	}
	kv, err := parseKV(spec, rest)
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(kind) {
	case "distinct":
		n, err := kv.count("n", 1, maxElements)
		if err != nil {
			return nil, err
		}
		return distinctStream{n: n}, kv.done()
	case "uniform":
		n, err := kv.count("n", 1, maxElements)
		if err != nil {
			return nil, err
		}
		u, err := kv.count("universe", 1, math.MaxInt64)
		if err != nil {
			return nil, err
		}
		return uniformStream{n: n, universe: u}, kv.done()
	case "zipf":
		n, err := kv.count("n", 1, maxElements)
		if err != nil {
			return nil, err
		}
		u, err := kv.count("universe", 1, 1<<53)
		if err != nil {
			return nil, err
		}
		s, err := kv.float("s", 0, 20)
		if err != nil {
			return nil, err
		}
		return zipfStream{n: n, universe: u, s: s}, kv.done()
	}
	return nil, fmt.Errorf("eval: %q: %w: unknown stream %q (known: distinct, uniform, zipf, file, pcap)", spec, ErrStreamSpec, kind)
}

type kvSpec struct {
	spec string
	vals map[string]string
	used map[string]bool
}

func parseKV(spec, rest string) (*kvSpec, error) {
	kv := &kvSpec{spec: spec, vals: map[string]string{}, used: map[string]bool{}}
	if strings.TrimSpace(rest) == "" {
		return kv, nil
	}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("eval: %q: %w: %q is not key=value", spec, ErrStreamSpec, part)
		}
		kv.vals[k] = v
	}
	return kv, nil
}

// count parses a required positive integer; it accepts 1e6-style and
// 1_000_000-style numbers, since stream lengths are long.
func (kv *kvSpec) count(key string, lo, hi int64) (int, error) {
	s, ok := kv.vals[key]
	if !ok {
		return 0, fmt.Errorf("eval: %q: %w: missing %s=", kv.spec, ErrStreamSpec, key)
	}
	kv.used[key] = true
	s = strings.ReplaceAll(s, "_", "")
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || f > math.MaxInt64 {
			return 0, fmt.Errorf("eval: %q: %w: %s=%s is not a whole number", kv.spec, ErrStreamSpec, key, kv.vals[key])
		}
		v = int64(f)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("eval: %q: %w: %s=%d out of range [%d, %d]", kv.spec, ErrStreamSpec, key, v, lo, hi)
	}
	return int(v), nil
}

func (kv *kvSpec) float(key string, lo, hi float64) (float64, error) {
	s, ok := kv.vals[key]
	if !ok {
		return 0, fmt.Errorf("eval: %q: %w: missing %s=", kv.spec, ErrStreamSpec, key)
	}
	kv.used[key] = true
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || v <= lo || v > hi {
		return 0, fmt.Errorf("eval: %q: %w: %s=%s must be a number in (%g, %g]", kv.spec, ErrStreamSpec, key, s, lo, hi)
	}
	return v, nil
}

func (kv *kvSpec) done() error {
	for k := range kv.vals {
		if !kv.used[k] {
			return fmt.Errorf("eval: %q: %w: unknown parameter %q", kv.spec, ErrStreamSpec, k)
		}
	}
	return nil
}

// hashID is the keyed hash of a synthetic element: xxh3 of its 8-byte
// little-endian id, the same function flow keys are hashed with.
func hashID(id, seed uint64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], id)
	return xxh3.HashSeed(b[:], seed)
}

// materializeIDs turns a sequence of element ids into hashes and ground
// truth. The truth is exact: it compares ids, not hashes.
func materializeIDs(n int, seed uint64, next func() uint64) *Elements {
	e := &Elements{Hashes: make([]uint64, n), Dup: make([]bool, n)}
	seen := filters.NewExact()
	for i := range n {
		id := next()
		e.Hashes[i] = hashID(id, seed)
		e.Dup[i] = seen.Observe(id)
	}
	return e
}

type distinctStream struct{ n int }

func (s distinctStream) String() string { return fmt.Sprintf("distinct:n=%d", s.n) }

func (s distinctStream) Materialize(seed uint64) (*Elements, error) {
	e := &Elements{Hashes: make([]uint64, s.n), Dup: make([]bool, s.n)}
	for i := range s.n {
		e.Hashes[i] = hashID(uint64(i), seed)
	}
	return e, nil
}

type uniformStream struct{ n, universe int }

func (s uniformStream) String() string {
	return fmt.Sprintf("uniform:n=%d,universe=%d", s.n, s.universe)
}

func (s uniformStream) Materialize(seed uint64) (*Elements, error) {
	r := mix.NewSplitMix(seed ^ 0x5bd1e995)
	u := uint64(s.universe)
	return materializeIDs(s.n, seed, func() uint64 { return r.Uint64N(u) }), nil
}

type zipfStream struct {
	n, universe int
	s           float64
}

func (s zipfStream) String() string {
	return fmt.Sprintf("zipf:n=%d,universe=%d,s=%s", s.n, s.universe, strconv.FormatFloat(s.s, 'g', -1, 64))
}

func (s zipfStream) Materialize(seed uint64) (*Elements, error) {
	r := mix.NewSplitMix(seed ^ 0x27d4eb2f)
	z := mix.NewZipf(uint64(s.universe), s.s)
	return materializeIDs(s.n, seed, func() uint64 { return z.Draw(&r) - 1 }), nil
}

// fileStream reads one key per line; a trailing CR is dropped, so files
// written on Windows give the same keys. Empty lines are keys too (the empty
// key): a file is taken as it is.
type fileStream struct{ path string }

func (s fileStream) String() string { return "file:" + s.path }

func (s fileStream) Materialize(seed uint64) (*Elements, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("eval: stream %s: %w", s, err)
	}
	defer f.Close()
	return readKeys(f, seed)
}

// maxLine bounds one key line so a file without newlines cannot make the
// reader buffer without limit.
const maxLine = 1 << 20

func readKeys(r io.Reader, seed uint64) (*Elements, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	e := &Elements{}
	seen := map[string]struct{}{}
	for sc.Scan() {
		line := sc.Bytes()
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		e.Hashes = append(e.Hashes, xxh3.HashSeed(line, seed))
		_, dup := seen[string(line)]
		if !dup {
			seen[string(line)] = struct{}{}
		}
		e.Dup = append(e.Dup, dup)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: reading keys (line %d): %w", len(e.Hashes)+1, err)
	}
	if len(e.Hashes) == 0 {
		return nil, fmt.Errorf("eval: %w: the key file is empty", ErrStreamSpec)
	}
	return e, nil
}
