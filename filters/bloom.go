package filters

import "errors"

// Stub: replaced by the Bloom implementation.
func buildBloom(p *params, seed uint64) (Filter, error) {
	return nil, errors.New("bloom: not implemented")
}
