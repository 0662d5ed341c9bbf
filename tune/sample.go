package tune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/eval"
	"github.com/flowdedup/flowdedup/flow"
)

// elements is one sample materialised under one seed: the keyed hashes the
// filters observe, in replay order, the ground truth of each, and where
// the windows begin.
type elements struct {
	hashes []uint64
	dup    []bool  // dup[i]: an equal key came before element i in its window
	starts []int32 // index of the first element of every window after the first
}

// sample is one input tune evaluates filters on.
type sample interface {
	// materialize returns the sample's elements under seed, which keys the
	// hashes (and drives random streams).
	materialize(seed uint64) (*elements, error)
	// describe says what the sample is, for the report.
	describe() SampleInfo
}

// SampleInfo describes one sample, as it was read.
type SampleInfo struct {
	Name     string `json:"name"`
	Elements int    `json:"elements"` // keys given to the filters (seed 0 for random streams)
	Distinct int    `json:"distinct"` // first occurrences of a key in its window
	Windows  int    `json:"windows"`  // windows with at least one packet
	// What replay reads but does not key: frames flow.Parse rejects,
	// packets older than the open window (replay's "late"), records of a
	// damaged file.
	Unkeyed int `json:"unkeyed,omitempty"`
	Late    int `json:"late,omitempty"`
	Corrupt int `json:"corrupt,omitempty"`
}

// openSamples turns Config.Samples into samples: the paths given bare are
// read in order as one capture, as `flowdedup replay FILE...` reads them;
// each stream spec (eval's grammar; pcap:PATH[,key=K][,prefix=P][,decap=D]
// keyed with windows as replay would) is a sample of its own. key is the
// configured kind and prefix, and decap the tunnels, which a pcap: spec
// may override.
//
// seed is the first seed the run will use: a random stream is generated
// for it once, here, and kept.
func openSamples(ctx context.Context, specs []string, key flow.KeySpec, decap *flow.Decap, window time.Duration, seed uint64) ([]sample, error) {
	var out []sample
	var paths []string
	for _, s := range specs {
		if _, err := os.Stat(s); err == nil || !strings.Contains(s, ":") {
			paths = append(paths, s) // a file (a missing one fails in pcapfile.Open)
			continue
		}
		kindName, rest, _ := strings.Cut(s, ":")
		if strings.EqualFold(kindName, "pcap") {
			ps, err := eval.ParsePcapSpec(rest)
			if err != nil {
				return nil, fmt.Errorf("tune: sample %q: %w", s, err)
			}
			k := key
			if ps.Kind != 0 {
				k.Kind = ps.Kind
			}
			if ps.HasPrefix {
				k.Mask = ps.Prefix
			}
			d := decap
			if ps.HasDecap {
				d = &ps.Decap
			}
			c, err := loadCapture(ctx, s, []string{ps.Path}, k, d, window)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
			continue
		}
		st, err := eval.ParseStream(s)
		if err != nil {
			return nil, fmt.Errorf("tune: sample %q: %w", s, err)
		}
		ss := &streamSample{stream: st}
		if err := ss.load(seed); err != nil {
			return nil, err
		}
		out = append(out, ss)
	}
	if len(paths) > 0 {
		c, err := loadCapture(ctx, strings.Join(paths, " "), paths, key, decap, window)
		if err != nil {
			return nil, err
		}
		out = append([]sample{c}, out...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("tune: %w", ErrNoSample)
	}
	return out, nil
}

// captureSample is a capture read once, as replay's producer reads it:
// each keyed frame is an element of the window of its packet time. The
// keys are kept, numbered, so that each seed only hashes each distinct key
// once.
type captureSample struct {
	info   SampleInfo
	keys   []flow.Key // by id
	ids    []uint32   // key id of each element
	dup    []bool
	starts []int32
}

// loadCapture reads the capture files in order and replays the window
// logic of pipeline's producer with replay's settings (packet-time
// windows, no lateness): a packet opens the window of its time when that
// is later than the open one, and filters are cleared there; a packet of
// an earlier window is late (counted, not keyed); frames the parser
// rejects are not keyed but do move time, as in replay. Ground truth: an
// element is a duplicate when its key came before it in its window, by
// key, not by hash. Keys are of key's kind, masked by its Mask, taken
// through decap's tunnels (flow.Key.DecodeDecap; nil or no tunnels: the
// outermost header, as flow.Parse).
func loadCapture(ctx context.Context, name string, paths []string, key flow.KeySpec, decap *flow.Decap, window time.Duration) (*captureSample, error) {
	src, err := pcapfile.Open(paths...)
	if err != nil {
		return nil, fmt.Errorf("tune: sample %s: %w", name, err)
	}
	defer src.Close()
	c := &captureSample{info: SampleInfo{Name: name}}
	index := map[flow.Key]uint32{}
	var lastWin []int32 // by key id: the window ordinal it was last seen in
	d := int64(window)
	var hi int64
	started := d == 0
	win := int32(0) // ordinal of the open window
	if started {
		c.info.Windows = 1
	}
	var pkt capture.Packet
	for n := 0; ; n++ {
		if n&0xffff == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		err := src.Next(&pkt)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, capture.ErrCorrupt) {
				c.info.Corrupt++
				continue
			}
			return nil, fmt.Errorf("tune: sample %s: %w", name, err)
		}
		if d > 0 {
			w := floorDiv(pkt.TimeNs, d)
			switch {
			case !started:
				hi, started = w, true
				c.info.Windows = 1
			case w > hi:
				hi = w
				win++
				c.info.Windows++
				c.starts = append(c.starts, int32(len(c.ids)))
			case w < hi:
				c.info.Late++
				continue
			}
		}
		var k flow.Key
		if err := k.DecodeDecap(pkt.Data, pkt.LinkType, key.Kind, decap); err != nil {
			c.info.Unkeyed++
			continue
		}
		key.Mask.Apply(&k)
		id, ok := index[k]
		if !ok {
			id = uint32(len(c.keys))
			index[k] = id
			c.keys = append(c.keys, k)
			lastWin = append(lastWin, -1)
		}
		dup := lastWin[id] == win
		lastWin[id] = win
		if !dup {
			c.info.Distinct++
		}
		c.ids = append(c.ids, id)
		c.dup = append(c.dup, dup)
	}
	if int64(len(c.ids)) >= 1<<31 {
		return nil, fmt.Errorf("tune: sample %s: more than 2^31 keys", name)
	}
	c.info.Elements = len(c.ids)
	if c.info.Elements == 0 {
		return nil, fmt.Errorf("tune: sample %s: %w", name, ErrNoKeys)
	}
	return c, nil
}

func floorDiv(t, d int64) int64 {
	q := t / d
	if t < 0 && q*d != t {
		q--
	}
	return q
}

func (c *captureSample) describe() SampleInfo { return c.info }

func (c *captureSample) materialize(seed uint64) (*elements, error) {
	kh := make([]uint64, len(c.keys))
	for i, k := range c.keys {
		kh[i] = k.Hash(seed)
	}
	e := &elements{hashes: make([]uint64, len(c.ids)), dup: c.dup, starts: c.starts}
	for i, id := range c.ids {
		e.hashes[i] = kh[id]
	}
	return e, nil
}

// streamSample is an eval stream: one window, the hashes and truth eval
// materialises (a new random stream per seed).
type streamSample struct {
	stream eval.Stream
	info   SampleInfo
	seed   uint64    // the seed first materialised
	first  *elements // its elements, kept: the first seed is used twice
}

func (s *streamSample) load(seed uint64) error {
	e, err := s.materialize(seed)
	if err != nil {
		return err
	}
	s.seed, s.first = seed, e
	s.info = SampleInfo{Name: s.stream.String(), Elements: len(e.hashes), Windows: 1}
	for _, d := range e.dup {
		if !d {
			s.info.Distinct++
		}
	}
	return nil
}

func (s *streamSample) describe() SampleInfo { return s.info }

func (s *streamSample) materialize(seed uint64) (*elements, error) {
	if s.first != nil && seed == s.seed {
		return s.first, nil
	}
	e, err := s.stream.Materialize(seed)
	if err != nil {
		return nil, fmt.Errorf("tune: %w", err)
	}
	if int64(len(e.Hashes)) >= 1<<31 {
		return nil, fmt.Errorf("tune: sample %s: more than 2^31 keys", s.stream)
	}
	return &elements{hashes: e.Hashes, dup: e.Dup}, nil
}

// shardStream is the part of one sample one shard's filter sees, in order.
type shardStream struct {
	hashes []uint64
	dup    []bool
	starts []int32 // the filter is cleared before each of these indexes
}

// thinSalt keys the thinning of the coarse phase apart from flow.ShardOf's
// remix, so which keys are kept says nothing about their shard.
const thinSalt = 0x13198a2e03707344

// keepThinned reports whether hash h is in the 2^-bits of keys the coarse
// phase keeps: the top bits of a bijective remix of h (murmur3's
// finaliser), which the filters never see, are zero.
func keepThinned(h uint64, bits uint) bool {
	if bits == 0 {
		return true
	}
	h ^= thinSalt
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h>>(64-bits) == 0
}

// split deals e's elements to workers shards as replay does
// (flow.ShardOf of the hash), keeping only the keys keepThinned keeps. A
// window boundary becomes a clear of every shard that has elements before
// it and after it.
func split(e *elements, workers int, thin uint) []shardStream {
	shardOf := func(h uint64) int {
		if !keepThinned(h, thin) {
			return -1
		}
		return flow.ShardOf(h, workers)
	}
	counts := make([]int, workers)
	for _, h := range e.hashes {
		if s := shardOf(h); s >= 0 {
			counts[s]++
		}
	}
	out := make([]shardStream, workers)
	for i := range out {
		out[i] = shardStream{hashes: make([]uint64, 0, counts[i]), dup: make([]bool, 0, counts[i])}
	}
	next := 0 // index in e.starts of the next boundary
	for i, h := range e.hashes {
		for next < len(e.starts) && int(e.starts[next]) == i {
			for s := range out {
				st := &out[s]
				n := int32(len(st.hashes))
				if n > 0 && (len(st.starts) == 0 || st.starts[len(st.starts)-1] != n) {
					st.starts = append(st.starts, n)
				}
			}
			next++
		}
		s := shardOf(h)
		if s < 0 {
			continue
		}
		out[s].hashes = append(out[s].hashes, h)
		out[s].dup = append(out[s].dup, e.dup[i])
	}
	for s := range out {
		// A boundary after a shard's last element clears nothing it uses.
		st := &out[s]
		for len(st.starts) > 0 && int(st.starts[len(st.starts)-1]) >= len(st.hashes) {
			st.starts = st.starts[:len(st.starts)-1]
		}
	}
	return out
}
