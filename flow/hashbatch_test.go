package flow

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/internal/simd"
)

// randomKeys returns n keys of kind, IPv6 with probability v6, masked to
// networks (prefix lengths drawn over the family's whole range, 0 and the
// full length included) with probability net, from r.
func randomKeys(r *rand.Rand, n int, kind KeyKind, v6, net float64) []Key {
	keys := make([]Key, n)
	for i := range keys {
		var src, dst netip.Addr
		is6 := r.Float64() < v6
		if is6 {
			var a, b [16]byte
			for j := range a {
				a[j], b[j] = byte(r.Uint32()), byte(r.Uint32())
			}
			src, dst = netip.AddrFrom16(a), netip.AddrFrom16(b)
		} else {
			var a, b [4]byte
			for j := range a {
				a[j], b[j] = byte(r.Uint32()), byte(r.Uint32())
			}
			if r.IntN(8) == 0 { // the ends of the range
				a = [4]byte{}
				b = [4]byte{255, 255, 255, 255}
			}
			src, dst = netip.AddrFrom4(a), netip.AddrFrom4(b)
		}
		proto := []uint8{6, 17, 1, 58, 0, 255}[r.IntN(6)]
		keys[i] = MakeKey(kind, src, dst, proto, uint16(r.Uint32()), uint16(r.Uint32()))
		if r.Float64() < net {
			m, err := MakeMask(r.IntN(33), r.IntN(129))
			if err != nil {
				panic(err)
			}
			m.Apply(&keys[i])
		}
	}
	return keys
}

// TestHashKeys checks that HashKeys answers what HashKey answers key by key
// (HashKey is checked against github.com/zeebo/xxh3 by TestHashEncoding and
// FuzzHash), with the vector path on and off, on batches of one kind and
// family (the vector path's), of mixed ones, of every length from 0 to 70
// (whole vectors and tails), under edge and random seeds.
func TestHashKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	seeds := []uint64{0, 1, ^uint64(0), 0x9e3779b97f4a7c15, 0xffffffff, 0x8000000000000000}
	type batch struct {
		name string
		keys []Key
	}
	var batches []batch
	for _, kind := range []KeyKind{KeySrc, KeyDst, KeyPair, Key5Tuple} {
		for _, c := range []struct {
			name    string
			v6, net float64
		}{{"ipv4", 0, 0}, {"ipv4-net", 0, 1}, {"ipv4-somenet", 0, 0.3}, {"ipv6", 1, 0}, {"mixed", 0.2, 0.2}} {
			for _, n := range []int{0, 1, 7, 8, 9, 16, 63, 70, 256} {
				batches = append(batches, batch{fmt.Sprintf("%v/%s/%d", kind, c.name, n), randomKeys(r, n, kind, c.v6, c.net)})
			}
		}
	}
	// Kinds and families mixed within a batch: one key of another kind or
	// family among IPv4 keys of one kind, first, in the middle, last, and
	// past the first 64 keys (hashKeys9to16's first chunk). A pair among
	// 5-tuples and a destination key among sources take the same kernel
	// with another length or encoding.
	for _, c := range []struct {
		kind, other KeyKind
		v6          float64
	}{{KeySrc, Key5Tuple, 0}, {KeySrc, KeyDst, 0}, {KeySrc, KeySrc, 1}, {Key5Tuple, KeyPair, 0},
		{Key5Tuple, KeySrc, 0}, {KeyPair, KeyPair, 1}, {KeyPair, Key5Tuple, 0}} {
		for _, at := range []int{0, 5, 8, 64, 99} {
			keys := randomKeys(r, 100, c.kind, 0, 0.5)
			keys[at] = randomKeys(r, 1, c.other, c.v6, 0)[0]
			batches = append(batches, batch{fmt.Sprintf("%v-with-%v-v6=%v-at-%d", c.kind, c.other, c.v6, at), keys})
		}
	}
	was := simd.SetVector(true)
	defer simd.SetVector(was)
	for _, b := range batches {
		for _, seed := range append(seeds, r.Uint64()) {
			want := make([]uint64, len(b.keys))
			for i := range b.keys {
				want[i] = HashKey(&b.keys[i], seed)
			}
			for _, vec := range []bool{true, false} {
				simd.SetVector(vec)
				got := make([]uint64, len(b.keys)+1)
				got[len(b.keys)] = 42
				HashKeys(b.keys, seed, got)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s seed %#x vector %v: key %d (%v): HashKeys %#x, HashKey %#x", b.name, seed, vec, i, b.keys[i], got[i], want[i])
					}
				}
				if got[len(b.keys)] != 42 {
					t.Fatalf("%s: HashKeys wrote past the keys", b.name)
				}
			}
		}
	}
	if !simd.Available() {
		t.Log("no vector path in this build: HashKeys is HashKey one key at a time")
	}
}

func TestHashKeysShortHashes(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic with hashes shorter than keys")
		}
	}()
	HashKeys(make([]Key, 3), 1, make([]uint64, 2))
}

func TestHashKeysDoesNotAllocate(t *testing.T) {
	keys := randomKeys(rand.New(rand.NewPCG(13, 14)), 256, KeySrc, 0, 0)
	hashes := make([]uint64, len(keys))
	for _, vec := range []bool{true, false} {
		was := simd.SetVector(vec)
		if a := testing.AllocsPerRun(100, func() { HashKeys(keys, 7, hashes) }); a != 0 {
			t.Errorf("vector %v: %v allocations a batch", vec, a)
		}
		simd.SetVector(was)
	}
}

// hashBatch is the pipeline's batch (pipeline.BatchSize).
const hashBatch = 256

// benchKeys is how many keys the hash benchmarks cycle through: 160 KiB of
// keys, within the L2 cache, as a batch the pipeline has just written is;
// 2^16 keys (2.5 MiB) timed the memory under them instead.
const benchKeys = 1 << 12

// benchKeyCases are the key kinds of BenchmarkHashKeys: IPv4 keys of one
// kind, which the vector path takes (sources as hosts and networks, pairs,
// 5-tuples), and two batches it does not (IPv6, and sources with a fifth
// of them IPv6).
func benchKeyCases() []struct {
	name string
	keys []Key
} {
	r := rand.New(rand.NewPCG(15, 16))
	return []struct {
		name string
		keys []Key
	}{
		{"ipv4-src", randomKeys(r, benchKeys, KeySrc, 0, 0)},
		{"ipv4-src-net", randomKeys(r, benchKeys, KeySrc, 0, 1)},
		{"ipv4-pair", randomKeys(r, benchKeys, KeyPair, 0, 0)},
		{"ipv4-5tuple", randomKeys(r, benchKeys, Key5Tuple, 0, 0)},
		{"ipv6-5tuple", randomKeys(r, benchKeys, Key5Tuple, 1, 0)},
		{"mixed-src", randomKeys(r, benchKeys, KeySrc, 0.2, 0)},
	}
}

// benchVectorPair runs f as "scalar" (vector path off) and "vector" (on;
// skipped without one), each after setup, one batch of hashBatch keys an
// op, cycling through
// benchKeys keys; ns/key is per key.
func benchVectorPair(b *testing.B, setup func(), f func(keys []Key)) {
	for _, vec := range []bool{false, true} {
		name := map[bool]string{false: "scalar", true: "vector"}[vec]
		b.Run(name, func(b *testing.B) {
			if vec && !simd.Available() {
				b.Skip("no vector path in this build or on this CPU (GOEXPERIMENT=simd on amd64 with AVX-512)")
			}
			was := simd.SetVector(vec)
			defer simd.SetVector(was)
			setup()
			b.ReportAllocs()
			f(nil) // warm
			for b.Loop() {
				f(nil)
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/hashBatch, "ns/key")
		})
	}
}

// BenchmarkHashKeys times HashKeys on batches of 256 keys, with the vector
// path off (scalar: HashKey a key at a time) and on (vector).
func BenchmarkHashKeys(b *testing.B) {
	for _, c := range benchKeyCases() {
		b.Run(c.name, func(b *testing.B) {
			var hashes [hashBatch]uint64
			i := 0
			benchVectorPair(b, func() { i = 0 }, func([]Key) {
				HashKeys(c.keys[i:i+hashBatch], 0x9e3779b97f4a7c15, hashes[:])
				i = (i + hashBatch) & (len(c.keys) - 1)
			})
		})
	}
}

// BenchmarkHashObserve is the batch stage of a replay worker: HashKeys,
// then filters.ObserveAll into the filter replay uses by default
// (qht, 1 MiB), 256 keys a batch, with the vector path off and on, each
// from the same filter state.
func BenchmarkHashObserve(b *testing.B) {
	for _, c := range benchKeyCases() {
		b.Run(c.name, func(b *testing.B) {
			f, err := filters.New("qht:mem=1MiB", 1)
			if err != nil {
				b.Fatal(err)
			}
			var hashes [hashBatch]uint64
			var dup [hashBatch]bool
			i := 0
			// Both paths start from the same state: the filter reset and
			// given every key once, so that the timed batches find their
			// keys (a replay's stream repeats most keys).
			setup := func() {
				f.Reset()
				for _, k := range c.keys {
					f.Observe(HashKey(&k, 0x9e3779b97f4a7c15))
				}
				i = 0
			}
			benchVectorPair(b, setup, func([]Key) {
				HashKeys(c.keys[i:i+hashBatch], 0x9e3779b97f4a7c15, hashes[:])
				filters.ObserveAll(f, hashes[:], dup[:])
				i = (i + hashBatch) & (len(c.keys) - 1)
			})
		})
	}
}
