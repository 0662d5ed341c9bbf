package flow

import (
	"encoding/binary"
	"math"
	"math/bits"
	"net/netip"
	"testing"

	"github.com/zeebo/xxh3"
)

// testKeys returns n distinct keys of each kind and family, built from
// consecutive addresses and ports: the structured input real traffic is.
func testKeys(n int) []Key {
	keys := make([]Key, 0, 8*n)
	base4 := netip.MustParseAddr("10.0.0.0").As4()
	base6 := netip.MustParseAddr("2001:db8::").As16()
	for i := range n {
		a4 := base4
		binary.BigEndian.PutUint16(a4[2:], uint16(i))
		a6 := base6
		binary.BigEndian.PutUint32(a6[12:], uint32(i))
		for _, a := range []netip.Addr{netip.AddrFrom4(a4), netip.AddrFrom16(a6)} {
			b := a.Next()
			keys = append(keys,
				MakeKey(KeySrc, a, b, 0, 0, 0),
				MakeKey(KeyDst, a, b, 0, 0, 0),
				MakeKey(KeyPair, a, b, 0, 0, 0),
				MakeKey(Key5Tuple, a, b, protoTCP, uint16(40000+i), 443),
			)
		}
	}
	return keys
}

// TestHashEncoding recomputes the hash from the encoding Hash documents.
func TestHashEncoding(t *testing.T) {
	const seed = 0x1234
	keys := append(append(testKeys(3), networkKeys(testKeys(3))...), noPorts(tcp4), Key{})
	for _, k := range append(testKeys(2), networkKeys(testKeys(2))...) {
		keys = append(keys, k.WithSegment(0), k.WithSegment(100), k.WithSegment(MaxSegment))
	}
	for _, k := range keys {
		enc := []byte{byte(k.Kind()) | k.flags<<4}
		addr := func(a netip.Addr) []byte { return a.AsSlice() }
		if k.Kind() != KeyDst && k.IsValid() {
			enc = append(enc, addr(k.Src())...)
		}
		if k.Kind() != KeySrc && k.IsValid() {
			enc = append(enc, addr(k.Dst())...)
		}
		if !k.IsValid() {
			enc = append(enc, make([]byte, 8)...) // the zero Key: two zero IPv4 addresses
		}
		if k.Kind() == Key5Tuple {
			enc = append(enc, k.Proto())
			enc = binary.BigEndian.AppendUint16(enc, k.SrcPort())
			enc = binary.BigEndian.AppendUint16(enc, k.DstPort())
		}
		s := uint64(seed)
		if bits := k.Bits(); bits >= 0 {
			s += uint64(bits) * 0x9e3779b97f4a7c15 // a network's length moves the seed
		}
		if vni, ok := k.Segment(); ok {
			s += uint64(vni) * 256 * 0x9e3779b97f4a7c15 // and so does a segment
		}
		if got, want := k.Hash(seed), xxh3.HashSeed(enc, s); got != want {
			t.Errorf("%v: Hash = %#x, hash of documented encoding % x = %#x", k, got, enc, want)
		}
	}
}

// TestHashGolden pins hash values: they must not change across releases, as
// runs with the same --seed must give the same shards and filter state.
func TestHashGolden(t *testing.T) {
	for _, c := range []struct {
		k    Key
		seed uint64
		want uint64
	}{
		{tcp4, 0, 0xb1be8a4b5eec7838},
		{tcp6, 42, 0xaee24b75dd4e17fa},
		{project(udp4, KeySrc), 7, 0x806a7e140081d31d},
		{project(udp6, KeyPair), 7, 0xb26325d44943df68},
	} {
		if got := c.k.Hash(c.seed); got != c.want {
			t.Errorf("%v.Hash(%d) = %#x, want %#x", c.k, c.seed, got, c.want)
		}
	}
}

func TestHashSeeds(t *testing.T) {
	keys := testKeys(500)
	seen := make(map[uint64]Key, 2*len(keys))
	for _, k := range keys {
		h := k.Hash(1)
		if h != k.Hash(1) {
			t.Fatalf("%v: hash not deterministic", k)
		}
		if h == k.Hash(2) {
			t.Errorf("%v: seeds 1 and 2 give the same hash", k)
		}
		// Among a few thousand 64-bit hashes a collision is a bug: keys of
		// different kinds or families must not share an encoding.
		if prev, ok := seen[h]; ok {
			t.Errorf("%v and %v share hash %#x", prev, k, h)
		}
		seen[h] = k
	}
	// The same flow parsed from two different frames hashes alike.
	k1, _ := Parse(ether(etherTypeIPv4, tcp4IP), LinkEthernet, Key5Tuple)
	k2, _ := Parse(ether(etherTypeVLAN, vlan(9, etherTypeIPv4), tcp4IP), LinkEthernet, Key5Tuple)
	if k1.Hash(99) != k2.Hash(99) {
		t.Error("equal keys hash differently")
	}
}

func TestHashNoAllocs(t *testing.T) {
	for _, k := range []Key{tcp4, tcp6, project(tcp6, KeySrc)} {
		if n := testing.AllocsPerRun(100, func() { sinkHash = k.Hash(7) }); n != 0 {
			t.Errorf("%v: Hash allocates %v times", k, n)
		}
		if n := testing.AllocsPerRun(100, func() { sinkHash = HashKey(&k, 7) }); n != 0 {
			t.Errorf("%v: HashKey allocates %v times", k, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { sinkHash = uint64(ShardOf(sinkHash, 7)) }); n != 0 {
		t.Errorf("ShardOf allocates %v times", n)
	}
}

// chiSquareLimit is the value a chi-square statistic with dof degrees of
// freedom exceeds with probability about 1e-4 (z = 3.719), by the
// Wilson-Hilferty approximation, which errs on the high side for few
// degrees of freedom (16.2 against the exact 15.1 for one). The inputs of the
// tests are fixed, so a good hash passes them always; the limit only has to
// be one a good hash is unlikely to exceed and a bad one (a few shards
// starved, a sixteenth of the buckets used) exceeds by orders of magnitude.
func chiSquareLimit(dof int) float64 {
	d := float64(dof)
	c := 2 / (9 * d)
	return d * math.Pow(1-c+3.719*math.Sqrt(c), 3)
}

func chiSquare(counts []int, total int) float64 {
	expect := float64(total) / float64(len(counts))
	var x float64
	for _, c := range counts {
		x += (float64(c) - expect) * (float64(c) - expect) / expect
	}
	return x
}

func TestShardOfRange(t *testing.T) {
	for _, n := range []int{-1, 0, 1} {
		if s := ShardOf(math.MaxUint64, n); s != 0 {
			t.Errorf("ShardOf(_, %d) = %d, want 0", n, s)
		}
	}
	for _, n := range []int{2, 3, 1000, math.MaxInt >> 20, math.MaxInt} {
		for _, h := range []uint64{0, 1, 0x8000000000000000, math.MaxUint64} {
			if s := ShardOf(h, n); s < 0 || s >= n {
				t.Errorf("ShardOf(%#x, %d) = %d, out of range", h, n, s)
			}
		}
	}
}

func TestShardOfUniform(t *testing.T) {
	keys := testKeys(25000) // 200,000 keys
	for _, n := range []int{2, 3, 7, 8, 16, 64} {
		counts := make([]int, n)
		for _, k := range keys {
			counts[ShardOf(k.Hash(0xfeed), n)]++
		}
		if x, limit := chiSquare(counts, len(keys)), chiSquareLimit(n-1); x > limit {
			t.Errorf("%d shards: chi-square %.1f > %.1f: %v", n, x, limit, counts)
		}
	}
}

// TestShardOfIndependent checks what ShardOf's remix is for: within each
// shard, the bits a filter reads (here the top 6 bits, a multiply-shift
// bucket index, and the low 6 bits, a fingerprint) are still uniform. The
// naive shard, the top bits of the hash, fails the same test, which shows
// the test can fail.
func TestShardOfIndependent(t *testing.T) {
	const shards, buckets = 4, 64
	keys := testKeys(25000)
	naive := func(h uint64, n int) int { hi, _ := bits.Mul64(h, uint64(n)); return int(hi) }
	for _, c := range []struct {
		name    string
		shardOf func(uint64, int) int
		good    bool
	}{{"ShardOf", ShardOf, true}, {"top-bits", naive, false}} {
		var top, low [shards][buckets]int
		var total [shards]int
		for _, k := range keys {
			h := k.Hash(0xfeed)
			s := c.shardOf(h, shards)
			top[s][h>>58]++
			low[s][h&(buckets-1)]++
			total[s]++
		}
		limit := chiSquareLimit(buckets - 1)
		worst := 0.0
		for s := range shards {
			worst = max(worst, chiSquare(top[s][:], total[s]), chiSquare(low[s][:], total[s]))
		}
		if c.good && worst > limit {
			t.Errorf("%s: filter bits within a shard are skewed: chi-square %.1f > %.1f", c.name, worst, limit)
		}
		if !c.good && worst <= limit {
			t.Errorf("%s: the test does not catch a shard made of filter bits (chi-square %.1f)", c.name, worst)
		}
	}
}
