package cli

import (
	"slices"
	"strings"
	"testing"
)

// TestDecapUsageErrors: a bad --decap (or a pcap: spec's decap=) is a
// usage error (exit 2) on every command that takes it, naming the bad word
// as replay names it. Each case gives the lines stderr ends with, exactly;
// a flag error is all of stderr.
func TestDecapUsageErrors(t *testing.T) {
	const kinds = `want none, all, novni, gre, erspan, vxlan, geneve, gtpu, ipip, vxlan=PORT[+PORT], geneve=PORT, gtpu=PORT`
	flagError := func(cmd, val, why string) []string {
		return []string{
			`flowdedup ` + cmd + `: invalid argument "` + val + `" for "--decap" flag: flow: invalid --decap` + why,
			`run 'flowdedup ` + cmd + ` --help' for usage`}
	}
	sflow := []string{"collect", "--listen", "sflow://127.0.0.1:0"}
	tune := []string{"tune", "--mem", "8KiB"}
	eval := []string{"eval", "--filter", "exact"}
	with := func(base []string, more ...string) []string { return append(slices.Clone(base), more...) }
	for _, c := range []struct {
		args  []string
		want  []string
		whole bool // stderr is want and nothing else
	}{
		{[]string{"replay", "--decap", "gre,teredo", "x.pcap"}, flagError("replay", "gre,teredo", ` "gre,teredo": "teredo" is not a tunnel kind: `+kinds), true},
		{with(sflow, "--decap", "teredo"), flagError("collect", "teredo", ` "teredo": "teredo" is not a tunnel kind: `+kinds), true},
		{with(sflow, "--decap="), flagError("collect", "", `: empty: want none, all or a list of gre,erspan,vxlan,geneve,gtpu,ipip`), true},
		{with(sflow, "--decap", "vxlan=99999"), flagError("collect", "vxlan=99999", ` "vxlan=99999": "vxlan=99999" has a bad port: want a number 1-65535`), true},
		{with(sflow, "--decap", "all,gre=1"), flagError("collect", "all,gre=1", ` "all,gre=1": "gre=1" takes no port`), true},
		{with(sflow, "--decap", "vxlan=4789,vxlan=8472"), flagError("collect", "vxlan=4789,vxlan=8472", ` "vxlan=4789,vxlan=8472": "vxlan=8472" gives the ports a second time`), true},
		{with(tune, "--decap", "none,gre", "x.pcap"), flagError("tune", "none,gre", ` "none,gre": "none" stands alone, not in a list`), true},
		{with(tune, "--decap", "geneve=1+2", "x.pcap"), flagError("tune", "geneve=1+2", ` "geneve=1+2": "geneve=1+2" takes one port`), true},
		{with(tune, "--decap", "ALL", "x.pcap"), flagError("tune", "ALL", ` "ALL": "ALL" is not a tunnel kind: `+kinds), true},
		{with(tune, "--sample", "pcap:x.pcap,decap=teredo"), []string{
			`flowdedup tune: sample "pcap:x.pcap,decap=teredo": bad stream spec: flow: invalid --decap "teredo": "teredo" is not a tunnel kind: ` + kinds,
			`run 'flowdedup tune --help' for usage`}, false},
		{with(tune, "--sample", "pcap:x.pcap,decap=all,decap=gre"), []string{
			`flowdedup tune: sample "pcap:x.pcap,decap=all,decap=gre": bad stream spec: decap= given twice`,
			`run 'flowdedup tune --help' for usage`}, false},
		{with(eval, "--stream", "pcap:x.pcap", "--decap", "bogus"), flagError("eval", "bogus", ` "bogus": "bogus" is not a tunnel kind: `+kinds), true},
		{with(eval, "--stream", "pcap:x.pcap", "--decap", "novni"), flagError("eval", "novni", ` "novni": no tunnel kind in the list`), true},
		{with(eval, "--stream", "pcap:x.pcap,decap=gtpu=0"), []string{
			`flowdedup eval: "pcap:x.pcap,decap=gtpu=0": bad stream spec: flow: invalid --decap "gtpu=0": "gtpu=0" has a bad port: want a number 1-65535`,
			`run 'flowdedup eval --help' for usage`}, true},
		{with(eval, "--stream", "distinct:n=10", "--decap", "all"), []string{
			`flowdedup eval: --decap all: bad stream spec: distinct:n=10 is no capture (--decap keys the frames of pcap: streams)`,
			`run 'flowdedup eval --help' for usage`}, true},
	} {
		code, out, errs := run(c.args...)
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		if code != ExitUsage || out != "" || len(lines) < len(c.want) || !slices.Equal(lines[len(lines)-len(c.want):], c.want) ||
			c.whole && len(lines) != len(c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr\n%s\nwant exit %d, nothing on stdout, stderr ending\n%s", c.args, code, out, errs, ExitUsage, strings.Join(c.want, "\n"))
		}
	}
}
