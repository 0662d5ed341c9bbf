package filters

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

func fpsbfMust(t testing.TB, spec string, seed uint64) *FPSBF { return mustNew[*FPSBF](t, spec, seed) }

// fpsbfCells returns the k cell indices of h, computed as Eq. 2 reads
// (h1 + j*h2, one per sub-table), independently of the filter's loop.
func fpsbfCells(s *FPSBF, h uint64) []int {
	h1 := h &^ s.fpMask
	h2 := bloomStep(h1)
	idx := make([]int, s.k)
	for j := range idx {
		idx[j] = j*s.sub + mix.Reduce(h1+uint64(j)*h2, s.sub)
	}
	return idx
}

func TestFPSBFSpec(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"fpsbf:mem=64KiB", "fpsbf:mem=64KiB,c=3,f=5,k=3,fps=0.1,xi=1"},
		{"FPSBF: mem = 1MiB , c=2, fps=0.05, xi=0.5", "fpsbf:mem=1MiB,c=2,f=5,k=3,fps=0.05,xi=0.5"},
		{"fpsbf:mem=1000bit,c=1,f=1,k=2,fps=0.3", "fpsbf:mem=125B,c=1,f=1,k=2,fps=0.3,xi=1"},
		{"fpsbf:mem=64KiB,c=4,f=9,k=4,xi=0.125", "fpsbf:mem=64KiB,c=4,f=9,k=4,fps=0.1,xi=0.125"},
		{"fpsbf:mem=1MiB,c=8,f=32,k=1,fps=0.01", "fpsbf:mem=1MiB,c=8,f=32,k=1,fps=0.01,xi=1"},
	} {
		s := fpsbfMust(t, c.spec, 7)
		if got := s.String(); got != c.want {
			t.Errorf("New(%q).String() = %q, want %q", c.spec, got, c.want)
		}
		r := fpsbfMust(t, s.String(), 7)
		if r.String() != s.String() || r.Cells() != s.Cells() || r.SizeBits() != s.SizeBits() || r.L() != s.L() {
			t.Errorf("%q does not round-trip: %q (L %d vs %d)", s.String(), r.String(), r.L(), s.L())
		}
		g := mix.NewSplitMix(3)
		var recent [4]uint64
		for i := range 20000 {
			h := g.Uint64()
			if i%3 == 0 {
				h = recent[h%4]
			}
			recent[i%4] = h
			if a, b := s.Observe(h), r.Observe(h); a != b {
				t.Fatalf("%q: element %d: %v from the original, %v from its round trip", c.want, i, a, b)
			}
		}
	}
}

func TestFPSBFSpecErrors(t *testing.T) {
	for _, c := range []struct {
		spec string
		want error
	}{
		{"fpsbf:mem=64KiB,c=0", ErrBadParam},
		{"fpsbf:mem=64KiB,c=9", ErrBadParam},
		{"fpsbf:mem=64KiB,c=x", ErrBadParam},
		{"fpsbf:mem=64KiB,f=0", ErrBadParam},
		{"fpsbf:mem=64KiB,f=33", ErrBadParam},
		{"fpsbf:mem=64KiB,k=0", ErrBadParam},
		{"fpsbf:mem=64KiB,k=65", ErrBadParam},
		{"fpsbf:mem=64KiB,xi=0", ErrBadParam},
		{"fpsbf:mem=64KiB,xi=-0.5", ErrBadParam},
		{"fpsbf:mem=64KiB,xi=1.5", ErrBadParam},
		{"fpsbf:mem=64KiB,xi=NaN", ErrBadParam},
		{"fpsbf:mem=64KiB,fps=0", ErrBadParam},
		{"fpsbf:mem=64KiB,fps=1", ErrBadParam},
		{"fpsbf:mem=64KiB,fps=-1", ErrBadParam},
		{"fpsbf:mem=64KiB,p=4", ErrUnknownParam},
		{"fpsbf:mem=12parsecs", ErrBadParam},
		{"fpsbf:mem=47bit", ErrTooSmall},                  // 3 sub-tables of 2 cells of 8 bits need 48
		{"fpsbf:mem=15bit,c=1,f=1,k=4", ErrTooSmall},      // 4 sub-tables of 2 cells of 2 bits need 16
		{"fpsbf:mem=48bit", ErrTooSmall},                  // m = 6 cells, fps=0.1 needs L = 17.8 > m
		{"fpsbf:mem=64KiB,fps=1e-9,xi=1e-9", ErrTooSmall}, // L beyond m
	} {
		f, err := New(c.spec, 1)
		if !errors.Is(err, c.want) {
			t.Errorf("New(%q) = %v, %v; want an error wrapping %v", c.spec, f, err, c.want)
		}
	}
	if _, err := New("fpsbf:mem=480bit", 1); err != nil {
		t.Errorf("a 60-cell filter should build: %v", err)
	}
}

func TestFPSBFSizeBits(t *testing.T) {
	for _, c := range []struct {
		spec        string
		cells, bits int
	}{
		{"fpsbf:mem=64KiB", 65535, 65535 * 8}, // 3 sub-tables of 21845 byte cells
		{"fpsbf:mem=64KiB,k=4", 65536, 65536 * 8},
		{"fpsbf:mem=1000bit,c=2,f=3,k=4", 200, 1000},
		{"fpsbf:mem=1000bit", 123, 984},                     // 41 cells per sub-table
		{"fpsbf:mem=1MiB,c=5,f=8,k=3", 645276, 645276 * 13}, // 13-bit cells straddle words
	} {
		s := fpsbfMust(t, c.spec, 1)
		d := s.CounterBits() + s.FingerprintBits()
		if s.Cells() != c.cells || s.SizeBits() != c.bits || s.SizeBits() != s.Cells()*d || s.Cells()%s.K() != 0 {
			t.Errorf("%s: %d cells of %d bits, SizeBits %d; want %d cells (a multiple of k=%d), %d bits",
				c.spec, s.Cells(), d, s.SizeBits(), c.cells, s.K(), c.bits)
		}
	}
}

// The per-cell model fpsbfSolve rests on is checked against the Markov
// chain it claims to solve: one counter, per element decremented by z
// uniform in [1, Max] with probability qd, then set to Max with probability
// qs if it was 0 before the element and qr if not (qr = qs when no false
// positive is skipped). The chain is iterated until (1-qr)^n < e^-60.
func TestFPSBFCellZerosSolvesTheCellChain(t *testing.T) {
	for _, c := range []struct {
		maxv       int
		qs, qr, qd float64
	}{
		{1, 0.02, 0.02, 0.05}, {3, 0.02, 0.02, 0.04}, {7, 1.0 / 30, 1.0 / 30, 0.1}, {7, 0.02, 0.015, 0.025},
		{63, 1.0 / 30, 0.02, 0.25}, {15, 0.025, 0.0125, 0.025}, {1, 0.05, 0.03, 0.2},
	} {
		pi := make([]float64, c.maxv+1)
		pi[0] = 1
		next := make([]float64, c.maxv+1)
		for range int(60 / c.qr) {
			clear(next)
			for v, p := range pi {
				set := c.qr
				if v == 0 {
					set = c.qs
				}
				next[c.maxv] += p * set
				p *= 1 - set
				next[v] += p * (1 - c.qd)
				for z := 1; z <= c.maxv; z++ {
					next[max(v-z, 0)] += p * c.qd / float64(c.maxv)
				}
			}
			pi, next = next, pi
		}
		if got := fpsbfCellZeros(c.maxv, c.qs, c.qr, c.qd); math.Abs(got-pi[0]) > 1e-9 {
			t.Errorf("%+v: closed form %.12f, chain's stationary Pr(0) %.12f", c, got, pi[0])
		}
	}
}

// Where FP-SBF's parameter setting is SBF's (Eq. 12, 13, 21 are SBF's 7, 8,
// 17 with L for P), the maths agree: at Max=1, where z is always 1, and
// with fingerprints wide enough (f=32) that no false positive is skipped,
// exactly; for Max > 1, random decrements empty cells sooner, so Eq. 13 as
// printed bounds the counters' FP rate from above and Eq. 21's L is larger
// than needed.
func TestFPSBFParameterSettingBuildsOnSBF(t *testing.T) {
	const m = 1 << 20
	for _, k := range []int{1, 2, 3, 6} {
		for _, l := range []int{1, 4, 17} {
			if got, want := FPSBFStableZeros(1, 32, k, 1, l, m), SBFStablePoint(1, k, l, m); math.Abs(got-want) > 1e-9 {
				t.Errorf("Max=1 k=%d L=%d: zeros %.12f, SBF Eq. 7 %.12f", k, l, got, want)
			}
			for _, maxv := range []int{3, 7, 255} {
				for _, f := range []int{1, 5, 32} {
					if got, eq13 := FPSBFCounterFPR(maxv, f, k, 1, l, m), SBFStableFPR(maxv, k, l, m); got > eq13 {
						t.Errorf("Max=%d f=%d k=%d L=%d: counter FP %.6g above Eq. 13 as printed %.6g", maxv, f, k, l, got, eq13)
					}
				}
			}
		}
		for _, fps := range []float64{0.3, 0.1, 0.01} {
			for _, xi := range []float64{1, 0.5, 0.1} {
				if got, want := FPSBFLForFPS(fps, 1, 32, k, xi, m), SBFPForFPS(fps, 1, k, m)/xi; math.Abs(got-want) > 1e-8*want {
					t.Errorf("Max=1 f=32 k=%d fps=%g xi=%g: L %.10g, SBF Eq. 17 / xi %.10g", k, fps, xi, got, want)
				}
				for _, maxv := range []int{1, 3, 7, 63} {
					for _, f := range []int{1, 5} {
						x := FPSBFLForFPS(fps, maxv, f, k, xi, m)
						z, _ := fpsbfSolve(maxv, f, k, xi, x, m)
						if back := math.Pow(1-z, float64(k)); math.Abs(back-fps) > 1e-9*fps {
							t.Errorf("Max=%d f=%d k=%d fps=%g xi=%g: counter FP at L=%g is %g", maxv, f, k, fps, xi, x, back)
						}
						if eq21 := SBFPForFPS(fps, maxv, k, m); maxv > 1 && xi == 1 && x >= eq21 {
							t.Errorf("Max=%d f=%d k=%d fps=%g: L=%g, not below Eq. 21's %g", maxv, f, k, fps, x, eq21)
						}
					}
				}
			}
		}
	}
	s := fpsbfMust(t, "fpsbf:mem=64KiB", 1)
	eq21 := SBFPForFPS(0.1, s.Max(), s.K(), s.Cells())
	t.Logf("defaults: L=%d (counter FP %.4f, with fingerprints %.3g); Eq. 21 asks L=%.2f, for a counter FP of %.4f",
		s.L(), s.FPBound(), s.StableFPR(), eq21, FPSBFCounterFPR(s.Max(), s.FingerprintBits(), s.K(), 1, int(math.Ceil(eq21)), s.Cells()))
}

// The derived L is the smallest integer whose counter FP rate meets fps.
func TestFPSBFDerivedLIsSmallestThatHolds(t *testing.T) {
	for _, c := range []int{1, 2, 3, 8} {
		for _, k := range []int{1, 2, 3, 5} {
			for _, fps := range []float64{0.5, 0.1, 0.01} {
				for _, xi := range []float64{1, 0.3} {
					spec := fmt.Sprintf("fpsbf:mem=1MiB,c=%d,f=4,k=%d,fps=%g,xi=%g", c, k, fps, xi)
					s := fpsbfMust(t, spec, 1)
					if got := s.FPBound(); got > fps {
						t.Errorf("%s: L=%d gives counter FP %g > fps", spec, s.L(), got)
					}
					if s.L() > 1 {
						if got := FPSBFCounterFPR(s.Max(), 4, k, xi, s.L()-1, s.Cells()); got <= fps {
							t.Errorf("%s: L=%d but L-1 already gives %g <= fps", spec, s.L(), got)
						}
					}
				}
			}
		}
	}
}

// fpsbfRef is a direct transcription of the algorithm, one counter byte and
// one fingerprint word per cell, drawing the same random numbers as FPSBF.
// stale keeps a cell's fingerprint when its counter reaches 0: the paper's
// "fingerprint cell ... remains unaffected in the deletion process" read
// literally.
type fpsbfRef struct {
	count       []uint8
	fp          []uint32
	maxv        uint8
	f           uint
	k, sub, l   int
	xi          float64
	stale       bool
	rng         mix.Wyrand
	evictRounds int
}

func fpsbfNewRef(s *FPSBF, seed uint64, stale bool) *fpsbfRef {
	return &fpsbfRef{
		count: make([]uint8, s.m), fp: make([]uint32, s.m), maxv: uint8(s.cmask), f: s.f,
		k: s.k, sub: s.sub, l: s.l, xi: s.xi, stale: stale, rng: mix.NewWyrand(seed),
	}
}

func (r *fpsbfRef) cells(h uint64) (idx []int, fp uint32) {
	mask := uint64(1)<<r.f - 1
	h1 := h &^ mask
	for j := range r.k {
		idx = append(idx, j*r.sub+mix.Reduce(h1+uint64(j)*bloomStep(h1), r.sub))
	}
	return idx, uint32(h & mask)
}

func (r *fpsbfRef) query(h uint64) bool {
	idx, fp := r.cells(h)
	for _, i := range idx {
		if r.count[i] == 0 || r.fp[i] != fp {
			return false
		}
	}
	return true
}

func (r *fpsbfRef) observe(h uint64) bool {
	if r.query(h) {
		return true
	}
	if r.xi >= 1 || r.rng.Float64() < r.xi {
		r.evictRounds++
		m := uint64(len(r.count))
		for range r.l {
			hi, lo := bits.Mul64(r.rng.Uint64(), m)
			z := uint8(1 + mix.Reduce(lo, int(r.maxv)))
			if r.count[hi] <= z {
				r.count[hi] = 0
				if !r.stale {
					r.fp[hi] = 0
				}
			} else {
				r.count[hi] -= z
			}
		}
	}
	idx, fp := r.cells(h)
	for _, i := range idx {
		r.count[i] = r.maxv
		r.fp[i] ^= fp
	}
	return false
}

// FPSBF answers and stores exactly what the transcription does, for cells
// that fit a word, straddle words (5, 13, 40 bits) and fill it, with and
// without xi.
func TestFPSBFMatchesReference(t *testing.T) {
	for _, spec := range []string{
		"fpsbf:mem=2000bit,c=1,f=1,k=2,fps=0.3",
		"fpsbf:mem=5000bit,c=2,f=3,k=3,fps=0.1",
		"fpsbf:mem=8000bit,c=3,f=5,k=3,fps=0.1,xi=0.5",
		"fpsbf:mem=13000bit,c=5,f=8,k=4,fps=0.2,xi=0.9",
		"fpsbf:mem=40000bit,c=8,f=32,k=2,fps=0.05",
		"fpsbf:mem=64000bit,c=4,f=4,k=1,fps=0.4,xi=0.1",
	} {
		const seed = 42
		s := fpsbfMust(t, spec, seed)
		ref := fpsbfNewRef(s, seed, false)
		dups := sameAsReference(t, spec, s.Observe, ref.observe)
		for i := range s.m {
			v := s.cells.get(i)
			if v&s.cmask != uint64(ref.count[i]) || v>>s.c != uint64(ref.fp[i]) {
				t.Fatalf("%s: cell %d = counter %d fp %#x, reference %d %#x", spec, i, v&s.cmask, v>>s.c, ref.count[i], ref.fp[i])
			}
		}
		if dups == 0 || ref.evictRounds == 0 {
			t.Errorf("%s: %d duplicates found, %d eviction rounds: the comparison exercised too little", spec, dups, ref.evictRounds)
		}
	}
}

// XOR accumulation (Sec. 4.3): a cell shared by two elements holds the XOR
// of their fingerprints and matches neither, so both queries fail even
// though every counter is at Max.
func TestFPSBFSharedCellMatchesNeither(t *testing.T) {
	s := fpsbfMust(t, "fpsbf:mem=384bit,c=3,f=5,k=3", 1) // 3 sub-tables of 16 cells
	const x = 0x1234_5678_9abc_de03                      // fingerprint 3
	cx := fpsbfCells(s, x)
	// Find y sharing exactly x's sub-table-1 cell, with another non-zero
	// fingerprint. The search is over a fixed sequence: deterministic.
	g := mix.NewSplitMix(5)
	var y uint64
	for {
		y = g.Uint64()
		cy := fpsbfCells(s, y)
		if cy[0] != cx[0] && cy[1] == cx[1] && cy[2] != cx[2] && y&s.fpMask != 0 && y&s.fpMask != x&s.fpMask {
			break
		}
	}
	s.insert(x)
	if !s.query(x) {
		t.Fatal("x not found right after its insertion into an empty filter")
	}
	s.insert(y)
	if s.query(x) || s.query(y) {
		t.Errorf("after x and y share a cell: query(x)=%v query(y)=%v, want both false", s.query(x), s.query(y))
	}
	shared := s.cells.get(cx[1])
	if shared&s.cmask != s.cmask || shared>>s.c != (x^y)&s.fpMask {
		t.Errorf("shared cell = counter %d fp %#x, want Max=%d and fp(x)^fp(y) = %#x", shared&s.cmask, shared>>s.c, s.cmask, (x^y)&s.fpMask)
	}
	// Their unshared cells still hold their own fingerprints.
	if v := s.cells.get(cx[0]); v>>s.c != x&s.fpMask {
		t.Errorf("x's own cell fp %#x, want %#x", v>>s.c, x&s.fpMask)
	}
	// A third insertion of x would XOR it out: the cell then matches y.
	s.insert(x)
	if v := s.cells.get(cx[1]); v>>s.c != y&s.fpMask {
		t.Errorf("after x again the shared cell fp = %#x, want fp(y) = %#x", v>>s.c, y&s.fpMask)
	}
}

// A decrement that leaves the counter non-zero keeps the fingerprint (Sec.
// 4.2); one that empties the cell clears it, so the next element to land
// there finds its own fingerprint.
func TestFPSBFEmptiedCellForgetsFingerprint(t *testing.T) {
	s := fpsbfMust(t, "fpsbf:mem=384bit,c=3,f=5,k=3", 1)
	const x, y = 0x1234_5678_9abc_de03, 0x1234_5678_9abc_de1c // same cells, fingerprints 3 and 0x1c
	cx := fpsbfCells(s, x)
	s.insert(x)
	s.decrement(cx[0], 6) // 7 -> 1
	if v := s.cells.get(cx[0]); v != 1|3<<s.c {
		t.Errorf("after decrementing by 6: cell %#x, want counter 1, fp 3", v)
	}
	if !s.query(x) {
		t.Error("x lost while all its counters are non-zero")
	}
	s.decrement(cx[0], 5) // clamped at 0
	if v := s.cells.get(cx[0]); v != 0 {
		t.Errorf("after the counter reached 0: cell %#x, want 0 (fingerprint cleared)", v)
	}
	if s.query(x) {
		t.Error("x found with a zero counter")
	}
	// y lands on the emptied cell and on x's two live cells: the emptied one
	// holds fp(y) exactly, the live ones fp(x)^fp(y).
	s.insert(y)
	want := []uint64{y & s.fpMask, (x ^ y) & s.fpMask, (x ^ y) & s.fpMask}
	for j, i := range cx {
		if v := s.cells.get(i); v>>s.c != want[j] || v&s.cmask != s.cmask {
			t.Errorf("cell %d after y: %#x, want counter Max, fp %#x", j, v, want[j])
		}
	}
}

// A detected duplicate changes nothing: no eviction draw, no insertion
// (Algorithm 1); re-inserting it would XOR its fingerprint out.
func TestFPSBFDuplicateChangesNothing(t *testing.T) {
	s := fpsbfMust(t, "fpsbf:mem=4KiB,c=3,f=5,k=3,xi=0.5", 1)
	g := mix.NewSplitMix(1)
	for range 200 {
		s.Observe(g.Uint64())
	}
	// An element whose cells are all empty: otherwise XOR accumulation could
	// hide it at once (see TestFPSBFSharedCellMatchesNeither).
	var h uint64
	for empty := false; !empty; {
		h, empty = g.Uint64(), true
		for _, i := range fpsbfCells(s, h) {
			empty = empty && s.cells.get(i) == 0
		}
	}
	if s.Observe(h) {
		t.Fatal("an element with empty cells reported duplicate")
	}
	words := append([]uint64(nil), s.cells.words...)
	r := s.rng
	for range 3 {
		if !s.Observe(h) {
			t.Fatal("duplicate at gap 1 missed with nothing in between")
		}
	}
	if s.rng != r {
		t.Error("a duplicate drew from the eviction generator")
	}
	for i := range words {
		if words[i] != s.cells.words[i] {
			t.Fatalf("a duplicate changed word %d", i)
		}
	}
}

// In a filter with spare room, a duplicate at a short gap is detected: it
// is missed only if one of the 12*gap cell writes between (3 insertions and
// 9 eviction picks per element at the defaults) lands on one of its 3
// cells, probability at most 36*gap/m. Over the gaps 0..15 below that is at
// most 36*7.5/65535 = 0.41% per trial, 4.1 of the 1000 trials expected;
// Poisson(4.1) exceeds 14 with probability 1e-4. Gap 0 (an immediate
// repeat) can never be missed.
func TestFPSBFShortGapDuplicateDetected(t *testing.T) {
	s := fpsbfMust(t, "fpsbf:mem=64KiB", 1)
	if s.Cells() != 65535 || s.L() != 9 {
		t.Fatalf("defaults moved (m=%d, L=%d): redo the bound", s.Cells(), s.L())
	}
	g := mix.NewSplitMix(77)
	missed := 0
	for trial := range 1000 {
		s.Reset()
		gap := trial % 16
		x := g.Uint64()
		if s.Observe(x) {
			t.Fatal("first element of an empty filter reported duplicate")
		}
		for range gap {
			s.Observe(g.Uint64())
		}
		if !s.Observe(x) {
			if gap == 0 {
				t.Fatal("immediate repeat missed")
			}
			missed++
		}
	}
	t.Logf("%d of 1000 short-gap duplicates missed (4.1 expected at most)", missed)
	if missed > 14 {
		t.Errorf("%d of 1000 short-gap duplicates missed, want at most 14", missed)
	}
}

// fpsbfNoise is the standard error of a rate p measured over n elements of
// a uniform distinct stream by a filter with sub-tables of s cells, when
// each element's answer is a product of k per-cell events of probability q
// (q = (1-Z) 2^-f for a false positive; Z + (1-Z) 2^-f for finding an
// element just inserted).
//
// The answers are Bernoulli(p): variance p(1-p)/n. The state wanders: the
// fraction of a sub-table's cells that satisfy the event is an average of s
// nearly independent cells (evictions pick cells independently), relative
// variance (1-q)/(q s); k sub-tables multiply, k times that; the fraction of
// cells matching one fingerprint value and the zero fraction both move it,
// so twice that as a bound. A cell is set with probability 1/s per element,
// so the state forgets itself within about s elements: averaging n of them
// divides its variance by n/(2s).
func fpsbfNoise(p, q float64, k, s, n int) float64 {
	state := 2 * float64(k) * (1 - q) / (q * float64(s))
	return math.Sqrt(p*(1-p)/float64(n) + p*p*state*math.Min(1, 2*float64(s)/float64(n)))
}

// On a uniform stream of distinct elements the zero fraction settles at
// FPSBFStableZeros, the FP rate at FPSBFStableFPR = ((1-Z) 2^-f)^k, below the
// paper's Eq. 13 bound and fps; and an element just inserted is found with
// probability (Z + (1-Z) 2^-f)^k, the XOR accumulation's cost: each of its
// cells either was empty or has since held another element's fingerprint
// too (which then cancels only with probability 2^-f).
func TestFPSBFStableRatesMatchModel(t *testing.T) {
	for _, spec := range []string{
		"fpsbf:mem=8KiB,c=1,f=1,k=2,fps=0.2",          // m = 32768, L = 3: counters are an SBF with Max=1
		"fpsbf:mem=20KiB,c=3,f=2,k=3,fps=0.1",         // m = 32766, 5-bit cells straddle words
		"fpsbf:mem=12KiB,c=2,f=1,k=2,fps=0.3,xi=0.25", // rounds on a quarter of insertions
		"fpsbf:mem=32KiB",                             // defaults: FP rate ~3e-6, near nothing to measure
	} {
		t.Run(spec, func(t *testing.T) {
			s := fpsbfMust(t, spec, 1)
			m, k, sub, f := s.Cells(), s.K(), s.sub, s.FingerprintBits()
			z := FPSBFStableZeros(s.Max(), f, k, s.Xi(), s.L(), m)
			fpr := s.StableFPR()
			find := math.Pow(z+(1-z)*math.Ldexp(1, -f), float64(k))
			const window = 1 << 16
			// A cell never set since the start survives with probability
			// (1-1/s)^n; 16s elements leave e^-16 of the empty start.
			warm := (16*sub + window - 1) / window
			windows := 16
			g := mix.NewSplitMix(uint64(len(spec)))
			fps, inserted, found, zeros := 0, 0, 0, 0.0
			for w := range warm + windows {
				for range window {
					h := g.Uint64()
					if s.Observe(h) {
						if w >= warm {
							fps++
						}
						continue
					}
					if w >= warm {
						inserted++
						if s.query(h) { // what a duplicate right now would get
							found++
						}
					}
				}
				if w >= warm {
					zeros += s.ZeroFraction()
				}
			}
			n := windows * window
			rate, zf, fr := float64(fps)/float64(n), zeros/float64(windows), float64(found)/float64(inserted)
			// Zero fraction: one sample per window (>= 2s elements apart,
			// nearly independent), each with variance z(1-z)/m.
			zTol := 5 * math.Sqrt(z*(1-z)/float64(m)/float64(windows))
			// 5 sd. The model's own approximations (eviction picks drawn
			// with replacement, the zero fraction seen after the eviction
			// but before the insertion) are O(L/m, k/m), below 3e-4 here,
			// and the tolerances below are at least 1e-3 relative.
			tol := 5 * fpsbfNoise(fpr, (1-z)*math.Ldexp(1, -f), k, sub, n)
			// The found-rate model takes a non-zero cell's fingerprint to be 0
			// (what the newcomer needs to find itself) with probability 2^-f.
			// Skipped false positives bias that: an element whose fingerprint
			// equals the cell's is never XOR-ed in, so P(0) moves by at most
			// 2^-f y^(k-1)/(1-phi), each cell's chance by at most
			// FPR/(1-phi), the product by find*k*FPR/((1-phi) q); conditioning
			// on the newcomer not being a false positive itself adds at most
			// 3 FPR. The bias is added to the tolerance: it is sizeable only
			// at f=1.
			q := z + (1-z)*math.Ldexp(1, -f)
			phi := fpr / (1 - z)
			bias := find*float64(k)*fpr/((1-phi)*q) + 3*fpr
			findTol := 5*fpsbfNoise(find, q, k, sub, inserted) + bias
			t.Logf("m=%d k=%d L=%d Max=%d f=%d xi=%g: zeros %.5f (model %.5f ± %.5f); FP rate %.3g (model %.3g ± %.2g, Eq. 13 %.4f, fps %g); just-inserted found %.4f (model %.4f ± %.4f, of which bias %.4f)",
				m, k, s.L(), s.Max(), f, s.Xi(), zf, z, zTol, rate, fpr, tol, s.FPBound(), s.fps, fr, find, findTol, bias)
			if math.Abs(zf-z) > zTol {
				t.Errorf("stable zero fraction %.5f, model says %.5f (5 sd = %.5f)", zf, z, zTol)
			}
			if math.Abs(rate-fpr) > tol {
				t.Errorf("stable FP rate %.4g, model says %.4g (5 sd = %.2g)", rate, fpr, tol)
			}
			if math.Abs(fr-find) > findTol {
				t.Errorf("just-inserted elements found %.4f, model says %.4f (5 sd = %.4f)", fr, find, findTol)
			}
			// The paper's bound (Eq. 13 with SBF's unit decrements) holds
			// with room to spare when every insertion evicts.
			if s.Xi() == 1 {
				if eq13 := SBFStableFPR(s.Max(), k, s.L(), m); rate > eq13 {
					t.Errorf("FP rate %.4g above Eq. 13 as printed, %.4g", rate, eq13)
				}
			}
			if rate > s.fps {
				t.Errorf("FP rate %.4g above fps=%g", rate, s.fps)
			}
		})
	}
}

// Read literally, "fingerprint cell ... remains unaffected in the deletion
// process" keeps a departed element's fingerprint in an emptied cell, and
// every FPC becomes the XOR of all fingerprints ever stored there. Once the
// filter has turned over, an element just inserted is then found only when
// the other fingerprints in each of its k cells cancel: probability about
// 2^-fk = 3e-5 at the defaults, against (Z + (1-Z) 2^-f)^k = 0.17 when an
// emptied cell forgets. This is why FPSBF clears it.
func TestFPSBFLiteralStaleFingerprintsFindNothing(t *testing.T) {
	s := fpsbfMust(t, "fpsbf:mem=6KiB", 1) // m = 6144, L = 9
	for _, stale := range []bool{false, true} {
		ref := fpsbfNewRef(s, 1, stale)
		g := mix.NewSplitMix(2)
		for range 40 * s.sub { // every cell set dozens of times
			ref.observe(g.Uint64())
		}
		found, inserted := 0, 0
		for range 50000 {
			h := g.Uint64()
			if ref.observe(h) {
				continue
			}
			inserted++
			if ref.query(h) {
				found++
			}
		}
		rate := float64(found) / float64(inserted)
		t.Logf("stale=%v: %.4f of just-inserted elements found", stale, rate)
		// Binomial sd at 50000 draws is at most 0.0017 around 0.17 and
		// 2.5e-5 around 3e-5: 0.1 and 0.01 are far outside both.
		if stale && rate > 0.01 {
			t.Errorf("stale fingerprints: %.4f of just-inserted elements found, want about 2^-15", rate)
		}
		if !stale && rate < 0.1 {
			t.Errorf("cleared fingerprints: %.4f of just-inserted elements found, want about 0.17", rate)
		}
	}
}

// fpsbfMixedStream feeds f n elements, 70% fresh and 30% repeats of an
// element gap positions back, gap uniform in [1, maxGap] (the paper's
// synthetic data set is 70% distinct; Eq. 25 takes gaps under 1000), and
// counts false positives among fresh elements and false negatives among
// repeats from element skip on.
func fpsbfMixedStream(f Filter, seed uint64, n, maxGap, skip int) (fresh, fps, repeats, fns int) {
	g := mix.NewSplitMix(seed)
	hist := make([]uint64, n)
	for i := range n {
		h := g.Uint64()
		gap := 1 + int((h>>32)%uint64(maxGap))
		repeat := h%10 < 3 && i >= gap
		if repeat {
			h = hist[i-gap]
		}
		hist[i] = h
		dup := f.Observe(h)
		if i < skip {
			continue
		}
		switch {
		case repeat:
			repeats++
			if !dup {
				fns++
			}
		default:
			fresh++
			if dup {
				fps++
			}
		}
	}
	return fresh, fps, repeats, fns
}

// The paper's relative result (Sec. 5, Fig. 7): at equal memory, FP-SBF's
// FP rate is far below SBF's, here against SBF with the same Max, K and FP
// bound and against SBF's defaults. Expected: SBF near its Eq. 8 bound
// (0.1 at most); FP-SBF about 0.1 * 2^-15 = 3e-6, i.e. about 1 false
// positive among the 350000 fresh elements measured. The factor 100 asked
// for is 300 times looser than that expectation. The FN rates are logged:
// the paper also claims fewer false negatives, which XOR accumulation does
// not deliver at stability.
func TestFPSBFFPRBelowSBFAtEqualMemory(t *testing.T) {
	const n, skip = 1000000, 500000 // both filters past 16 turnovers of a cell by then
	fp := fpsbfMust(t, "fpsbf:mem=32KiB", 1)
	fFresh, fFPs, fReps, fFNs := fpsbfMixedStream(fp, 4, n, 1000, skip)
	fRate := float64(fFPs) / float64(fFresh)
	t.Logf("%v: FP rate %.2g (%d/%d), FN rate %.4f", fp, fRate, fFPs, fFresh, float64(fFNs)/float64(fReps))
	for _, spec := range []string{"sbf:mem=32KiB,max=7,k=3,fps=0.1", "sbf:mem=32KiB"} {
		sbf := sbfMust(t, spec, 1)
		sFresh, sFPs, sReps, sFNs := fpsbfMixedStream(sbf, 4, n, 1000, skip)
		sRate := float64(sFPs) / float64(sFresh)
		t.Logf("%v: FP rate %.4f (Eq. 8 bound %.4f), FN rate %.4f", sbf, sRate, sbf.FPBound(), float64(sFNs)/float64(sReps))
		if sRate < 0.02 {
			t.Errorf("%v: FP rate %.4f, not the ~0.1 expected: the comparison would be vacuous", sbf, sRate)
		}
		if fRate*100 > sRate {
			t.Errorf("FP-SBF's FP rate %.3g is not 100 times below %v's %.4f", fRate, sbf, sRate)
		}
	}
}

// Observe allocates nothing, for every cell layout and with xi < 1.
func TestFPSBFObserveAllocatesNothing(t *testing.T) {
	for _, spec := range []string{
		"fpsbf:mem=64KiB",
		"fpsbf:mem=64KiB,c=1,f=1,k=2",
		"fpsbf:mem=64KiB,c=5,f=8,k=4,xi=0.3",
		"fpsbf:mem=64KiB,c=8,f=32,k=1",
	} {
		s := fpsbfMust(t, spec, 5)
		g := mix.NewSplitMix(9)
		for range 4096 {
			s.Observe(g.Uint64())
		}
		if n := testing.AllocsPerRun(10000, func() { s.Observe(g.Uint64()) }); n != 0 {
			t.Errorf("%s: Observe allocates %.2f times per call, want 0", spec, n)
		}
	}
}

// BenchmarkFPSBFObserve times Observe at the defaults on precomputed hashes
// of distinct elements (every element inserts and runs an eviction round of
// L=9 cells: the slow path) and on the paper's 70/30 mix with gaps under
// 1000.
func BenchmarkFPSBFObserve(b *testing.B) {
	const n = 1 << 20
	distinct := make([]uint64, n)
	mixed := make([]uint64, n)
	g := mix.NewSplitMix(42)
	for i := range n {
		distinct[i] = g.Uint64()
		mixed[i] = distinct[i]
		if gap := 1 + int((distinct[i]>>32)%1000); distinct[i]%10 < 3 && i >= gap {
			mixed[i] = mixed[i-gap]
		}
	}
	for _, mem := range []string{"64KiB", "1MiB"} {
		for _, st := range []struct {
			name string
			hs   []uint64
		}{{"distinct", distinct}, {"mixed", mixed}} {
			b.Run(mem+"/"+st.name, func(b *testing.B) {
				s := fpsbfMust(b, "fpsbf:mem="+mem, 1)
				for _, h := range st.hs { // warm: past stability, pages touched
					s.Observe(h)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					s.Observe(st.hs[i&(n-1)])
					i++
				}
			})
		}
	}
}

// An FP-SBF at the defaults: L comes from fps (the counters' stable FP
// bound); the fingerprints cut the FP rate a further 2^-15.
func ExampleFPSBF() {
	f, err := New("fpsbf:mem=64KiB", 1)
	if err != nil {
		panic(err)
	}
	s := f.(*FPSBF)
	fmt.Println(s)
	fmt.Printf("%d cells of %d+%d bits, k=%d, L=%d; counter FP bound %.4f, with fingerprints %.2g\n",
		s.Cells(), s.CounterBits(), s.FingerprintBits(), s.K(), s.L(), s.FPBound(), s.StableFPR())
	fmt.Println(s.Observe(0x9e3779b97f4a7c15), s.Observe(0x9e3779b97f4a7c15))
	// Output:
	// fpsbf:mem=64KiB,c=3,f=5,k=3,fps=0.1,xi=1
	// 65535 cells of 3+5 bits, k=3, L=9; counter FP bound 0.0976, with fingerprints 3e-06
	// false true
}
