package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fencedBlocks returns the bodies of a Markdown page's blocks fenced as
// ```lang ... ```.
func fencedBlocks(page, lang string) []string {
	var out []string
	var cur []string
	in := false
	for _, line := range strings.Split(page, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```"+lang:
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

// pythonBlocks returns the fenced ```python blocks of a Markdown page.
func pythonBlocks(page string) []string { return fencedBlocks(page, "python") }

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

// goBlocks returns the fenced ```go blocks of a Markdown page.
func goBlocks(page string) []string { return fencedBlocks(page, "go") }

// goSnippetFragment wraps a page's go-redis snippet that is not a whole
// function (the HTTP handler's body of cl.pthrottle.md) in one that gives
// it what it takes as given: ctx, rdb, the request's apiKey and the
// response writer w.
const goSnippetFragment = `func snippet_%s(ctx context.Context, rdb *redis.Client, w http.ResponseWriter, apiKey string) error {
%s
	return nil
}
`

// goSnippetChecks are the drivers of the go-redis snippets, per page: Go
// statements run with ctx and rdb against a real celld, which return an
// error when a snippet's branches do not produce what the page says.
var goSnippetChecks = map[string]string{
	// 5 per 15 minutes: calls 1-5 pass, the 6th is refused with a wait.
	"cl.mthrottle.md": `
	for i := range 25 {
		ok, wait, err := allowLogin(ctx, rdb, "203.0.113.7")
		if err != nil {
			return err
		}
		if !ok {
			if i != 5 || wait <= 0 || wait > 900*time.Second {
				return fmt.Errorf("limited at call %d with retry after %v", i+1, wait)
			}
			return nil
		}
	}
	return fmt.Errorf("login snippet: never limited")
`,
	// 20 per second: calls 1-20 pass with X-RateLimit-Remaining, the 21st
	// answers 429 with Retry-After 1 and Retry-After-Ms in (0, 50].
	"cl.pthrottle.md": `
	for i := range 21 {
		w := httptest.NewRecorder()
		if err := snippet_cl_pthrottle(ctx, rdb, w, "k1"); err != nil {
			return err
		}
		h := w.Result().Header
		if i < 20 {
			if w.Code != 200 || h.Get("X-RateLimit-Remaining") != strconv.Itoa(19-i) {
				return fmt.Errorf("call %d: status %d, remaining %q", i+1, w.Code, h.Get("X-RateLimit-Remaining"))
			}
			continue
		}
		ms, _ := strconv.Atoi(h.Get("Retry-After-Ms"))
		if w.Code != 429 || h.Get("Retry-After") != "1" || ms <= 0 || ms > 50 {
			return fmt.Errorf("call 21: status %d, headers %v", w.Code, h)
		}
	}
	return nil
`,
	// A peek: on a fresh user the full quota (16 of 16, full now), nothing
	// written; after one request charged, twice the same 15 left, full
	// again in 2 s (30 per 60 s), nothing more written.
	"cl.throttle_ro.md": `
	if left, full, err := quota(ctx, rdb, "43"); err != nil || left != 16 || full != 0 {
		return fmt.Errorf("fresh quota: %d left, full in %d s (%v); want 16 and 0", left, full, err)
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 0 {
		return fmt.Errorf("DBSIZE after a peek: %d, %v", n, err)
	}
	if err := rdb.Do(ctx, "CL.THROTTLE", "user:42", 15, 30, 60, 1).Err(); err != nil {
		return err
	}
	for range 2 {
		left, full, err := quota(ctx, rdb, "42")
		if err != nil {
			return err
		}
		if left != 15 || full < 1 || full > 2 {
			return fmt.Errorf("quota after one request: %d left, full in %d s; want 15 and 1-2", left, full)
		}
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 1 {
		return fmt.Errorf("DBSIZE after the peeks: %d, %v; want 1", n, err)
	}
	return nil
`,
}

// TestDocsFamilyGoSnippets compiles every go-redis snippet of the GCRA
// family's pages (docs/gcra-family/*.md) with the go-redis this module
// requires, into one program with a driver per page, and runs it against
// a real celld: each snippet is called until its limited branch has run,
// and what its branches return (or write to the HTTP response) is
// checked. So a snippet that does not compile, unpacks a reply of the
// wrong shape (go-redis's Int64Slice on a nested reply, an index past a
// five-integer reply) or misreads a field fails here, as
// TestDocsFamilyPythonSnippets does for redis-py.
func TestDocsFamilyGoSnippets(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("docs", "gcra-family", "*.md"))
	if err != nil || len(pages) < 5 {
		t.Fatalf("docs/gcra-family: %d pages (%v), want the family's five", len(pages), err)
	}
	var prog strings.Builder
	prog.WriteString(`package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var _ = http.StatusOK
var _ = httptest.NewRecorder
var _ = strconv.Itoa
var _ = time.Second

`)
	var names []string
	var drivers strings.Builder
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(page)
		blocks := goBlocks(string(text))
		if len(blocks) == 0 {
			continue
		}
		check, ok := goSnippetChecks[base]
		if !ok || len(blocks) != 1 {
			t.Errorf("%s: %d go-redis snippets, this test checks %v of one; add a check", base, len(blocks), ok)
			continue
		}
		name := strings.NewReplacer(".md", "", ".", "_").Replace(base)
		if strings.HasPrefix(strings.TrimSpace(blocks[0]), "func ") {
			prog.WriteString(blocks[0] + "\n\n")
		} else {
			prog.WriteString(fmt.Sprintf(goSnippetFragment, name, blocks[0]) + "\n")
		}
		fmt.Fprintf(&drivers, "\t%q: func() error {%s},\n", name, check)
		names = append(names, name)
	}
	prog.WriteString("var checks = map[string]func() error{\n" + drivers.String() + "}\n")
	prog.WriteString(`
var (
	ctx = context.Background()
	rdb = redis.NewClient(&redis.Options{Addr: os.Args[1]})
)

// main runs the check named by os.Args[2] on a flushed server.
func main() {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	if err := checks[os.Args[2]](); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("ok")
}
`)
	if len(names) != len(goSnippetChecks) {
		t.Fatalf("found go-redis snippets on %v, want the %d pages this test checks", names, len(goSnippetChecks))
	}
	// A module of its own with this one's requirements (go.mod and go.sum
	// copied): the build needs no network, only the module cache.
	dir := t.TempDir()
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(mod), "\n")
	for name, b := range map[string][]byte{"go.mod": []byte("module snippets\n" + rest), "go.sum": sum, "main.go": []byte(prog.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "snippets")
	build := exec.Command(goToolPath(), "build", "-mod=mod", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the go-redis snippets do not compile: %v\n%s\n--- program:\n%s", err, out, prog.String())
	}
	c := mustLaunch(t, t.TempDir())
	for _, name := range names {
		out, err := exec.Command(bin, c.addr, name).CombinedOutput()
		t.Logf("%s: %s", name, strings.TrimSpace(string(out)))
		if err != nil {
			t.Errorf("%s: %v: %s", name, err, out)
		}
	}
}

// jsBlocks returns the fenced ```js blocks of a Markdown page.
func jsBlocks(page string) []string { return fencedBlocks(page, "js") }

// jsSnippetPrelude stands in for ioredis (not packaged by Debian; CI does
// not reach npm): a Redis whose call(...args) sends one command over a
// real socket (RESP2) and resolves with the reply as ioredis maps it
// (integers as numbers, bulk strings as strings, arrays as arrays, nil as
// null; an error reply rejects), plus what the snippets take as given (ip,
// apiKey, user, an Express-like res, TooManyAttempts).
const jsSnippetPrelude = `
const net = require("net");
function parse(b, i) {
  const nl = b.indexOf("\r\n", i);
  if (nl < 0) return null;
  const t = String.fromCharCode(b[i]), line = b.toString("latin1", i + 1, nl);
  let p = nl + 2;
  switch (t) {
  case ":": return [Number(line), p];
  case "+": return [line, p];
  case "-": return [new Error(line), p];
  case "$": {
    const n = Number(line);
    if (n < 0) return [null, p];
    if (b.length < p + n + 2) return null;
    return [b.toString("utf8", p, p + n), p + n + 2];
  }
  case "*": {
    const n = Number(line);
    if (n < 0) return [null, p];
    const a = [];
    for (let k = 0; k < n; k++) {
      const r = parse(b, p);
      if (!r) return null;
      a.push(r[0]);
      p = r[1];
    }
    return [a, p];
  }
  }
  throw new Error("unexpected reply type " + t);
}
class Redis {
  constructor(port) {
    this.sock = net.connect(port, "127.0.0.1");
    this.buf = Buffer.alloc(0);
    this.waiting = null;
    this.sock.on("data", (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      const r = parse(this.buf, 0);
      if (r && this.waiting) {
        this.buf = this.buf.subarray(r[1]);
        const w = this.waiting;
        this.waiting = null;
        r[0] instanceof Error ? w.reject(r[0]) : w.resolve(r[0]);
      }
    });
  }
  call(...args) {
    let cmd = "*" + args.length + "\r\n";
    for (const a of args) {
      const s = String(a);
      cmd += "$" + Buffer.byteLength(s) + "\r\n" + s + "\r\n";
    }
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.sock.write(cmd);
    });
  }
}
const redis = new Redis(Number(process.env.CELLD_PORT));
const ip = "203.0.113.7", apiKey = "k1", user = "42";
class TooManyAttempts extends Error {
  constructor(wait) { super("too many attempts"); this.wait = wait; }
}
let res;
function newRes() {
  return res = { headers: {}, code: 200,
    set(k, v) { this.headers[k] = v; return this; },
    status(c) { this.code = c; return this; },
    end() { return this; } };
}
function check(ok, ...what) { if (!ok) { console.error("check failed:", ...what); process.exit(1); } }
`

// jsSnippetChecks are the drivers of the ioredis snippets, per page: the
// snippet's lines after tail (to hand back what it computed) run as the
// body of an async function snippet(), which main calls until the
// limited branch has run.
var jsSnippetChecks = map[string]struct{ tail, main string }{
	// 5 per 15 minutes: calls 1-5 pass, the 6th throws with a wait.
	"cl.mthrottle.md": {"", `
for (let i = 0; i < 25; i++) {
  try {
    await snippet();
  } catch (e) {
    check(e instanceof TooManyAttempts && i === 5 && e.wait > 0 && e.wait <= 900, "limited at call", i + 1, e);
    return;
  }
}
check(false, "login snippet: never limited");
`},
	// 20 per second: calls 1-20 pass, the 21st answers 429 with
	// Retry-After 1 and Retry-After-Ms in (0, 50].
	"cl.pthrottle.md": {"", `
for (let i = 0; i < 21; i++) {
  newRes();
  await snippet();
  if (i < 20) { check(res.code === 200, "call", i + 1, res); continue; }
  const ms = Number(res.headers["Retry-After-Ms"]);
  check(res.code === 429 && res.headers["Retry-After"] === "1" && ms > 0 && ms <= 50, "call 21", res);
}
`},
	// A peek after one request charged: 15 of 16 left, full in 2 s.
	"cl.throttle_ro.md": {"\nreturn [limit, left, fullIn];", `
await redis.call("CL.THROTTLE", "user:42", 15, 30, 60, 1);
for (let i = 0; i < 2; i++) {
  const [limit, left, fullIn] = await snippet();
  check(limit === 16 && left === 15 && fullIn >= 1 && fullIn <= 2, "peek", limit, left, fullIn);
}
check(await redis.call("DBSIZE") === 1, "DBSIZE after the peeks");
`},
}

// TestDocsFamilyNodeSnippets runs every ioredis snippet of the GCRA
// family's pages with node against a real celld, through a stand-in for
// ioredis's call (jsSnippetPrelude: ioredis itself is not installable
// here), each until its limited branch has run: a snippet that does not
// parse, or destructures a reply of the wrong shape, fails here. Needs
// node (Debian's nodejs; CI installs it for examples/).
func TestDocsFamilyNodeSnippets(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node not found: .ci/run installs nodejs")
		}
		t.Skip("node not found (install nodejs; CI always runs this)")
	}
	pages, err := filepath.Glob(filepath.Join("docs", "gcra-family", "*.md"))
	if err != nil || len(pages) < 5 {
		t.Fatalf("docs/gcra-family: %d pages (%v), want the family's five", len(pages), err)
	}
	c := mustLaunch(t, t.TempDir())
	_, port, _ := net.SplitHostPort(c.addr)
	ran := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(page)
		for bi, block := range jsBlocks(string(text)) {
			check, ok := jsSnippetChecks[base]
			if !ok {
				t.Errorf("%s: an ioredis snippet with no check in this test; add one", base)
				continue
			}
			prog := jsSnippetPrelude + "async function snippet() {\n" + block + check.tail + "\n}\n" +
				"(async () => {\nawait redis.call(\"FLUSHALL\");\n" + check.main + "\n})().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });\n"
			f := filepath.Join(t.TempDir(), "snippet.js")
			if err := os.WriteFile(f, []byte(prog), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(node, f)
			cmd.Env = append(os.Environ(), "CELLD_PORT="+port)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s#%d: %v\n--- program:\n%s\n--- output:\n%s", base, bi+1, err, prog, out)
			}
			ran++
		}
	}
	if ran != len(jsSnippetChecks) {
		t.Errorf("ran %d ioredis snippets, want the %d this test checks", ran, len(jsSnippetChecks))
	}
}
