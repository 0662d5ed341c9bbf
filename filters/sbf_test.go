package filters

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

func sbfMust(t testing.TB, spec string, seed uint64) *SBF { return mustNew[*SBF](t, spec, seed) }

func TestSBFEq17AndEq8(t *testing.T) {
	const m = 1 << 30 // the 1/m term is negligible here, 1e-9
	if got := SBFPForFPS(0.1, 1, 2, m); math.Abs(got-4.325) > 0.001 {
		t.Errorf("Eq. 17 (FPS=0.1, Max=1, K=2) = %.4f, want 4.325 (the paper's 4.3)", got)
	}
	// The paper's P=4 misses its own 10% target: (1/3)^2 = 11.1%.
	if got, want := SBFStableFPR(1, 2, 4, m), 1.0/9; math.Abs(got-want) > 1e-8 {
		t.Errorf("Eq. 8 (Max=1, K=2, P=4) = %.10f, want (1/3)^2 = %.10f", got, want)
	}
	if got := SBFStablePoint(1, 2, 4, m); math.Abs(got-2.0/3) > 1e-8 {
		t.Errorf("Eq. 7 (Max=1, K=2, P=4) = %.10f, want 2/3", got)
	}
	// Rounded up, P=5 keeps the bound: Eq. 8 = (1 - 2.5/3.5)^2 = 8.16%.
	s := sbfMust(t, "sbf:mem=64KiB", 1)
	if s.P() != 5 || s.K() != 2 || s.Max() != 1 {
		t.Errorf("defaults: P=%d K=%d Max=%d, want P=5 K=2 Max=1", s.P(), s.K(), s.Max())
	}
	if got, want := s.FPBound(), math.Pow(1-2.5/3.5, 2); math.Abs(got-want) > 1e-5 {
		t.Errorf("FPBound at P=5 = %.6f, want %.6f (up to the 1/m term)", got, want)
	}
	// Eq. 17 and Eq. 8 are inverses of each other.
	for _, maxv := range []int{1, 3, 7, 15} {
		for _, k := range []int{1, 2, 3, 6} {
			for _, fps := range []float64{0.2, 0.1, 0.01, 0.001} {
				p := SBFPForFPS(fps, maxv, k, 1e6)
				x := p * (1/float64(k) - 1e-6)
				back := math.Pow(1-math.Pow(x/(1+x), float64(maxv)), float64(k))
				if math.Abs(back-fps) > 1e-9*fps {
					t.Errorf("Max=%d K=%d: Eq. 8 at Eq. 17's P=%g is %g, want fps=%g", maxv, k, p, back, fps)
				}
			}
		}
	}
	// The paper's other worked examples (Sec. 4.1) truncate Eq. 17 too:
	// Max=1, FPS=0.01, K=3 "is 10" (Eq. 17: 10.92) and Max=15, FPS=0.01,
	// K=6 "is 141" (141.27). Rounded up, those bounds hold: 11 and 142.
	for _, c := range []struct{ maxv, k, paper, ours int }{{1, 2, 4, 5}, {1, 3, 10, 11}, {15, 6, 141, 142}} {
		fps := 0.1
		if c.paper != 4 {
			fps = 0.01
		}
		x := SBFPForFPS(fps, c.maxv, c.k, m)
		if math.Floor(x) != float64(c.paper) {
			t.Errorf("Eq. 17 (FPS=%g, Max=%d, K=%d) = %.3f, paper's value %d is not its floor", fps, c.maxv, c.k, x, c.paper)
		}
		if got, ok := sbfDeriveP(fps, c.maxv, c.k, m); !ok || got != c.ours {
			t.Errorf("derived P (FPS=%g, Max=%d, K=%d) = %d, want %d", fps, c.maxv, c.k, got, c.ours)
		}
		if b := SBFStableFPR(c.maxv, c.k, c.paper, m); b <= fps {
			t.Errorf("paper's P=%d gives Eq. 8 = %g <= FPS=%g: then it needs no rounding up", c.paper, b, fps)
		}
	}
}

// The P that fps derives is the smallest whose Eq. 8 bound holds.
func TestSBFDerivedPIsSmallestThatHolds(t *testing.T) {
	for _, maxv := range []int{1, 3, 7, 255} {
		for _, k := range []int{1, 2, 3, 5} {
			for _, fps := range []float64{0.5, 0.2, 0.1, 0.05, 0.01, 0.001} {
				mem := 1 << 23
				spec := fmt.Sprintf("sbf:mem=%dbit,max=%d,k=%d,fps=%g", mem, maxv, k, fps)
				f, err := New(spec, 1)
				if errors.Is(err, ErrTooSmall) {
					continue // Max=255 at small fps needs P > m
				}
				if err != nil {
					t.Fatalf("New(%q): %v", spec, err)
				}
				s := f.(*SBF)
				if got := s.FPBound(); got > fps {
					t.Errorf("%s: P=%d gives Eq. 8 = %g > fps", spec, s.P(), got)
				}
				if s.P() > 1 {
					if got := SBFStableFPR(maxv, k, s.P()-1, s.Cells()); got <= fps {
						t.Errorf("%s: P=%d but P-1 already gives Eq. 8 = %g <= fps", spec, s.P(), got)
					}
				}
				if want := int(math.Ceil(SBFPForFPS(fps, maxv, k, s.Cells()))); s.P() != max(want, 1) {
					t.Errorf("%s: P=%d, want ceil(Eq. 17) = %d", spec, s.P(), want)
				}
			}
		}
	}
}

// Eq. 7 is the limit of Eq. 1 (Theorem 2); the paper suggests checking it by
// putting test values into Eq. 1, which this does, with p = P/m, k = K/m.
func TestSBFStablePointIsLimitOfEq1(t *testing.T) {
	for _, c := range []struct{ maxv, k, p, m int }{
		{1, 2, 4, 1000}, {3, 2, 15, 1000}, {7, 3, 40, 5000}, {1, 1, 1, 100},
	} {
		kk, pp := float64(c.k)/float64(c.m), float64(c.p)/float64(c.m)
		// Eq. 1 for N -> infinity: sum over l of Pr(A_l) Pr(0 | A_l); the
		// never-set term (1-k)^N vanishes. Stop when (1-k)^l < 1e-16.
		sum := 0.0
		for l := c.maxv; math.Pow(1-kk, float64(l)) > 1e-16; l++ {
			below := 0.0 // Pr(Bin(l, p) < Max)
			for j := 0; j < c.maxv; j++ {
				lg1, _ := math.Lgamma(float64(l + 1))
				lg2, _ := math.Lgamma(float64(j + 1))
				lg3, _ := math.Lgamma(float64(l - j + 1))
				below += math.Exp(lg1 - lg2 - lg3 + float64(j)*math.Log(pp) + float64(l-j)*math.Log1p(-pp))
			}
			sum += kk * math.Pow(1-kk, float64(l)) * (1 - below)
		}
		if got := SBFStablePoint(c.maxv, c.k, c.p, c.m); math.Abs(got-sum) > 1e-9 {
			t.Errorf("%+v: Eq. 7 = %.12f, Eq. 1 summed = %.12f", c, got, sum)
		}
	}
}

func TestSBFSpec(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"sbf:mem=64KiB", "sbf:mem=64KiB,max=1,k=2,p=5"},
		{"sbf:mem=64KiB,max=1,k=2,p=4", "sbf:mem=64KiB,max=1,k=2,p=4"},
		{"SBF: mem = 1MiB , max=3, fps=0.1", "sbf:mem=1MiB,max=3,k=2,p=15"},
		{"sbf:mem=1000bit,max=7,k=3,p=0", "sbf:mem=125B,max=7,k=3,p=0"},
		{"sbf:mem=65536bit,max=255,k=1,p=1", "sbf:mem=8KiB,max=255,k=1,p=1"},
	} {
		s := sbfMust(t, c.spec, 7)
		if got := s.String(); got != c.want {
			t.Errorf("New(%q).String() = %q, want %q", c.spec, got, c.want)
		}
		r := sbfMust(t, s.String(), 7)
		if r.String() != s.String() || r.Cells() != s.Cells() || r.SizeBits() != s.SizeBits() ||
			r.P() != s.P() || r.K() != s.K() || r.Max() != s.Max() {
			t.Errorf("%q does not round-trip: %q", s.String(), r.String())
		}
		// Identical filters: same answers on the same stream, duplicates included.
		g := mix.NewSplitMix(3)
		var recent [4]uint64
		for i := range 20000 {
			h := g.Uint64()
			if i%3 == 0 { // a third of the elements repeat a recent one
				h = recent[h%4]
			}
			recent[i%4] = h
			if a, b := s.Observe(h), r.Observe(h); a != b {
				t.Fatalf("%q: element %d: %v from the original, %v from its round trip", c.want, i, a, b)
			}
		}
	}
	for _, c := range []struct {
		spec string
		want error
	}{
		{"sbf:mem=64KiB,max=2", ErrBadParam},
		{"sbf:mem=64KiB,max=0", ErrBadParam},
		{"sbf:mem=64KiB,max=256", ErrBadParam},
		{"sbf:mem=64KiB,max=x", ErrBadParam},
		{"sbf:mem=64KiB,k=0", ErrBadParam},
		{"sbf:mem=64KiB,k=65", ErrBadParam},
		{"sbf:mem=64KiB,p=-1", ErrBadParam},
		{"sbf:mem=64KiB,fps=0", ErrBadParam},
		{"sbf:mem=64KiB,fps=1", ErrBadParam},
		{"sbf:mem=64KiB,fps=1.5", ErrBadParam},
		{"sbf:mem=64KiB,fps=-0.1", ErrBadParam},
		{"sbf:mem=64KiB,fps=NaN", ErrBadParam},
		{"sbf:mem=64KiB,p=4,fps=0.1", ErrBadParam},
		{"sbf:mem=64KiB,q=1", ErrUnknownParam},
		{"sbf:mem=2bit", ErrTooSmall},               // m = K: Eq. 8 is 1
		{"sbf:mem=5bit,max=3,k=2,p=1", ErrTooSmall}, // m = 2 cells of 2 bits
		{"sbf:mem=8bit,p=9", ErrTooSmall},           // P > m
		{"sbf:mem=16bit,fps=0.001", ErrTooSmall},    // Eq. 17 asks P=70 > m=16
	} {
		f, err := New(c.spec, 1)
		if !errors.Is(err, c.want) {
			t.Errorf("New(%q) = %v, %v; want an error wrapping %v", c.spec, f, err, c.want)
		}
	}
}

func TestSBFSizeBits(t *testing.T) {
	for _, c := range []struct {
		spec        string
		cells, bits int
	}{
		{"sbf:mem=64KiB,max=1,p=4", 8 << 16, 8 << 16},
		{"sbf:mem=64KiB,max=3,p=4", 4 << 16, 8 << 16},
		{"sbf:mem=1000bit,max=7,p=4", 333, 999}, // m = floor(mem/d)
		{"sbf:mem=1000bit,max=255,p=4", 125, 1000},
	} {
		s := sbfMust(t, c.spec, 1)
		if s.Cells() != c.cells || s.SizeBits() != c.bits || s.SizeBits() != s.Cells()*s.CellBits() {
			t.Errorf("%s: %d cells of %d bits, SizeBits %d; want %d cells, %d bits", c.spec, s.Cells(), s.CellBits(), s.SizeBits(), c.cells, c.bits)
		}
	}
}

// sbfFill sets every cell of s to Max.
func sbfFill(s *SBF) {
	for i := range s.m {
		s.cells.set(i, s.max)
	}
}

// The decrement run is the start cell and the P-1 after it, wrapping at m
// (Sec. 5.2): checked for every start, for bit cells (word-straddling runs,
// m not a multiple of 64, P = m) and for packed cells (3-bit cells straddle
// words).
func TestSBFDecrementRun(t *testing.T) {
	for _, spec := range []string{
		"sbf:mem=130bit,max=1,k=1,p=1",
		"sbf:mem=130bit,max=1,k=1,p=5",
		"sbf:mem=130bit,max=1,k=1,p=64",
		"sbf:mem=130bit,max=1,k=1,p=100",
		"sbf:mem=130bit,max=1,k=1,p=130",
		"sbf:mem=192bit,max=1,k=1,p=70",
		"sbf:mem=390bit,max=7,k=1,p=7",
		"sbf:mem=390bit,max=7,k=1,p=130",
		"sbf:mem=256bit,max=3,k=1,p=20",
		"sbf:mem=260bit,max=3,k=1,p=1",
		"sbf:mem=260bit,max=3,k=1,p=100",
		"sbf:mem=260bit,max=3,k=1,p=130",
		"sbf:mem=520bit,max=15,k=1,p=40",
		"sbf:mem=1040bit,max=255,k=1,p=17",
		"sbf:mem=1040bit,max=255,k=1,p=130",
	} {
		s := sbfMust(t, spec, 1)
		for start := range s.m {
			sbfFill(s)
			s.decrement(start)
			s.decrement(start) // Max=1: a second pass must saturate at 0
			for i := range s.m {
				inRun := (i-start+s.m)%s.m < s.p
				want := s.max
				if inRun {
					want = uint64(max(int(s.max)-2, 0))
				}
				if got := s.cells.get(i); got != want {
					t.Fatalf("%s: after two decrements from %d, cell %d = %d, want %d", spec, start, i, got, want)
				}
			}
		}
	}
}

// sbfRef is a direct transcription of the paper's text, one byte per cell,
// drawing the same random starts and using the same cell indices as SBF.
type sbfRef struct {
	cells   []uint8
	max     uint8
	k, p, m int
	rng     mix.Wyrand
}

func (r *sbfRef) observe(h uint64) bool {
	idx := make([]int, r.k)
	for i := range idx {
		idx[i] = mix.Reduce(h+uint64(i)*bloomStep(h), r.m)
	}
	dup := true
	for _, i := range idx {
		if r.cells[i] == 0 {
			dup = false
		}
	}
	if r.p > 0 {
		start := r.rng.IntN(r.m)
		for j := range r.p {
			if c := &r.cells[(start+j)%r.m]; *c > 0 {
				*c--
			}
		}
	}
	for _, i := range idx {
		r.cells[i] = r.max
	}
	return dup
}

// The optimised paths answer and store exactly what the paper's text does.
func TestSBFMatchesReference(t *testing.T) {
	for _, spec := range []string{
		"sbf:mem=100bit,max=1,k=2,p=70",
		"sbf:mem=1000bit,max=1,k=2,p=4",
		"sbf:mem=64bit,max=1,k=3,p=64",
		"sbf:mem=4096bit,max=1,k=1,p=0",
		"sbf:mem=200bit,max=3,k=2,p=15",
		"sbf:mem=3000bit,max=7,k=4,p=30",
		"sbf:mem=8000bit,max=255,k=2,p=600",
		"sbf:mem=2000bit,max=15,k=3,p=100",
		"sbf:mem=1000bit,max=31,k=2,p=50",
	} {
		const seed = 42
		s := sbfMust(t, spec, seed)
		ref := &sbfRef{cells: make([]uint8, s.m), max: uint8(s.max), k: s.k, p: s.p, m: s.m, rng: mix.NewWyrand(seed)}
		sameAsReference(t, spec, s.Observe, ref.observe)
		for i := range s.m {
			if got, want := s.cells.get(i), uint64(ref.cells[i]); got != want {
				t.Fatalf("%s: cell %d = %d, reference %d", spec, i, got, want)
			}
		}
	}
}

// Algorithm 1's indentation would skip the decrement and the set for
// duplicates; the text (and ERRATA.md) does both for every element.
func TestSBFDuplicateStillDecrementsAndSets(t *testing.T) {
	for _, spec := range []string{"sbf:mem=2000bit,max=3,k=2,p=8", "sbf:mem=2000bit,max=1,k=2,p=8"} {
		s := sbfMust(t, spec, 5)
		sbfFill(s)
		const h = 0x1234_5678_9abc_def0
		if !s.Observe(h) {
			t.Fatalf("%s: all cells at Max, Observe = false", spec)
		}
		low := 0
		for i := range s.m {
			if s.cells.get(i) != s.max {
				low++
			}
		}
		// P cells were decremented, then h's K cells set back to Max.
		if low < s.p-s.k || low > s.p {
			t.Errorf("%s: %d cells below Max after a duplicate, want P=%d minus at most K=%d re-set", spec, low, s.p, s.k)
		}
		for i := range s.k {
			if c := s.cells.get(mix.Reduce(h+uint64(i)*bloomStep(h), s.m)); c != s.max {
				t.Errorf("%s: the duplicate's cell %d = %d after Observe, want Max", spec, i, c)
			}
		}
	}
}

// sbfNoise returns the standard error of an FP rate measured over n distinct
// elements of a uniform stream by an SBF whose expected FP rate is fpr and
// expected zero fraction z.
//
// Two sources add up. The answers are Bernoulli(fpr): variance fpr(1-fpr)/n.
// The state wanders around its stable point: a cell's neighbours share its
// decrement runs, so cells are dependent only within P-1 of each other and
// Var(Z) <= (2P-1) z(1-z)/m; the FP rate moves with Z by
// dFPR/dZ = -K(1-z)^(K-1); and a set resets a cell whatever its history, so
// Z forgets itself within about m/K elements: averaging n elements divides
// that variance by n/(2m/K) once n exceeds 2m/K.
func sbfNoise(fpr, z float64, k, p, m, n int) float64 {
	slope := float64(k) * math.Pow(1-z, float64(k-1))
	varZ := float64(2*p-1) * z * (1 - z) / float64(m)
	return math.Sqrt(fpr*(1-fpr)/float64(n) + slope*slope*varZ*math.Min(1, 2*float64(m)/float64(k)/float64(n)))
}

// A uniform stream of distinct elements drives the FP rate to Eq. 8
// (Corollary 4) and the zero fraction to Eq. 7 (Theorem 3), and no window
// ever exceeds Eq. 8 beyond noise, before or after stability (Corollary 5).
func TestSBFStableFPRReachesEq8(t *testing.T) {
	for _, spec := range []string{
		"sbf:mem=8KiB,max=1,k=2,p=4",      // the paper's setting, m = 65536 cells
		"sbf:mem=16KiB,max=3,k=2,fps=0.1", // d = 2, m = 65536, P = 15
		"sbf:mem=24KiB,max=7,k=3,p=12",    // d = 3 (cells straddle words), m = 65536
	} {
		t.Run(spec, func(t *testing.T) {
			s := sbfMust(t, spec, 1)
			m, k, p := s.Cells(), s.K(), s.P()
			bound, z := s.FPBound(), SBFStablePoint(s.Max(), k, p, m)
			const window = 1 << 16
			// After n elements a cell has never been set with probability
			// (1-K/m)^n, and once set its start no longer matters:
			// 16m/K elements leave e^-16 of the start.
			warm := (16*m/k + window - 1) / window
			windows := 64
			if testing.Short() {
				windows = 16
			}
			g := mix.NewSplitMix(uint64(len(spec)))
			fps, zeros := 0, 0.0
			worst := 0.0
			tolWindow := 5 * sbfNoise(bound, z, k, p, m, window) // 5 sd: about 3e-7 per window
			for w := range warm + windows {
				fp := 0
				for range window {
					if s.Observe(g.Uint64()) {
						fp++
					}
				}
				rate := float64(fp) / window
				worst = max(worst, rate)
				if rate > bound+tolWindow {
					t.Errorf("window %d: FP rate %.5f > Eq. 8 bound %.5f + %.5f (5 sd)", w, rate, bound, tolWindow)
				}
				if w >= warm {
					fps += fp
					zeros += s.ZeroFraction()
				}
			}
			n := windows * window
			rate, zf := float64(fps)/float64(n), zeros/float64(windows)
			// Zero fraction: sampled every window (>= 2m/K elements apart,
			// nearly independent); each sample has Var(Z) <= (2P-1)z(1-z)/m.
			zTol := 4 * math.Sqrt(float64(2*p-1)*z*(1-z)/float64(m)/float64(windows))
			tol := 4 * sbfNoise(bound, z, k, p, m, n)
			t.Logf("m=%d K=%d P=%d Max=%d: FP rate %.5f (Eq. 8 %.5f, tol %.5f), worst window %.5f (tol %.5f); zero fraction %.5f (Eq. 7 %.5f, tol %.5f)",
				m, k, p, s.Max(), rate, bound, tol, worst, tolWindow, zf, z, zTol)
			if math.Abs(rate-bound) > tol {
				t.Errorf("stable FP rate %.5f, Eq. 8 says %.5f (4 sd = %.5f)", rate, bound, tol)
			}
			if math.Abs(zf-z) > zTol {
				t.Errorf("stable zero fraction %.5f, Eq. 7 says %.5f (4 sd = %.5f)", zf, z, zTol)
			}
		})
	}
}

// sbfGapStream feeds s n elements, half fresh, half repeats of the element
// gap positions back with gap uniform in [minGap, maxGap], and counts the
// repeats reported as distinct.
func sbfGapStream(s Filter, seed uint64, n, minGap, maxGap int) (repeats, fns int) {
	g := mix.NewSplitMix(seed)
	hist := make([]uint64, n)
	for i := range n {
		h := g.Uint64()
		gap := minGap + int((h>>32)%uint64(maxGap-minGap+1))
		repeat := h&1 == 0 && i >= gap
		if repeat {
			h = hist[i-gap]
			repeats++
		}
		hist[i] = h
		if !s.Observe(h) && repeat {
			fns++
		}
	}
	return repeats, fns
}

// A duplicate fewer than Max+1 positions after its previous occurrence is
// never a false negative: its cells were set to Max and at most Max-1
// decrement runs came since (Sec. 3.6, "when delta < Max, PR0 = 0"). A
// small, fast-forgetting filter (p = P/m = 1/4) makes any slip visible: the
// same stream with gaps just past Max does give false negatives.
func TestSBFNoFalseNegativeWithinMax(t *testing.T) {
	for _, maxv := range []int{1, 3, 7} {
		spec := fmt.Sprintf("sbf:mem=%dbit,max=%d,k=3,p=64", 256*bits.Len(uint(maxv)), maxv)
		s := sbfMust(t, spec, 1)
		if reps, fns := sbfGapStream(s, 1, 200000, 1, maxv); fns != 0 {
			t.Errorf("%s: %d false negatives among %d repeats with gap <= Max", spec, fns, reps)
		}
		s.Reset()
		if reps, fns := sbfGapStream(s, 1, 200000, maxv+1, maxv+4); fns == 0 {
			t.Errorf("%s: no false negative among %d repeats with gaps Max+1..Max+4: the test cannot see a slip", spec, reps)
		}
	}
}

// With P = 0 nothing is ever forgotten: SBF with Max=1 is the Bloom filter
// over the same bits (Sec. 5.2), so it answers exactly as Bloom and never
// gives a false negative.
func TestSBFWithoutDecrementIsBloom(t *testing.T) {
	s := sbfMust(t, "sbf:mem=64KiB,max=1,k=3,p=0", 1)
	b, err := NewBloom(64<<13, 3)
	if err != nil {
		t.Fatal(err)
	}
	g := mix.NewSplitMix(11)
	seen := map[uint64]bool{}
	var hist []uint64
	for i := range 300000 {
		h := g.Uint64()
		if i > 0 && h%3 == 0 { // a third of the stream repeats any earlier element
			h = hist[(h>>8)%uint64(len(hist))]
		}
		hist = append(hist, h)
		got, want := s.Observe(h), b.Observe(h)
		if got != want {
			t.Fatalf("element %d: SBF(P=0) = %v, Bloom = %v", i, got, want)
		}
		if seen[h] && !got {
			t.Fatalf("element %d: false negative at P=0", i)
		}
		seen[h] = true
	}
}

// Reset forgets everything, the decrement generator's position included.
func TestSBFReset(t *testing.T) {
	for _, spec := range []string{"sbf:mem=4KiB,max=1,k=2,p=4", "sbf:mem=4KiB,max=3,k=2,p=9"} {
		s, fresh := sbfMust(t, spec, 3), sbfMust(t, spec, 3)
		g := mix.NewSplitMix(1)
		for range 10000 {
			s.Observe(g.Uint64())
		}
		s.Reset()
		if z := s.ZeroFraction(); z != 1 {
			t.Fatalf("%s: zero fraction %v after Reset", spec, z)
		}
		g = mix.NewSplitMix(2)
		for i := range 10000 {
			h := g.Uint64() % 5000 // repeats
			if a, b := s.Observe(h), fresh.Observe(h); a != b {
				t.Fatalf("%s: element %d after Reset: %v, new filter %v", spec, i, a, b)
			}
		}
	}
}

func TestSBFObserveDoesNotAllocate(t *testing.T) {
	for _, spec := range []string{"sbf:mem=64KiB,max=1,k=2,p=4", "sbf:mem=64KiB,max=3,k=3,p=15"} {
		s := sbfMust(t, spec, 1)
		var f Filter = s
		h := uint64(1)
		if n := testing.AllocsPerRun(1000, func() { h = mix.Mix64(h); f.Observe(h) }); n != 0 {
			t.Errorf("%s: Observe allocates %v times per call", spec, n)
		}
	}
}

// sbfBenchHashes is a fixed set of uniform hashes that the benchmarks
// cycle through, so that they time the filter, not a generator. 2^16 of them
// (512 KiB) are many more than the cells a 64 KiB filter could keep.
func sbfBenchHashes() []uint64 {
	g := mix.NewSplitMix(0xbe9c)
	hs := make([]uint64, 1<<16)
	for i := range hs {
		hs[i] = g.Uint64()
	}
	return hs
}

func BenchmarkSBFObserve(b *testing.B) {
	hs := sbfBenchHashes()
	for _, spec := range []string{
		"mem=64KiB,max=1,k=2,p=4",
		"mem=1MiB,max=1,k=2,p=4",
		"mem=64MiB,max=1,k=2,p=4",
		"mem=1MiB,max=1,k=2,p=5",
		"mem=1MiB,max=3,k=2,p=15",
		"mem=1MiB,max=7,k=3,p=12",
	} {
		b.Run(spec, func(b *testing.B) {
			s := sbfMust(b, "sbf:"+spec, 1)
			s.Reset() // touch every page before timing
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.Observe(hs[i&(len(hs)-1)])
				i++
			}
		})
	}
}

// sameAsReference feeds observe and ref the same 50000 elements, 3 in 4
// of them a repeat of one of the last 64, fails t at the first answer
// that differs, and returns how many elements observe called duplicates.
func sameAsReference(t *testing.T, spec string, observe, ref func(uint64) bool) (dups int) {
	t.Helper()
	g := mix.NewSplitMix(9)
	var recent [64]uint64
	for i := range 50000 {
		h := g.Uint64()
		if j := h % 4; j != 0 {
			h = recent[(h>>8)%64]
		}
		recent[i%64] = h
		got, want := observe(h), ref(h)
		if got != want {
			t.Fatalf("%s: element %d: Observe = %v, reference = %v", spec, i, got, want)
		}
		if got {
			dups++
		}
	}
	return dups
}
