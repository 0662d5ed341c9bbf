package filters

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/flowdedup/flowdedup/mix"
)

// Defaults. sqf: the QHT paper's benchmark SQF (Sec. 6.1): 1 bucket, r=2,
// r'=1. The SQF authors recommend r=2, r'=1 with k=4, and the ISQF paper
// (Sec. 6.1) takes that over, but it is degenerate: those r and r' allow
// S = 4 signatures, four buckets hold them all, and a full filter answers
// DUPLICATE to everything (FPR = 1; QHT paper Sec. 3, footnote 8). So isqf
// keeps r=2, r'=1 and the QHT benchmark's k=1, and takes m=3 from the
// ISQF paper's worked example (Sec. 4.1); its experiments never say which
// m their Table 2 used.
const (
	sqfDefaultBuckets = "1"
	sqfDefaultR       = "2"
	sqfDefaultRPrime  = "1"
	isqfDefaultTables = "3"
)

const (
	sqfMaxR       = 32
	isqfMaxTables = 16
	isqfTableSalt = mix.Golden // table i > 0 hashes the quotient plus i times this
)

// Parameter help shared by sqf and isqf.
const (
	sqfBucketsHelp = "buckets per row k, 1..64 and at most S = 2^r'*(r-r'+1) signatures; k = S answers DUPLICATE to everything once full (the SQF authors' r=2, r'=1, k=4)"
	sqfRHelp       = "remainder bits r, 2..32: the low r bits of the hash; the signature ends with their popcount, ceil(log2(r+1)) bits"
	sqfRPrimeHelp  = "reduced-remainder bits r', 1..r-1: the signature starts with the remainder's r' high bits"
)

var sqfFamily = &Family{
	Name: "sqf", Paper: "Dutta, Narang & Bera, VLDB 2013 (Streaming Quotient Filter), as the QHT and ISQF papers restate it",
	About: "rows of k signatures (r' remainder bits, then the remainder's popcount); an unseen element replaces a random bucket when its row is full",
	Params: []Param{memParam,
		{Name: "buckets", Default: sqfDefaultBuckets, Help: sqfBucketsHelp},
		{Name: "r", Default: sqfDefaultR, Help: sqfRHelp},
		{Name: "rprime", Default: sqfDefaultRPrime, Help: sqfRPrimeHelp},
	},
	build: buildSQF,
}

var isqfFamily = &Family{
	Name: "isqf", Paper: "Che, Yang & Wang, IAJIT 2020 (Improved Streaming Quotient Filter)",
	About: "m SQF tables with independent row hashes and a shared signature; duplicate if any table holds it, distinct elements stored in all",
	Params: []Param{memParam,
		{Name: "buckets", Default: sqfDefaultBuckets, Help: sqfBucketsHelp},
		{Name: "r", Default: sqfDefaultR, Help: sqfRHelp},
		{Name: "rprime", Default: sqfDefaultRPrime, Help: sqfRPrimeHelp},
		{Name: "tables", Default: isqfDefaultTables, Help: "SQF tables m, 1..16, each with 1/m of mem; duplicate if any table's row holds the signature, a distinct element goes to all m"},
	},
	build: buildISQF,
}

// sqfSig derives SQF signatures from a hash (QHT paper Sec. 2.4, ISQF paper
// Sec. 3 and 4.1): the remainder is the hash's r low bits (the quotient,
// the rest, picks the row); the reduced remainder is r' bits chosen from
// the remainder, here its r' high bits as in both papers' worked examples
// (QHT Sec. 4.1.1, ISQF Sec. 4.1); the signature is the reduced remainder
// followed by the remainder's popcount, in ceil(log2(r+1)) bits.
//
// Empty buckets hold 0, as in a QHT, but signature 0 is a real one (a zero
// remainder). No signature has a non-zero reduced remainder and popcount 0,
// so the QHT paper's suggestion for SQF (Sec. 4.4.1, footnote 16) applies:
// give the empty mark one of those impossible values. A bucket stores
// code = signature ^ empty, with empty = the signature 1<<popBits (reduced
// remainder 1, popcount 0): the codes are a relabelling of the signatures,
// none of them 0, so an empty bucket matches no element, no signature is
// re-derived, and their distribution is untouched.
type sqfSig struct {
	remMask uint64 // the r low bits: the remainder; 0 selects QHT fingerprints in a qhtTable
	drop    uint   // r - r': shifting these out of the remainder leaves the reduced remainder
	popBits uint   // ceil(log2(r+1)): bits of the popcount
	empty   uint64 // 1<<popBits, an impossible signature: its code is 0
}

func newSQFSig(r, rprime int) sqfSig {
	pop := uint(bits.Len(uint(r))) // ceil(log2(r+1))
	return sqfSig{
		remMask: 1<<uint(r) - 1,
		drop:    uint(r - rprime),
		popBits: pop,
		empty:   1 << pop,
	}
}

// sqfSigBits is sigma = r' + ceil(log2(r+1)), the bits of a signature.
func sqfSigBits(r, rprime int) int { return rprime + bits.Len(uint(r)) }

// SQFSignatures is S = 2^r' * (r - r' + 1), the number of signatures an
// sqf or isqf table with parameters r and rprime holds (QHT paper Sec.
// 4.4.1: given the reduced remainder, the popcount takes r - r' + 1
// values): its buckets cannot exceed it. Computed in int64 and clamped to
// the int range, so that it holds on 32-bit platforms too.
func SQFSignatures(r, rprime int) int {
	if rprime >= 62 {
		return math.MaxInt
	}
	return int(min(int64(1)<<rprime*int64(r-rprime+1), math.MaxInt))
}

// signature is h's SQF signature: reduced remainder, then popcount.
func (g sqfSig) signature(h uint64) uint64 {
	rem := h & g.remMask
	return rem>>g.drop<<g.popBits | uint64(bits.OnesCount64(rem))
}

// code is what a bucket stores for h: its signature relabelled so that it
// is never 0, the empty mark.
func (g sqfSig) code(h uint64) uint64 { return g.signature(h) ^ g.empty }

// sqfParams are the checked parameters common to sqf and isqf.
type sqfParams struct {
	memBits, k, r, rprime, sigBits int
}

func parseSQFParams(p *params) (sqfParams, error) {
	var c sqfParams
	var err error
	if c.memBits, err = p.mem(); err != nil {
		return c, err
	}
	if c.k, err = p.int("buckets", qhtDefault(sqfDefaultBuckets), 1, qhtMaxBuckets); err != nil {
		return c, err
	}
	if c.r, err = p.int("r", qhtDefault(sqfDefaultR), 2, sqfMaxR); err != nil {
		return c, err
	}
	if c.rprime, err = p.int("rprime", qhtDefault(sqfDefaultRPrime), 1, sqfMaxR-1); err != nil {
		return c, err
	}
	if c.rprime >= c.r {
		key := "rprime"
		if !p.has(key) {
			key = "r"
		}
		return c, p.errorf(key, "r'=%d must be less than r=%d: the reduced remainder is r' of the r remainder bits", c.rprime, c.r)
	}
	// As for a QHT: a row of distinct signatures cannot use more than S
	// buckets. k = S is allowed (it is the SQF authors' setting) and answers
	// DUPLICATE to everything once full.
	if maxK := SQFSignatures(c.r, c.rprime); c.k > maxK {
		key := "buckets"
		if !p.has(key) {
			key = "r"
		}
		return c, p.errorf(key, "buckets=%d exceed the %d signatures of r=%d, r'=%d (need k <= 2^r'*(r-r'+1))", c.k, maxK, c.r, c.rprime)
	}
	c.sigBits = sqfSigBits(c.r, c.rprime)
	return c, nil
}

// SQF is the Streaming Quotient Filter of Dutta, Narang and Bera as the QHT
// paper (Sec. 2.4) and the ISQF paper (Sec. 3) restate it: N = floor(M/(k*σ))
// rows of k buckets of σ = r' + ceil(log2(r+1)) bits. A hash's r low bits
// are its remainder; the rest, the quotient, picks the row by a
// multiply-shift. The signature is r' bits of the remainder followed by the
// remainder's popcount (see sqfSig for the bits chosen and for how empty
// buckets are told apart). A row holding the signature means duplicate, and
// nothing is stored; otherwise the signature goes to an empty bucket of the
// row, or replaces a random one when the row is full. That is QHT's
// Algorithm 1 with a different fingerprint, and SQF shares QHT's row code
// (qhtTable).
//
// Signatures are not uniform: the popcount repeats information of the
// reduced remainder, so only S = 2^r'*(r-r'+1) of the 2^σ values occur, and
// with unequal probabilities (QHT paper Sec. 4.1.1). On a uniform stream of
// distinct elements a full row is a Markov chain over k-sets of signatures
// whose stationary law weighs a set by the product of its signatures'
// probabilities, so the asymptotic FPR is sum_x p_x^2 e_{k-1}(p without x) /
// e_k(p) (e_j: elementary symmetric polynomials); k/S when signatures are
// uniform, and for k = 1 the collision probability
// 2^-r' * C(2d, d)/4^d ≈ 2^-r'/sqrt(π d), d = r - r'. The papers'
// k/(2^r' sqrt(π r)) treats the popcount as independent of the reduced
// remainder and is too low (by 19% at r=8, r'=3).
//
// Warning: the SQF authors' recommended setting r=2, r'=1, k=4 (which the
// ISQF paper uses) has S = 4 = k: once full, every row holds every
// signature, and the filter answers DUPLICATE to every element (FPR = 1,
// FNR = 0). The default is the QHT paper's benchmark setting, k=1.
//
// Observe (promoted from qhtTable) reports whether h's signature is in its
// row, and inserts it if not.
type SQF struct {
	qhtTable
	r, rprime int
	memBits   int // as requested, for String
}

var _ Filter = (*SQF)(nil)

func buildSQF(p *params, seed uint64) (Filter, error) {
	c, err := parseSQFParams(p)
	if err != nil {
		return nil, err
	}
	if row := c.k * c.sigBits; c.memBits < row {
		return nil, p.tooSmall(c.memBits, row, fmt.Sprintf("one row of %d buckets of %d-bit signatures", c.k, c.sigBits))
	}
	return newSQF(c, seed), nil
}

func newSQF(c sqfParams, seed uint64) *SQF {
	f := &SQF{
		qhtTable: newQHTTable(qhtBasic, c.memBits/(c.k*c.sigBits), c.k, c.sigBits, seed),
		r:        c.r,
		rprime:   c.rprime,
		memBits:  c.memBits,
	}
	f.sig = newSQFSig(c.r, c.rprime)
	return f
}

// SizeBits is N*k*σ, the paper's M = 2^q*k*σ with N rows instead of 2^q.
func (f *SQF) SizeBits() int { return f.rows * int(f.rowBits) }

// Reset empties every bucket and rewinds the random source, so the filter
// behaves as New built it.
func (f *SQF) Reset() { f.reset() }

func (f *SQF) String() string {
	return fmt.Sprintf("sqf:mem=%s,buckets=%d,r=%d,rprime=%d", FormatMem(f.memBits), f.k, f.r, f.rprime)
}

// Rows is N, the number of rows.
func (f *SQF) Rows() int { return f.rows }

// Buckets is k, the number of buckets per row.
func (f *SQF) Buckets() int { return int(f.k) }

// SignatureBits is σ = r' + ceil(log2(r+1)), the bits of a bucket.
func (f *SQF) SignatureBits() int { return int(f.s) }

// FillRatio is the fraction of buckets that are not empty. It scans the
// whole state: it is for metrics and tests, not for the packet path.
func (f *SQF) FillRatio() float64 { return f.fillRatio() }

// ISQF is the Improved Streaming Quotient Filter of Che, Yang and Wang:
// m SQF tables of N = floor(M/(m*k*σ)) rows each, so mem is split equally,
// with pairwise-independent row hashes of the quotient h_i(f^q) (Sec. 4.1)
// and one signature, SQF's, shared by all tables. Table 0 picks its row as
// SQF does (so isqf:tables=1 is sqf), table i > 0 from a remix of the
// quotient, mix.Mix64(quotient + i*C).
//
// Algorithm 1: an element is a duplicate if the row of any table holds its
// signature, and then nothing is stored; otherwise it is stored in all m
// tables, each in an empty bucket of its row or else a random one. (The
// prose of Sec. 4.1 stores into table i before looking at table i+1, which
// would also store a duplicate found late in the tables before; the
// algorithm checks all tables first, and so do we.)
//
// What m buys: the paper's Table 1 adds tables of a fixed size (memory
// grows with m), and then the FNR falls as m grows, at the cost of an FPR
// that grows, towards 1 - (1 - 1/S)^m for k = 1 and uniform signatures
// (0.58 for the defaults). At equal total memory each table has 1/m of the
// rows and forgets m times faster: more tables catch duplicates after short
// gaps better and after long ones worse (see the tests). The paper's error
// rates come from streams that do not fill the filter; their memory formula
// (Eq. 2) counts log r bits for a popcount that needs ceil(log2(r+1)).
//
// State is the m tables' rows back to back in one qhtTable: table i is rows
// [i*N, (i+1)*N). Observe branches on its outcomes and visits up to 2m
// rows: ISQF is for comparison, not the packet path.
type ISQF struct {
	t         qhtTable // tables*rows rows, and the shared signature in t.sig
	tables    int
	rows      int // per table
	r, rprime int
	memBits   int // as requested, for String
}

var _ Filter = (*ISQF)(nil)

func buildISQF(p *params, seed uint64) (Filter, error) {
	c, err := parseSQFParams(p)
	if err != nil {
		return nil, err
	}
	m, err := p.int("tables", qhtDefault(isqfDefaultTables), 1, isqfMaxTables)
	if err != nil {
		return nil, err
	}
	if rows := m * c.k * c.sigBits; c.memBits < rows {
		return nil, p.tooSmall(c.memBits, rows, fmt.Sprintf("%d tables of one row of %d buckets of %d-bit signatures", m, c.k, c.sigBits))
	}
	return newISQF(c, m, seed), nil
}

func newISQF(c sqfParams, m int, seed uint64) *ISQF {
	rows := c.memBits / (m * c.k * c.sigBits)
	f := &ISQF{
		t:       newQHTTable(qhtBasic, m*rows, c.k, c.sigBits, seed),
		tables:  m,
		rows:    rows,
		r:       c.r,
		rprime:  c.rprime,
		memBits: c.memBits,
	}
	f.t.sig = newSQFSig(c.r, c.rprime)
	return f
}

// row is h's row in table i, as an index into the whole state.
func (f *ISQF) row(h uint64, i int) int {
	q := h &^ f.t.sig.remMask // the quotient (shifted left by r)
	if i == 0 {
		return mix.Reduce(q, f.rows)
	}
	return i*f.rows + mix.Reduce(mix.Mix64(q+uint64(i)*isqfTableSalt), f.rows)
}

// Observe reports whether any table's row holds h's signature; if none
// does, it stores the signature in all of them.
func (f *ISQF) Observe(h uint64) bool {
	sig := f.t.sig.code(h)
	var at [isqfMaxTables]int
	for i := range f.tables {
		at[i] = f.row(h, i)
		if f.t.holds(at[i], sig) {
			return true
		}
	}
	for _, r := range at[:f.tables] {
		f.t.insert(r, sig)
	}
	return false
}

// SizeBits is m*N*k*σ: m times Eq. 2's M = 2^q*k*σ, with N rows per table
// instead of 2^q and σ = r' + ceil(log2(r+1)).
func (f *ISQF) SizeBits() int { return f.tables * f.rows * int(f.t.rowBits) }

// Reset empties every bucket and rewinds the random source, so the filter
// behaves as New built it.
func (f *ISQF) Reset() { f.t.reset() }

func (f *ISQF) String() string {
	return fmt.Sprintf("isqf:mem=%s,buckets=%d,r=%d,rprime=%d,tables=%d", FormatMem(f.memBits), f.t.k, f.r, f.rprime, f.tables)
}

// Tables is m, the number of SQF tables.
func (f *ISQF) Tables() int { return f.tables }

// Rows is N, the number of rows of each table.
func (f *ISQF) Rows() int { return f.rows }

// Buckets is k, the number of buckets per row.
func (f *ISQF) Buckets() int { return int(f.t.k) }

// SignatureBits is σ = r' + ceil(log2(r+1)), the bits of a bucket.
func (f *ISQF) SignatureBits() int { return int(f.t.s) }

// FillRatio is the fraction of buckets, over all tables, that are not
// empty. It scans the whole state: it is for metrics and tests.
func (f *ISQF) FillRatio() float64 { return f.t.fillRatio() }
