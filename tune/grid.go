package tune

import (
	"slices"
	"strconv"
	"strings"

	"github.com/flowdedup/flowdedup/filters"
)

// point is one grid point: a family and its parameters but mem.
type point struct {
	family string
	params []param
}

type param struct{ key, value string }

// spec renders the point at memBits of state, shrunk by 2^shift for the
// thinned coarse phase: mem and bdbf's window (counted in arrivals, which
// thinning divides) scale down; every other parameter is per cell or per
// row and stays.
func (p point) spec(memBits int, shift uint) string {
	var b strings.Builder
	b.WriteString(p.family)
	b.WriteString(":mem=")
	b.WriteString(filters.FormatMem(memBits >> shift))
	for _, kv := range p.params {
		v := kv.value
		if p.family == "bdbf" && kv.key == "window" && shift > 0 {
			n, _ := strconv.Atoi(v)
			v = strconv.Itoa(max(1, n>>shift))
		}
		b.WriteByte(',')
		b.WriteString(kv.key)
		b.WriteByte('=')
		b.WriteString(v)
	}
	return b.String()
}

// variant is the point's family, or its blocked layout
// (filters.Spec.Variant): what tune keeps the best of, and plots, as one
// family.
func (p point) variant() string {
	if slices.Contains(p.params, param{"blocked", "1"}) {
		return p.family + ":blocked=1"
	}
	return p.family
}

// DefaultSpec is replay's default filter (`qht:mem=auto,buckets=4,fpbits=12`)
// at a given memory: the reference every pick is compared with.
func DefaultSpec(mem string) string { return "qht:mem=" + mem + ",buckets=4,fpbits=12" }

var defaultPoint = point{family: "qht", params: []param{{"buckets", "4"}, {"fpbits", "12"}}}

func ints(vs ...int) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.Itoa(v)
	}
	return out
}

func floats(vs ...float64) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return out
}

// withBound adds the objective's bound to a list of rate parameters, so
// that a family whose parameter is itself an FP target (sbf fps, a2 fpr,
// fpbuffer q) is tried exactly at the bound the user asked for.
func withBound(vals []string, obj Objective) []string {
	if obj.Goal != MinFNR || obj.Bound <= 0 || obj.Bound >= 1 {
		return vals
	}
	b := strconv.FormatFloat(obj.Bound, 'g', -1, 64)
	if slices.Contains(vals, b) {
		return vals
	}
	return append(vals, b)
}

// cross is the cartesian product of the named value lists, in order.
func cross(family string, keys []string, vals ...[]string) []point {
	out := []point{{family: family}}
	for i, k := range keys {
		var next []point
		for _, p := range out {
			for _, v := range vals[i] {
				q := point{family: family, params: append(slices.Clip(p.params), param{k, v})}
				next = append(next, q)
			}
		}
		out = next
	}
	return out
}

// Grid returns the specs tune tries at memBits of state per shard, in a
// fixed order, for objective obj. Every family but exact is there, and the
// blocked layouts of bloom and sbf, each over the parameters that move its
// error rates (see the package
// documentation for the values and why). Some points are invalid at some
// sizes (a row wider than mem); Run skips those.
func Grid(memBits int, obj Objective) []string {
	pts := gridPoints(obj)
	out := make([]string, len(pts))
	for i, p := range pts {
		out[i] = p.spec(memBits, 0)
	}
	return out
}

func gridPoints(obj Objective) []point {
	var pts []point
	// QHT family: buckets k x fingerprint bits s, k <= 2^s-1. The
	// saturated FPR is k/S (QHTD: 1-(1-1/S)^k) and the FNR falls with k:
	// the optimum moves with memory per distinct key, so the grid spans
	// from the papers' benchmark (1 bucket of 3 bits) to wide rows of
	// long fingerprints.
	fp := ints(2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 32)
	for _, fam := range []string{"qht", "qhtd", "qqhtd"} {
		for _, p := range cross(fam, []string{"buckets", "fpbits"}, ints(1, 2, 3, 4, 6, 8, 12, 16), fp) {
			k, _ := strconv.Atoi(p.params[0].value)
			s, _ := strconv.Atoi(p.params[1].value)
			if s < 31 && k > 1<<s-1 {
				continue
			}
			pts = append(pts, p)
		}
	}
	// SQF: signatures of r' remainder bits and a popcount of the r-bit
	// remainder; k <= 2^r'(r-r'+1). r' from 1 to r-1.
	for _, k := range []int{1, 2, 4, 8} {
		for _, rr := range sqfPairs(2, 3, 4, 6, 8, 12, 16, 24, 32) {
			if k > filters.SQFSignatures(rr[0], rr[1]) {
				continue
			}
			pts = append(pts, point{family: "sqf", params: []param{{"buckets", strconv.Itoa(k)}, {"r", strconv.Itoa(rr[0])}, {"rprime", strconv.Itoa(rr[1])}}})
		}
	}
	// ISQF: the same signatures in m tables; fewer pairs, as more tables
	// only raise the FPR (docs/reproduction.md).
	for _, m := range []int{2, 3} {
		for _, k := range []int{1, 2, 4} {
			for _, rr := range sqfPairs(2, 4, 8, 16, 32) {
				if k > filters.SQFSignatures(rr[0], rr[1]) {
					continue
				}
				pts = append(pts, point{family: "isqf", params: []param{{"buckets", strconv.Itoa(k)}, {"r", strconv.Itoa(rr[0])}, {"rprime", strconv.Itoa(rr[1])}, {"tables", strconv.Itoa(m)}}})
			}
		}
	}
	// SBF: cell max, hash count, and P through the FP bound it meets
	// (Eq. 17), from 1% to 30% (and the objective's bound).
	pts = append(pts, cross("sbf", []string{"max", "k", "fps"}, ints(1, 3, 7), ints(1, 2, 3, 4),
		withBound(floats(0.01, 0.03, 0.1, 0.3), obj))...)
	// Blocked SBF and Bloom: all of a key's cells in one cache line, one
	// miss per key where the others take K+1 and k (the 64 MiB figures of
	// docs/filters.md), for somewhat higher error rates at equal memory.
	// The same values as their families, so that each pick is compared
	// with its unblocked twin, but for those whose P would exceed the
	// cells of a block (Max=7, K=1 at fps=0.03) at any memory.
	for _, p := range cross("sbf", []string{"max", "k", "fps", "blocked"}, ints(1, 3, 7), ints(1, 2, 3, 4),
		withBound(floats(0.01, 0.03, 0.1, 0.3), obj), ints(1)) {
		if _, err := filters.New(p.spec(512, 0), 1); err == nil { // one block
			pts = append(pts, p)
		}
	}
	// FP-SBF: counter bits c, fingerprint bits f, sub-tables k, the
	// counters' FP bound. Few points: it decrements L cells per insertion
	// (tens of ns each), and its FNR is the highest of all at equal
	// memory (docs/reproduction.md), so it is rarely the pick.
	pts = append(pts, cross("fpsbf", []string{"c", "f", "k", "fps"}, ints(2, 3, 4), ints(6, 12), ints(2, 3),
		withBound(floats(0.1), obj))...)
	// RSBF: k filters, and p* (0: pure reservoir sampling).
	pts = append(pts, cross("rsbf", []string{"k", "pstar"}, ints(1, 2, 3, 4, 6), floats(0, 0.03, 0.1))...)
	for _, fam := range []string{"bsbf", "bsbfsd", "rlbsbf", "bloom"} {
		pts = append(pts, cross(fam, []string{"k"}, ints(1, 2, 3, 4, 6, 8))...)
	}
	pts = append(pts, cross("bloom", []string{"k", "blocked"}, ints(1, 2, 3, 4, 6, 8), ints(1))...)
	pts = append(pts, cross("a2", []string{"fpr"}, withBound(floats(0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.4), obj))...)
	// b_DBF: the sliding window in arrivals per shard, 64 to 16M by
	// powers of two: it must match the gaps of the traffic.
	var win []int
	for w := 1 << 6; w <= 1<<24; w <<= 1 {
		win = append(win, w)
	}
	pts = append(pts, cross("bdbf", []string{"window"}, ints(win...))...)
	pts = append(pts, point{family: "lru"})
	pts = append(pts, cross("fpbuffer", []string{"q"}, withBound(floats(0.001, 0.01, 0.05, 0.1, 0.2), obj))...)
	// Cuckoo: bucket size b x fingerprint bits f (saturated FPR about 2b/S).
	pts = append(pts, cross("cuckoo", []string{"buckets", "fpbits"}, ints(1, 2, 4, 8), ints(4, 6, 8, 10, 12, 16, 20, 24, 32))...)
	return pts
}

// sqfPairs lists (r, r') for each r: r' = 1, r/2, r-2 and r-1, deduplicated.
func sqfPairs(rs ...int) [][2]int {
	var out [][2]int
	for _, r := range rs {
		seen := map[int]bool{}
		for _, rp := range []int{1, r / 2, r - 2, r - 1} {
			if rp < 1 || rp > r-1 || seen[rp] {
				continue
			}
			seen[rp] = true
			out = append(out, [2]int{r, rp})
		}
	}
	return out
}
