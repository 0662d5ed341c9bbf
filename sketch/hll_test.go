package sketch

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
)

// key returns the i-th test key: a UDP 5-tuple from a distinct IPv4 source
// (even i) or IPv6 source (odd i), so keys i != j always differ.
func key(i int) flow.Key {
	var v4 [4]byte
	binary.BigEndian.PutUint32(v4[:], 0x0a000000+uint32(i))
	src, dst := netip.AddrFrom4(v4), netip.MustParseAddr("192.0.2.1")
	if i%2 == 1 {
		var v6 [16]byte
		copy(v6[:], netip.MustParseAddr("2001:db8::").AsSlice())
		binary.BigEndian.PutUint32(v6[12:], uint32(i))
		src, dst = netip.AddrFrom16(v6), netip.MustParseAddr("2001:db8::53")
	}
	return flow.MakeKey(flow.Key5Tuple, src, dst, 17, uint16(1024+i%7), 53)
}

// million is 10^6 distinct keys, built once.
var million = sync.OnceValue(func() []flow.Key {
	ks := make([]flow.Key, 1_000_000)
	for i := range ks {
		ks[i] = key(i)
	}
	return ks
})

func mustNew(t testing.TB, p uint8, seed uint64) *HLL {
	t.Helper()
	h, err := New(p, seed)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// sigma is the relative standard error of an HLL of precision p,
// 1.04/sqrt(2^p) (Flajolet, Fusy, Gandouet, Meunier, "HyperLogLog: the
// analysis of a near-optimal cardinality estimation algorithm", AofA 2007;
// the LogLog-Beta estimator of Qin, Kim, Tung, 2016, has the same
// asymptotic error).
func sigma(p uint8) float64 { return 1.04 / math.Sqrt(float64(uint64(1)<<p)) }

// TestEstimateMillion: 10^6 distinct keys at precision 14 are estimated
// within 2%. The standard error is 1.04/sqrt(16384) = 0.81%, so 2% is 2.46
// standard errors: a random seed misses it with probability about 1.4%
// (normal tails); the seed here is fixed, so the test is deterministic, and
// TestEstimateSeeds checks the error's distribution over many seeds.
func TestEstimateMillion(t *testing.T) {
	ks := million()
	h := mustNew(t, DefaultPrecision, DefaultSeed)
	h.InsertKeys(ks)
	est := h.Estimate()
	rel := (float64(est) - float64(len(ks))) / float64(len(ks))
	t.Logf("estimate %d of %d: %+.3f%% (standard error %.3f%%)", est, len(ks), 100*rel, 100*sigma(DefaultPrecision))
	if math.Abs(rel) > 0.02 {
		t.Errorf("estimate %d of %d distinct keys: error %.2f%%, want within 2%%", est, len(ks), 100*rel)
	}
	// Inserting every key again changes nothing: an HLL counts distinct keys.
	before := h.Clone()
	h.InsertKeys(ks[:1000])
	if !h.Equal(before) {
		t.Error("inserting keys again changed the registers")
	}
}

// TestEstimateSeeds: over R seeds, the relative errors of the estimate of
// 10^6 keys have mean 0 within 3 standard errors of the mean
// (3*sigma/sqrt(R)), a standard deviation within [0.6, 1.5] sigma (the
// sample deviation of R = 24 normal errors has a relative standard error of
// 1/sqrt(2(R-1)) = 15%, so the bounds are 2.7 and 3.4 of those), and each
// error is within 4 sigma (3.3%; probability 6e-5 per seed).
func TestEstimateSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("24 x 10^6 insertions; -short")
	}
	const R = 24
	ks := million()
	n := float64(len(ks))
	s := sigma(DefaultPrecision)
	var sum, sumSq float64
	rng := rand.New(rand.NewPCG(1, 2))
	for range R {
		seed := rng.Uint64()
		h2 := mustNew(t, DefaultPrecision, seed)
		h2.InsertKeys(ks)
		rel := (float64(h2.Estimate()) - n) / n
		if math.Abs(rel) > 4*s {
			t.Errorf("seed %#x: error %.3f%%, beyond 4 standard errors (%.3f%%)", seed, 100*rel, 400*s)
		}
		sum += rel
		sumSq += rel * rel
	}
	mean := sum / R
	sd := math.Sqrt((sumSq - R*mean*mean) / (R - 1))
	t.Logf("over %d seeds: mean error %+.4f%%, sd %.4f%% (sigma %.4f%%)", R, 100*mean, 100*sd, 100*s)
	if math.Abs(mean) > 3*s/math.Sqrt(R) {
		t.Errorf("mean error %.4f%% beyond 3 standard errors of the mean (%.4f%%): biased", 100*mean, 300*s/math.Sqrt(R))
	}
	if sd < 0.6*s || sd > 1.5*s {
		t.Errorf("standard deviation of the error %.4f%%, want within [0.6, 1.5] x %.4f%%", 100*sd, 100*s)
	}
}

// TestEstimateSmall: below 2^p keys an HLL behaves as linear counting,
// whose standard error is sqrt(m(e^t - t - 1)) keys for t = n/m (Whang,
// Vander-Zanden, Taylor, "A linear-time probabilistic counting algorithm
// for database applications", TODS 1990): the estimate is within 4 of those
// plus one for rounding. An empty HLL estimates 0 and one key 1.
func TestEstimateSmall(t *testing.T) {
	const p = DefaultPrecision
	m := float64(uint64(1) << p)
	ks := million()
	h := mustNew(t, p, DefaultSeed)
	if got := h.Estimate(); got != 0 {
		t.Errorf("empty: estimate %d", got)
	}
	done := 0
	for _, n := range []int{1, 2, 10, 100, 1000, 5000, 16384} {
		h.InsertKeys(ks[done:n])
		done = n
		tt := float64(n) / m
		tol := 4*math.Sqrt(m*(math.Exp(tt)-tt-1)) + 1
		got := h.Estimate()
		t.Logf("n %d: estimate %d (tolerance %.1f)", n, got, tol)
		if math.Abs(float64(got)-float64(n)) > tol {
			t.Errorf("%d keys: estimate %d, want within %.1f", n, got, tol)
		}
	}
}

// sets returns three overlapping key sets and their concatenation (the
// union, with the keys in two sets twice): a = [0, 60000), b = [40000,
// 100000), c = [90000, 130000) in steps of 1, 1 and 3.
func sets() (a, b, c, union []flow.Key) {
	ks := million()
	a = ks[:60000]
	b = ks[40000:100000]
	for i := 90000; i < 130000; i += 3 {
		c = append(c, ks[i])
	}
	union = append(append([]flow.Key(nil), ks[:100000]...), c...)
	return a, b, c, union
}

func of(t testing.TB, p uint8, seed uint64, keys ...[]flow.Key) *HLL {
	h := mustNew(t, p, seed)
	for _, ks := range keys {
		h.InsertKeys(ks)
	}
	return h
}

// TestMergeIsUnion: merging the HLLs of sets gives the registers of the HLL
// of their union, in any order and grouping; merging is idempotent and the
// empty HLL is its identity.
func TestMergeIsUnion(t *testing.T) {
	const p, seed = 14, 99
	a, b, c, union := sets()
	ha, hb, hc, hu := of(t, p, seed, a), of(t, p, seed, b), of(t, p, seed, c), of(t, p, seed, union)
	merge := func(hs ...*HLL) *HLL {
		var acc HLL // the zero HLL adopts the first
		for _, h := range hs {
			if err := acc.Merge(h); err != nil {
				t.Fatal(err)
			}
		}
		return &acc
	}
	abc := merge(ha, hb, hc)
	if !abc.Equal(hu) {
		t.Error("merge(a, b, c) != HLL of the union")
	}
	if abc.Estimate() != hu.Estimate() {
		t.Errorf("estimates %d and %d", abc.Estimate(), hu.Estimate())
	}
	for name, h := range map[string]*HLL{
		"c,b,a":       merge(hc, hb, ha),
		"b,a,c":       merge(hb, ha, hc),
		"(a,b),c":     merge(merge(ha, hb), hc),
		"a,(b,c)":     merge(ha, merge(hb, hc)),
		"a,a,b,c,c":   merge(ha, ha, hb, hc, hc),
		"a,empty,b,c": merge(ha, mustNew(t, p, seed), hb, hc),
	} {
		if !h.Equal(hu) {
			t.Errorf("merge %s != HLL of the union", name)
		}
	}
	// Merge leaves its argument alone.
	if !ha.Equal(of(t, p, seed, a)) {
		t.Error("Merge changed its argument")
	}
	// A reset HLL counts afresh.
	ha.Reset()
	if ha.Estimate() != 0 {
		t.Errorf("reset: estimate %d", ha.Estimate())
	}
	ha.InsertKeys(b)
	if !ha.Equal(hb) {
		t.Error("reset then b != HLL of b")
	}
	// Order of insertion does not matter.
	shuffled := append([]flow.Key(nil), union...)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if !of(t, p, seed, shuffled).Equal(hu) {
		t.Error("shuffled insertion gave other registers")
	}
	// The estimate of the union is close to its exact size (within 4 sigma).
	distinct := map[flow.Key]bool{}
	for _, k := range union {
		distinct[k] = true
	}
	n := float64(len(distinct))
	if rel := (float64(abc.Estimate()) - n) / n; math.Abs(rel) > 4*sigma(p) {
		t.Errorf("union of %d keys estimated %d", len(distinct), abc.Estimate())
	}
}

// TestMismatch: another seed hashes keys elsewhere: the registers differ,
// and a merge across seeds fails with ErrSeedMismatch and leaves h as it was.
// Across precisions, ErrPrecisionMismatch.
func TestMismatch(t *testing.T) {
	a, _, _, _ := sets()
	h1, h2 := of(t, 14, 1, a), of(t, 14, 2, a)
	if h1.Equal(h2) {
		t.Fatal("HLLs of seeds 1 and 2 have the same registers")
	}
	if h1.Fingerprint() == h2.Fingerprint() {
		t.Fatal("seeds 1 and 2 have one fingerprint")
	}
	before := h1.Clone()
	if err := h1.Merge(h2); !errors.Is(err, ErrSeedMismatch) {
		t.Errorf("merge across seeds: %v, want ErrSeedMismatch", err)
	}
	if !h1.Equal(before) {
		t.Error("a failed merge changed the HLL")
	}
	h3 := of(t, 12, 1, a)
	if err := h1.Merge(h3); !errors.Is(err, ErrPrecisionMismatch) {
		t.Errorf("merge across precisions: %v, want ErrPrecisionMismatch", err)
	}
	if !h1.Equal(before) {
		t.Error("a failed merge changed the HLL")
	}
	// The same through the binary form: a decoded HLL keeps the fingerprint.
	var d HLL
	b, err := h2.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if err := h1.Merge(&d); !errors.Is(err, ErrSeedMismatch) {
		t.Errorf("merge of a decoded HLL across seeds: %v, want ErrSeedMismatch", err)
	}
	for _, p := range []uint8{0, 3, 19, 255} {
		if _, err := New(p, 1); !errors.Is(err, ErrPrecision) {
			t.Errorf("New(%d): %v, want ErrPrecision", p, err)
		}
	}
}

// TestFingerprint: the fingerprint is the first 8 bytes of SHA-256 of the
// domain string and the seed, as Python's hashlib computes them:
//
//	d = b'flowdedup sketch seed, keys hashed by flow.Key.Hash (v1)\x00'
//	hashlib.sha256(d + struct.pack('>Q', seed)).hexdigest()[:16]
func TestFingerprint(t *testing.T) {
	for seed, want := range map[uint64]uint64{
		DefaultSeed: 0xe406f06f059b5ef7,
		0:           0xb542229b452d46af,
		1:           0x348d9a4188da3112,
	} {
		if got := Fingerprint(seed); got != want {
			t.Errorf("Fingerprint(%#x) = %016x, want %016x", seed, got, want)
		}
		if got := mustNew(t, 10, seed).Fingerprint(); got != want {
			t.Errorf("HLL of seed %#x: fingerprint %016x, want %016x", seed, got, want)
		}
	}
}

// TestKeyHash: the HLL's key hash is flow.Key.Hash under the seed, so any
// program that hashes keys with flow can feed InsertHash.
func TestKeyHash(t *testing.T) {
	a, _, _, _ := sets()
	h := mustNew(t, 14, 7)
	for i := range a {
		h.InsertHash(KeyHash(7, &a[i]))
	}
	if !h.Equal(of(t, 14, 7, a)) {
		t.Error("InsertHash(KeyHash) != InsertKeys")
	}
	g := mustNew(t, 14, 7)
	for i := range a {
		g.Insert(&a[i])
	}
	if !g.Equal(h) {
		t.Error("Insert != InsertKeys")
	}
}

// TestNoAllocs: inserting, estimating, merging and resetting allocate
// nothing.
func TestNoAllocs(t *testing.T) {
	ks := million()[:256]
	h, o := of(t, 14, 1, ks), of(t, 14, 1, million()[256:512])
	for name, f := range map[string]func(){
		"InsertKeys": func() { h.InsertKeys(ks) },
		"Insert":     func() { h.Insert(&ks[3]) },
		"InsertHash": func() { h.InsertHash(0x1234567890abcdef) },
		"Estimate":   func() { _ = h.Estimate() },
		"Merge":      func() { _ = h.Merge(o) },
		"Reset":      func() { h.Reset() },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

func TestZeroHLL(t *testing.T) {
	var z HLL
	if z.Estimate() != 0 || z.Precision() != 0 {
		t.Errorf("zero HLL: estimate %d, precision %d", z.Estimate(), z.Precision())
	}
	z.Reset()
	if _, err := z.MarshalBinary(); !errors.Is(err, ErrFormat) {
		t.Errorf("MarshalBinary of the zero HLL: %v", err)
	}
	h := of(t, 12, 5, million()[:100])
	if err := h.Merge(&z); err != nil || h.Estimate() == 0 {
		t.Errorf("merging the zero HLL: %v, estimate %d", err, h.Estimate())
	}
	var z2 HLL
	if !z2.Equal(&z) || z.Equal(h) {
		t.Error("Equal of zero HLLs")
	}
}

// TestInsertNeedsSeed: an HLL decoded from bytes does not know its seed and
// refuses keys rather than hash them under a wrong one.
func TestInsertNeedsSeed(t *testing.T) {
	b, err := mustNew(t, 10, 5).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var d HLL
	if err := d.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	k := key(1)
	for name, f := range map[string]func(){
		"Insert":            func() { d.Insert(&k) },
		"InsertKeys":        func() { d.InsertKeys([]flow.Key{k}) },
		"InsertHash (zero)": func() { new(HLL).InsertHash(1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s on an HLL without a seed did not panic", name)
				}
			}()
			f()
		}()
	}
	// A decoded HLL does take hashes, and merges into a seeded one.
	d.InsertHash(KeyHash(5, &k))
	h := mustNew(t, 10, 5)
	if err := h.Merge(&d); err != nil || !h.Equal(of(t, 10, 5, []flow.Key{k})) {
		t.Errorf("merge of a decoded HLL: %v", err)
	}
}
