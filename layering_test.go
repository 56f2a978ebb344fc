package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayering keeps the arrows of design.md pointing one way: each
// package's non-test files may import the standard library plus only what
// its row allows. A new import outside the row fails here, so a change of
// layering is a deliberate edit of this table.
func TestLayering(t *testing.T) {
	const mod = "github.com/celld/celld/"
	allowed := map[string][]string{
		"gcra":              nil, // the leaf: the algorithm, pure
		"window":            nil, // CL.WINDOW's algorithms, pure
		"internal/testutil": nil, // tests' shared helpers
		"cluster":           nil,
		"guard":             nil,
		"script":            {"github.com/yuin/gopher-lua"},
		"store":             {mod + "gcra", mod + "window"},
		"persist":           {"github.com/cockroachdb/pebble/v2"},
		"server":            {mod + "gcra", mod + "store", mod + "cluster", mod + "script", "github.com/tidwall/redcon", "golang.org/x/sys/unix"},
		"metrics":           {mod + "server", "github.com/prometheus/"},
		"config":            nil, // flags and environment: standard library only
		"sidecar":           {mod + "server", mod + "cluster"},
		"kinds":             nil, // the value kinds' pure operations
		"data":              {mod + "server", mod + "store", mod + "kinds", mod + "window"},
		"repl":              {mod + "store", mod + "kinds", mod + "cluster"},          // the replication stream (cluster: key slots, for slot moves): no server/
		"ha":                {mod + "cluster", "go.etcd.io/etcd/", "go.uber.org/zap"}, // leadership and topology in etcd (zap: only to silence the etcd client); server/ knows nothing of it
		"ha/etcdtest":       nil,                                                      // starts a real etcd for tests
	}
	for dir, ok := range allowed {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if first, _, _ := strings.Cut(path, "/"); !strings.Contains(first, ".") {
					continue // standard library
				}
				permitted := false
				for _, prefix := range ok {
					permitted = permitted || path == prefix || strings.HasPrefix(path, strings.TrimSuffix(prefix, "/")+"/")
				}
				if !permitted {
					t.Errorf("%s imports %q, outside its layer (allowed: standard library %v)", name, path, ok)
				}
			}
		}
	}
}
