package filters

import "unsafe"

var (
	_ BatchObserver = (*LRU)(nil)
	_ BatchObserver = (*FPBuffer)(nil)
	_ BatchObserver = (*Exact)(nil)
)

// ObserveBatch is Observe over hashes in order, with the table slot of a
// stretch of hashes requested before they are observed (see
// BatchObserver).
func (l *LRU) ObserveBatch(hashes []uint64, dup []bool) {
	var buf lineBuf // zeroed once a batch, not once a stretch
	for st := range stretches(hashes, dup, l.stateBits()) {
		l.prefetchLines(st.ahead, &buf)
		for i, h := range st.hashes {
			st.dup[i] = l.Observe(h)
		}
	}
}

// stateBits is what the LRU really holds (its table and entries), not what
// SizeBits counts.
func (l *LRU) stateBits() int {
	return 8 * (len(l.slots)*int(unsafe.Sizeof(l.slots[0])) + len(l.ents)*int(unsafe.Sizeof(l.ents[0])))
}

// prefetchLines requests h's home slot for each h, where Observe's probe
// starts.
func (l *LRU) prefetchLines(hs []uint64, buf *lineBuf) {
	n := 0
	for _, h := range hs {
		n = buf.add(n, unsafe.Pointer(&l.slots[l.home(h)]))
	}
	buf.flush(n)
}

// ObserveBatch is Observe over hashes in order, with the LRU's batch path
// (see BatchObserver): the coin for a miss is drawn in Observe's order.
func (f *FPBuffer) ObserveBatch(hashes []uint64, dup []bool) {
	var buf lineBuf // zeroed once a batch, not once a stretch
	for st := range stretches(hashes, dup, f.lru.stateBits()) {
		f.lru.prefetchLines(st.ahead, &buf)
		for i, h := range st.hashes {
			st.dup[i] = f.Observe(h)
		}
	}
}

// ObserveBatch is Observe over hashes in order, with the home slot of a
// stretch of hashes requested before they are observed (see
// BatchObserver). A slot requested before the table grows is in the old
// table; the prefetch only misses, and the answers stay Observe's.
func (x *Exact) ObserveBatch(hashes []uint64, dup []bool) {
	var buf lineBuf // zeroed once a batch, not once a stretch
	for st := range stretches(hashes, dup, 64*len(x.slots)) {
		n := 0
		mask := len(x.slots) - 1
		for _, h := range st.ahead {
			n = buf.word(n, x.slots, int(h*0x9e3779b97f4a7c15>>32)&mask)
		}
		buf.flush(n)
		for i, h := range st.hashes {
			st.dup[i] = x.Observe(h)
		}
	}
}
