package servers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// Prometheus is a Prometheus server the test started on loopback
// (StartPrometheus), scraping its targets every second; its cleanup stops
// it.
type Prometheus struct {
	// Web is the address of its HTTP API, host:port.
	Web  string
	proc *testutil.Process
}

// Sample is one sample of an instant query's answer.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// StartPrometheus starts a Prometheus server, with its data in a temporary
// directory, that scrapes targets (host:port, path /metrics) every second
// as job job, and evaluates the rule files rules (absolute paths) every
// second; it returns once the server is ready. It skips the test, or
// fails it under FLOWDEDUP_REQUIRE_PRIVILEGED=1, where no prometheus
// binary is installed.
func StartPrometheus(tb testing.TB, job string, targets []string, rules ...string) *Prometheus {
	tb.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		bin = "/usr/bin/prometheus" // Debian's, for a PATH without /usr/bin
		if _, err := os.Stat(bin); err != nil {
			testutil.SkipOrFail(tb, "no prometheus server in PATH or at /usr/bin/prometheus; install it with: DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus")
			return nil
		}
	}
	dir := tb.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n")
	if len(rules) > 0 {
		cfg.WriteString("rule_files:\n")
		for _, r := range rules {
			fmt.Fprintf(&cfg, "  - %q\n", r)
		}
	}
	fmt.Fprintf(&cfg, "scrape_configs:\n  - job_name: %s\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: [", job)
	for i, target := range targets {
		if i > 0 {
			cfg.WriteString(", ")
		}
		fmt.Fprintf(&cfg, "'%s'", target)
	}
	cfg.WriteString("]\n")
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(cfg.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	web := "127.0.0.1:" + strconv.Itoa(freeTCPPort(tb))
	proc := testutil.StartProcess(tb, exec.Command(bin,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web,
	), "Server is ready to receive web requests", 2*time.Minute)
	return &Prometheus{Web: web, proc: proc}
}

// Log returns what the server has written so far.
func (p *Prometheus) Log() string { return p.proc.Log() }

// Query runs an instant query. A server that does not answer it yet gives
// no samples and no error; an answer other than success fails tb.
func (p *Prometheus) Query(tb testing.TB, query string) []Sample {
	tb.Helper()
	resp, err := http.Get("http://" + p.Web + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any // [unix time, "value"]
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil
	}
	if r.Status != "success" {
		tb.Fatalf("prometheus: query %s: %s %s", query, r.Status, r.Error)
	}
	var out []Sample
	for _, s := range r.Data.Result {
		text, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			tb.Fatalf("prometheus: query %s: value %q", query, text)
		}
		out = append(out, Sample{s.Metric, v})
	}
	return out
}

// WaitSample waits until query gives exactly one sample and returns it.
func (p *Prometheus) WaitSample(tb testing.TB, query string) Sample {
	tb.Helper()
	var got []Sample
	p.proc.WaitFor(tb, "prometheus to have a sample of "+query, 2*time.Minute, func() bool {
		got = p.Query(tb, query)
		return len(got) == 1
	})
	return got[0]
}
