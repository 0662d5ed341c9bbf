package filters

import "github.com/flowdedup/flowdedup/mix"

var _ BatchObserver = (*Bloom)(nil)

// ObserveBatch is Observe over hashes in order, with the k words of a
// stretch of hashes requested before they are observed (see BatchObserver).
func (b *Bloom) ObserveBatch(hashes []uint64, dup []bool) {
	var buf lineBuf // zeroed once a batch, not once a stretch
	for s := range stretches(hashes, dup, b.m) {
		b.prefetchLines(s.ahead, &buf)
		for i, h := range s.hashes {
			s.dup[i] = b.Observe(h)
		}
	}
}

// prefetchLines requests the word of each of h's k bits.
func (b *Bloom) prefetchLines(hs []uint64, buf *lineBuf) {
	n := 0
	for _, h := range hs {
		step := bloomStep(h)
		g := h
		for range b.k {
			n = buf.word(n, b.words, mix.Reduce(g, b.m)>>6)
			g += step
		}
	}
	buf.flush(n)
}
