package report

import (
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/pipeline"
)

// TestPrometheusScrape replays a shipped capture through the real pipeline,
// then has a real Prometheus server scrape Serve: asked through its HTTP
// API, it must answer with the replay's packet count (2000 frames in
// testdata/pcaps/malformed.pcap, README there).
func TestPrometheusScrape(t *testing.T) {
	const packets = 2000
	src, err := pcapfile.Open(filepath.Join("..", "testdata", "pcaps", "malformed.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sink, err := New(Config{Kind: flow.KeySrc})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Seed: 1}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(p.Stats))
	target, err := Serve(t.Context(), "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}

	prom := servers.StartPrometheus(t, "flowdedup", []string{target.String()})
	defer func() {
		if t.Failed() {
			t.Logf("prometheus output:\n%s", prom.Log())
		}
	}()
	s := prom.WaitSample(t, "flowdedup_packets_total")
	if s.Value != packets || s.Labels["job"] != "flowdedup" {
		t.Fatalf("prometheus has flowdedup_packets_total%v %v, want {job=\"flowdedup\"} %d", s.Labels, s.Value, packets)
	}
	t.Logf("prometheus scraped flowdedup_packets_total %v from %s", s.Value, target)
}
