package filters

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// productFamily is a family's product defaults: the parameters as
// `flowdedup filters` lists them, and fill, which gives the values of the
// parameters a spec leaves out (some depend on those it gives).
type productFamily struct {
	params []Param // Default: the value, or the rule when it depends on the spec
	fill   func(given map[string]string) map[string]string
}

// productFamilies are the product defaults, what replay and run use. A
// family's own defaults (Param.Default, what New and so eval use) are its
// paper's benchmark settings, so that eval reproduces the papers. replay
// and run report flows, and a report values the two errors unequally: a
// false positive is a key never reported in its window, lost without a
// trace, while a false negative is a key reported once more, visible in the
// output and removable downstream. So where a family has a setting that
// trades one for the other, the product's default is the one that loses
// fewer keys, at the price of more repeats when memory is tight. Measured
// with eval (seed 1) on zipf:n=1e6,universe=1e5,s=0.8 at 64KiB (5.4 bits
// per distinct key) and 512KiB (43 bits), and uniform:n=1e6,universe=2e6 at
// 512KiB (5.3 bits, 79% distinct), the lost keys (FPR) go:
//
//	qht      buckets=1,fpbits=3 -> 4,12        3.4%, 0.49%, 3.4% -> 0.07%, 0.01%, 0.07%
//	sqf      buckets=1,r=2,rprime=1 -> 4,12,10 5.8%, 0.84%       -> 0.10%, 0.02%
//	cuckoo   buckets=1,fpbits=3 -> 4,12        9.8%, 1.3%, 10%   -> 0.17%, 0.04%, 0.16%
//	sbf      fps=0.1 -> 0.01                   0.95%, 0.05%, 1.8% -> 0.24%, 0.03%, 0.51%
//	bloom    k=2 -> 4                          3.5%, 0.07%, 3.6% -> 1.9%, 0.003%, 2.0%
//	a2       fpr=0.1 -> 0.01                   4.1%, 0.01%, 4.0% -> 0.49%, 0.001%, 0.46%
//	rsbf     fpr=0.1 -> 0.01                   1.6%, 0.008%, 2.3% -> 0.17%, 0%, 1.2%
//	bsbf     k=2 -> 4                          3.1%, 0.06%, 2.9% -> 0.80%, 0.001%, 0.75%
//
// (bsbfsd and rlbsbf alike; the repeats (FNR) grow, e.g. qht's from 8.4% to
// 22% on the tight stream, and fall on the roomy one, 1.2% to 0.17%.)
// fpbuffer's q answers "duplicate" at random on purpose, so the product
// sets it to 0; bdbf's window is sized to the memory rather than the QHT
// paper's 6000 arrivals, after which every key is forgotten. fpsbf, lru and
// exact keep their papers' settings (fpsbf repeated 88-98% of the
// duplicates on all three streams with every setting tried: c, f, fps, xi).
var productFamilies = map[string]productFamily{
	"qht":   fingerprintProduct("asymptotic FPR about buckets/(2^fpbits-1) = 0.1%"),
	"qhtd":  fingerprintProduct("asymptotic FPR about buckets/(2^fpbits-1) = 0.1%"),
	"qqhtd": fingerprintProduct("asymptotic FPR about buckets/(2^fpbits-1) = 0.1%"),
	"cuckoo": fingerprintProduct("saturated FPR about 2*buckets/(2^fpbits-1) = 0.2%; once full, every new key " +
		"walks the whole relocation chain: 3-12 us per key measured, use qht at line rate"),
	"sqf":  sqfProduct,
	"isqf": sqfProduct,
	"sbf": fixedProduct(Param{Name: "fps", Default: "0.01",
		Help: "a tenth of the paper's bound; not added when the spec gives p"}, "p"),
	"bloom": fixedProduct(Param{Name: "k", Default: "4",
		Help: "fewer false positives than k=2 from 4 bits per key up"}),
	"a2": fixedProduct(Param{Name: "fpr", Default: "0.01",
		Help: "a tenth of the paper's target"}),
	"rsbf": fixedProduct(Param{Name: "fpr", Default: "0.01",
		Help: "a tenth of the paper's threshold (k=6); not added when the spec gives k"}, "k"),
	"bsbf":   fixedProduct(Param{Name: "k", Default: "4", Help: "twice the paper's filters"}),
	"bsbfsd": fixedProduct(Param{Name: "k", Default: "4", Help: "twice the paper's filters"}),
	"rlbsbf": fixedProduct(Param{Name: "k", Default: "4", Help: "twice the paper's filters"}),
	"fpbuffer": fixedProduct(Param{Name: "q", Default: "0",
		Help: "never answer duplicate at random: a product has no reason to lose keys on purpose"}),
	"bdbf": {
		params: []Param{{Name: "window", Default: "sized to mem",
			Help: fmt.Sprintf("the largest W whose false-positive rate with W keys alive is at most %g%% (64KiB: %d, 1MiB: %d)",
				100*bdbfProductFPR, bdbfProductWindow(64<<13), bdbfProductWindow(1<<23))}},
		fill: func(given map[string]string) map[string]string {
			if _, ok := given["window"]; ok {
				return nil
			}
			mem, ok := given["mem"]
			if !ok {
				mem = "auto"
			}
			memBits, err := ParseMem(mem)
			if err != nil {
				return nil // New reports it
			}
			return map[string]string{"window": strconv.Itoa(bdbfProductWindow(memBits))}
		},
	},
}

// fixedProduct is a family whose product default is one fixed value, not
// added when the spec gives the parameter or one it excludes.
func fixedProduct(p Param, excludes ...string) productFamily {
	return productFamily{
		params: []Param{p},
		fill: func(given map[string]string) map[string]string {
			for _, name := range append([]string{p.Name}, excludes...) {
				if _, ok := given[name]; ok {
					return nil
				}
			}
			return map[string]string{p.Name: p.Default}
		},
	}
}

// fingerprintProduct is the product default of the tables of s-bit
// fingerprints in rows (buckets) of k: 4 of 12 bits, an asymptotic FPR of
// about k/S = 4/4095 (QHT paper; 2k/S for cuckoo) where the papers'
// 1 of 3 bits gives 1/7. A spec that gives only fpbits gets at most 4
// buckets of the 2^s-1 its fingerprints allow.
func fingerprintProduct(fpr string) productFamily {
	const buckets, fpbits = "buckets", "fpbits"
	return productFamily{
		params: []Param{
			{Name: buckets, Default: "4", Help: "at most 2^fpbits-1 when the spec gives fpbits"},
			{Name: fpbits, Default: "12", Help: fpr},
		},
		fill: func(given map[string]string) map[string]string {
			out := map[string]string{}
			s := 12
			if v, ok := given[fpbits]; ok {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 62 {
					return nil // New reports it
				}
				s = n
			} else {
				out[fpbits] = "12"
			}
			if _, ok := given[buckets]; !ok {
				out[buckets] = strconv.Itoa(min(4, 1<<s-1))
			}
			return out
		},
	}
}

// sqfProduct: 4 buckets of signatures of r' = 10 remainder bits and a
// 4-bit popcount of r = 12: S = 2^10 * 3 = 3072 signatures, an FPR about
// k/S = 0.13%. Given r or r', the other follows (r' = r-2, r = r'+2, as
// 12 and 10) and buckets stay below S.
var sqfProduct = productFamily{
	params: []Param{
		{Name: "buckets", Default: "4", Help: "below the S = 2^rprime*(r-rprime+1) signatures"},
		{Name: "r", Default: "12", Help: "rprime+2 when the spec gives rprime only"},
		{Name: "rprime", Default: "10", Help: "r-2 when the spec gives r only; FPR about buckets/S = 0.13%"},
	},
	fill: func(given map[string]string) map[string]string {
		out := map[string]string{}
		atoi := func(name string) (int, bool, bool) {
			v, ok := given[name]
			if !ok {
				return 0, false, true
			}
			n, err := strconv.Atoi(v)
			return n, true, err == nil && n >= 1 && n <= sqfMaxR
		}
		r, hasR, okR := atoi("r")
		rp, hasRP, okRP := atoi("rprime")
		if !okR || !okRP {
			return nil // New reports it
		}
		switch {
		case !hasR && !hasRP:
			r, rp = 12, 10
			out["r"], out["rprime"] = "12", "10"
		case !hasR:
			r = min(rp+2, sqfMaxR)
			out["r"] = strconv.Itoa(r)
		case !hasRP:
			rp = max(1, r-2)
			out["rprime"] = strconv.Itoa(rp)
		}
		if _, ok := given["buckets"]; !ok && rp < r {
			out["buckets"] = strconv.Itoa(max(1, min(4, SQFSignatures(r, rp)-1)))
		}
		return out
	},
}

// bdbfProductFPR is the false-positive rate bdbf's product window is sized
// for, with that many keys alive.
const bdbfProductFPR = 0.01

// bdbfProductWindow is the largest window W (in arrivals) whose bdbf of
// memBits bits has a false-positive rate of at most bdbfProductFPR with W
// distinct keys alive, (1-e^(-kW/m))^k for the m counters and k hashes
// newBDBF gives that W; at least 1.
func bdbfProductWindow(memBits int) int {
	fpr := func(w int) float64 {
		sh := bdbfShapeFor(memBits, w, bits.Len(uint(2*w)))
		// newBDBF's widening of the counters, which costs counters.
		for sh.d < 32 && 1<<sh.shift > sh.k && memBits >= sh.d+1 {
			sh = bdbfShapeFor(memBits, w, sh.d+1)
		}
		if sh.m <= 0 {
			return 1
		}
		return math.Pow(1-math.Exp(-float64(sh.k)*float64(w)/float64(sh.m)), float64(sh.k))
	}
	lo, hi := 1, bdbfMaxWindow // the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if fpr(mid) <= bdbfProductFPR {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// WithProductDefaults returns spec with the product defaults (see
// ProductDefaults) of the parameters it leaves out appended, in the order
// ProductDefaults lists them; the parameters it gives are kept as given. A
// spec New would reject for its name or a parameter's name is rejected
// with the same errors; values are checked by New.
func WithProductDefaults(spec string) (string, error) {
	sp, err := ParseSpec(spec)
	if err != nil {
		return "", err
	}
	fam, ok := lookup(sp.Name)
	if !ok {
		return "", fmt.Errorf("filters: %q: %w %q (known: %s)", spec, ErrUnknownFilter, sp.Name, strings.Join(Names(), ", "))
	}
	for k := range sp.Params {
		if !fam.knows(k) {
			return "", fmt.Errorf("filters: %q: %w %q for %s (it takes: %s)", spec, ErrUnknownParam, k, fam.Name, fam.paramNames())
		}
	}
	prod, ok := productFamilies[sp.Name]
	if !ok {
		return strings.TrimSpace(spec), nil
	}
	fill := prod.fill(sp.Params)
	if len(fill) == 0 {
		return strings.TrimSpace(spec), nil
	}
	var b strings.Builder
	b.WriteString(strings.TrimSpace(spec))
	sep := ","
	if len(sp.Params) == 0 {
		b.Reset()
		b.WriteString(sp.Name)
		sep = ":"
	}
	for _, p := range prod.params {
		if v, ok := fill[p.Name]; ok {
			b.WriteString(sep + p.Name + "=" + v)
			sep = ","
		}
	}
	return b.String(), nil
}

// ProductDefaults returns the parameters of family name whose product
// default differs from its paper's (Param.Default: the value, or the rule
// when it depends on the spec; Param.Help: why or how), or nil when the
// family runs with its papers' defaults.
func ProductDefaults(name string) []Param {
	return slices.Clone(productFamilies[name].params)
}
