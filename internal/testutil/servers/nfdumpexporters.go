package servers

import (
	"bytes"
	"cmp"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// NfdumpExporter is one exporter as nfcapd saw it: nfcapd keys what it
// collects by the exporter's address and, for IPFIX, the observation
// domain of the messages, and numbers each such pair (its SysID). nfdump
// -E lists them with their counts; each flow names its exporter's SysID
// (export_sysid in nfdump -o json).
type NfdumpExporter struct {
	SysID   uint32
	IP      netip.Addr
	Version int    // 10 for IPFIX
	Domain  uint32 // the IPFIX observation domain ID
	// SequenceFailures counts the messages whose sequence number was not
	// the one nfcapd expected of this exporter and domain.
	SequenceFailures uint64
	Packets          uint64 // messages
	FlowCount        uint64 // flows, as nfdump -E counts them
	// Flows are the flows nfdump attributes to this exporter, in the
	// order nfcapd received them.
	Flows []NfdumpFlow
}

// Exporters stops nfcapd (see Stop) and returns the exporters nfdump lists
// from its files, with their flows, by SysID.
func (n *Nfcapd) Exporters(tb testing.TB) []NfdumpExporter {
	tb.Helper()
	n.Stop(tb)
	return ReadNfdumpExporters(tb, n.Dir)
}

// nfdumpExporterLine matches an exporter's line of nfdump 1.7's -E:
//
//	SysID: 1, IP:        127.0.0.1, version: 10, ID:  7, Sequence failures: 0, packets: 1, flows: 3
var nfdumpExporterLine = regexp.MustCompile(`(?m)^SysID: (\d+), IP:\s+(\S+), version: (\d+), ID:\s+(\d+), Sequence failures: (\d+), packets: (\d+), flows: (\d+)$`)

// ReadNfdumpExporters returns the exporters of the nfcapd files in dir, as
// `nfdump -E FILE` lists them, with their flows, by SysID. nfcapd numbers
// exporters once per process and lists them in every file it writes: the
// counts of a SysID in several files are added up, and a SysID that names
// another exporter in another file fails tb.
func ReadNfdumpExporters(tb testing.TB, dir string) []NfdumpExporter {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "nfcapd.2*")) // closed files: nfcapd.YYYYMMDDhhmm
	bySysID := map[uint32]*NfdumpExporter{}
	for _, file := range files {
		cmd := exec.Command("nfdump", "-E", file)
		cmd.Env = append(os.Environ(), "TZ=UTC")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			tb.Fatalf("nfdump -E %s: %v\n%s", file, err, stderr.String())
		}
		for _, m := range nfdumpExporterLine.FindAllStringSubmatch(string(out), -1) {
			var e NfdumpExporter
			// SysID, version and domain are 32-bit; the counts 64-bit.
			var nums [6]uint64
			for i, s := range []string{m[1], m[3], m[4], m[5], m[6], m[7]} {
				bits := 64
				if i < 3 {
					bits = 32
				}
				if nums[i], err = strconv.ParseUint(s, 10, bits); err != nil {
					tb.Fatalf("nfdump -E %s: line %q: %v", file, m[0], err)
				}
			}
			if e.IP, err = netip.ParseAddr(m[2]); err != nil {
				tb.Fatalf("nfdump -E %s: line %q: %v", file, m[0], err)
			}
			e.SysID, e.Version, e.Domain = uint32(nums[0]), int(nums[1]), uint32(nums[2])
			e.SequenceFailures, e.Packets, e.FlowCount = nums[3], nums[4], nums[5]
			prev, ok := bySysID[e.SysID]
			if !ok {
				bySysID[e.SysID] = &e
				continue
			}
			if prev.IP != e.IP || prev.Version != e.Version || prev.Domain != e.Domain {
				tb.Fatalf("nfdump -E: SysID %d is %v version %d domain %d in one file, %v version %d domain %d in %s",
					e.SysID, prev.IP, prev.Version, prev.Domain, e.IP, e.Version, e.Domain, file)
			}
			prev.SequenceFailures += e.SequenceFailures
			prev.Packets += e.Packets
			prev.FlowCount += e.FlowCount
		}
	}
	flows, sysIDs := readNfdump(tb, dir)
	for i, f := range flows {
		e, ok := bySysID[sysIDs[i]]
		if !ok {
			tb.Fatalf("nfdump shows flow %d (%+v) of exporter SysID %d, which nfdump -E does not list", i, f, sysIDs[i])
		}
		e.Flows = append(e.Flows, f)
	}
	exps := make([]NfdumpExporter, 0, len(bySysID))
	for _, e := range bySysID {
		exps = append(exps, *e)
	}
	slices.SortFunc(exps, func(a, b NfdumpExporter) int { return cmp.Compare(a.SysID, b.SysID) })
	return exps
}
