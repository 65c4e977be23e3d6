package sqltext

// Clip shortens s to at most n runes, the last of them "…" when it cut:
// statement texts and labels are cut this way wherever a line or a label
// has a width (charts, Prometheus labels).
func Clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
