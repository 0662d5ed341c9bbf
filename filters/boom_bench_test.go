package filters

import (
	"encoding/binary"
	"testing"

	boom "github.com/tylertreat/BoomFilters"
	"github.com/zeebo/xxh3"
)

// BenchmarkSBFVersusBoomFilters times our SBF next to BoomFilters'
// StableBloomFilter (test-only comparison), both with 1 MiB of 1-bit cells,
// K=2, P=4, on the same 2^16 keys.
//
// BoomFilters hashes []byte keys itself (FNV-64 unless SetHash), so it gets
// the 8-byte little-endian encodings of the benchmark hashes; "ours/xxh3"
// hashes those same 8 bytes with xxh3 before Observe, which is the
// apples-to-apples row, and "boom/xxh3" gives BoomFilters the same hash.
// "ours/prehashed" is how the pipeline calls SBF: hash computed once upstream.
func BenchmarkSBFVersusBoomFilters(b *testing.B) {
	const cells = 8 << 20 // 1 MiB of 1-bit cells
	hs := sbfBenchHashes()
	keys := make([][8]byte, len(hs))
	for i, h := range hs {
		binary.LittleEndian.PutUint64(keys[i][:], h)
	}
	mask := len(keys) - 1

	ours := func(b *testing.B) *SBF {
		s := sbfMust(b, "sbf:mem=1MiB,max=1,k=2,p=4", 1)
		if s.Cells() != cells {
			b.Fatalf("ours has %d cells, want %d", s.Cells(), cells)
		}
		s.Reset() // touch every page before timing
		return s
	}
	theirs := func(b *testing.B) *boom.StableBloomFilter {
		// fpRate 0.1 makes BoomFilters pick K = ceil(log2(10))/2 = 2 and
		// P = floor(Eq. 17) = 4: the paper's setting, and ours above.
		f := boom.NewDefaultStableBloomFilter(cells, 0.1)
		if f.K() != 2 || f.P() != 4 || f.Cells() != cells {
			b.Fatalf("BoomFilters picked K=%d P=%d m=%d, want 2, 4, %d", f.K(), f.P(), f.Cells(), cells)
		}
		return f
	}

	b.Run("ours/prehashed", func(b *testing.B) {
		s := ours(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.Observe(hs[i&mask])
			i++
		}
	})
	b.Run("ours/xxh3", func(b *testing.B) {
		s := ours(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.Observe(xxh3.Hash(keys[i&mask][:]))
			i++
		}
	})
	b.Run("boom/fnv", func(b *testing.B) {
		f := theirs(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			f.TestAndAdd(keys[i&mask][:])
			i++
		}
	})
	b.Run("boom/xxh3", func(b *testing.B) {
		f := theirs(b)
		f.SetHash(xxh3.New())
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			f.TestAndAdd(keys[i&mask][:])
			i++
		}
	})
}
