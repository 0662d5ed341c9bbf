package filters

// The BSBF family against its paper: error rates on uniform streams, the
// published tables reproduced.

import (
	"fmt"
	"math"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

func newBSBFUniformStream(n int, distinct float64, seed uint64) *bsbfUniformStream {
	lo, hi := 1.0, float64(n)*1e6
	for range 200 {
		u := (lo + hi) / 2
		if u*(1-math.Exp(-float64(n)/u)) > distinct*float64(n) {
			hi = u
		} else {
			lo = u
		}
	}
	u := int(lo)
	return &bsbfUniformStream{g: mix.NewSplitMix(seed), u: u, seen: make([]uint64, (u+63)/64)}
}

func (st *bsbfUniformStream) next() (h uint64, dup bool) {
	id := mix.Reduce(st.g.Uint64(), st.u)
	dup = st.seen[id>>6]>>(id&63)&1 != 0
	st.seen[id>>6] |= 1 << (id & 63)
	return mix.Mix64(uint64(id) ^ 0x5bf0_3635_2f7c_a1e7), dup
}

// bsbfRates runs f over n elements of a uniform stream and returns FPR
// (FPs over distinct elements) and FNR (FNs over duplicates), in percent.
func bsbfRates(f Filter, n int, distinct float64, seed uint64) (fpr, fnr float64) {
	st := newBSBFUniformStream(n, distinct, seed)
	var fp, fn, d int
	for range n {
		h, dup := st.next()
		got := f.Observe(h)
		switch {
		case dup && !got:
			fn++
		case !dup:
			d++
			if got {
				fp++
			}
		}
	}
	return 100 * float64(fp) / float64(d), 100 * float64(fn) / float64(n-d)
}

// The paper's Table 4 (695M elements, 15% distinct) and Table 5 (60%
// distinct) at 64 MB and 128 MB, all scaled down 1000 times: 695,000
// elements and 64 MiB/1000 of state, so bits per element, bits per distinct
// element and s per stream length are the paper's. k=2 throughout (Sec.
// 6.3). SBF is the SBF paper's Max=1, K=2, P=4 (this paper does not give its
// setting; this one reproduces its column).
//
// The numbers are the paper's values to within 10% relative (0.1 point
// absolute for the smallest): e.g. Table 4 at 64 MB, RLBSBF 3.71/1.32 here
// against 3.7064/1.3453 published. The tolerance is the agreement measured,
// with margin: over seeds 1-8 the worst gap to a published value was 4.5%
// relative (their stream generator is not described), and every order
// below held for every seed.
//
// The robust orders at equal memory (ERRATA) are checked separately, with
// the margins they have here: FNR RLBSBF < BSBFSD < BSBF, RLBSBF's below 0.6 of
// BSBF's everywhere and below a quarter at 15% distinct (published: 6.5x
// and 10x lower there, 2x and 2.9x at 60%),
// and FPR BSBF < BSBFSD < RLBSBF (the price paid).
func TestBSBFReproducesPaperTables(t *testing.T) {
	type rates struct{ fpr, fnr float64 }
	cases := []struct {
		table          string
		distinct       float64
		memMB          int
		sbf, b, sd, rl rates // published
	}{
		{"4", 0.15, 64, rates{1.9319, 53.2681}, rates{3.2569, 8.7547}, rates{3.5475, 3.3299}, rates{3.7064, 1.3453}},
		{"4", 0.15, 128, rates{0.7414, 37.7853}, rates{1.0128, 3.888}, rates{1.0530, 1.7048}, rates{1.0821, 0.3773}},
		{"5", 0.60, 64, rates{6.7672, 70.832}, rates{16.0723, 39.9809}, rates{22.4491, 19.9394}, rates{22.7214, 20.2164}},
		{"5", 0.60, 128, rates{4.3075, 57.9713}, rates{8.0154, 28.6708}, rates{9.7951, 14.7555}, rates{10.4734, 9.8051}},
	}
	const n, scale = 695_000, 1000
	near := func(got, want float64) bool { return math.Abs(got-want) <= max(0.10*want, 0.1) }
	for _, c := range cases {
		mem := c.memMB << 23 / scale
		specs := []string{
			fmt.Sprintf("sbf:mem=%dbit,max=1,k=2,p=4", mem),
			fmt.Sprintf("bsbf:mem=%dbit,k=2", mem),
			fmt.Sprintf("bsbfsd:mem=%dbit,k=2", mem),
			fmt.Sprintf("rlbsbf:mem=%dbit,k=2", mem),
		}
		published := []rates{c.sbf, c.b, c.sd, c.rl}
		got := make([]rates, len(specs))
		for i, spec := range specs {
			f, err := New(spec, 1)
			if err != nil {
				t.Fatal(err)
			}
			got[i].fpr, got[i].fnr = bsbfRates(f, n, c.distinct, 1)
			p := published[i]
			if !near(got[i].fpr, p.fpr) || !near(got[i].fnr, p.fnr) {
				t.Errorf("Table %s, %d MB/%d, %s: FPR/FNR %.2f/%.2f%%, published %.2f/%.2f%%",
					c.table, c.memMB, scale, spec, got[i].fpr, got[i].fnr, p.fpr, p.fnr)
			}
		}
		t.Logf("Table %s %3d MB/%d: SBF %.2f/%.2f  BSBF %.2f/%.2f  BSBFSD %.2f/%.2f  RLBSBF %.2f/%.2f (FPR/FNR %%)", c.table, c.memMB, scale,
			got[0].fpr, got[0].fnr, got[1].fpr, got[1].fnr, got[2].fpr, got[2].fnr, got[3].fpr, got[3].fnr)
		sbf, b, sd, rl := got[0], got[1], got[2], got[3]
		// Published BSBF/RLBSBF FNR ratios: 6.5, 10.3, 1.98, 2.9.
		if !(rl.fnr < 0.6*b.fnr && rl.fnr < sbf.fnr/2) {
			t.Errorf("Table %s %d MB: RLBSBF FNR %.2f%% not below 0.6 of BSBF's %.2f%% and half of SBF's %.2f%%", c.table, c.memMB, rl.fnr, b.fnr, sbf.fnr)
		}
		if c.distinct == 0.15 && rl.fnr > b.fnr/4 {
			t.Errorf("Table %s %d MB: RLBSBF FNR %.2f%%, want below a quarter of BSBF's %.2f%%", c.table, c.memMB, rl.fnr, b.fnr)
		}
		// At 60% distinct and 64 MB, BSBFSD and RLBSBF tie on FNR (19.9
		// and 20.2 published, 19.6 and 19.7 here): no order there.
		if !(sd.fnr < b.fnr && (rl.fnr < sd.fnr || c.distinct == 0.60 && c.memMB == 64)) {
			t.Errorf("Table %s %d MB: FNR order RLBSBF %.2f < BSBFSD %.2f < BSBF %.2f broken", c.table, c.memMB, rl.fnr, sd.fnr, b.fnr)
		}
		if !(b.fpr < sd.fpr && sd.fpr < rl.fpr && sbf.fpr < b.fpr) {
			t.Errorf("Table %s %d MB: FPR order SBF %.2f < BSBF %.2f < BSBFSD %.2f < RLBSBF %.2f broken", c.table, c.memMB, sbf.fpr, b.fpr, sd.fpr, rl.fpr)
		}
	}
}
