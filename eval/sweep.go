package eval

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flowdedup/flowdedup/filters"
)

// TakesMem reports whether spec's family is sized by a mem= parameter.
// Families that are not (exact) cannot be swept over memory.
func TakesMem(spec string) (bool, error) {
	sp, err := filters.ParseSpec(spec)
	if err != nil {
		return false, err
	}
	for _, fam := range filters.Families() {
		if fam.Name == sp.Name {
			return slices.ContainsFunc(fam.Params, func(p filters.Param) bool { return p.Name == "mem" }), nil
		}
	}
	return false, fmt.Errorf("eval: %q: %w %q (known: %s)", spec, filters.ErrUnknownFilter, sp.Name, strings.Join(filters.Names(), ", "))
}

// WithMem returns spec with its mem= replaced by (or set to) mem, in
// canonical form: name, then mem in the largest exact unit, then the other
// parameters sorted by key.
func WithMem(spec, mem string) (string, error) {
	bits, err := filters.ParseMem(mem)
	if err != nil {
		return "", fmt.Errorf("eval: mem %q: %w: %v", mem, filters.ErrBadParam, err)
	}
	sp, err := filters.ParseSpec(spec)
	if err != nil {
		return "", err
	}
	if _, ok := sp.Params["entries"]; ok {
		// entries= overrides mem=, so the sweep would measure one size many times.
		return "", fmt.Errorf("eval: %q: %w: entries= fixes the size; drop it to sweep memory", spec, filters.ErrBadParam)
	}
	sp.Params["mem"] = filters.FormatMem(bits)
	return formatSpec(sp), nil
}

// Sweep expands specs over mems: every spec whose family takes mem= once
// per size (spec-major, in the order given), every other spec once, as it
// is. With no mems it returns specs unchanged.
func Sweep(specs, mems []string) ([]string, error) {
	if len(mems) == 0 {
		return specs, nil
	}
	out := make([]string, 0, len(specs)*len(mems))
	for _, spec := range specs {
		ok, err := TakesMem(spec)
		if err != nil {
			return nil, err
		}
		if !ok {
			out = append(out, spec)
			continue
		}
		for _, m := range mems {
			s, err := WithMem(spec, m)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// ParseMems parses a comma-separated list of sizes ("8KiB,16KiB,1MiB"),
// checking each with filters.ParseMem.
func ParseMems(list string) ([]string, error) {
	var mems []string
	for m := range strings.SplitSeq(list, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			return nil, fmt.Errorf("eval: mem list %q: %w: empty size", list, filters.ErrBadParam)
		}
		if _, err := filters.ParseMem(m); err != nil {
			return nil, fmt.Errorf("eval: mem list %q: %w: %v", list, filters.ErrBadParam, err)
		}
		mems = append(mems, m)
	}
	if len(mems) == 0 {
		return nil, errors.New("eval: empty mem list")
	}
	return mems, nil
}

// formatSpec renders sp in the grammar filters.ParseSpec reads: mem first,
// then the other parameters sorted, so equal specs print equally.
func formatSpec(sp filters.Spec) string {
	if len(sp.Params) == 0 {
		return sp.Name
	}
	keys := make([]string, 0, len(sp.Params))
	for k := range sp.Params {
		if k != "mem" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if _, ok := sp.Params["mem"]; ok {
		keys = slices.Insert(keys, 0, "mem")
	}
	var b strings.Builder
	b.WriteString(sp.Name)
	for i, k := range keys {
		if i == 0 {
			b.WriteByte(':')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + sp.Params[k])
	}
	return b.String()
}
