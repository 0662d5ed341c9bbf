package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// Each shell's completion script is produced, and is that shell's.
func TestCompletionScripts(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash":       "complete -o default -F __start_flowdedup flowdedup",
		"zsh":        "#compdef flowdedup",
		"fish":       "complete -c flowdedup",
		"powershell": "Register-ArgumentCompleter",
	} {
		code, out, errs := run("completion", shell)
		if code != ExitOK || errs != "" || !strings.Contains(out, marker) {
			t.Errorf("completion %s: exit %d, stderr %q, script lacks %q", shell, code, errs, marker)
		}
	}
}

// completions asks the completion back end every script calls
// (`flowdedup __complete ARGS... PREFIX`) and returns its candidates.
func completions(t *testing.T, args ...string) []string {
	t.Helper()
	code, out, errs := run(append([]string{"__complete"}, args...)...)
	if code != ExitOK {
		t.Fatalf("__complete %q: exit %d: %s", args, code, errs)
	}
	var got []string
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, ":") { // the directive
			continue
		}
		name, _, _ := strings.Cut(line, "\t") // drop descriptions
		got = append(got, name)
	}
	return got
}

func TestCompletionCandidates(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"re"}, []string{"replay"}},
		{[]string{"replay", "--key", ""}, []string{"src", "dst", "pair", "5tuple"}},
		{[]string{"replay", "x.pcap", "--format", ""}, []string{"jsonl", "csv", "text"}},
		{[]string{"replay", "--fil"}, []string{"--filter"}},
		{[]string{"replay", "--filter", "qh"}, []string{"qht", "qhtd"}},
		{[]string{"eval", "--format", ""}, []string{"text", "json", "csv"}},
		{[]string{"gen", "--format", ""}, []string{"pcap", "pcapng"}},
	} {
		got := completions(t, c.args...)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("__complete %q = %q, lacks %q", c.args, got, w)
			}
		}
	}
}

// flowdedupBinary returns the directory of the flowdedup command built
// once for these tests (testutil.Flowdedup), for a shell's PATH.
func flowdedupBinary(t *testing.T) string { return filepath.Dir(testutil.Flowdedup(t)) }

// bashCompletion is bash-completion's library, which the script cobra
// writes for bash calls (_get_comp_words_by_ref).
const bashCompletion = "/usr/share/bash-completion/bash_completion"

// The bash script really completes in bash, as an interactive shell with
// bash-completion loads it: it calls the binary's completion back end and
// fills COMPREPLY.
func TestBashCompletes(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		testutil.SkipOrFail(t, "no bash on this system")
	}
	if _, err := os.Stat(bashCompletion); err != nil {
		testutil.SkipOrFail(t, "bash-completion is not installed (Debian package bash-completion; .ci/run installs it)")
	}
	dir := flowdedupBinary(t)
	for _, c := range []struct {
		line string // the words typed, the last one being completed
		want []string
	}{
		{"flowdedup rep", []string{"replay"}},
		{"flowdedup replay --key ", []string{"src", "dst", "pair", "5tuple"}},
		{"flowdedup replay x.pcap --ke", []string{"--key"}},
	} {
		words := strings.Fields(c.line)
		if strings.HasSuffix(c.line, " ") {
			words = append(words, "")
		}
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+w+"'")
		}
		script := `source ` + bashCompletion + `
source <(flowdedup completion bash)
COMP_WORDS=(` + strings.Join(quoted, " ") + `)
COMP_CWORD=` + strconv.Itoa(len(words)-1) + `
COMP_LINE='` + c.line + `'
COMP_POINT=${#COMP_LINE}
__start_flowdedup
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, "--norc", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stderr strings.Builder
		cmd.Stderr = &stderr // bash's compopt complains outside a real completion
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%q: %v\n%s", c.line, err, stderr.String())
		}
		got := strings.Fields(string(out))
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("bash completes %q to %q, lacks %q", c.line, got, w)
			}
		}
	}
}
