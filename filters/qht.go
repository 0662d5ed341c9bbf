package filters

import (
	"fmt"
	"strconv"

	"github.com/flowdedup/flowdedup/mix"
)

// Defaults are the paper's benchmark setting (Sec. 6.1): one bucket per row
// and 3-bit fingerprints, for an asymptotic FPR of k/S = 1/7.
const (
	qhtDefaultBuckets = "1"
	qhtDefaultFPBits  = "3"
)

// qhtVariant selects how a row is updated; detection is the same for all.
type qhtVariant uint8

const (
	qhtBasic qhtVariant = iota // Algorithm 1: store only unseen elements
	qhtDup                     // Sec. 5.1, QHTD: store duplicates too
	qhtQueue                   // Sec. 5.2, QQHTD: every row a FIFO queue
)

func (v qhtVariant) String() string {
	switch v {
	case qhtBasic:
		return "qht"
	case qhtDup:
		return "qhtd"
	case qhtQueue:
		return "qqhtd"
	}
	return "qht?"
}

// QHT is the Quotient Hash Table of Géraud, Lombard-Platet and Naccache and
// its two variants, QHTD and QQHTD (spec names qht, qhtd, qqhtd).
//
// State is N = floor(M/(k*s)) rows of k buckets of s-bit fingerprints and
// nothing else: N*k*s bits packed back to back (see qhtTable, which holds
// the row code that SQF and ISQF share). A hash selects its row with a
// multiply-shift of its high bits and its fingerprint from its low s bits.
// Fingerprint 0 marks an empty bucket: a hash whose low bits are 0 is
// re-mixed until they are not (the paper's option (3), Sec. 3.2), so
// fingerprints are uniform over S = 2^s - 1 values.
//
//   - qht (Algorithm 1): a row holding the fingerprint means duplicate, and
//     nothing is stored; otherwise the fingerprint goes to the row's first
//     empty bucket, or replaces a random bucket when the row is full.
//     Asymptotic FPR k/S, FNR 1 - k/S (Theorems 4.1, 4.2).
//   - qhtd (Sec. 5.1): as qht, but a duplicate is inserted "anyway", by the
//     same rule: first empty bucket, else a random one. So a row may hold a
//     fingerprint twice; once rows are full each bucket holds an independent
//     fingerprint and the asymptotic FPR is 1 - (1 - 1/S)^k.
//   - qqhtd (Algorithm 2): every element, duplicate or not, is appended to
//     its row as to a FIFO queue of k buckets, popping the oldest; a row holds
//     the fingerprints of the last k elements that mapped to it. With k = 1
//     it is the same filter as qht.
//
// With k = 1 the three variants are one filter (the bucket always ends up
// holding the last fingerprint).
//
// Observe (promoted from qhtTable) reports whether h's fingerprint is in
// its row, and updates the row as the variant says.
type QHT struct {
	qhtTable
	memBits int // as requested, for String
}

var _ Filter = (*QHT)(nil)

func buildQHT(p *params, seed uint64) (Filter, error)   { return buildQHTVariant(p, seed, qhtBasic) }
func buildQHTD(p *params, seed uint64) (Filter, error)  { return buildQHTVariant(p, seed, qhtDup) }
func buildQQHTD(p *params, seed uint64) (Filter, error) { return buildQHTVariant(p, seed, qhtQueue) }

const (
	qhtMaxBuckets = 64
	qhtMaxFPBits  = 32
)

func buildQHTVariant(p *params, seed uint64, v qhtVariant) (Filter, error) {
	memBits, err := p.mem()
	if err != nil {
		return nil, err
	}
	k, err := p.int("buckets", qhtDefault(qhtDefaultBuckets), 1, qhtMaxBuckets)
	if err != nil {
		return nil, err
	}
	s, err := p.int("fpbits", qhtDefault(qhtDefaultFPBits), 1, qhtMaxFPBits)
	if err != nil {
		return nil, err
	}
	// Setup requires 0 < k <= S: a row of distinct fingerprints cannot use
	// more than S buckets, and k = S already answers DUPLICATE to everything
	// once full. S = 2^s - 1 here, the paper's count without a spare empty
	// symbol (Sec. 4.4.1, footnote 16).
	if err := p.fingerprintSlots(k, s); err != nil {
		return nil, err
	}
	if memBits < k*s {
		return nil, p.tooSmall(memBits, k*s, fmt.Sprintf("one row of %d buckets of %d bits", k, s))
	}
	return newQHT(v, memBits, k, s, seed), nil
}

func qhtDefault(s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		panic("filters: bad QHT default " + s)
	}
	return v
}

// newQHT builds a filter from checked parameters.
func newQHT(v qhtVariant, memBits, k, s int, seed uint64) *QHT {
	return &QHT{qhtTable: newQHTTable(v, memBits/(k*s), k, s, seed), memBits: memBits}
}

// nonZeroFingerprint derives the s-bit fingerprint, in [1, 2^s-1], from the low
// bits of h; the row (QHT) or bucket (cuckoo) comes from its high bits. It branches on a zero
// fingerprint, which mispredicts on up to 1/S of the hashes: selecting a
// precomputed remix with a conditional move measured no faster.
func nonZeroFingerprint(h, mask uint64) uint64 {
	if fp := h & mask; fp != 0 {
		return fp
	}
	return refingerprint(h, mask)
}

// qhtRemix is added before each remix so that 0 is not a fixed point.
const qhtRemix = mix.Golden

// refingerprint is option (3) of Sec. 3.2 for a zero fingerprint: derive
// new ones deterministically from h until one is non-zero. Each draw is an
// independent-looking remix, so the result is uniform over the non-zero
// values. The bound only guards termination: 64 zero draws in a row have
// probability 2^-64 even for s = 1. Out of line: 1/S of the hashes come here.
//
//go:noinline
func refingerprint(h, mask uint64) uint64 {
	x := h
	for range 64 {
		x = mix.Mix64(x + qhtRemix)
		if fp := x & mask; fp != 0 {
			return fp
		}
	}
	return 1
}

// SizeBits is N*k*s, the paper's M rounded down to whole rows.
func (q *QHT) SizeBits() int { return q.rows * int(q.rowBits) }

// Reset empties every bucket and rewinds the random source, so the filter
// behaves as New built it.
func (q *QHT) Reset() { q.reset() }

func (q *QHT) String() string {
	return fmt.Sprintf("%s:mem=%s,buckets=%d,fpbits=%d", q.variant, FormatMem(q.memBits), q.k, q.s)
}

// Rows is N, the number of rows.
func (q *QHT) Rows() int { return q.rows }

// Buckets is k, the number of buckets per row.
func (q *QHT) Buckets() int { return int(q.k) }

// FPBits is s, the number of bits of a fingerprint.
func (q *QHT) FPBits() int { return int(q.s) }

// FillRatio is the fraction of buckets that are not empty. It scans the
// whole state: it is for metrics and tests, not for the packet path.
func (q *QHT) FillRatio() float64 { return q.fillRatio() }
