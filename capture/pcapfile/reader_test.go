package pcapfile

import (
	"errors"
	"io"
	"os"
	"testing"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

func TestFormats(t *testing.T) {
	base := testFrames(60, 1, true)
	links := []flow.LinkType{flow.LinkEthernet, flow.LinkRaw, flow.LinkLinuxSLL, flow.LinkLinuxSLL2, 147 /* USER0: not parsed by flow */}
	for _, link := range links {
		pkts := withLink(base, link)
		formats := []struct {
			name  string
			data  []byte
			micro bool
		}{
			{"pcap", writePcap(t, pkts, link, false), true},
			{"pcap-nsec", writePcap(t, pkts, link, true), false},
			{"pcap-be", writePcapBE(pkts, link, false), true},
			{"pcap-nsec-be", writePcapBE(pkts, link, true), false},
			{"pcapng", writeNg(t, pkts, link), false},
		}
		for _, f := range formats {
			for _, gz := range []bool{false, true} {
				name, data := f.name, f.data
				if gz {
					name, data = name+".gz", gzipBytes(t, data)
				}
				t.Run(link.String()+"/"+name, func(t *testing.T) {
					// A misleading name: the format comes from the magic.
					path := writeTemp(t, "capture.txt", data)
					s, err := Open(path)
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					got, err := readAll(s)
					if err != io.EOF {
						t.Fatalf("read ended with %v, want io.EOF", err)
					}
					compare(t, got, pkts, f.micro)
					st := s.Files()[0]
					if st.Packets != int64(len(pkts)) || !st.Done || st.Err != nil || st.Compressed != gz || st.LinkType != link {
						t.Errorf("Files() = %+v", st)
					}
				})
			}
		}
	}
}

// TestFileUnsupportedLink: frames of a link type flow does not parse are
// returned, and flow.Parse is what says so.
func TestUnsupportedLink(t *testing.T) {
	pkts := withLink(testFrames(3, 2, false), 147)
	s, err := Open(writeTemp(t, "user0.pcap", writePcap(t, pkts, 147, false)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var p capture.Packet
	if err := s.Next(&p); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Parse(p.Data, p.LinkType, flow.KeySrc); !errors.Is(err, flow.ErrUnsupportedLink) {
		t.Errorf("flow.Parse on link type %v: %v, want ErrUnsupportedLink", p.LinkType, err)
	}
}

// bigCapture writes n small packets in the given format to a file.
func bigCapture(t testing.TB, n int, format string) string {
	pkts := make([]testPkt, n)
	frame := make([]byte, 1514)
	for i := range frame {
		frame[i] = byte(i)
	}
	for i := range pkts {
		size := 60 + i%7*40
		pkts[i] = testPkt{data: frame[:size], timeNs: int64(i) * 1000, wireLen: size}
	}
	var data []byte
	switch format {
	case "pcap":
		data = writePcap(t, pkts, flow.LinkEthernet, true)
	case "pcapng":
		data = writeNg(t, pkts, flow.LinkEthernet)
	case "pcap.gz":
		data = gzipBytes(t, writePcap(t, pkts, flow.LinkEthernet, true))
	}
	return writeTemp(t, "big."+format, data)
}

// TestFileNoAllocs proves that reading a record allocates nothing, and that
// reading a file of 200k packets takes a fixed amount of memory.
func TestNoAllocs(t *testing.T) {
	const n = 200_000
	for _, format := range []string{"pcap", "pcapng", "pcap.gz"} {
		t.Run(format, func(t *testing.T) {
			path := bigCapture(t, n, format)
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var p capture.Packet
			if avg := testing.AllocsPerRun(n/2, func() {
				if err := s.Next(&p); err != nil {
					t.Fatal(err)
				}
			}); avg != 0 {
				t.Errorf("%v allocations per Next", avg)
			}

			var read int
			alloc := allocated(func() {
				s, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				for s.Next(&p) == nil {
					read++
				}
				s.Close()
			})
			info, _ := os.Stat(path)
			t.Logf("%d packets, %d-byte file: %d bytes allocated", read, info.Size(), alloc)
			if read != n || alloc > 2*bufSize {
				t.Errorf("read %d packets allocating %d bytes", read, alloc)
			}
		})
	}
}

// BenchmarkReaderNext reads a 100k-packet capture from the page cache;
// one op is one packet.
func BenchmarkReaderNext(b *testing.B) {
	for _, format := range []string{"pcap", "pcapng", "pcap.gz"} {
		b.Run(format, func(b *testing.B) {
			path := bigCapture(b, 100_000, format)
			s, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			var p capture.Packet
			var bytesRead int64
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Next(&p); err != nil {
					if err != io.EOF {
						b.Fatal(err)
					}
					s.Close()
					if s, err = Open(path); err != nil {
						b.Fatal(err)
					}
					continue
				}
				bytesRead += int64(len(p.Data))
			}
			s.Close()
			b.SetBytes(bytesRead / int64(b.N))
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "packets/s")
		})
	}
}
