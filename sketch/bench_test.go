package sketch

import "testing"

// BenchmarkInsertKeys is the per-key cost the pipeline's workers pay:
// hash a key under the seed (flow.Key.Hash) and update a register, in
// batches of 256 keys as the workers get them. The keys cycle over 2^16
// distinct ones; the registers (16 KiB) stay in L1.
func BenchmarkInsertKeys(b *testing.B) {
	ks := million()[:1<<16]
	h := mustNew(b, DefaultPrecision, DefaultSeed)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.InsertKeys(ks[i : i+256])
		i = (i + 256) % len(ks)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/key")
}

// BenchmarkKeyHash is the hash alone, and BenchmarkInsertHash the register
// update alone: the two parts of BenchmarkInsertKeys.
func BenchmarkKeyHash(b *testing.B) {
	ks := million()[:1<<16]
	b.ReportAllocs()
	var sum uint64
	i := 0
	for b.Loop() {
		sum += KeyHash(DefaultSeed, &ks[i])
		i = (i + 1) & (len(ks) - 1)
	}
	_ = sum
}

func BenchmarkInsertHash(b *testing.B) {
	h := mustNew(b, DefaultPrecision, DefaultSeed)
	b.ReportAllocs()
	x := uint64(0x9e3779b97f4a7c15)
	for b.Loop() {
		h.InsertHash(x)
		x = x*6364136223846793005 + 1442695040888963407 // a 64-bit LCG: cheap, and its high bits (the register index) vary
	}
}

// The per-window costs: estimate, merge a worker's HLL, reset, encode.
func BenchmarkEstimate(b *testing.B) {
	h := of(b, DefaultPrecision, 1, million()[:100000])
	b.ReportAllocs()
	for b.Loop() {
		_ = h.Estimate()
	}
}

func BenchmarkMerge(b *testing.B) {
	h, o := of(b, DefaultPrecision, 1, million()[:100000]), of(b, DefaultPrecision, 1, million()[100000:200000])
	b.ReportAllocs()
	for b.Loop() {
		_ = h.Merge(o)
	}
}

func BenchmarkReset(b *testing.B) {
	h := of(b, DefaultPrecision, 1, million()[:100000])
	b.ReportAllocs()
	for b.Loop() {
		h.Reset()
	}
}

func BenchmarkMarshalBinary(b *testing.B) {
	h := of(b, DefaultPrecision, 1, million()[:100000])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalBinary(b *testing.B) {
	enc, err := of(b, DefaultPrecision, 1, million()[:100000]).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var h HLL
	for b.Loop() {
		if err := h.UnmarshalBinary(enc); err != nil {
			b.Fatal(err)
		}
	}
}
