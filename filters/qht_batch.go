package filters

import "github.com/flowdedup/flowdedup/mix"

// The batch path of the QHT family and of SQF and ISQF, which share its rows
// (qhtTable). A row depends only on the hash, so its words are known before
// the batch is observed; a replacement's random bucket is in the same row.

var (
	_ BatchObserver = (*QHT)(nil)
	_ BatchObserver = (*SQF)(nil)
	_ BatchObserver = (*ISQF)(nil)
)

// ObserveBatch is Observe over hashes in order, with the rows of a stretch
// of hashes requested before they are observed (see BatchObserver).
func (q *QHT) ObserveBatch(hashes []uint64, dup []bool) { q.observeBatch(hashes, dup) }

// ObserveBatch is Observe over hashes in order, with the rows of a stretch
// of hashes requested before they are observed (see BatchObserver).
func (f *SQF) ObserveBatch(hashes []uint64, dup []bool) { f.observeBatch(hashes, dup) }

// qhtShareL2 is how many times its size the batch path counts a QHT or
// SQF state as when it decides whether to request rows ahead: the rows of
// a state from a quarter of the L2 cache up are requested. A row is one
// line (two at most), so requesting it is the cheapest batch path; and
// the state does not have the L2 to itself: in a replay the 1 MiB table of
// `--key src` (qht's default) shares it with the batches, the
// distinct-count sketch and the reader's buffer, and its rows missed
// the L2 as often as not. Requesting them ahead took the CPU of `flowdedup
// replay --key src` on the 2M-packet capture of docs/benchmarks.md to
// 0.91-0.95 with 1 worker and 0.85-1.00 with 2 (--parsers 0) (farm-bench
// pairs, load 6-8).
const qhtShareL2 = 4

func (t *qhtTable) observeBatch(hashes []uint64, dup []bool) {
	var buf lineBuf // zeroed once a batch, not once a stretch
	for s := range stretches(hashes, dup, qhtShareL2*t.rows*int(t.rowBits)) {
		t.prefetchLines(s.ahead, &buf)
		for i, h := range s.hashes {
			s.dup[i] = t.Observe(h)
		}
	}
}

// prefetchLines requests the words of h's row for each h: those Observe
// reads and writes back. QHT rows come from the hash, SQF rows from its
// quotient (remMask is 0 for QHT).
func (t *qhtTable) prefetchLines(hs []uint64, buf *lineBuf) {
	n := 0
	w, rowBits := t.cells.words, int(t.rowBits)
	for _, h := range hs {
		bit := mix.Reduce(h&^t.sig.remMask, t.rows) * rowBits
		if t.wide {
			n = t.prefetchWideRow(buf, n, bit)
			continue
		}
		n = buf.pair(n, w, bit>>6) // prefetchRow, inlined
	}
	buf.flush(n)
}

// prefetchRow queues the words of row r after the n queued in buf. A lane
// read (qhtLoad) or written (qhtFlip) at a bit touches that bit's word and
// the next one.
func (t *qhtTable) prefetchRow(buf *lineBuf, n, r int) int {
	bit := r * int(t.rowBits)
	if !t.wide {
		return buf.pair(n, t.cells.words, bit>>6)
	}
	return t.prefetchWideRow(buf, n, bit)
}

// prefetchWideRow is prefetchRow for rows wider than a word, out of line
// so that prefetchRow inlines.
func (t *qhtTable) prefetchWideRow(buf *lineBuf, n, bit int) int {
	return buf.words(n, t.cells.words, bit>>6, (bit+int(t.rowBits)-1)>>6+1)
}

// ObserveBatch is Observe over hashes in order, with h's row in every table
// requested for a stretch of hashes before they are observed (see
// BatchObserver): Observe reads them until one holds h's signature, and
// inserts into all of them when none does.
func (f *ISQF) ObserveBatch(hashes []uint64, dup []bool) {
	var buf lineBuf // zeroed once a batch, not once a stretch
	for s := range stretches(hashes, dup, f.SizeBits()) {
		n := 0
		for _, h := range s.ahead {
			for i := range f.tables {
				n = f.t.prefetchRow(&buf, n, f.row(h, i))
			}
		}
		buf.flush(n)
		for i, h := range s.hashes {
			s.dup[i] = f.Observe(h)
		}
	}
}
