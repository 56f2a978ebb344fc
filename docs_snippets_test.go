package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pythonBlocks returns the fenced ```python blocks of a Markdown page.
func pythonBlocks(page string) []string {
	var out []string
	var cur []string
	in := false
	for _, line := range strings.Split(page, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```python":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			out = append(out, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	return out
}

// docsSnippetPrelude defines what the pages' redis-py snippets take as
// given (a client r, the request's ip / api_key / users, a web framework's
// Response, the application's TooManyAttempts) and runs each snippet as the
// body of a function, again and again, so that both its allowed and its
// limited branch run against the real server's replies.
const docsSnippetPrelude = `
import os, sys, redis
r = redis.Redis(host="127.0.0.1", port=int(os.environ["CELLD_PORT"]))
ip, api_key, users = "203.0.113.7", "k1", ["42", "43"]
class TooManyAttempts(Exception):
    pass
def Response(status, headers):
    return (status, headers)
`

// TestDocsFamilyPythonSnippets runs every redis-py snippet of the GCRA
// family's pages (docs/gcra-family/*.md: the login limit, the 20-per-second
// API, the dashboard) with the real redis-py against a real celld, each
// called until its limited branch has run too, and checks what the
// branches produce: the snippets unpack the replies (a five-integer list,
// CL.MTHROTTLE's verdict and groups), so a reply shape the page gets wrong
// fails here. TestDocsFamilyTranscripts checks the pages' redis-cli
// transcripts the same way. Needs python3 with redis-py (CI installs
// python3-redis; elsewhere the test skips).
func TestDocsFamilyPythonSnippets(t *testing.T) {
	var python string
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import redis").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 with redis-py not found: .ci/run installs python3-redis")
		}
		t.Skip("python3 with redis-py not found (install python3-redis; CI always runs this)")
	}
	pages, err := filepath.Glob(filepath.Join("docs", "gcra-family", "*.md"))
	if err != nil || len(pages) < 5 {
		t.Fatalf("docs/gcra-family: %d pages (%v), want the family's five", len(pages), err)
	}
	c := mustLaunch(t, t.TempDir())
	rdb := c.client()
	_, port, _ := net.SplitHostPort(c.addr)
	// What each page's snippet must show when called 25 times: the limited
	// branch's effect, checked by the driver below.
	checks := map[string]string{
		// 5 per 15 minutes: calls 1-5 pass, the 6th raises with a wait.
		"cl.mthrottle.md": `
for i in range(25):
    try:
        snippet()
    except TooManyAttempts as e:
        assert i == 5, ("limited at call", i + 1)
        assert 0 < e.args[0] <= 900, e.args
        break
else:
    sys.exit("login snippet: never limited")
`,
		// 20 per second: calls 1-20 pass (None), the 21st answers 429 with
		// Retry-After 1 and Retry-After-Ms in (0, 50].
		"cl.pthrottle.md": `
got = [snippet() for i in range(21)]
assert got[:20] == [None] * 20, got
status, headers = got[20]
assert status == 429 and headers["Retry-After"] == "1", got[20]
assert 0 < int(headers["Retry-After-Ms"]) <= 50, headers
`,
		// A peek: twice, the same full quota, and nothing written.
		"cl.throttle_ro.md": `
snippet(); snippet()
assert r.dbsize() == 0, r.dbsize()
`,
	}
	ran := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(page)
		for bi, block := range pythonBlocks(string(text)) {
			check, ok := checks[base]
			if !ok {
				t.Errorf("%s: a redis-py snippet with no check in this test; add one", base)
				continue
			}
			if err := rdb.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			var body strings.Builder
			for _, line := range strings.Split(block, "\n") {
				body.WriteString("    " + line + "\n")
			}
			prog := docsSnippetPrelude + "def snippet():\n" + body.String() + check
			cmd := exec.Command(python, "-c", prog)
			cmd.Env = append(os.Environ(), "CELLD_PORT="+port)
			out, err := cmd.CombinedOutput()
			t.Logf("%s#%d:\n%s", base, bi+1, strings.TrimSpace(string(out)))
			if err != nil {
				t.Errorf("%s#%d: %v\n--- program:\n%s\n--- output:\n%s", base, bi+1, err, prog, out)
			}
			ran++
		}
	}
	if ran != len(checks) {
		t.Errorf("ran %d redis-py snippets, want the %d this test checks", ran, len(checks))
	}
}
