//go:build linux

package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
)

const (
	unitFile = "flowdedup.service"
	envFile  = "flowdedup.env"
	// stateDir is the unit's StateDirectory, where the example settings
	// put the output files; the tests move it to a temporary directory.
	stateDir = "/var/lib/flowdedup"
)

// unit is a parsed systemd unit file: section -> key -> values in order
// (a key may be given more than once).
type unit map[string]map[string][]string

// get returns the last value of section.key ("" when absent), as systemd
// takes the last assignment of a single-valued setting.
func (u unit) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// words returns every white-space-separated word of every value of
// section.key (list settings such as AmbientCapabilities accumulate).
func (u unit) words(section, key string) []string {
	var w []string
	for _, v := range u[section][key] {
		w = append(w, strings.Fields(v)...)
	}
	return w
}

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	return parseUnitText(t, path, string(mustRead(t, path)))
}

// parseUnitText parses the text of the unit file path.
func parseUnitText(t *testing.T, path, text string) unit {
	t.Helper()
	b := []byte(text)
	u := unit{}
	section := ""
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, n+1, line)
			}
			k = strings.TrimSpace(k)
			u[section][k] = append(u[section][k], strings.TrimSpace(v))
		}
	}
	return u
}

// parseEnv reads a systemd EnvironmentFile: KEY=VALUE lines, a value
// optionally in double quotes.
func parseEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	return parseEnvText(t, path, mustRead(t, path))
}

// parseEnvText parses b, the text of the EnvironmentFile path. A variable
// set twice has its last value, as systemd does.
func parseEnvText(t *testing.T, path string, b []byte) map[string]string {
	t.Helper()
	env := map[string]string{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s:%d: not KEY=VALUE: %q", path, n+1, line)
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		env[k] = v
	}
	return env
}

var varRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$|^\$([A-Za-z_][A-Za-z0-9_]*)$`)

// expandExec expands an ExecStart line as systemd does for the forms the
// unit uses: a word "${VAR}" becomes the value as one word, a word "$VAR"
// the value split on white space. An unset variable fails the test (the
// service would get an empty argument).
func expandExec(t *testing.T, line string, env map[string]string) []string {
	t.Helper()
	var argv []string
	for _, w := range strings.Fields(line) {
		m := varRef.FindStringSubmatch(w)
		switch {
		case m == nil:
			if strings.Contains(w, "$") {
				t.Fatalf("ExecStart word %q: only whole-word ${VAR} and $VAR are expected", w)
			}
			argv = append(argv, w)
		case m[1] != "":
			v, ok := env[m[1]]
			if !ok {
				t.Fatalf("ExecStart uses ${%s}, which %s does not set", m[1], envFile)
			}
			argv = append(argv, v)
		default:
			v, ok := env[m[2]]
			if !ok {
				t.Fatalf("ExecStart uses $%s, which %s does not set", m[2], envFile)
			}
			argv = append(argv, strings.Fields(v)...)
		}
	}
	return argv
}

// buildBinary returns the flowdedup command (testutil.Flowdedup), copied
// into a directory the service's user (nobody) may enter.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(sharedTempDir(t, 0o755), "flowdedup")
	data, err := os.ReadFile(testutil.Flowdedup(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) { testutil.Main(m) }

func needCommand(t *testing.T, name, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		testutil.SkipOrFail(t, "%s not installed (Debian package %s; .ci/run installs it)", name, pkg)
	}
}

// The unit verifies: systemd-analyze finds nothing to say about it, with
// ExecStart's binary and the EnvironmentFile pointing at real files (verify
// checks that the binary exists and is executable). Its sandbox rates
// "OK" or better in systemd-analyze security (exposure below 3.0 of 10).
func TestUnitVerifies(t *testing.T) {
	needCommand(t, "systemd-analyze", "systemd")
	bin := buildBinary(t)
	u := parseUnit(t, unitFile)
	exe := strings.Fields(u.get("Service", "ExecStart"))[0]
	envPath := u.get("Service", "EnvironmentFile")
	if exe != "/usr/bin/flowdedup" || envPath != "/etc/default/flowdedup" {
		t.Fatalf("ExecStart binary %q, EnvironmentFile %q: the Debian package (packaging/nfpm.yaml) and docs/install.md put them at /usr/bin/flowdedup and /etc/default/flowdedup", exe, envPath)
	}
	verifyUnit(t, bin, string(mustRead(t, unitFile)), mustRead(t, envFile))
}

// verifyUnit runs systemd-analyze verify and security on the unit text
// unitText, with its ExecStart binary moved to bin and its EnvironmentFile
// to a copy of env: verify must say nothing, and the sandbox must rate
// below 3.0.
func verifyUnit(t *testing.T, bin, unitText string, env []byte) {
	t.Helper()
	u := parseUnitText(t, unitFile, unitText)
	exe := strings.Fields(u.get("Service", "ExecStart"))[0]
	envPath := u.get("Service", "EnvironmentFile")
	dir := t.TempDir()
	text := strings.ReplaceAll(unitText, exe, bin)
	text = strings.ReplaceAll(text, envPath, filepath.Join(dir, envFile))
	if err := os.WriteFile(filepath.Join(dir, envFile), env, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, unitFile)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("systemd-analyze", "verify", "--man=no", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, stderr.String())
	}

	out, err := exec.Command("systemd-analyze", "security", "--offline=yes", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for [^:]*: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no exposure level:\n%s", out)
	}
	if level, _ := strconv.ParseFloat(string(m[1]), 64); level >= 3.0 {
		t.Errorf("exposure level %.1f, want below 3.0 (OK):\n%s", level, out)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The capabilities live capture needs, as setpriv names them.
var wantCaps = []string{"CAP_BPF", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_PERFMON"}

// The unit grants exactly wantCaps, both ambient and as its bounding set.
func TestUnitCapabilities(t *testing.T) {
	u := parseUnit(t, unitFile)
	for _, key := range []string{"AmbientCapabilities", "CapabilityBoundingSet"} {
		got := u.words("Service", key)
		slices.Sort(got)
		if !slices.Equal(got, wantCaps) {
			t.Errorf("%s = %v, want %v", key, got, wantCaps)
		}
	}
	if u.get("Service", "DynamicUser") != "yes" && u.get("Service", "User") == "" {
		t.Errorf("the unit runs as root: want DynamicUser=yes or a User=")
	}
	if u.get("Service", "NoNewPrivileges") != "yes" || u.get("Service", "Restart") != "on-failure" {
		t.Errorf("want NoNewPrivileges=yes and Restart=on-failure")
	}
}

// setprivCaps returns setpriv's form of a capability list: "+bpf,+net_admin".
func setprivCaps(caps []string) string {
	var s []string
	for _, c := range caps {
		s = append(s, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	return strings.Join(s, ",")
}

// allowedSyscalls expands a SystemCallFilter allow list (names and @groups)
// with systemd-analyze, recursively.
func allowedSyscalls(t *testing.T, filter []string) map[string]bool {
	t.Helper()
	allowed := map[string]bool{}
	seen := map[string]bool{}
	var expand func(string)
	expand = func(name string) {
		if !strings.HasPrefix(name, "@") {
			allowed[name] = true
			return
		}
		if seen[name] {
			return
		}
		seen[name] = true
		out, err := exec.Command("systemd-analyze", "syscall-filter", name).Output()
		if err != nil {
			t.Fatalf("systemd-analyze syscall-filter %s: %v", name, err)
		}
		lines := strings.Split(string(out), "\n")
		for _, l := range lines[1:] { // the first line is the group's name
			if !strings.HasPrefix(l, "    ") {
				continue
			}
			w := strings.TrimSpace(l)
			if w == "" || w[0] == '#' {
				continue
			}
			expand(w)
		}
	}
	for _, f := range filter {
		if strings.HasPrefix(f, "~") {
			t.Fatalf("SystemCallFilter %q: the test expects an allow list", f)
		}
		expand(f)
	}
	if len(allowed) < 100 {
		t.Fatalf("SystemCallFilter %v expands to only %d system calls: systemd-analyze's output changed?", filter, len(allowed))
	}
	return allowed
}

// tracedSyscalls returns the names of the system calls in strace -f output
// files (lines "PID name(args...) = ret").
func tracedSyscalls(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^(?:\d+\s+)?(?:<\.\.\. )?([a-z_][a-z_0-9]*)[( ]`)
	got := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		if m := re.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "+++") && !strings.HasPrefix(line, "---") {
			got[m[1]] = true
		}
	}
	if !got["execve"] {
		t.Fatalf("strace output %s shows no execve: not a trace?\n%.2000s", path, b)
	}
	return got
}

// service is the unit's command running as the service would: an
// unprivileged user holding only the unit's capabilities, in a test
// namespace, under strace.
type service struct {
	*testutil.Process
	trace string
}

// startService starts argv (the unit's ExecStart, already expanded) in ns
// as the nobody user with caps, and returns once it says it is capturing.
func startService(t *testing.T, ns *netns.Namespace, caps []string, argv []string) *service {
	t.Helper()
	// strace runs as the service's user, so it writes to a directory of
	// that user's.
	s := &service{trace: filepath.Join(stateDirFor(t), "strace.out")}
	c := setprivCaps(caps)
	args := []string{"netns", "exec", ns.Name,
		"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all," + c, "--ambient-caps=-all," + c, "--bounding-set=-all," + c, "--no-new-privs",
		"strace", "-f", "-qq", "-o", s.trace, "--"}
	// StartProcess gives it a process group of its own, so that cleanup
	// kills flowdedup too: a killed strace detaches from its tracee and
	// leaves it running.
	s.Process = testutil.StartProcess(t, exec.Command("ip", append(args, argv...)...), "capturing on", 30*time.Second)
	return s
}

// stop sends SIGTERM, as systemd's KillSignal does, to flowdedup and waits
// for a clean exit. The process started is strace (ip, setpriv and strace
// exec one another), which would detach on a signal rather than pass it
// on: the signal goes to its child, flowdedup.
func (s *service) stop(t *testing.T) {
	t.Helper()
	pid := s.Cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Fatalf("finding flowdedup under strace: %v", err)
	}
	children := strings.Fields(string(b))
	if len(children) != 1 {
		t.Fatalf("strace (pid %d) has children %v, want flowdedup alone", pid, children)
	}
	child, _ := strconv.Atoi(children[0])
	if err := syscall.Kill(child, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(t, 20*time.Second); err != nil {
		t.Fatalf("the service exited with %v after SIGTERM:\n%s", err, s.Log())
	}
}

// serviceArgv is the unit's ExecStart expanded from the example settings,
// with the binary, the interface, the state directory and the metrics port
// moved to the test's own.
func serviceArgv(t *testing.T, bin, iface, state string) []string {
	t.Helper()
	u := parseUnit(t, unitFile)
	env := parseEnv(t, envFile)
	env["FLOWDEDUP_IFACE"] = iface
	argv := expandExec(t, u.get("Service", "ExecStart"), env)
	argv[0] = bin
	for i, a := range argv {
		if strings.HasPrefix(a, stateDir+"/") {
			argv[i] = state + strings.TrimPrefix(a, stateDir)
		}
		if i > 0 && argv[i-1] == "--metrics" {
			argv[i] = "127.0.0.1:0" // a free port: tests may run side by side
		}
	}
	return argv
}

// stateDirFor makes the test's state directory, owned by the service's
// user as systemd's StateDirectory= would be.
func stateDirFor(t *testing.T) string {
	t.Helper()
	dir := sharedTempDir(t, 0o750)
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sharedTempDir makes a temporary directory with mode perm directly under
// the system's temporary directory, which every user may enter (t.TempDir's
// parents are private to root), removed at cleanup.
func sharedTempDir(t *testing.T, perm os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "flowdedup-deploy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The unit's command, run as an unprivileged user with exactly the unit's
// capabilities, picks the XDP fast path in --mode auto, reports the
// sources of a capture sent into the interface, closes its window on
// SIGTERM into a whole per-window file, and makes no system call outside
// the unit's SystemCallFilter. The same command in the other live modes
// (a user may add --mode to FLOWDEDUP_OPTS) stays inside the filter too.
func TestServiceRunsUnprivileged(t *testing.T) {
	if testing.Short() {
		t.Skip("live capture test: skipped in -short mode")
	}
	needCommand(t, "setpriv", "util-linux")
	needCommand(t, "strace", "strace")
	needCommand(t, "systemd-analyze", "systemd")
	needCommand(t, "tcpreplay", "tcpreplay")
	ns := netns.NetNS(t)
	if ns.Name == "" {
		testutil.SkipOrFail(t, "the test namespace has no name, so `ip netns exec` cannot enter it")
	}
	bin := buildBinary(t)
	u := parseUnit(t, unitFile)
	caps := u.words("Service", "AmbientCapabilities")
	allowed := allowedSyscalls(t, u.words("Service", "SystemCallFilter"))
	capture := filepath.Join("..", "testdata", "pcaps", "small.pcap")
	want := exactSources(t, bin, capture)

	for _, mode := range []string{"auto", "afpacket", "afxdp"} {
		t.Run(mode, func(t *testing.T) {
			state := stateDirFor(t)
			argv := serviceArgv(t, bin, ns.Veth[0], state)
			if mode != "auto" {
				argv = append(argv, "--mode", mode) // the last --mode wins
			}
			s := startService(t, ns, caps, argv)
			if mode == "auto" && !strings.Contains(s.Log(), "mode auto: using xdp") {
				t.Errorf("--mode auto did not pick xdp with the unit's capabilities:\n%s", s.Log())
			}
			send := exec.Command("ip", "netns", "exec", ns.Name, "tcpreplay", "-q", "-i", ns.Veth[1], "--mbps", "100", capture)
			if b, err := send.CombinedOutput(); err != nil {
				t.Fatalf("tcpreplay: %v\n%s", err, b)
			}
			s.stop(t)

			got := sourcesIn(t, state, "sources-*.jsonl")
			if !maps.Equal(got, want) {
				t.Errorf("mode %s: the service reported %d sources, an exact replay %d:\ngot  %v\nwant %v\n%s", mode, len(got), len(want), keys(got), keys(want), s.Log())
			}
			if tmp, _ := filepath.Glob(filepath.Join(state, "*.tmp")); len(tmp) > 0 {
				t.Errorf("temporary files left after a clean stop: %v", tmp)
			}
			var outside []string
			for name := range tracedSyscalls(t, s.trace) {
				if !allowed[name] {
					outside = append(outside, name)
				}
			}
			slices.Sort(outside)
			if len(outside) > 0 {
				t.Errorf("mode %s made system calls the unit's SystemCallFilter does not allow: %v", mode, outside)
			}
		})
	}

	// Without CAP_PERFMON the verifier refuses the XDP program: --mode
	// auto falls back to afpacket and says what was missing.
	t.Run("without CAP_PERFMON", func(t *testing.T) {
		state := stateDirFor(t)
		less := slices.DeleteFunc(slices.Clone(caps), func(c string) bool { return c == "CAP_PERFMON" })
		s := startService(t, ns, less, serviceArgv(t, bin, ns.Veth[0], state))
		s.stop(t)
		if log := s.Log(); !strings.Contains(log, "using afpacket") || !strings.Contains(log, "CAP_PERFMON") {
			t.Errorf("without CAP_PERFMON: want a fall back to afpacket naming CAP_PERFMON, got:\n%s", log)
		}
	})
}

// exactSources runs an exact replay of capture and returns its sources.
func exactSources(t *testing.T, bin, capture string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "replay", "--filter", "exact", "--key", "src", "--out", "-", capture).Output()
	if err != nil {
		t.Fatalf("replay %s: %v", capture, err)
	}
	return srcSet(t, out)
}

// sourcesIn reads the sources of every record file matching glob in dir.
func sourcesIn(t *testing.T, dir, glob string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil || len(files) == 0 {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("no %s in the state directory (it holds %v)", glob, names)
	}
	got := map[string]bool{}
	for _, f := range files {
		for k := range srcSet(t, mustRead(t, f)) {
			got[k] = true
		}
	}
	return got
}

func srcSet(t *testing.T, jsonl []byte) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	for line := range strings.Lines(string(jsonl)) {
		var r struct{ Src string }
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Src == "" {
			t.Fatalf("record %q: %v", line, err)
		}
		set[r.Src] = true
	}
	return set
}

func keys(m map[string]bool) string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return fmt.Sprint(k)
}

// uncomment returns text with the lines that begin with '#' followed by
// prefix made active (the '#' dropped), and how many there were.
func uncomment(text, prefix string) (string, int) {
	lines := strings.Split(text, "\n")
	n := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "#"+prefix) {
			lines[i] = l[1:]
			n++
		}
	}
	return strings.Join(lines, "\n"), n
}

// The ClickHouse password as the unit and its settings suggest, commented
// out: LoadCredential= in the unit and password_file=
// ${CREDENTIALS_DIRECTORY}/ID in the --export URL of flowdedup.env.
// Uncommented, the unit still verifies (and rates as well); the command
// line holds no password; and the --export URL of that command line,
// pointed at a real clickhouse-server, logs in as the user of the example
// with the password from the credential's file, as systemd would provide
// it (ExecStart gets ${CREDENTIALS_DIRECTORY} of an EnvironmentFile value
// as it is: systemd expands variables on the ExecStart line, not within
// their values), with no warning. Without $CREDENTIALS_DIRECTORY the
// command is refused (exit 2) and says why. The other way the settings
// show, FLOWDEDUP_CLICKHOUSE_PASSWORD, is there too, commented out.
func TestUnitClickHouseCredential(t *testing.T) {
	needCommand(t, "systemd-analyze", "systemd")
	bin := buildBinary(t)
	unitText, n := uncomment(string(mustRead(t, unitFile)), "LoadCredential=")
	if n != 1 {
		t.Fatalf("%s has %d commented-out LoadCredential= lines, want 1", unitFile, n)
	}
	envText, n := uncomment(string(mustRead(t, envFile)), "FLOWDEDUP_OPTS=")
	if n != 1 {
		t.Fatalf("%s has %d commented-out FLOWDEDUP_OPTS= lines, want 1 (the export example)", envFile, n)
	}
	if _, n := uncomment(string(mustRead(t, envFile)), "FLOWDEDUP_CLICKHOUSE_PASSWORD="); n != 1 {
		t.Errorf("%s has %d commented-out FLOWDEDUP_CLICKHOUSE_PASSWORD= lines, want 1", envFile, n)
	}
	verifyUnit(t, bin, unitText, []byte(envText))

	u := parseUnitText(t, unitFile, unitText)
	id, source, ok := strings.Cut(u.get("Service", "LoadCredential"), ":")
	if !ok || !strings.HasPrefix(source, "/etc/flowdedup/") {
		t.Fatalf("LoadCredential=%s: want ID:/etc/flowdedup/FILE", u.get("Service", "LoadCredential"))
	}
	env := parseEnvText(t, envFile, []byte(envText))
	env["FLOWDEDUP_IFACE"] = "eth0"
	argv := expandExec(t, u.get("Service", "ExecStart"), env)
	i := slices.Index(argv, "--export")
	if i < 0 || i+1 == len(argv) {
		t.Fatalf("the export example's command line has no --export: %q", argv)
	}
	exportURL := argv[i+1]
	if want := "?password_file=${CREDENTIALS_DIRECTORY}/" + id; !strings.HasSuffix(exportURL, want) {
		t.Fatalf("--export %s: want the credential %s's file, %s", exportURL, id, want)
	}
	const password = servers.ClickHousePassword
	if strings.Contains(strings.Join(argv, " "), password) {
		t.Fatalf("the command line holds the password")
	}

	ch := servers.StartClickHouse(t)
	m := regexp.MustCompile(`^clickhouse://([^@:/]+)@([^/]+)(/[a-z_]+\?.*)$`).FindStringSubmatch(exportURL)
	if m == nil || m[1] != servers.ClickHouseUser {
		t.Fatalf("--export %s: want clickhouse://%s@HOST:PORT/DB?... (the test server's user)", exportURL, servers.ClickHouseUser)
	}
	local := "clickhouse://" + m[1] + "@" + ch.Addr + m[3]
	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, id), []byte(password+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	capture := filepath.Join("..", "testdata", "pcaps", "small.pcap")
	replay := func(extraEnv ...string) (int, string) {
		cmd := exec.Command(bin, "replay", "--key", "src", "--filter", "exact", "--out", os.DevNull, "--observer", "unit", "--export", local, capture)
		// The service's environment: no password variable of the test's.
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "FLOWDEDUP_CLICKHOUSE_PASSWORD=") || strings.HasPrefix(kv, "CREDENTIALS_DIRECTORY=")
		}), extraEnv...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(stderr.String(), password) {
			t.Errorf("stderr shows the password:\n%s", stderr.String())
		}
		return code, stderr.String()
	}

	code, errs := replay("CREDENTIALS_DIRECTORY=" + creds)
	if code != 0 || strings.Contains(errs, "warning") || strings.Contains(errs, "rejected") {
		t.Fatalf("with the credential: exit %d, stderr:\n%s", code, errs)
	}
	want := len(exactSources(t, bin, capture))
	db := strings.TrimPrefix(m[3][:strings.IndexByte(m[3], '?')], "/")
	got := strings.TrimSpace(ch.Query(t, "SELECT count() FROM "+db+".flows WHERE observer = 'unit'"))
	if got != strconv.Itoa(want) {
		t.Errorf("%s rows in %s.flows, want %d (the capture's sources)\n%s", got, db, want, errs)
	}

	code, errs = replay()
	if code != 2 || !strings.Contains(errs, "$CREDENTIALS_DIRECTORY is not set") {
		t.Errorf("without $CREDENTIALS_DIRECTORY: exit %d, want 2 saying it is not set:\n%s", code, errs)
	}
}
