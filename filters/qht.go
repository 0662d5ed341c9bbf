package filters

import "errors"

const (
	qhtDefaultBuckets = "1"
	qhtDefaultFPBits  = "3"
)

// Stubs: replaced by the QHT implementation.
func buildQHT(p *params, seed uint64) (Filter, error) { return nil, errors.New("qht: not implemented") }
func buildQHTD(p *params, seed uint64) (Filter, error) {
	return nil, errors.New("qhtd: not implemented")
}
func buildQQHTD(p *params, seed uint64) (Filter, error) {
	return nil, errors.New("qqhtd: not implemented")
}
