package filters

import (
	"errors"
	"math"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

// a2BufferFPR is the Bloom estimate (1 - e^(-kn/m))^k of one buffer holding
// n elements.
func a2BufferFPR(m, k, n int) float64 {
	return math.Pow(1-math.Exp(-float64(k)*float64(n)/float64(m)), float64(k))
}

// a2PeriodArrivals is the expected number of distinct arrivals that make n
// insertions into an empty buffer: at i arrivals one is a false positive of
// active1, and not inserted, with probability p(i).
func a2PeriodArrivals(m, k, n int) int {
	arrivals, inserted := 0, 0.0
	for inserted < float64(n) {
		inserted += 1 - a2BufferFPR(m, k, arrivals)
		arrivals++
	}
	return arrivals
}

// The capacity n (insertions) is such that a buffer, when it swaps, holds
// the bits of as many distinct elements as make two such buffers reach the
// target: 1 - (1-p(A))^2 = fpr, A the arrivals of a period (summed here
// step by step, where a2Capacity integrates in closed form). And k is the
// usual optimum, about log2(1/p).
func TestA2CapacityMeetsTarget(t *testing.T) {
	for _, m := range []int{4096, 262144, 1 << 20} {
		for _, fpr := range []float64{0.001, 0.01, 0.1, 0.3, 0.5} {
			k, n := a2Capacity(m, fpr)
			a := a2PeriodArrivals(m, k, n)
			p := a2BufferFPR(m, k, a)
			pair := 1 - (1-p)*(1-p)
			pb := a2BufferFPR(m, k, a-1)
			step := pair - (1 - (1-pb)*(1-pb)) // one arrival more or less
			if math.Abs(pair-fpr) > 0.01*fpr+step {
				t.Errorf("m=%d fpr=%g: k=%d n=%d fill over %d arrivals: pair FPR %.5g, want the target within 1%% and one arrival", m, fpr, k, n, a, pair)
			}
			if opt := math.Log2(1 / (1 - math.Sqrt(1-fpr))); math.Abs(float64(k)-opt) > 1 {
				t.Errorf("m=%d fpr=%g: k=%d, far from log2(1/p) = %.2f", m, fpr, k, opt)
			}
		}
	}
	if k, n := a2Capacity(262144, 0.1); k != 4 || n != 41811 {
		t.Errorf("64KiB, fpr 0.1: k=%d n=%d, the doc says k=4 n=41811", k, n)
	}
}

// On a stream of distinct elements, active2 holds the bits of one period's
// A arrivals and active1 fills from empty, so the pair's FPR at i arrivals
// into a period is 1 - (1-p(i))(1-p(A)): it reaches the target only at the
// end of the period, and averages less. The model allows 3% for the Bloom
// estimate's error (double hashing is a little worse than independent
// hashes).
func TestA2FPRBelowTarget(t *testing.T) {
	for _, spec := range []string{"a2:mem=64KiB", "a2:mem=16KiB,fpr=0.01", "a2:mem=16KiB,fpr=0.3"} {
		a := mustNew[*A2](t, spec, 1)
		m, k, n := a.BufferBits(), a.K(), a.Capacity()
		fpr := a.fpr
		r := mix.NewWyrand(2)
		for range 2 * n { // past the first swap: both buffers in their steady cycle
			a.Observe(r.Uint64())
		}
		total := 5 * n
		fp, lastFP, last := 0, 0, 0
		for range total {
			end := a.n >= n-n/10 // the last tenth of a period
			dup := a.Observe(r.Uint64())
			if dup {
				fp++
			}
			if end {
				last++
				if dup {
					lastFP++
				}
			}
		}
		period := a2PeriodArrivals(m, k, n)
		pa := a2BufferFPR(m, k, period)
		want := 0.0
		for i := range period {
			want += 1 - (1-a2BufferFPR(m, k, i))*(1-pa)
		}
		want /= float64(period)
		got, gotLast := float64(fp)/float64(total), float64(lastFP)/float64(last)
		sd := math.Sqrt(fpr * (1 - fpr) / float64(total))
		sdLast := math.Sqrt(fpr * (1 - fpr) / float64(last))
		t.Logf("%s: k=%d n=%d: FPR %.4f (model %.4f), %.4f in the last tenth of periods, target %g", spec, k, n, got, want, gotLast, fpr)
		if got > fpr+5*sd || gotLast > 1.03*fpr+5*sdLast {
			t.Errorf("%s: FPR %.4f, %.4f at the end of periods: above the target %g", spec, got, gotLast, fpr)
		}
		if math.Abs(got-want) > 0.03*want+5*sd {
			t.Errorf("%s: FPR %.4f, the model says %.4f", spec, got, want)
		}
	}
}

// A duplicate whose previous occurrence is fewer than n Observes back is
// always found; one much older than 2n is forgotten (found again only as a
// false positive).
func TestA2RecentDuplicatesNeverMissed(t *testing.T) {
	a := mustNew[*A2](t, "a2:mem=8KiB", 3)
	n := a.Capacity()
	r := mix.NewWyrand(4)
	recent := make([]uint64, n-1) // the last n-1 Observes
	for i := range recent {
		recent[i] = r.Uint64()
		a.Observe(recent[i])
	}
	at, dups := 0, 0
	for range 20 * n {
		h := r.Uint64()
		if r.IntN(2) == 0 {
			h = recent[r.IntN(len(recent))]
			dups++
			if !a.Observe(h) {
				t.Fatalf("duplicate seen at most %d Observes ago reported unseen (capacity %d)", n-1, n)
			}
		} else {
			a.Observe(h)
		}
		recent[at] = h
		at = (at + 1) % len(recent)
	}
	old := make([]uint64, 200)
	for i := range old {
		old[i] = r.Uint64()
		a.Observe(old[i])
	}
	for range 3 * n {
		a.Observe(r.Uint64())
	}
	found := 0
	for _, h := range old {
		if a.Observe(h) {
			found++
		}
	}
	t.Logf("n=%d: %d recent duplicates all found; %d of %d elements 3n back still found", n, dups, found, len(old))
	if float64(found) > 200*a.fpr+5*math.Sqrt(200*a.fpr) {
		t.Errorf("%d of 200 elements 3n Observes old still reported duplicate: more than the FPR %g explains", found, a.fpr)
	}
}

// Swaps clear a buffer in place: no allocation across them.
func TestA2SwapAllocatesNothing(t *testing.T) {
	a := mustNew[*A2](t, "a2:mem=2KiB", 1)
	r := mix.NewWyrand(5)
	runs := 10 * a.Capacity()
	if n := testing.AllocsPerRun(runs, func() { a.Observe(r.Uint64()) }); n != 0 {
		t.Errorf("Observe allocates %.2f times per call across ~10 swaps", n)
	}
}

func TestA2Spec(t *testing.T) {
	for spec, want := range map[string]string{
		"a2:mem=64KiB":              "a2:mem=64KiB,fpr=0.1",
		"a2:fpr=0.025,mem=65537bit": "a2:mem=65537bit,fpr=0.025",
	} {
		a := mustNew[*A2](t, spec, 1)
		if a.String() != want {
			t.Errorf("New(%q).String() = %q, want %q", spec, a.String(), want)
		}
	}
	if a := mustNew[*A2](t, "a2:mem=65537bit", 1); a.SizeBits() != 65536 || a.BufferBits() != 32768 {
		t.Errorf("mem=65537bit: SizeBits %d, buffer %d; want two buffers of 32768 bits", a.SizeBits(), a.BufferBits())
	}
	for spec, want := range map[string]error{
		"a2:fpr=0":       ErrBadParam,
		"a2:fpr=1":       ErrBadParam,
		"a2:fpr=1.5":     ErrBadParam,
		"a2:fpr=tiny":    ErrBadParam,
		"a2:mem=8bit":    ErrTooSmall,
		"a2:mem=1KiB,k=": ErrSyntax,
		"a2:k=3":         ErrUnknownParam,
	} {
		if _, err := New(spec, 1); !errors.Is(err, want) {
			t.Errorf("New(%q) error %v, want %v", spec, err, want)
		}
	}
}
