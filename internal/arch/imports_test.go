package arch

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gapscope/gapscope/"

// allowed lists, for each internal package, the internal packages its
// non-test files may import. Test files may also import sandbox and workload.
// Every package listed here exists (TestRulesNameExistingPackages).
var allowed = map[string][]string{
	"arch":       {},
	"event":      {},
	"mysqlproto": {},
	"sqltext":    {},
	"sandbox":    {},
	"netlab":     {},
	"eventlog":   {},
	"txn":        {"event", "sqltext"},
	"selfprof":   {},
	"capture":    {"event", "mysqlproto", "sqltext"},
	"collect":    {"event", "sqltext"},
	"join":       {"event", "capture", "collect", "mysqlproto", "sqltext"},
	"diagnose":   {"event", "join", "collect"},
	"store":      {"event"},
	"report":     {"event", "eventlog", "sqltext", "diagnose", "store"},
	"export":     {"event", "sqltext", "watch"},
	"web":        {"event", "watch", "diagnose", "sqltext"},
	"workload":   {"event", "sandbox"},
	"watch":      {"event", "capture", "collect", "join", "diagnose", "report", "sqltext", "mysqlproto", "plans", "txn"},
	"probe":      {"event", "collect", "workload", "diagnose", "report", "store"},
	"plans":      {"event", "collect", "sqltext", "diagnose", "report", "store"},
	"overhead":   {"event", "collect", "workload", "sandbox", "watch", "diagnose", "report", "store"},
	"offline":    {"event", "capture", "collect", "sqltext", "diagnose", "report", "txn"},
	"watchtext":  {"event", "capture", "collect", "watch", "report", "sqltext", "txn"},
	"lab":        {"netlab", "txn", "watch", "probe", "plans", "overhead", "event", "sandbox", "workload", "capture", "collect", "join", "diagnose", "report", "mysqlproto", "sqltext", "store"},
}

var testOnly = []string{"sandbox", "workload", "netlab"}

// sinks turn results into outputs for other programs (a Prometheus/OTLP
// exporter, a web view). They may read the results of every layer below
// the command line, and only the command line imports them, so that no
// analysis ever depends on how it is shown. The rule holds for them when
// they exist; a sink listed in allowed has its own, narrower rule.
var (
	sinks       = []string{"export", "web"}
	sinkImports = []string{"event", "sqltext", "collect", "join", "diagnose", "report", "store", "watch"}
)

// commandOnly are imported by the command line alone: the labs, and sinks.
var commandOnly = append([]string{"lab"}, sinks...)

// rulesFor is what pkg's non-test files may import, and whether pkg has a
// rule at all.
func rulesFor(pkg string) ([]string, bool) {
	if allow, ok := allowed[pkg]; ok {
		return allow, true
	}
	if contains(sinks, pkg) {
		return sinkImports, true
	}
	return nil, false
}

func TestImportDirection(t *testing.T) {
	root := filepath.Join("..")
	dirs, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		pkg := d.Name()
		imports := internalImports(t, filepath.Join(root, pkg))
		if len(imports) == 0 && !hasGoFiles(filepath.Join(root, pkg)) {
			continue
		}
		allow, known := rulesFor(pkg)
		if !known {
			t.Errorf("internal/%s has no rule in the import graph; add it to allowed", pkg)
			continue
		}
		for imp, isTest := range imports {
			if imp == pkg || (isTest && contains(testOnly, imp)) {
				continue
			}
			if contains(commandOnly, imp) || !contains(allow, imp) {
				t.Errorf("internal/%s imports internal/%s, which the layering forbids", pkg, imp)
			}
		}
	}
}

// TestCommandImports covers cmd/: a command may import any internal
// package, but only packages that exist and have a rule, so that a package
// added for a command alone still gets its place in the graph.
func TestCommandImports(t *testing.T) {
	cmds, err := os.ReadDir(filepath.Join("..", "..", "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if !c.IsDir() {
			continue
		}
		for imp := range internalImports(t, filepath.Join("..", "..", "cmd", c.Name())) {
			if _, known := rulesFor(imp); !known {
				t.Errorf("cmd/%s imports internal/%s, which has no rule in the import graph", c.Name(), imp)
			}
		}
	}
}

// TestRulesNameExistingPackages: the graph names no package that is not in
// the repository (sinks excepted: their rule waits for them).
func TestRulesNameExistingPackages(t *testing.T) {
	exists := func(pkg string) bool { return hasGoFiles(filepath.Join("..", pkg)) }
	for pkg, allow := range allowed {
		if !exists(pkg) {
			t.Errorf("allowed has a rule for internal/%s, which does not exist", pkg)
		}
		for _, imp := range allow {
			if !exists(imp) && !contains(sinks, imp) {
				t.Errorf("internal/%s may import internal/%s, which does not exist", pkg, imp)
			}
		}
	}
	for _, imp := range append(slices.Clone(testOnly), sinkImports...) {
		if !exists(imp) {
			t.Errorf("the graph names internal/%s, which does not exist", imp)
		}
	}
}

// internalImports maps each internal package imported under dir (recursively)
// to whether only test files import it.
func internalImports(t *testing.T, dir string) map[string]bool {
	out := map[string]bool{}
	fset := token.NewFileSet()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.Contains(path, "testdata") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("parsing %s: %v", path, err)
			return nil
		}
		isTest := strings.HasSuffix(path, "_test.go")
		for _, is := range f.Imports {
			p := strings.Trim(is.Path.Value, `"`)
			if !strings.HasPrefix(p, module+"internal/") {
				continue
			}
			name := strings.SplitN(strings.TrimPrefix(p, module+"internal/"), "/", 2)[0]
			if prev, seen := out[name]; !seen || prev {
				out[name] = isTest
			}
		}
		return nil
	})
	return out
}

func hasGoFiles(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return len(m) > 0
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }
