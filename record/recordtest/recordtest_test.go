package recordtest

import (
	"reflect"
	"slices"
	"testing"
)

// TestFullSummaryIsFull: every field of FullSummary but those of Unset is
// set (a field added to record.Summary and not to FullSummary or Unset
// fails), and each call is a copy of its own.
func TestFullSummaryIsFull(t *testing.T) {
	var check func(path string, v reflect.Value)
	check = func(path string, v reflect.Value) {
		for i := range v.NumField() {
			f, sf := v.Field(i), v.Type().Field(i)
			if !sf.IsExported() {
				continue
			}
			if sf.Anonymous && f.Kind() == reflect.Struct {
				check(path+sf.Name+".", f)
				continue
			}
			if slices.Contains(Unset, sf.Name) {
				if !f.IsZero() {
					t.Errorf("FullSummary sets %s%s, listed in Unset", path, sf.Name)
				}
				continue
			}
			if f.IsZero() || ((f.Kind() == reflect.Map || f.Kind() == reflect.Slice) && f.Len() == 0) {
				t.Errorf("FullSummary leaves %s%s unset", path, sf.Name)
			}
		}
	}
	check("", reflect.ValueOf(FullSummary()))

	a, b := FullSummary(), FullSummary()
	a.MalformedBy["truncated"]++
	a.Sketch[0]++
	a.ExportDropped["ipfix://127.0.0.1:4739"]["shutdown"]++
	if !reflect.DeepEqual(b, FullSummary()) {
		t.Error("a change to one FullSummary changed another")
	}
}
