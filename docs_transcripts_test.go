package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDocsFamilyTranscripts runs every command transcript of the GCRA
// family's pages (docs/gcra-family/*.md) against a real celld, through the
// real redis-cli over a socket and bash for the shell around it, and checks
// the documented output, so the pages cannot drift from what the server
// answers.
//
// A transcript is a fenced block whose lines start with "$ " (a command,
// continued on the next lines while its parentheses are open) followed by
// that command's output. Each block runs on an emptied keyspace (FLUSHALL),
// its commands in order, with `redis-cli` on PATH pointing at the test's
// celld. A command that is one bare `redis-cli ...` (output to the
// terminal in the page) is run with --no-raw, so it prints as on a
// terminal; in a pipe redis-cli prints raw values, as the pages show.
//
// Output is compared line by line after dropping "# ..." comments and
// folding runs of spaces; a "..." line stands for any number of lines
// (the documented lines before it must be the first ones printed, those
// after it the last). Every word must be equal, except durations, which
// depend on when the block runs: retry_after and reset_after (the 4th and
// 5th integer of a five-integer reply, when not -1) and the reply of PTTL
// or TTL. A duration d documented in the page's unit u (ms for the P
// commands and PTTL, s otherwise) passes when the printed value lies in
// [d - ceil(elapsed/u) - 1, d + slack], elapsed being the time since the
// block started and slack 10 ms or 1 s (the page's own run took a little
// time too). Everything else (verdicts, limits, remaining, -1, errors) is
// exact.
//
// redis-cli and bash are required: without them the test skips, except in
// CI (CI set), where .ci/run installs redis-tools and a missing one fails.
func TestDocsFamilyTranscripts(t *testing.T) {
	cli := docsNeedTool(t, "redis-cli", "redis-tools")
	docsNeedTool(t, "bash", "bash")
	pages, err := filepath.Glob(filepath.Join("docs", "gcra-family", "*.md"))
	if err != nil || len(pages) < 5 {
		t.Fatalf("docs/gcra-family: %d pages (%v), want the family's five", len(pages), err)
	}
	c := mustLaunch(t, t.TempDir())
	rdb := c.client()
	_, port, _ := net.SplitHostPort(c.addr)
	bin := t.TempDir()
	wrapper := "#!/bin/sh\nif [ -n \"$DOCS_TTY\" ]; then set -- --no-raw \"$@\"; fi\nexec " + strconv.Quote(cli) + " -h 127.0.0.1 -p " + port + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "redis-cli"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		blocks := transcripts(string(text))
		if len(blocks) == 0 {
			t.Errorf("%s: no transcript (a fenced block of \"$ \" commands and their output); every family page shows one", page)
		}
		for bi, b := range blocks {
			name := fmt.Sprintf("%s#%d", filepath.Base(page), bi+1)
			if err := rdb.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for _, step := range b {
				cmd := exec.Command("bash", "-c", step.cmd)
				cmd.Env = env
				if bare := transcriptQuoted.ReplaceAllString(strings.TrimSpace(transcriptComment(step.cmd)), "''"); strings.HasPrefix(bare, "redis-cli ") && !strings.ContainsAny(bare, "|;&()") {
					cmd.Env = append(cmd.Env, "DOCS_TTY=1")
				}
				out, err := cmd.CombinedOutput()
				elapsed := time.Since(start)
				if err != nil {
					t.Errorf("%s: `%s`: %v\n%s", name, step.cmd, err, out)
					continue
				}
				if msg := matchTranscript(step, strings.Split(strings.TrimRight(string(out), "\n"), "\n"), elapsed); msg != "" {
					t.Errorf("%s: `%s`: %s\ndocumented:\n%s\nprinted:\n%s", name, step.cmd, msg, strings.Join(step.want, "\n"), out)
				}
			}
		}
	}
}

// docsNeedTool finds an executable, skipping the test outside CI when it is
// missing (see TestDocsFamilyTranscripts).
func docsNeedTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found on PATH: .ci/run installs it (apt-get install -y %s)", name, pkg)
		}
		t.Skipf("%s not installed: apt-get install %s to run this test (CI always runs it)", name, pkg)
	}
	return p
}

// transcriptStep is one documented command and the output lines shown
// under it.
type transcriptStep struct {
	cmd  string
	want []string
}

// transcripts returns the transcript blocks of a markdown page: fenced
// blocks whose first non-empty line starts with "$ ".
func transcripts(md string) [][]transcriptStep {
	var blocks [][]transcriptStep
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		j := i + 1
		for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
			j++
		}
		body := lines[i+1 : min(j, len(lines))]
		i = j
		if len(body) == 0 || !strings.HasPrefix(body[0], "$ ") {
			continue
		}
		var b []transcriptStep
		for k := 0; k < len(body); k++ {
			line := body[k]
			if strings.HasPrefix(line, "$ ") {
				cmd := strings.TrimPrefix(line, "$ ")
				for openParens(transcriptComment(cmd)) > 0 && k+1 < len(body) {
					k++
					cmd += "\n" + body[k]
				}
				b = append(b, transcriptStep{cmd: cmd})
				continue
			}
			if s := &b[len(b)-1]; strings.TrimSpace(line) != "" || len(s.want) > 0 {
				s.want = append(s.want, line)
			}
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// openParens is the number of parentheses a shell line leaves open.
func openParens(s string) int { return strings.Count(s, "(") - strings.Count(s, ")") }

// transcriptComment drops a "# ..." comment (a '#' at the start or after a
// space) from a transcript line.
func transcriptComment(s string) string {
	if strings.HasPrefix(s, "#") {
		return ""
	}
	if i := strings.Index(s, " #"); i >= 0 {
		return s[:i]
	}
	return s
}

var (
	transcriptInt    = regexp.MustCompile(`^-?[0-9]+$`)
	transcriptIndex  = regexp.MustCompile(`^[0-9]+\)$`)
	transcriptQuoted = regexp.MustCompile(`'[^']*'|"[^"]*"`)
)

// matchTranscript compares what a step printed with what its page shows
// (see TestDocsFamilyTranscripts for the rules) and says what differs, or
// returns "".
func matchTranscript(step transcriptStep, got []string, elapsed time.Duration) string {
	var want []string
	for _, l := range step.want {
		if l = strings.TrimSpace(transcriptComment(l)); l != "" || len(want) > 0 {
			want = append(want, l)
		}
	}
	for len(want) > 0 && want[len(want)-1] == "" {
		want = want[:len(want)-1]
	}
	unit, slack := time.Second, int64(1)
	cmd := strings.ToUpper(step.cmd)
	if strings.Contains(cmd, "PTHROTTLE") || strings.Contains(cmd, "PTTL") {
		unit, slack = time.Millisecond, 10
	}
	lone := strings.Contains(cmd, "TTL ") // a bare integer reply is a TTL
	head, tail := want, []string(nil)
	for i, l := range want {
		if l == "..." {
			head, tail = want[:i], want[i+1:]
			break
		}
	}
	if len(head)+len(tail) > len(got) || (tail == nil && len(head) != len(got)) {
		return fmt.Sprintf("%d lines printed, the page shows %d", len(got), len(head)+len(tail))
	}
	for _, part := range []struct {
		want, got []string
	}{{head, got[:len(head)]}, {tail, got[len(got)-len(tail):]}} {
		raw := 0 // raw integers seen in this part: their place in a five-integer reply
		for i, w := range part.want {
			ww, gw := strings.Fields(w), strings.Fields(part.got[i])
			if len(ww) != len(gw) {
				return fmt.Sprintf("line %q printed, the page shows %q", part.got[i], w)
			}
			for k := range ww {
				if ww[k] == gw[k] {
					if transcriptInt.MatchString(ww[k]) && (k == 0 || ww[k-1] != "(integer)") {
						raw++
					}
					continue
				}
				if !transcriptInt.MatchString(ww[k]) || !transcriptInt.MatchString(gw[k]) {
					return fmt.Sprintf("line %q printed, the page shows %q", part.got[i], w)
				}
				pos := -1 // place in a five-integer reply, or -2 for a lone integer
				switch {
				case k > 0 && ww[k-1] == "(integer)" && k > 1 && transcriptIndex.MatchString(ww[k-2]):
					pos, _ = strconv.Atoi(strings.TrimSuffix(ww[k-2], ")"))
					pos--
				case k > 0 && ww[k-1] == "(integer)":
					pos = -2
				default:
					pos = raw % 5
					raw++
				}
				d, _ := strconv.ParseInt(ww[k], 10, 64)
				v, _ := strconv.ParseInt(gw[k], 10, 64)
				duration := d >= 0 && (pos == 3 || pos == 4 || (pos == -2 && lone))
				lo := d - int64(math.Ceil(float64(elapsed)/float64(unit))) - 1
				if !duration || v < lo || v > d+slack {
					return fmt.Sprintf("line %q printed, the page shows %q (word %d: %d, want %d%s)",
						part.got[i], w, k+1, v, d, map[bool]string{true: fmt.Sprintf(" within [%d, %d]", lo, d+slack)}[duration])
				}
			}
		}
	}
	return ""
}

// The transcript matcher's rules, without a server: exact words, durations
// within the elapsed time, -1 exact, "..." for any lines, comments ignored.
func TestTranscriptMatcher(t *testing.T) {
	ms := transcriptStep{cmd: "for i in $(seq 3); do echo CL.PTHROTTLE k 19 20 1000; done | redis-cli | paste -d' ' - - - - -",
		want: []string{"0 20 19 -1 50    # first", "...", "0 20 17 -1 149", "1 20 17 49 999"}}
	tty := transcriptStep{cmd: "redis-cli CL.THROTTLE k 15 30 60 3",
		want: []string{"1) (integer) 0", "2) (integer) 16", "3) (integer) 13", "4) (integer) -1", "5) (integer) 6"}}
	pttl := transcriptStep{cmd: "redis-cli PTTL k", want: []string{"(integer) 5990"}}
	for _, c := range []struct {
		step    transcriptStep
		got     string
		elapsed time.Duration
		ok      bool
	}{
		{ms, "0 20 19 -1 50\n0 20 18 -1 99\n0 20 17 -1 149\n1 20 17 49 999", time.Millisecond, true},
		{ms, "0 20 19 -1 50\n0 20 17 -1 149\n1 20 17 49 999", time.Millisecond, true},     // "..." may be no line
		{ms, "0 20 19 -1 47\n0 20 17 -1 146\n1 20 17 46 996", 3 * time.Millisecond, true}, // 3 ms later
		{ms, "0 20 19 -1 47\n0 20 17 -1 146\n1 20 17 46 996", 0, false},                   // ... but none passed
		{ms, "0 20 19 -1 50\n0 20 17 -1 149\n1 20 17 61 999", time.Millisecond, false},    // too late a retry
		{ms, "0 20 19 -1 50\n0 20 17 -1 149\n0 20 17 49 999", time.Millisecond, false},    // the verdict
		{ms, "0 20 19 -1 50\n0 20 17 -1 149\n1 20 16 49 999", time.Millisecond, false},    // remaining
		{ms, "0 20 19 -1 50\n0 20 17 -1 149\n1 20 17 -1 999", time.Millisecond, false},    // -1 for a time
		{ms, "0 20 19 -1 50\n0 20 17 -1 149", time.Millisecond, false},                    // a line short
		{tty, "1) (integer) 0\n2) (integer) 16\n3) (integer) 13\n4) (integer) -1\n5) (integer) 5", 10 * time.Millisecond, true},
		{tty, "1) (integer) 0\n2) (integer) 16\n3) (integer) 12\n4) (integer) -1\n5) (integer) 6", 0, false},
		{tty, "1) (integer) 0\n2) (integer) 16\n3) (integer) 13\n4) (integer) 0\n5) (integer) 6", 0, false},
		{tty, "0\n16\n13\n-1\n6", 0, false}, // raw where the page shows a terminal's output
		{pttl, "(integer) 5970", 25 * time.Millisecond, true},
		{pttl, "(integer) 5970", 5 * time.Millisecond, false},
		{pttl, "(integer) 6001", 0, false},
	} {
		msg := matchTranscript(c.step, strings.Split(c.got, "\n"), c.elapsed)
		if (msg == "") != c.ok {
			t.Errorf("%q printed %q after %v: matched %v (%s), want %v", c.step.cmd, c.got, c.elapsed, msg == "", msg, c.ok)
		}
	}
	blocks := transcripts("text\n```\n$ (for i in 1 2; do echo PING; done\n   echo PING) | redis-cli   # three\nPONG\nPONG\nPONG\n$ redis-cli PING\nPONG\n```\n```go\nx := 1\n```\n")
	if len(blocks) != 1 || len(blocks[0]) != 2 || !strings.Contains(blocks[0][0].cmd, "\n   echo PING)") ||
		len(blocks[0][0].want) != 3 || blocks[0][1].cmd != "redis-cli PING" {
		t.Fatalf("transcripts parsed %q", blocks)
	}
}
