package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/celld/celld/config"
)

const (
	flagsBegin = "<!-- BEGIN settings: generated from config's table by TestConfigurationDoc; CELLD_UPDATE_DOCS=1 go test -run TestConfigurationDoc . -->\n"
	flagsEnd   = "<!-- END settings -->\n"
)

// settingsTable is docs/configuration.md's table of every setting, by
// group, from config's table.
func settingsTable() string {
	var b strings.Builder
	b.WriteString(flagsBegin)
	last := config.Group(-1)
	for _, n := range config.Names() {
		if n.Group != last {
			fmt.Fprintf(&b, "\n### %s\n\n| flag | variable | default | meaning |\n|---|---|---|---|\n", n.Group)
			last = n.Group
		}
		flag := "(none: environment only)"
		if n.Flag != "" {
			flag = "`" + n.Flag + " " + n.Meta + "`"
		}
		def := "`" + n.Default + "`"
		if n.Default == "" {
			def = "''"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", strings.ReplaceAll(flag, "|", "\\|"), n.Env, def, strings.ReplaceAll(n.Usage, "|", "\\|"))
	}
	b.WriteString("\n" + flagsEnd)
	return b.String()
}

// TestConfigurationDoc keeps docs/configuration.md's settings table equal
// to config's table (regenerate with CELLD_UPDATE_DOCS=1).
func TestConfigurationDoc(t *testing.T) {
	const path = "docs/configuration.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, flagsBegin), strings.Index(doc, flagsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated settings markers", path)
	}
	want := settingsTable()
	if got := doc[i : j+len(flagsEnd)]; got != want {
		if os.Getenv("CELLD_UPDATE_DOCS") != "" {
			if err := os.WriteFile(path, []byte(doc[:i]+want+doc[j+len(flagsEnd):]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("%s's settings table is not config's; regenerate it with\n\tCELLD_UPDATE_DOCS=1 go test -run TestConfigurationDoc .", path)
	}
}

// TestDocsNameRealFlags: every --flag the README and the operator docs
// mention is one celld has (or an action, or another tool's flag in a
// command line shown), so the docs spell flags as --help does.
func TestDocsNameRealFlags(t *testing.T) {
	known := map[string]bool{"help": true, "version": true, "healthcheck": true}
	for _, n := range config.Names() {
		known[strings.TrimPrefix(n.Flag, "--")] = true
	}
	// Flags of other programs the docs show: redis-cli, redis-benchmark,
	// go, docker, kubectl.
	for _, f := range []string{"tls", "cacert", "cert", "key", "no-auth-warning", "name", "rm", "mount",
		"fuzztime", "interval", "timeout", "from", "chown", "requirepass", "tags", "chmod"} {
		known[f] = true
	}
	re := regexp.MustCompile("(?:^|[\\s`(\\[\"])--([a-z][a-z0-9-]*)")
	for _, path := range []string{"README.md", "docs/configuration.md", "docs/deploy.md", "docs/durability.md", "docs/observability.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if !known[m[1]] {
				t.Errorf("%s mentions --%s, which celld does not have", path, m[1])
			}
		}
	}
}

// TestDocLinks: every relative link in README.md and docs/*.md names a
// file that exists (anchors are not checked).
func TestDocLinks(t *testing.T) {
	files, _ := filepath.Glob("docs/*.md")
	files = append(files, "README.md")
	re := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, target)
			}
		}
	}
}
