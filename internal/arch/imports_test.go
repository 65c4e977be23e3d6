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
var allowed = map[string][]string{
	"arch":       {},
	"event":      {},
	"mysqlproto": {},
	"sqltext":    {},
	"sandbox":    {},
	"capture":    {"event", "mysqlproto", "sqltext"},
	"collect":    {"event", "sqltext"},
	"join":       {"event", "capture", "collect", "mysqlproto", "sqltext"},
	"diagnose":   {"event", "join", "collect"},
	"store":      {"event"},
	"report":     {"event", "sqltext", "diagnose"},
	"export":     {"event"},
	"workload":   {"event", "sandbox"},
	"watch":      {"event", "capture", "collect", "join", "diagnose", "report", "sqltext", "mysqlproto", "plans"},
	"probe":      {"event", "collect", "workload", "diagnose"},
	"plans":      {"event", "collect", "sqltext", "diagnose"},
	"overhead":   {"event", "collect", "workload", "sandbox", "watch", "diagnose"},
	"lab":        {"watch", "probe", "plans", "overhead", "event", "sandbox", "workload", "capture", "collect", "join", "diagnose", "report", "mysqlproto", "sqltext", "store"},
}

var testOnly = []string{"sandbox", "workload"}

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
		allow, known := allowed[pkg]
		if !known {
			t.Errorf("internal/%s is not in the import graph of DESIGN §3; add it to allowed", pkg)
			continue
		}
		for imp, isTest := range imports {
			if imp == pkg || contains(allow, imp) || (isTest && contains(testOnly, imp)) {
				continue
			}
			t.Errorf("internal/%s imports internal/%s, which the layering forbids", pkg, imp)
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
