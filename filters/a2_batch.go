package filters

var _ BatchObserver = (*A2)(nil)

// ObserveBatch is Observe over hashes in order, with the k words of both
// buffers of a stretch of hashes requested before they are observed (see
// BatchObserver).
func (a *A2) ObserveBatch(hashes []uint64, dup []bool) {
	for st := range stretches(hashes, dup, a.SizeBits()) {
		var buf lineBuf
		n := 0
		for _, h := range st.ahead {
			step := bloomStep(h)
			g := h
			for range a.k {
				wi := reduce(g, a.m) >> 6
				n = buf.word(n, a.words, wi)
				n = buf.word(n, a.words, a.wpb+wi)
				g += step
			}
		}
		buf.flush(n)
		for i, h := range st.hashes {
			st.dup[i] = a.Observe(h)
		}
	}
}
