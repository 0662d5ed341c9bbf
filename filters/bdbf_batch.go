package filters

import "github.com/flowdedup/flowdedup/mix"

var _ BatchObserver = (*BDBF)(nil)

// ObserveBatch is Observe over hashes in order, with the k counters of a
// stretch of hashes requested before they are observed (see
// BatchObserver). The blocks decayed go through the counters in order, one
// per arrival, which the hardware prefetcher follows.
func (f *BDBF) ObserveBatch(hashes []uint64, dup []bool) {
	var buf lineBuf // zeroed once a batch, not once a stretch
	for st := range stretches(hashes, dup, f.SizeBits()) {
		n := 0
		for _, h := range st.ahead {
			step := bloomStep(h)
			g := h
			for range f.k {
				n = buf.cell(n, &f.cells, mix.Reduce(g, f.m))
				g += step
			}
		}
		buf.flush(n)
		for i, h := range st.hashes {
			st.dup[i] = f.Observe(h)
		}
	}
}
