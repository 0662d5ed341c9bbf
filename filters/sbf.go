package filters

import "errors"

// Stub: replaced by the SBF implementation.
func buildSBF(p *params, seed uint64) (Filter, error) { return nil, errors.New("sbf: not implemented") }
