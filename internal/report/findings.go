package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gapscope/gapscope/internal/event"
)

// WriteFindingsText writes findings, most severe first (otherwise in the
// order given): code, severity and summary, the evidence by sorted key, and
// the fix.
func WriteFindingsText(w io.Writer, f []event.Finding) error {
	return writeFindings(w, f, false)
}

// WriteFindingsBrief is WriteFindingsText with only the scalar evidence
// (numbers, names): what a terminal reader needs; --format json has the
// examples, groups and settings.
func WriteFindingsBrief(w io.Writer, f []event.Finding) error {
	return writeFindings(w, f, true)
}

func writeFindings(w io.Writer, f []event.Finding, brief bool) error {
	bw := bufio.NewWriter(w)
	if len(f) == 0 {
		bw.WriteString("no findings\n")
	}
	sorted := slices.Clone(f)
	slices.SortStableFunc(sorted, event.MoreSevere)
	for i, x := range sorted {
		if i > 0 {
			bw.WriteByte('\n')
		}
		writeFinding(bw, x, brief)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing findings: %w", err)
	}
	return nil
}

func writeFinding(w *bufio.Writer, f event.Finding, brief bool) {
	fmt.Fprintf(w, "%s [%s] %s\n", f.Code, strings.ToUpper(string(f.Severity)), oneLine(f.Summary))
	if len(f.Evidence) > 0 {
		w.WriteString("  evidence:\n")
		for _, k := range slices.Sorted(maps.Keys(f.Evidence)) {
			if brief && !isScalar(f.Evidence[k]) {
				continue
			}
			fmt.Fprintf(w, "    %s: %s\n", k, oneLine(evidenceValue(f.Evidence[k])))
		}
	}
	if f.Fix != "" {
		fmt.Fprintf(w, "  fix: %s\n", oneLine(f.Fix))
	}
}

func isScalar(v any) bool {
	switch v.(type) {
	case string, float64, float32, int, int64, int32, uint64, uint32, bool:
		return true
	}
	return false
}

// maxEvidenceText bounds one evidence value in text output; --format json
// carries it whole.
const maxEvidenceText = 400

// evidenceValue renders numbers without exponent noise, strings as they
// are, and structured values (examples, groups, settings) as compact JSON
// so that their field names stay readable.
func evidenceValue(v any) string {
	switch x := v.(type) {
	case float64:
		return trimFloat(x)
	case float32:
		return trimFloat(float64(x))
	case string:
		return x
	case int, int64, int32, uint64, uint32, bool:
		return fmt.Sprint(x)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "a>b" connection names stay readable
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	b := bytes.TrimSpace(buf.Bytes())
	if len(b) > maxEvidenceText {
		n := maxEvidenceText
		for n > 0 && !utf8.RuneStart(b[n]) {
			n-- // never cut a character in two
		}
		return string(b[:n]) + "…"
	}
	return string(b)
}

// trimFloat prints whole numbers as such, others with three decimals (or
// three significant digits below 1), trailing zeros dropped.
func trimFloat(x float64) string {
	switch {
	case x == math.Trunc(x) && math.Abs(x) < 1e15:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case math.Abs(x) < 1:
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
	s := strconv.FormatFloat(x, 'f', 3, 64)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// oneLine keeps a value on its line: newlines and tabs become spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
