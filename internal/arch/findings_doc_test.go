package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// findingCode is what a finding code looks like: FOO or FOO_BAR.
var findingCode = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)

// codeHeading is a section of docs/findings.md that documents one code.
var codeHeading = regexp.MustCompile(`(?m)^## ([A-Z][A-Z0-9_]*)\s*$`)

// TestFindingsDocumented: docs/findings.md has one "## CODE" section for
// every finding code the code can emit, and none for a code that does not
// exist, so the documented list and the code stay one list. A code is a
// string constant named Code… (the diagnose registry, plans.CodePlanFlip,
// probe.CodeConcurrencyKnee) or a string literal given as a Finding's Code.
func TestFindingsDocumented(t *testing.T) {
	inCode := codesInSource(t)
	if len(inCode) < 20 {
		t.Fatalf("found only %d finding codes in the source (%v): the scan is broken", len(inCode), inCode)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "findings.md"))
	if err != nil {
		t.Fatal(err)
	}
	var inDoc []string
	for _, m := range codeHeading.FindAllStringSubmatch(string(b), -1) {
		if slices.Contains(inDoc, m[1]) {
			t.Errorf("docs/findings.md documents %s twice", m[1])
		}
		inDoc = append(inDoc, m[1])
	}
	for _, c := range inCode {
		if !slices.Contains(inDoc, c) {
			t.Errorf("finding code %s is not documented in docs/findings.md (add a \"## %s\" section)", c, c)
		}
	}
	for _, c := range inDoc {
		if !slices.Contains(inCode, c) {
			t.Errorf("docs/findings.md documents %s, which no code emits", c)
		}
	}
}

// codesInSource returns the finding codes of the non-test Go files under
// internal/ and cmd/, sorted.
func codesInSource(t *testing.T) []string {
	var codes []string
	add := func(lit *ast.BasicLit) {
		if lit == nil || lit.Kind != token.STRING {
			return
		}
		v, err := strconv.Unquote(lit.Value)
		if err == nil && findingCode.MatchString(v) && !slices.Contains(codes, v) {
			codes = append(codes, v)
		}
	}
	fset := token.NewFileSet()
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec: // const CodeX = "X"
					for i, name := range n.Names {
						if strings.HasPrefix(name.Name, "Code") && i < len(n.Values) {
							lit, _ := n.Values[i].(*ast.BasicLit)
							add(lit)
						}
					}
				case *ast.CompositeLit: // event.Finding{Code: "X", ...}
					if isFinding(n.Type) {
						for _, el := range n.Elts {
							if kv, ok := el.(*ast.KeyValueExpr); ok && identName(kv.Key) == "Code" {
								lit, _ := kv.Value.(*ast.BasicLit)
								add(lit)
							}
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(codes)
	return codes
}

// isFinding: the composite literal's type is event.Finding (or Finding
// inside package event).
func isFinding(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name == "Finding"
	case *ast.Ident:
		return e.Name == "Finding"
	}
	return false
}

func identName(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
