package flow

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func TestProtoName(t *testing.T) {
	// Known numbers against the IANA registry's keywords, lower-cased.
	for proto, want := range map[uint8]string{
		0:   "hopopt",
		1:   "icmp",
		2:   "igmp",
		4:   "ipv4",
		6:   "tcp",
		17:  "udp",
		41:  "ipv6",
		47:  "gre",
		50:  "esp",
		51:  "ah",
		58:  "icmp6", // the one exception to the registry's keyword (IPv6-ICMP): see ProtoName
		89:  "ospfigp",
		103: "pim",
		112: "vrrp",
		115: "l2tp",
		124: "isis-over-ipv4", // a keyword with spaces
		132: "sctp",
		135: "mobility-header",
		136: "udplite",
		137: "mpls-in-ip",
		146: "homa",
		13:  "argus", // "ARGUS (deprecated)" in the registry
	} {
		if got := ProtoName(proto); got != want {
			t.Errorf("ProtoName(%d) = %q, want %q", proto, got, want)
		}
	}
	// Unassigned and reserved numbers, and those whose registry entry has
	// no keyword ("any local network"), have no name.
	for _, proto := range []uint8{61, 63, 68, 99, 114, 147, 200, 252, 253, 254, 255} {
		if got := ProtoName(proto); got != "" {
			t.Errorf("ProtoName(%d) = %q, want none", proto, got)
		}
	}
}

// Every name can stand unquoted in a CSV field and a text record, and no
// two numbers share one (a name read back means one number).
func TestProtoNamesAreFieldSafe(t *testing.T) {
	seen := map[string]int{}
	named := 0
	for p := range 256 {
		name := ProtoName(uint8(p))
		if name == "" {
			continue
		}
		named++
		if strings.ContainsAny(name, " ,\"\n\t") || name != strings.ToLower(name) {
			t.Errorf("ProtoName(%d) = %q: not lower case or not field-safe", p, name)
		}
		if _, err := strconv.Atoi(name); err == nil {
			t.Errorf("ProtoName(%d) = %q reads as a number", p, name)
		}
		if q, dup := seen[name]; dup {
			t.Errorf("%q names both %d and %d", name, q, p)
		}
		seen[name] = p
	}
	// 0-146 are assigned but for the five entries without a keyword
	// (61, 63, 68, 99, 114).
	if named != 147-5 {
		t.Errorf("%d named protocols, want %d", named, 147-5)
	}
}

func TestKeyTextNamesEveryProtocol(t *testing.T) {
	k := MakeKey(Key5Tuple, netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), 2, 0, 0)
	if got := k.String(); got != "igmp 192.0.2.1 > 192.0.2.2" {
		t.Errorf("IGMP key text %q", got)
	}
}
