package arch

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the module's root, seen from this package's directory.
const repoRoot = "../.."

// absentDocs are documents the project was designed from that the
// repository does not hold: code and --help texts must not send a reader
// to them (they cite docs/design.md, docs/events.md or the cases of
// docs/field-reports.md by name instead). The design document and the notes
// are named in capitals (docs/design.md is the repository's own); a seed is
// matched in any case. The strings are split so that this file does not
// cite them itself.
var absentDocs = []*regexp.Regexp{
	regexp.MustCompile(`DESIGN` + ` §|DESIGN` + `\.md|FACTS` + `\.md|CRAFT` + `\.md`),
	regexp.MustCompile(`(?i)seeds` + `/|seed` + `[ -]?00[0-9]`),
}

// TestNoCitationsOfAbsentDocuments: no Go file (comments and --help texts
// alike), shell script or Makefile cites a document the repository does not
// contain.
func TestNoCitationsOfAbsentDocuments(t *testing.T) {
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != repoRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !citesChecked(d.Name()) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, re := range absentDocs {
				if cite := re.FindString(line); cite != "" {
					t.Errorf("%s:%d cites %q, which the repository does not hold: %s", rel(path), i+1, cite, strings.TrimSpace(line))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// citesChecked says whether a file is one whose citations are checked:
// code, --help texts and the scripts that build and test.
func citesChecked(name string) bool {
	return strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".sh") || name == "Makefile"
}

// mdLink matches a Markdown inline link or image, [text](target "title"),
// and a reference definition, [label]: target.
var mdLink = regexp.MustCompile(`\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|(?m)^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)`)

// linkedDocs are the documents whose relative links must resolve.
func linkedDocs(t *testing.T) []string {
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, docs...)
}

// TestDocLinksExist: every relative link in README.md and docs/*.md points
// to a file or directory of the repository.
func TestDocLinksExist(t *testing.T) {
	checked := 0
	for _, doc := range linkedDocs(t) {
		b, err := os.ReadFile(doc)
		if os.IsNotExist(err) {
			continue // README.md may be absent while it is rewritten
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range relativeLinks(string(b)) {
			checked++
			path := filepath.Join(filepath.Dir(doc), target)
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel(doc), target)
			} else if !strings.HasPrefix(filepath.Clean(path), filepath.Clean(repoRoot)+string(filepath.Separator)) && filepath.Clean(path) != filepath.Clean(repoRoot) {
				t.Errorf("%s links to %s, outside the repository", rel(doc), target)
			}
		}
	}
	t.Logf("%d relative links checked", checked)
}

// relativeLinks returns the link targets of md that name a file of the
// repository: not a URL, not an anchor of the same page; a fragment is
// dropped.
func relativeLinks(md string) []string {
	var out []string
	for _, m := range mdLink.FindAllStringSubmatch(md, -1) {
		target := m[1] + m[2]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
			continue
		}
		if i := strings.IndexByte(target, '#'); i >= 0 {
			target = target[:i]
		}
		out = append(out, target)
	}
	return out
}

func TestRelativeLinks(t *testing.T) {
	md := "see [design](docs/design.md#stages), [site](https://example.com/x), [top](#top), ![chart](img/a.svg \"A chart\") and [mail](mailto:a@b)\n\n[ref]: docs/events.md\n[web]: https://example.com"
	got := relativeLinks(md)
	if strings.Join(got, " ") != "docs/design.md img/a.svg docs/events.md" {
		t.Errorf("relativeLinks = %q", got)
	}
}

func rel(path string) string {
	r, err := filepath.Rel(repoRoot, path)
	if err != nil {
		return path
	}
	return r
}
