package ipfix_test

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// TestIPFIXDump has libfixbuf's ipfixDump (Debian: libfixbuf-tools), the
// CERT NetSA reference IPFIX library, read what the exporter sent over TCP
// (the stream) and over UDP (the datagrams, one after another, as a file
// of messages): it must find every message and record, and the fields of
// every record must be the exported ones.
func TestIPFIXDump(t *testing.T) {
	bin, err := exec.LookPath("ipfixDump")
	if err != nil {
		testutil.SkipOrFail(t, "ipfixDump is not installed (Debian package libfixbuf-tools): %v", err)
	}
	for _, network := range []string{"tcp", "udp"} {
		for _, kind := range kinds {
			t.Run(network+"/"+kind.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(kind), 21))
				recs := randRecords(rng, kind, 3000, 2)
				var stream []byte
				var e *ipfix.Destination
				cfg := ipfix.Config{Network: network, Kind: kind, ObservationDomain: 5, MessageSize: 1400}
				if network == "tcp" {
					col := newTCPCollector(t, "127.0.0.1:0")
					cfg.Address = col.addr()
					e = newDestination(t, cfg)
					sendBatches(t, e, rng, recs, nil)
					if err := e.Close(); err != nil {
						t.Fatal(err)
					}
					stream = col.waitStreams(t, "the exporter to close", func(s [][]byte, ended []bool) bool {
						return len(ended) == 1 && ended[0]
					})[0]
				} else {
					col := newUDPCollector(t, "udp4", "127.0.0.1:0")
					cfg.Address = col.addr()
					e = newDestination(t, cfg)
					sendBatches(t, e, rng, recs, nil)
					if err := e.Close(); err != nil {
						t.Fatal(err)
					}
					stream = bytes.Join(col.waitDatagrams(t, int(e.Stats().Messages)), nil)
				}
				path := filepath.Join(t.TempDir(), "export.ipfix")
				if err := os.WriteFile(path, stream, 0o644); err != nil {
					t.Fatal(err)
				}
				msgs := ipfixDump(t, bin, path)
				if len(msgs) != int(e.Stats().Messages) {
					t.Errorf("ipfixDump read %d messages, the exporter sent %d", len(msgs), e.Stats().Messages)
				}
				var flows []wireFlow
				for i, m := range msgs {
					if m.Domain != 5 {
						t.Errorf("ipfixDump: message %d of observation domain %d, want 5", i, m.Domain)
					}
					flows = append(flows, m.Flows...)
				}
				sameFlows(t, "ipfixDump", flows, wantAll(recs))
			})
		}
	}
}

var (
	dumpField  = regexp.MustCompile(`^\s*\((\d+)\)\s+\w+ : (.*)$`)
	dumpDomain = regexp.MustCompile(`\sobservation domain id: (\d+)$`)
)

// dumpMessage is a message as ipfixDump shows it: its header's
// observation domain, and its data records.
type dumpMessage struct {
	Domain uint32
	Flows  []wireFlow
}

// ipfixDump runs ipfixDump on path and returns the messages it shows.
// Anything it says on stderr fails t: libfixbuf warns there of a message
// out of sequence in its domain, and of a data set whose template its
// domain has not defined ("Missing external template"), and skips the
// set.
func ipfixDump(t *testing.T, bin, path string) (msgs []dumpMessage) {
	t.Helper()
	cmd := exec.Command(bin, "-i", path)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("ipfixDump -i %s: %v\n%s", path, err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	in := false // inside a data record
	var f wireFlow
	flush := func() {
		if in {
			msgs[len(msgs)-1].Flows = append(msgs[len(msgs)-1].Flows, f)
		}
		in, f = false, wireFlow{SrcBits: -1, DstBits: -1}
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "--- Message Header"):
			flush()
			msgs = append(msgs, dumpMessage{})
		case dumpDomain.MatchString(line) && len(msgs) > 0 && !in:
			d, err := strconv.ParseUint(dumpDomain.FindStringSubmatch(line)[1], 10, 32)
			if err != nil {
				t.Fatalf("ipfixDump line %q: %v", line, err)
			}
			msgs[len(msgs)-1].Domain = uint32(d)
		case strings.HasPrefix(line, "--- data record"):
			flush()
			in = true
		case strings.HasPrefix(line, "---"):
			flush()
		case in:
			m := dumpField.FindStringSubmatch(line)
			if m == nil {
				continue // "header:", "fields:", the record header line
			}
			id, _ := strconv.Atoi(m[1])
			if err := setDumpField(&f, id, m[2]); err != nil {
				t.Fatalf("ipfixDump line %q: %v", line, err)
			}
		}
	}
	flush()
	if len(msgs) == 0 {
		t.Fatalf("ipfixDump found no message in %s:\n%s", path, out)
	}
	return msgs
}

func setDumpField(f *wireFlow, id int, v string) error {
	var err error
	switch id {
	case 8, 27:
		f.Src, err = netip.ParseAddr(v)
	case 12, 28:
		f.Dst, err = netip.ParseAddr(v)
	case 9, 29, 13, 30:
		var n uint64
		n, err = strconv.ParseUint(v, 10, 8)
		if id == 9 || id == 29 {
			f.SrcBits = int(n)
		} else {
			f.DstBits = int(n)
		}
	case 4:
		var n uint64
		n, err = strconv.ParseUint(v, 10, 8)
		f.Proto = uint8(n)
	case 7, 11:
		var n uint64
		n, err = strconv.ParseUint(v, 10, 16)
		f.Ports = true
		if id == 7 {
			f.SrcPort = uint16(n)
		} else {
			f.DstPort = uint16(n)
		}
	case 351:
		f.Seg, err = strconv.ParseUint(v, 10, 64)
	case 152, 153:
		var ts time.Time
		ts, err = time.ParseInLocation("2006-01-02 15:04:05.000", v, time.UTC)
		if id == 152 {
			f.Ms = uint64(ts.UnixMilli())
		} else {
			f.EndMs = uint64(ts.UnixMilli())
		}
	default:
		return strconv.ErrSyntax
	}
	return err
}
