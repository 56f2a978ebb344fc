package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// deploy/grafana/celld.json and deploy/prometheus/alerts.yml may name
// only metrics a running celld exports; promtool accepts the rules and
// their unit tests (docs/limiter-metrics.md).

// promqlMetricNames returns the metric names a PromQL expression selects:
// every identifier that is not a function, an aggregation, a keyword, a
// label list (by/without/on/ignoring/group_left/group_right (...)), a
// label matcher ({...}), a range ([...]), a string, a number or a Grafana
// variable ($x, ${x}). Enough PromQL for dashboards and rules, with no
// parser dependency.
func promqlMetricNames(expr string) []string {
	aggregations := map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "count": true,
		"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true, "group": true}
	keywords := map[string]bool{"bool": true, "and": true, "or": true, "unless": true, "offset": true, "atan2": true}
	labelLists := map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	skipString := func(i int) int { // i at the opening quote; returns the index after the closing one
		q := expr[i]
		for i++; i < len(expr) && expr[i] != q; i++ {
			if expr[i] == '\\' && q != '`' {
				i++
			}
		}
		return i + 1
	}
	skipUntil := func(i int, open, close byte) int { // i at open; strings inside are skipped
		depth := 0
		for i < len(expr) {
			switch c := expr[i]; {
			case c == '"' || c == '\'' || c == '`':
				i = skipString(i)
				continue
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	nextNonSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\n' || expr[i] == '\t' || expr[i] == '\r') {
			i++
		}
		return i
	}
	seen := map[string]bool{}
	var names []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(i)
		case c == '{':
			i = skipUntil(i, '{', '}')
		case c == '[':
			i = skipUntil(i, '[', ']')
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				i = skipUntil(i, '{', '}')
			}
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			word := expr[i:j]
			k := nextNonSpace(j)
			switch {
			case labelLists[word]:
				if k < len(expr) && expr[k] == '(' {
					j = skipUntil(k, '(', ')')
				}
			case aggregations[word], keywords[word], k < len(expr) && expr[k] == '(':
			default:
				if !seen[word] {
					seen[word] = true
					names = append(names, word)
				}
			}
			i = j
		default:
			i++
		}
	}
	return names
}

func TestPromQLMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (limiter, decision) (rate(celld_decisions_total{job=~"$job",decision="denied"}[$__rate_interval]))`, []string{"celld_decisions_total"}},
		{`histogram_quantile(0.99, sum by (le, command) (rate(celld_command_duration_seconds_bucket{command=~"cl\\..*"}[5m])))`, []string{"celld_command_duration_seconds_bucket"}},
		{"sum without (instance) (rate(a_total[1m])) / on (job) group_left (x) b > bool 0.05 and c offset 5m", []string{"a_total", "b", "c"}},
		{`celld_persist_last_flush_ok == 0`, []string{"celld_persist_last_flush_ok"}},
		{`max(x{l="a}b"}) or count(y) unless z`, []string{"x", "y", "z"}},
		{`topk(3, celld_keys) * 1e3 + ${var}`, []string{"celld_keys"}},
	} {
		got := promqlMetricNames(c.expr)
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("promqlMetricNames(%s) = %v, want %v", c.expr, got, c.want)
		}
	}
}

// dashboardQueries returns every PromQL expression of a Grafana dashboard:
// panel targets' expr (nested rows included) and templating variables'
// queries (label_values(expr, label) → expr).
func dashboardQueries(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`)
	var out []string
	var walk func(v any, inTemplating bool)
	walk = func(v any, inTemplating bool) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch s, ok := x.(string); {
				case ok && k == "expr":
					out = append(out, s)
				case ok && inTemplating && (k == "query" || k == "definition") && strings.HasPrefix(s, "label_values("):
					if m := labelValues.FindStringSubmatch(s); m != nil {
						out = append(out, m[1])
					} else {
						t.Errorf("templating query %q: not label_values(expr, label)", s)
					}
				default:
					walk(x, inTemplating || k == "templating")
				}
			}
		case []any:
			for _, x := range v {
				walk(x, inTemplating)
			}
		}
	}
	walk(doc, false)
	return out
}

// ruleExprs returns the expr of every rule in a Prometheus rules file
// (one-line values and '|' blocks).
func ruleExprs(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	var block []string
	indent := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		ind := len(line) - len(trimmed)
		if indent >= 0 {
			if trimmed == "" || ind > indent {
				block = append(block, trimmed)
				continue
			}
			out = append(out, strings.Join(block, "\n"))
			block, indent = nil, -1
		}
		if v, ok := strings.CutPrefix(trimmed, "expr:"); ok {
			v = strings.TrimSpace(v)
			if v == "|" || v == ">" || v == "|-" || v == ">-" {
				indent = ind
				continue
			}
			out = append(out, strings.Trim(v, `'"`))
		}
	}
	if indent >= 0 {
		out = append(out, strings.Join(block, "\n"))
	}
	return out
}

// exportedMetricNames scrapes a /metrics text exposition and returns the
// sample names (histograms as their _bucket, _sum and _count series).
func exportedMetricNames(body string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// TestDeployQueriesNameExportedMetrics runs celld (persistence on, a
// shadow pattern, the metrics port), makes decisions of every kind, waits
// for a successful flush, and fails if the dashboard or the alert rules
// name a metric its /metrics does not carry.
func TestDeployQueriesNameExportedMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("launches celld")
	}
	dash := dashboardQueries(t, "deploy/grafana/celld.json")
	rules := ruleExprs(t, "deploy/prometheus/alerts.yml")
	if len(dash) < 10 || len(rules) < 4 {
		t.Fatalf("found %d dashboard queries and %d rules: the files were not read", len(dash), len(rules))
	}
	maddr := freeAddr(t)
	c := mustLaunch(t, t.TempDir(), "--metrics-addr", maddr, "--shadow", "dry:*", "--flush-interval", "10ms")
	defer c.termOK()
	rdb := c.client()
	throttle(t, rdb, "api:1", 0, 1, 60, 1)
	throttle(t, rdb, "api:1", 0, 1, 60, 1) // denied
	throttle(t, rdb, "dry:1", 0, 1, 60, 1)
	throttle(t, rdb, "dry:1", 0, 1, 60, 1) // shadow-denied

	var body string
	for deadline := time.Now().Add(time.Minute); ; {
		resp, err := http.Get("http://" + maddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if strings.Contains(body, "\ncelld_persist_last_flush_age_seconds ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful flush reported within a minute:\n%s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	exported := exportedMetricNames(body)
	check := func(what string, exprs []string) {
		for _, e := range exprs {
			names := promqlMetricNames(e)
			if len(names) == 0 {
				t.Errorf("%s: %q names no metric", what, e)
			}
			for _, n := range names {
				if !exported[n] {
					t.Errorf("%s: %q names %s, which celld does not export", what, e, n)
				}
			}
		}
	}
	check("deploy/grafana/celld.json", dash)
	check("deploy/prometheus/alerts.yml", rules)
	if t.Failed() {
		var all []string
		for n := range exported {
			if strings.HasPrefix(n, "celld_") {
				all = append(all, n)
			}
		}
		sort.Strings(all)
		t.Logf("celld exports: %s", strings.Join(all, " "))
	}
	for _, want := range []string{`decision="shadow_denied",limiter="dry"} 1`, `decision="denied",limiter="api"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestAlertRulesPromtool: promtool check rules and promtool test rules
// (deploy/prometheus/alerts_test.yml: the reject-rate rule fires after a
// minute above 5% for the limiter above it only; persistence rules).
// Skipped only when promtool is absent and CI is unset (.ci/run installs
// Debian's prometheus package, which ships it).
func TestAlertRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found (apt-get install prometheus) and CI is set")
		}
		t.Skip("promtool not installed (Debian: apt-get install prometheus)")
	}
	for _, args := range [][]string{
		{"check", "rules", "deploy/prometheus/alerts.yml"},
		{"test", "rules", "deploy/prometheus/alerts_test.yml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
