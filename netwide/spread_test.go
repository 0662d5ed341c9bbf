package netwide

import "testing"

// TestSpreadsDropped: summaries with spread lists merge as any other (the
// same groups and estimates as without them), and the Merger counts the
// ones whose lists it dropped.
func TestSpreadsDropped(t *testing.T) {
	const p, seed = 12, 42
	f := newFleet(t, p, seed)
	plain, err := Merge(f.summaries, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := New(Options{})
	with := 0
	for i := range f.summaries {
		s := f.summaries[i]
		s.Spread = i%3 == 0
		if s.Spread {
			with++
		}
		if err := m.Add(&s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.Groups()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(plain) {
		t.Fatalf("%d groups, want %d", len(got), len(plain))
	}
	for i := range got {
		if got[i].Estimate != plain[i].Estimate || got[i].SumDistinct != plain[i].SumDistinct || got[i].Summaries != plain[i].Summaries {
			t.Errorf("group %d: %+v, without spreads %+v", i, got[i], plain[i])
		}
	}
	if with == 0 || m.DroppedSpreads() != with {
		t.Errorf("DroppedSpreads %d, want %d", m.DroppedSpreads(), with)
	}
}
