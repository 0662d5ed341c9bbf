package filters

import (
	"math/bits"

	"github.com/flowdedup/flowdedup/mix"
)

var _ BatchObserver = (*SamplingBF)(nil)

// samplingAhead predicts, on copies, what a SamplingBF's Observe will draw
// and count for the elements ahead of the one being observed.
type samplingAhead struct {
	rng mix.Wyrand
	n   uint64 // RSBF's stream position
}

// ObserveBatch is Observe over hashes in order, with the k bits and the
// bits a stretch of hashes' resets would pick requested before they are
// observed (see BatchObserver).
//
// The reset positions are the generator's next draws, predicted on a copy
// of it as if every element were inserted (one that is not draws nothing):
// the real draws are then a prefix of the predicted ones, each requested
// no later than the prediction for its element. RSBF's resets after p*
// reject positions until a set bit comes up, which depends on bits not yet
// read, so only its k bits are requested then.
func (b *SamplingBF) ObserveBatch(hashes []uint64, dup []bool) {
	ahead := samplingAhead{rng: b.rng, n: b.n}
	var buf lineBuf // zeroed once a batch, not once a stretch
	for st := range stretches(hashes, dup, b.SizeBits()) {
		ahead = b.prefetchLines(st.ahead, ahead, &buf)
		for i, h := range st.hashes {
			st.dup[i] = b.Observe(h)
		}
	}
}

// prefetchLines requests, for each h, the words of its k bits and of the
// bits its insertion would reset, drawing them from ahead in Observe's
// order; it returns ahead advanced past those draws.
func (b *SamplingBF) prefetchLines(hs []uint64, ahead samplingAhead, buf *lineBuf) samplingAhead {
	n := 0
	w := b.words
	r := ahead.rng
	for _, h := range hs {
		step := bloomStep(h)
		g := h
		for f := range b.k {
			n = buf.word(n, w, b.pos(f, g)>>6)
			g += step
		}
		switch b.rule {
		case ruleBSBF:
			for f := range b.k {
				n = buf.word(n, w, (f*b.stride+r.IntN(b.s))>>6)
			}
		case ruleBSBFSD:
			f := r.IntN(b.k)
			n = buf.word(n, w, (f*b.stride+r.IntN(b.s))>>6)
		case ruleRLBSBF:
			for f := range b.k {
				n = buf.word(n, w, (f*b.stride+r.IntN(b.s))>>6)
				r.Uint64() // the coin
			}
		case ruleRSBF:
			if ahead.n < b.phase3 {
				ahead.n++
			}
			if i := ahead.n; i > uint64(b.s) && i < b.phase3 { // phase 2
				if hi, _ := bits.Mul64(r.Uint64(), i); hi < uint64(b.s) {
					for f := range b.k {
						n = buf.word(n, w, (f*b.stride+r.IntN(b.s))>>6)
					}
				}
			}
		}
	}
	buf.flush(n)
	ahead.rng = r
	return ahead
}
