package plans

import (
	"fmt"
	"sort"
	"strings"
)

// Verdict of comparing a slow execution's plan with the usual one.
type change struct {
	flipped bool
	reason  string
}

// compare decides whether slow is a different plan from usual: another
// signature (tables in another order, another access type or key), or
// the same shape whose row estimates collapsed (the plan-flip case of docs/field-reports.md: table_scan rows 1
// where the table has 197 million). Estimates that merely move with the
// literals (a wider range) are not a flip: a collapse must cross both a
// ratio and an absolute floor.
func compare(usual, slow Plan, ratio float64, floor int64) change {
	if us, ss := usual.Signature(), slow.Signature(); us != ss {
		return change{true, fmt.Sprintf("the plan changed: %s instead of %s", ss, us)}
	}
	ue, se := usual.Estimates(), slow.Estimates()
	var collapsed []string
	for _, k := range sortedKeys(ue) {
		u, s := ue[k], se[k]
		if u >= floor && float64(max(s, 0))*ratio <= float64(u) {
			collapsed = append(collapsed, fmt.Sprintf("%s %d -> %d", k, u, s))
		}
	}
	if len(collapsed) > 0 {
		return change{true, "row estimates collapsed: " + strings.Join(collapsed, ", ")}
	}
	return change{}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
