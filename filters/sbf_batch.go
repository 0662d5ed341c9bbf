package filters

import (
	"github.com/flowdedup/flowdedup/internal/simd"
	"github.com/flowdedup/flowdedup/mix"
)

var _ BatchObserver = (*SBF)(nil)

// ObserveBatch is Observe over hashes in order, with the K cells and the
// decrement run of a stretch of hashes requested before they are observed
// (see BatchObserver). Observe draws one decrement start per element (when
// P > 0), so the starts of the elements ahead are the generator's next
// draws, predicted on a copy of it.
func (s *SBF) ObserveBatch(hashes []uint64, dup []bool) {
	ahead := s.rng
	var buf lineBuf // zeroed once a batch, not once a stretch
	bytes := s.d == 8
	for st := range stretches(hashes, dup, s.m*s.d) {
		ahead = s.prefetchLines(st.ahead, ahead, &buf)
		if bytes {
			for i, h := range st.hashes {
				st.dup[i] = s.observeBytes(h)
			}
			continue
		}
		for i, h := range st.hashes {
			st.dup[i] = s.Observe(h)
		}
	}
}

// prefetchLines requests, for each h, the words of its K cells and of the
// first cells of the P its Observe decrements, whose start it draws from
// ahead; it returns ahead advanced past those draws.
func (s *SBF) prefetchLines(hs []uint64, ahead mix.Wyrand, buf *lineBuf) mix.Wyrand {
	n := 0
	w := s.cells.words
	for _, h := range hs {
		step := bloomStep(h)
		g := h
		for range s.k {
			if s.d == 1 {
				n = buf.word(n, w, mix.Reduce(g, s.m)>>6)
			} else {
				n = buf.cell(n, &s.cells, mix.Reduce(g, s.m))
			}
			g += step
		}
		if s.p == 0 {
			continue
		}
		// decrement(start): cells start..start+P-1, wrapping at m.
		start := ahead.IntN(s.m)
		end := start + s.p
		if end > s.m {
			n = buf.words(n, w, 0, ((end-s.m)*s.d-1)>>6)
			end = s.m
		}
		n = buf.words(n, w, start*s.d>>6, (end*s.d-1)>>6)
	}
	buf.flush(n)
	return ahead
}

// observeBytes is Observe for cells of 8 bits (Max=255) with the decrement
// run's whole words decremented by internal/simd's DecrementBytes, for the
// batch path. Answers and state are Observe's: the same cells decremented
// by one, saturating, then the same cells set.
func (s *SBF) observeBytes(h uint64) bool {
	step := bloomStep(h)
	dup := s.probeCells(h, step)
	if s.p > 0 {
		start := s.rng.IntN(s.m)
		end := start + s.p
		if end > s.m {
			s.decrementByteCells(0, end-s.m)
			end = s.m
		}
		s.decrementByteCells(start, end)
	}
	s.setCells(h, step)
	return dup
}

// decrementByteCells decrements 8-bit cells [lo, hi) by one, saturating:
// the partial words at the ends as decrementBits does, the whole words
// between with simd.DecrementBytes.
func (s *SBF) decrementByteCells(lo, hi int) {
	w := s.cells.words
	loBit, hiBit := lo*8, hi*8
	first, last := (loBit+63)>>6, hiBit>>6 // the whole words: [first, last)
	if first >= last {
		sbfDecrementBits(w, loBit, hiBit, 8, s.lanes)
		return
	}
	sbfDecrementBits(w, loBit, first<<6, 8, s.lanes)
	simd.DecrementBytes(w[first:last])
	sbfDecrementBits(w, last<<6, hiBit, 8, s.lanes)
}
