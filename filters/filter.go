package filters

import "errors"

// Filter is a streaming duplicate detector over 64-bit keyed hashes.
//
// Implementations are not safe for concurrent use: the pipeline gives each
// worker its own Filter (a shard), so no filter is ever shared.
type Filter interface {
	// Observe reports whether h is a duplicate (seen before) and records h.
	// It always records h, whatever it answers.
	Observe(h uint64) bool
	// SizeBits is the number of bits of state the filter holds, counted as
	// its paper counts them.
	SizeBits() int
	// Reset forgets everything observed, as if the filter were new.
	Reset()
	// String is the filter's canonical spec: New(f.String(), seed) builds an
	// identical filter.
	String() string
}

// Errors returned (wrapped) by New and ParseSpec. Test with errors.Is.
var (
	ErrSyntax        = errors.New("bad filter spec syntax")
	ErrUnknownFilter = errors.New("unknown filter")
	ErrUnknownParam  = errors.New("unknown parameter")
	ErrBadParam      = errors.New("bad parameter value")
	ErrTooSmall      = errors.New("memory too small")
)
