package filters

import (
	"fmt"
	"math/bits"
	"strconv"
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
// nothing else: N*k*s bits packed back to back in []uint64, so a row need not
// start on a word boundary. Bucket j of row i is the s bits at (i*k+j)*s.
// A hash selects its row with a multiply-shift of its high bits and its
// fingerprint from its low s bits. Fingerprint 0 marks an empty bucket: a
// hash whose low bits are 0 is re-mixed until they are not (the paper's
// option (3), Sec. 3.2), so fingerprints are uniform over S = 2^s - 1 values.
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
// Layout of a row: buckets are never emptied, so a row's fingerprints sit
// in arrival order at its top (highest bits) and its empty buckets at its
// bottom, and a row is full when its bottom bucket is in use. Inserting
// into "the first empty bucket" (Algorithm 1) is then the same shift that
// pushes onto a qqhtd queue: the row moves down one bucket, dropping an
// empty bottom bucket, and fp enters at the top. This places fingerprints
// differently from a literal Algorithm 1 only while a row is not full, and
// which bucket holds which fingerprint matters to no answer; once full the
// rows agree bucket for bucket, so the random replacements do too.
//
// When k*s <= 64 a row is one unaligned 64-bit read (two word loads and a
// funnel shift), matched against all k buckets at once with SWAR arithmetic,
// and written back by xoring the change into the two words; the insertion
// is one shift of the row. With k = 1 the three variants are one filter
// (the bucket always ends up holding the last fingerprint). Wider rows are
// processed in chunks of floor(64/s) buckets.
type QHT struct {
	cells   packed // N*k cells of s bits; cells.words is the whole state
	rows    int
	k, s    uint
	rowBits uint
	fpMask  uint64
	variant qhtVariant
	keepDup uint64 // all ones for qht, which stores nothing for a duplicate; else 0
	shift   bool   // always insert by a shift: qqhtd, or any variant with k = 1
	wide    bool   // k*s > 64: row is several lanes

	row qhtLane // the whole row, when !wide

	// Wide rows: chunks of chunk.bits bits, the last one last.bits wide.
	chunk, last qhtLane
	chunks      uint

	rng     rng
	seed    uint64
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
	if maxK := 1<<s - 1; k > maxK {
		key := "buckets"
		if !p.has(key) {
			key = "fpbits"
		}
		return nil, p.errorf(key, "buckets=%d exceed the %d usable fingerprints of fpbits=%d (need k <= 2^s-1)", k, maxK, s)
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
	rowBits := k * s
	rows := memBits / rowBits
	q := &QHT{
		cells:   newPacked(rows*k, uint(s)),
		rows:    rows,
		k:       uint(k),
		s:       uint(s),
		rowBits: uint(rowBits),
		fpMask:  1<<uint(s) - 1,
		variant: v,
		wide:    rowBits > 64,
		seed:    seed,
		memBits: memBits,
		rng:     newRNG(seed),
	}
	if v == qhtBasic {
		q.keepDup = ^uint64(0)
	}
	// With one bucket every variant ends up with fp in it, as the shift
	// puts it there (Sec. 5.2: QQHTD with k = 1 is QHT).
	q.shift = v == qhtQueue || k == 1
	if !q.wide {
		q.row = newQHTLane(q.k, q.s)
	} else {
		per := 64 / q.s
		q.chunks = (q.k + per - 1) / per
		q.chunk = newQHTLane(per, q.s)
		q.last = newQHTLane(q.k-(q.chunks-1)*per, q.s)
	}
	return q
}

// qhtFingerprint derives the s-bit fingerprint, in [1, 2^s-1], from the low
// bits of h; the row comes from its high bits. It branches on a zero
// fingerprint, which mispredicts on up to 1/S of the hashes: selecting a
// precomputed remix with a conditional move measured no faster.
func qhtFingerprint(h, mask uint64) uint64 {
	if fp := h & mask; fp != 0 {
		return fp
	}
	return qhtRefingerprint(h, mask)
}

// qhtRemix is added before each remix so that 0 is not a fixed point.
const qhtRemix = 0x9e3779b97f4a7c15

// qhtRefingerprint is option (3) of Sec. 3.2 for a zero fingerprint: derive
// new ones deterministically from h until one is non-zero. Each draw is an
// independent-looking remix, so the result is uniform over the non-zero
// values. The bound only guards termination: 64 zero draws in a row have
// probability 2^-64 even for s = 1. Out of line: 1/S of the hashes come here.
//
//go:noinline
func qhtRefingerprint(h, mask uint64) uint64 {
	x := h
	for range 64 {
		x = mix64(x + qhtRemix)
		if fp := x & mask; fp != 0 {
			return fp
		}
	}
	return 1
}

// Observe reports whether h's fingerprint is in its row, and updates the row
// as the variant says.
//
// For rows of one word there is no branch on the row's content: whether h
// is a duplicate, whether its row is full. Those outcomes can be coin flips
// on a real stream, and a mispredicted branch that waits on the row's load
// throws away the work of the packets behind it. So both outcomes are
// computed and selected with conditional moves: with k > 1, qht and qhtd
// draw the random bucket on every call and use it only when the row is
// full, and a duplicate in qht writes back no change. Shift counts are
// masked with 63 where they are known to be smaller, which spares the
// compiler's fix-up for counts of 64 and more.
func (q *QHT) Observe(h uint64) bool {
	fp := qhtFingerprint(h, q.fpMask)
	r := reduce(h, q.rows)
	if q.wide {
		return q.observeWide(r, fp)
	}
	bit := uint64(r) * uint64(q.rowBits)
	words := q.cells.words
	row := qhtLoad(words, bit, q.row.mask)
	match := q.row.zeros(row ^ fp*q.row.lsbs) // non-zero: duplicate
	s := q.s & 63
	// Append fp at the top of the row, shifting the others down a bucket:
	// qqhtd's queue push, and qht's and qhtd's insertion while the row has
	// an empty bucket, which is then the bottom one (see QHT).
	next := row>>s | fp<<((q.rowBits-s)&63)
	if !q.shift {
		// A full row (bottom bucket in use) replaces a random bucket.
		at := (q.randomBucket() * s) & 63
		replaced := row&^(q.fpMask<<at) | fp<<at // computed first: a move, not a branch
		if row&q.fpMask != 0 {
			next = replaced
		}
		if match&q.keepDup != 0 { // qht stores nothing for a duplicate
			next = row
		}
	}
	qhtFlip(words, bit, row^next)
	return match != 0
}

// randomBucket draws a bucket index in [0, k): a 32-bit multiply-shift of
// the generator's high bits, whose bias (at most k/2^32) no test can see,
// and which spares the 128-bit multiply of rng.intn on the packet path.
func (q *QHT) randomBucket() uint {
	return uint((q.rng.next() >> 32) * uint64(q.k) >> 32)
}

// observeWide is Observe for rows wider than 64 bits, one chunk at a time.
func (q *QHT) observeWide(r int, fp uint64) bool {
	words := q.cells.words
	base := uint64(r) * uint64(q.rowBits)
	var random uint64
	if q.variant != qhtQueue {
		random = base + uint64(q.randomBucket()*q.s) // drawn on every call, as in Observe
	}
	dup := false
	bit := base
	for c := uint(0); c < q.chunks && !dup; c++ {
		l := &q.chunk
		if c == q.chunks-1 {
			l = &q.last
		}
		dup = l.holds(qhtLoad(words, bit, l.mask), fp)
		bit += uint64(l.bits)
	}
	if dup && q.variant == qhtBasic {
		return true
	}
	if q.variant != qhtQueue && qhtLoad(words, base, q.fpMask) != 0 {
		qhtStore(words, random, q.fpMask, fp) // full row: replace a random bucket
		return dup
	}
	// Shift the whole row down one bucket, chunk by chunk: each chunk takes
	// the first bucket of the next one (read before that chunk is
	// rewritten), and the last chunk takes fp.
	bit = base
	for c := uint(0); c < q.chunks; c++ {
		l := &q.chunk
		in := fp
		if c == q.chunks-1 {
			l = &q.last
		} else {
			in = qhtLoad(words, bit+uint64(l.bits), q.fpMask)
		}
		v := qhtLoad(words, bit, l.mask)
		qhtStore(words, bit, l.mask, v>>q.s|in<<(l.bits-q.s))
		bit += uint64(l.bits)
	}
	return dup
}

// SizeBits is N*k*s, the paper's M rounded down to whole rows.
func (q *QHT) SizeBits() int { return q.rows * int(q.rowBits) }

// Reset empties every bucket and rewinds the random source, so the filter
// behaves as New built it.
func (q *QHT) Reset() {
	q.cells.clear()
	q.rng = newRNG(q.seed)
}

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
func (q *QHT) FillRatio() float64 {
	words := q.cells.words
	empty := 0
	bit := uint64(0)
	for range q.rows {
		if !q.wide {
			empty += bits.OnesCount64(q.row.zeros(qhtLoad(words, bit, q.row.mask)))
			bit += uint64(q.rowBits)
			continue
		}
		for c := uint(0); c < q.chunks; c++ {
			l := &q.chunk
			if c == q.chunks-1 {
				l = &q.last
			}
			empty += bits.OnesCount64(l.zeros(qhtLoad(words, bit, l.mask)))
			bit += uint64(l.bits)
		}
	}
	total := q.rows * int(q.k)
	return float64(total-empty) / float64(total)
}
