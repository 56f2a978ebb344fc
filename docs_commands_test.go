package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
	"github.com/redis/go-redis/v9"
)

// TestCommandReference keeps docs/commands.md equal to what a running
// server reports through COMMAND and COMMAND DOCS, so the reference lists
// every command celld serves and no other. After adding a command, run
//
//	CELLD_UPDATE_DOCS=1 go test -run TestCommandReference .
//
// and commit the regenerated file.
func TestCommandReference(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Logger: quietLog()}, store.New(store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
	})
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1, Protocol: 2})
	defer rdb.Close()

	got := commandReference(t, rdb)
	const path = "docs/commands.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, commandsBegin), strings.Index(doc, commandsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated-table markers", path)
	}
	if doc[i:j+len(commandsEnd)] == got {
		return
	}
	if os.Getenv("CELLD_UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(doc[:i]+got+doc[j+len(commandsEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is not what the server serves; regenerate it with\n\tCELLD_UPDATE_DOCS=1 go test -run TestCommandReference .\ngenerated:\n%s", path, got)
}

const (
	commandsBegin = "<!-- BEGIN commands: generated from the server's command table by TestCommandReference; CELLD_UPDATE_DOCS=1 go test -run TestCommandReference . -->\n"
	commandsEnd   = "<!-- END commands -->\n"
)

// cmdDoc is one command or subcommand as COMMAND and COMMAND DOCS report it.
type cmdDoc struct {
	name, summary, group, since string
	arity                       int64
	flags                       []string
	firstKey                    int64
	subs                        []cmdDoc
}

func commandReference(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	all, err := rdb.Do(ctx, "COMMAND").Slice()
	if err != nil {
		t.Fatal(err)
	}
	parse := func(v any) cmdDoc {
		e := v.([]any)
		d := cmdDoc{name: e[0].(string), arity: e[1].(int64), firstKey: e[3].(int64)}
		for _, f := range e[2].([]any) {
			d.flags = append(d.flags, f.(string))
		}
		docs, err := rdb.Do(ctx, "COMMAND", "DOCS", d.name).Slice()
		if err != nil || len(docs) != 2 {
			t.Fatalf("COMMAND DOCS %s: %v %v", d.name, docs, err)
		}
		kv := docs[1].([]any)
		for i := 0; i+1 < len(kv); i += 2 {
			switch kv[i].(string) {
			case "summary":
				d.summary = kv[i+1].(string)
			case "group":
				d.group = kv[i+1].(string)
			case "since":
				d.since = kv[i+1].(string)
			}
		}
		return d
	}
	groups := map[string][]cmdDoc{}
	for _, v := range all {
		d := parse(v)
		if e := v.([]any); len(e) > 9 {
			for _, s := range e[9].([]any) {
				d.subs = append(d.subs, parse(s))
			}
			sort.Slice(d.subs, func(i, j int) bool { return d.subs[i].name < d.subs[j].name })
		}
		groups[d.group] = append(groups[d.group], d)
	}
	var names []string
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)

	var b strings.Builder
	b.WriteString(commandsBegin)
	for _, g := range names {
		cmds := groups[g]
		sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
		fmt.Fprintf(&b, "\n### %s\n\n| command | arity | flags | since | summary |\n|---|---|---|---|---|\n", g)
		row := func(d cmdDoc, name string) {
			fmt.Fprintf(&b, "| `%s` | %d | %s | %s | %s |\n", name, d.arity, strings.Join(d.flags, " "), d.since, d.summary)
		}
		for _, d := range cmds {
			row(d, strings.ToUpper(d.name))
			for _, s := range d.subs {
				_, sub, _ := strings.Cut(s.name, "|")
				row(s, strings.ToUpper(d.name)+" "+strings.ToUpper(sub))
			}
		}
	}
	b.WriteString("\n" + commandsEnd)
	return b.String()
}
