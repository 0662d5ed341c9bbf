package filters

import (
	"math/bits"

	"github.com/flowdedup/flowdedup/mix"
)

// Row matching for the QHT and SQF families: a row's buckets are s-bit
// fields packed side by side in a uint64 (bucket 0 in the lowest bits), and
// all of them are compared at once with SWAR arithmetic instead of a loop
// over buckets.

// qhtLane describes n s-bit fields (n*s <= 64) held in the low bits of a
// word: a whole row when k*s <= 64, else one chunk of a wider row.
type qhtLane struct {
	bits uint   // n*s
	mask uint64 // the n*s low bits
	lsbs uint64 // lowest bit of each field: fp*lsbs broadcasts fp to every field
	his  uint64 // highest bit of each field
	lows uint64 // every bit of every field but its highest
}

func newQHTLane(n, s uint) qhtLane {
	if n == 0 || s == 0 || n*s > 64 {
		panic("filters: qht lane out of range")
	}
	var l qhtLane
	l.bits = n * s
	l.mask = ^uint64(0) >> (64 - l.bits)
	for i := uint(0); i < n; i++ {
		l.lsbs |= 1 << (i * s)
	}
	l.his = l.lsbs << (s - 1)
	l.lows = l.mask &^ l.his
	return l
}

// zeros returns a word with the highest bit of each zero field of v set, and
// no other bit. It is exact, unlike the cheaper "has a zero byte" trick that
// may flag a field above a zero one: (v&lows)+lows cannot carry out of a
// field (at most 2^s - 2), so a field's top bit in the sum says whether its
// low bits are non-zero, and or-ing v adds its own top bit.
func (l *qhtLane) zeros(v uint64) uint64 {
	return ^((v & l.lows) + l.lows | v | l.lows) & l.his
}

// holds reports whether some field of v equals fp (fp < 2^s).
func (l *qhtLane) holds(v, fp uint64) bool {
	return l.zeros(v^fp*l.lsbs) != 0
}

// qhtLoad returns the n bits of words starting at bit, which may straddle two
// words: an unaligned read done with two loads and a funnel shift. words must
// have a word past the last bit read (packed keeps one).
func qhtLoad(words []uint64, bit uint64, mask uint64) uint64 {
	w, off := bit>>6, uint(bit&63)
	_ = words[w+1]
	// <<1<<(63-off) is <<(64-off) without the shift-by-64 fixup Go needs.
	return (words[w]>>off | words[w+1]<<1<<((63-off)&63)) & mask
}

// qhtStore writes v (already within mask) to the bits that qhtLoad reads.
// When the field does not straddle, the second word is rewritten unchanged.
func qhtStore(words []uint64, bit uint64, mask, v uint64) {
	w, off := bit>>6, uint(bit&63)
	_ = words[w+1]
	words[w] = words[w]&^(mask<<off) | v<<off
	words[w+1] = words[w+1]&^(mask>>1>>((63-off)&63)) | v>>1>>((63-off)&63)
}

// qhtFlip xors diff into the bits that qhtLoad(words, bit, ...) reads: with
// diff = old ^ new it writes a row back without masking, and when nothing
// changed it rewrites both words as they were.
func qhtFlip(words []uint64, bit uint64, diff uint64) {
	w, off := bit>>6, uint(bit&63)
	_ = words[w+1]
	words[w] ^= diff << off
	words[w+1] ^= diff >> 1 >> ((63 - off) & 63)
}

// qhtTable is the state and row machinery that the QHT family and the SQF
// family share: rows of k s-bit buckets packed back to back in []uint64 (a
// row need not start on a word boundary; bucket j of row i is the s bits at
// (i*k+j)*s), where 0 marks an empty bucket, plus the random source for
// replacements. The filters differ in how they derive a row and a non-zero
// fingerprint from a hash, and in which update they apply.
//
// Layout of a row: buckets are never emptied, so a row's fingerprints sit
// in arrival order at its top (highest bits) and its empty buckets at its
// bottom, and a row is full when its bottom bucket is in use. Inserting
// into "the first empty bucket" (QHT Algorithm 1, SQF's Stream) is then the
// same shift that pushes onto a qqhtd queue: the row moves down one bucket,
// dropping an empty bottom bucket, and fp enters at the top. This places
// fingerprints differently from a literal Algorithm 1 only while a row is
// not full, and which bucket holds which fingerprint matters to no answer;
// once full the rows agree bucket for bucket, so the random replacements do
// too.
//
// When k*s <= 64 a row is one unaligned 64-bit read (two word loads and a
// funnel shift), matched against all k buckets at once with SWAR
// arithmetic, and written back by xoring the change into the two words; the
// insertion is one shift of the row. Wider rows are processed in chunks of
// floor(64/s) buckets.
type qhtTable struct {
	cells   packed // rows*k cells of s bits; cells.words is the whole state
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

	// sig derives SQF signatures; its zero value selects QHT fingerprints.
	sig sqfSig

	rng  mix.Wyrand
	seed uint64
}

// newQHTTable builds an empty table of rows rows of k buckets of s bits
// (k*s need not fit a word), updated by observe as variant v says.
func newQHTTable(v qhtVariant, rows, k, s int, seed uint64) qhtTable {
	rowBits := k * s
	t := qhtTable{
		cells:   newPacked(rows*k, uint(s)),
		rows:    rows,
		k:       uint(k),
		s:       uint(s),
		rowBits: uint(rowBits),
		fpMask:  1<<uint(s) - 1,
		variant: v,
		wide:    rowBits > 64,
		seed:    seed,
		rng:     mix.NewWyrand(seed),
	}
	if v == qhtBasic {
		t.keepDup = ^uint64(0)
	}
	// With one bucket every variant ends up with fp in it, as the shift
	// puts it there (Sec. 5.2: QQHTD with k = 1 is QHT).
	t.shift = v == qhtQueue || k == 1
	if !t.wide {
		t.row = newQHTLane(t.k, t.s)
	} else {
		per := 64 / t.s
		t.chunks = (t.k + per - 1) / per
		t.chunk = newQHTLane(per, t.s)
		t.last = newQHTLane(t.k-(t.chunks-1)*per, t.s)
	}
	return t
}

// Observe is the packet path of QHT and SQF, promoted to both (a promoted
// method at offset 0 costs no call). It derives h's row and non-zero
// fingerprint as the filter's paper does, reports whether the row holds the
// fingerprint, and updates the row as the variant says.
//
// For rows of one word there is no branch on the row's content: whether fp
// is a duplicate, whether its row is full. Those outcomes can be coin flips
// on a real stream, and a mispredicted branch that waits on the row's load
// throws away the work of the packets behind it. So both outcomes are
// computed and selected with conditional moves: with k > 1, qht, qhtd and
// sqf draw the random bucket on every call and use it only when the row is
// full, and a duplicate in qht and sqf writes back no change. Shift counts
// are masked with 63 where they are known to be smaller, which spares the
// compiler's fix-up for counts of 64 and more. The branch on the
// fingerprint scheme is the same for every call of a filter.
func (t *qhtTable) Observe(h uint64) bool {
	var r int
	var fp uint64
	if t.sig.remMask == 0 { // QHT: row from the high bits, fingerprint from the low s
		r, fp = mix.Reduce(h, t.rows), nonZeroFingerprint(h, t.fpMask)
	} else { // SQF: row from the quotient, signature from the remainder
		r, fp = mix.Reduce(h&^t.sig.remMask, t.rows), t.sig.code(h)
	}
	if t.wide {
		return t.observeWide(r, fp)
	}
	bit := uint64(r) * uint64(t.rowBits)
	words := t.cells.words
	row := qhtLoad(words, bit, t.row.mask)
	match := t.row.zeros(row ^ fp*t.row.lsbs) // non-zero: duplicate
	s := t.s & 63
	// Append fp at the top of the row, shifting the others down a bucket:
	// qqhtd's queue push, and qht's and qhtd's insertion while the row has
	// an empty bucket, which is then the bottom one (see qhtTable).
	next := row>>s | fp<<((t.rowBits-s)&63)
	if !t.shift {
		// A full row (bottom bucket in use) replaces a random bucket.
		at := (t.randomBucket() * s) & 63
		replaced := row&^(t.fpMask<<at) | fp<<at // computed first: a move, not a branch
		if row&t.fpMask != 0 {
			next = replaced
		}
		if match&t.keepDup != 0 { // qht stores nothing for a duplicate
			next = row
		}
	}
	qhtFlip(words, bit, row^next)
	return match != 0
}

// randomBucket draws a bucket index in [0, k): a 32-bit multiply-shift of
// the generator's high bits, whose bias (at most k/2^32) no test can see,
// and which spares the 128-bit multiply of Wyrand.IntN on the packet path.
func (t *qhtTable) randomBucket() uint {
	return uint((t.rng.Uint64() >> 32) * uint64(t.k) >> 32)
}

// observeWide is Observe for rows wider than 64 bits, one chunk at a time.
func (t *qhtTable) observeWide(r int, fp uint64) bool {
	var random uint
	if t.variant != qhtQueue {
		random = t.randomBucket() // drawn on every call, as in Observe
	}
	dup := t.holds(r, fp)
	if dup && t.variant == qhtBasic {
		return true
	}
	if t.variant != qhtQueue && t.full(r) {
		t.replace(r, random, fp)
		return dup
	}
	t.push(r, fp)
	return dup
}

// holds reports whether some bucket of row r holds fp (non-zero).
func (t *qhtTable) holds(r int, fp uint64) bool {
	words := t.cells.words
	bit := uint64(r) * uint64(t.rowBits)
	if !t.wide {
		return t.row.holds(qhtLoad(words, bit, t.row.mask), fp)
	}
	for c := uint(0); c < t.chunks; c++ {
		l := &t.chunk
		if c == t.chunks-1 {
			l = &t.last
		}
		if l.holds(qhtLoad(words, bit, l.mask), fp) {
			return true
		}
		bit += uint64(l.bits)
	}
	return false
}

// full reports whether row r has no empty bucket: its bottom one is in use.
func (t *qhtTable) full(r int) bool {
	return qhtLoad(t.cells.words, uint64(r)*uint64(t.rowBits), t.fpMask) != 0
}

// replace stores fp in bucket j of row r.
func (t *qhtTable) replace(r int, j uint, fp uint64) {
	qhtStore(t.cells.words, uint64(r)*uint64(t.rowBits)+uint64(j*t.s), t.fpMask, fp)
}

// push shifts row r down one bucket, dropping its bottom bucket, and puts
// fp in its top bucket: an insertion into the first empty bucket while the
// row has one (see qhtTable), a queue push in qqhtd.
func (t *qhtTable) push(r int, fp uint64) {
	words := t.cells.words
	bit := uint64(r) * uint64(t.rowBits)
	if !t.wide {
		row := qhtLoad(words, bit, t.row.mask)
		qhtFlip(words, bit, row^(row>>t.s|fp<<(t.rowBits-t.s)))
		return
	}
	// Chunk by chunk: each chunk takes the first bucket of the next one
	// (read before that chunk is rewritten), and the last chunk takes fp.
	for c := uint(0); c < t.chunks; c++ {
		l := &t.chunk
		in := fp
		if c == t.chunks-1 {
			l = &t.last
		} else {
			in = qhtLoad(words, bit+uint64(l.bits), t.fpMask)
		}
		v := qhtLoad(words, bit, l.mask)
		qhtStore(words, bit, l.mask, v>>t.s|in<<(l.bits-t.s))
		bit += uint64(l.bits)
	}
}

// insert stores fp in row r as QHT's Algorithm 1 and SQF's Stream do: in an
// empty bucket, else in a random one (drawn only then, and only if k > 1).
func (t *qhtTable) insert(r int, fp uint64) {
	if !t.full(r) {
		t.push(r, fp)
		return
	}
	var j uint
	if t.k > 1 {
		j = t.randomBucket()
	}
	t.replace(r, j, fp)
}

// reset empties every bucket and rewinds the random source.
func (t *qhtTable) reset() {
	t.cells.clear()
	t.rng = mix.NewWyrand(t.seed)
}

// fillRatio is the fraction of buckets that are not empty. It scans the
// whole state: it is for metrics and tests, not for the packet path.
func (t *qhtTable) fillRatio() float64 {
	words := t.cells.words
	empty := 0
	bit := uint64(0)
	for range t.rows {
		if !t.wide {
			empty += bits.OnesCount64(t.row.zeros(qhtLoad(words, bit, t.row.mask)))
			bit += uint64(t.rowBits)
			continue
		}
		for c := uint(0); c < t.chunks; c++ {
			l := &t.chunk
			if c == t.chunks-1 {
				l = &t.last
			}
			empty += bits.OnesCount64(l.zeros(qhtLoad(words, bit, l.mask)))
			bit += uint64(l.bits)
		}
	}
	total := t.rows * int(t.k)
	return float64(total-empty) / float64(total)
}
