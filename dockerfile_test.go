package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/celld/celld/config"
)

// CI has no Docker engine, so the Dockerfile's facts that matter are
// checked by reading it: who runs celld, that /data exists and belongs to
// that user, the entrypoint, the ports, the health check, the environment
// (only CELLD_* variables config knows), the build command .ci/run also
// runs, and that .dockerignore keeps .git and data out of the context.

// instruction is one Dockerfile line (continuations joined).
type instruction struct {
	stage int // 0-based FROM index
	cmd   string
	args  string
}

func readDockerfile(t *testing.T) []instruction {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	stage, cont := -1, ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if cont == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cont += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, cont = cont+line, ""
		cmd, args, _ := strings.Cut(line, " ")
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		out = append(out, instruction{stage, cmd, strings.TrimSpace(args)})
	}
	return out
}

func TestDockerfile(t *testing.T) {
	ins := readDockerfile(t)
	final := ins[len(ins)-1].stage
	get := func(cmd string) []string {
		var v []string
		for _, in := range ins {
			if in.stage == final && in.cmd == cmd {
				v = append(v, in.args)
			}
		}
		return v
	}
	one := func(cmd string) string {
		t.Helper()
		v := get(cmd)
		if len(v) != 1 {
			t.Fatalf("final stage has %d %s instructions, want 1: %q", len(v), cmd, v)
		}
		return v[0]
	}
	exec := func(cmd string) []string {
		t.Helper()
		var v []string
		if err := json.Unmarshal([]byte(one(cmd)), &v); err != nil {
			t.Fatalf("%s is not in exec (JSON) form: %v", cmd, err)
		}
		return v
	}

	if from := ins[0].args; !strings.HasPrefix(from, "golang:1.26 ") {
		t.Errorf("build stage FROM %q, want golang:1.26 (go.mod's Go)", from)
	}
	if from := one("FROM"); !strings.HasSuffix(from, ":nonroot") {
		t.Errorf("final FROM %q: want a nonroot distroless base", from)
	}
	if user := one("USER"); user != "nonroot:nonroot" && user != "65532:65532" {
		t.Errorf("USER %q, want nonroot:nonroot", user)
	}
	// /data is created (the build stage's empty directory) and handed to
	// nonroot before USER, so a new named volume starts writable.
	var dataOwned bool
	for _, c := range get("COPY") {
		f := strings.Fields(c)
		if len(f) >= 3 && f[len(f)-1] == "/data" && (contains(f, "--chown=65532:65532") || contains(f, "--chown=nonroot:nonroot")) {
			dataOwned = true
		}
	}
	if !dataOwned {
		t.Error("no COPY --chown=65532:65532 ... /data in the final stage: a volume at /data would not be writable by nonroot")
	}
	var mkdir bool
	for _, in := range ins {
		mkdir = mkdir || (in.stage < final && in.cmd == "RUN" && strings.Contains(in.args, "mkdir -p /out/data"))
	}
	if !mkdir {
		t.Error("the build stage does not create the empty data directory the final stage copies")
	}
	if v := one("VOLUME"); v != "/data" {
		t.Errorf("VOLUME %q", v)
	}
	if ep := exec("ENTRYPOINT"); len(ep) != 1 || ep[0] != "/celld" {
		t.Errorf("ENTRYPOINT %q, want [\"/celld\"]", ep)
	}
	if p := one("EXPOSE"); p != "6379" {
		t.Errorf("EXPOSE %q, want 6379", p)
	}
	hc := one("HEALTHCHECK")
	if _, cmd, ok := strings.Cut(hc, "CMD "); !ok || strings.TrimSpace(cmd) != `["/celld", "--healthcheck"]` {
		t.Errorf("HEALTHCHECK %q, want CMD [\"/celld\", \"--healthcheck\"]", hc)
	}

	// Every ENV is a CELLD_* variable config reads, with a value it
	// accepts; the image listens on all interfaces and keeps state in /data.
	known := map[string]bool{}
	for _, n := range config.Names() {
		known[n.Env] = true
	}
	env := map[string]string{}
	for _, e := range get("ENV") {
		for _, kv := range strings.Fields(e) {
			k, v, _ := strings.Cut(kv, "=")
			if !known[k] {
				t.Errorf("ENV %s: not a variable celld reads", k)
			}
			env[k] = v
		}
	}
	if env["CELLD_ADDR"] != "0.0.0.0:6379" || env["CELLD_DIR"] != "/data" {
		t.Errorf("ENV %v: want CELLD_ADDR=0.0.0.0:6379 CELLD_DIR=/data", env)
	}
	if _, err := config.Parse(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Errorf("the image's environment is refused: %v", err)
	}

	// The build command is the one .ci/run builds, since CI cannot run it.
	var build string
	for _, in := range ins {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			build = in.args
		}
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(build, "-o /out/celld", "-o /tmp/celld-static", 1)
	if build == "" || !strings.Contains(string(ci), want) {
		t.Errorf(".ci/run does not run the Dockerfile's build command %q", want)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// .dockerignore keeps history, local state and build output out of the
// build context.
func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile(".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, want := range []string{".git", "data", "/celld", "**/*.test"} {
		if !lines[want] {
			t.Errorf(".dockerignore lacks %q", want)
		}
	}
}
