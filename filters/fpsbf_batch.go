package filters

import (
	"math/bits"

	"github.com/flowdedup/flowdedup/mix"
)

var _ BatchObserver = (*FPSBF)(nil)

// ObserveBatch is Observe over hashes in order, with the k cells and the
// eviction round of a stretch of hashes requested before they are
// observed (see BatchObserver).
//
// The eviction cells are the generator's next draws, predicted on a copy of
// it as if every element were distinct (a duplicate draws nothing). The
// real draws are then a prefix of the predicted ones: an element's cells
// were requested no later than the prediction for it, only earlier than
// needed after duplicates.
func (s *FPSBF) ObserveBatch(hashes []uint64, dup []bool) {
	ahead := s.rng
	var buf lineBuf // zeroed once a batch, not once a stretch
	for st := range stretches(hashes, dup, s.SizeBits()) {
		ahead = s.prefetchLines(st.ahead, ahead, &buf)
		for i, h := range st.hashes {
			st.dup[i] = s.Observe(h)
		}
	}
}

// prefetchLines requests, for each h, the words of its k cells and of the
// L cells its eviction round would decrement, drawing them from ahead as
// Observe and evict do; it returns ahead advanced past those draws.
func (s *FPSBF) prefetchLines(hs []uint64, ahead mix.Wyrand, buf *lineBuf) mix.Wyrand {
	n := 0
	m := uint64(s.m)
	for _, h := range hs {
		g, step, _ := s.indexHash(h)
		base := 0
		for range s.k {
			n = buf.cell(n, &s.cells, base+mix.Reduce(g, s.sub))
			g += step
			base += s.sub
		}
		if s.xi < 1 && !(ahead.Float64() < s.xi) {
			continue
		}
		for range s.l {
			i, _ := bits.Mul64(ahead.Uint64(), m)
			n = buf.cell(n, &s.cells, int(i))
		}
	}
	buf.flush(n)
	return ahead
}
