package report

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/pipeline"
)

// prometheusBinary returns the path of a Prometheus server, or skips the
// test when there is none.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("prometheus"); err == nil {
		return path
	}
	const debian = "/usr/bin/prometheus"
	if _, err := os.Stat(debian); err == nil {
		return debian
	}
	testutil.SkipOrFail(t, "no prometheus server binary in PATH or at /usr/bin/prometheus; "+
		"install it with: DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus")
	return ""
}

// freeLoopbackPort returns a TCP port on 127.0.0.1 that was free a moment
// ago, for a child process to listen on.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestPrometheusScrape replays a shipped capture through the real pipeline,
// then has a real Prometheus server scrape Serve: asked through its HTTP
// API, it must answer with the replay's packet count (2000 frames in
// testdata/pcaps/malformed.pcap, README there).
func TestPrometheusScrape(t *testing.T) {
	bin := prometheusBinary(t)
	dir := t.TempDir()

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

	config := filepath.Join(dir, "prometheus.yml")
	err = os.WriteFile(config, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: flowdedup
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ['%s']
`, target), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	web := "127.0.0.1:" + strconv.Itoa(freeLoopbackPort(t))
	var output testutil.SyncBuffer
	cmd := exec.Command(bin,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web,
	)
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus output:\n%s", output.String())
		}
	})

	query := "http://" + web + "/api/v1/query?query=" + url.QueryEscape("flowdedup_packets_total")
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("prometheus exited early: %v", err)
		case <-time.After(250 * time.Millisecond):
		}
		value, job, err := queryValue(query)
		switch {
		case err != nil:
			last = err.Error()
		case value == "":
			last = "no sample yet"
		default:
			if value != strconv.Itoa(packets) || job != "flowdedup" {
				t.Fatalf("prometheus has flowdedup_packets_total{job=%q} %s, want {job=\"flowdedup\"} %d", job, value, packets)
			}
			t.Logf("prometheus scraped flowdedup_packets_total %s from %s", value, target)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no flowdedup_packets_total in prometheus after 30s: %s", last)
		}
	}
}

// queryValue runs an instant query and returns the value and job label of
// its only sample, or "" when the result is still empty.
func queryValue(query string) (value, job string, err error) {
	resp, err := http.Get(query)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			ResultType string
			Result     []struct {
				Metric map[string]string
				Value  [2]any // [unix time, "value"]
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return "", "", fmt.Errorf("%s: %v", resp.Status, err)
	}
	if r.Status != "success" {
		return "", "", fmt.Errorf("query status %q: %s", r.Status, r.Error)
	}
	switch len(r.Data.Result) {
	case 0:
		return "", "", nil
	case 1:
		s, _ := r.Data.Result[0].Value[1].(string)
		return s, r.Data.Result[0].Metric["job"], nil
	}
	return "", "", fmt.Errorf("%d series, want 1", len(r.Data.Result))
}
