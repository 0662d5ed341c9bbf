package record

import (
	"net/netip"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
)

// TestAppendJSONSegment: a key with a segment has "vni" after its key
// fields and before "window"; the same key without one has the line of
// before segments. Lines written by hand from AppendJSON's comment.
func TestAppendJSONSegment(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	k := flow.MakeKey(flow.Key5Tuple, a, b, 17, 5000, 53)
	const ts = 1767225601500000000 // 2026-01-01T00:00:01.5Z
	const win = 1767225600000000000
	for _, c := range []struct {
		key  flow.Key
		win  bool
		want string
	}{
		{k, true, `{"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","dst":"10.0.0.2","proto":17,"proto_name":"udp","sport":5000,"dport":53,"window":"2026-01-01T00:00:00Z"}` + "\n"},
		{k.WithSegment(100), true, `{"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","dst":"10.0.0.2","proto":17,"proto_name":"udp","sport":5000,"dport":53,"vni":100,"window":"2026-01-01T00:00:00Z"}` + "\n"},
		{k.WithSegment(200), false, `{"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","dst":"10.0.0.2","proto":17,"proto_name":"udp","sport":5000,"dport":53,"vni":200}` + "\n"},
		{flow.MakeKey(flow.KeySrc, a, b, 0, 0, 0).WithSegment(0), false, `{"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","vni":0}` + "\n"},
		{flow.MakeKey(flow.KeyDst, a, b, 0, 0, 0).WithSegment(flow.MaxSegment), false, `{"ts":"2026-01-01T00:00:01.5Z","dst":"10.0.0.2","vni":16777215}` + "\n"},
	} {
		r := Record{Key: c.key, TimeNs: ts, WindowNs: win, Windowed: c.win}
		if got := string(AppendJSON(nil, &r)); got != c.want {
			t.Errorf("%v:\n got %s\nwant %s", c.key, got, c.want)
		}
	}
}
