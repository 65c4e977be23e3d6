package sqltext

import (
	"bytes"
	"net/url"
	"strings"
)

// Comment returns the trailing comment of a statement when it is a
// sqlcommenter comment (/*key='value',...*/ at the end, as the sqlcommenter
// libraries append it), with its tags, URL-decoded. Other comments give
// "" and nil: the digest text drops comments, and a sqlcommenter comment
// is the one that carries the application's context (route, framework,
// W3C traceparent) worth keeping beside redacted SQL.
//
// It looks only at the statement's end, so a statement without such a
// comment costs a few byte comparisons.
func Comment(raw []byte) (comment string, tags map[string]string) {
	end := len(raw)
	for end > 0 && (isSpace(raw[end-1]) || raw[end-1] == ';') {
		end--
	}
	if end < 4 || raw[end-1] != '/' || raw[end-2] != '*' {
		return "", nil
	}
	start := bytes.LastIndex(raw[:end-2], []byte("/*"))
	if start < 0 {
		return "", nil
	}
	body := raw[start+2 : end-2]
	if len(body) > 0 && (body[0] == '!' || body[0] == '+' || body[0] == 'M') {
		return "", nil // executable comments and optimizer hints are SQL
	}
	tags = ParseTags(string(body))
	if tags == nil {
		return "", nil
	}
	return string(raw[start:end]), tags
}

// ParseTags parses a sqlcommenter comment's body: comma-separated
// key='value' pairs, keys and values URL-encoded, quotes in values escaped
// with a backslash. It returns nil when the body is not of that form, so
// that an ordinary comment is never mistaken for tags.
func ParseTags(body string) map[string]string {
	s := strings.TrimSpace(body)
	if s == "" {
		return nil
	}
	tags := map[string]string{}
	for s != "" {
		key, rest, ok := strings.Cut(s, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" || strings.ContainsAny(key, " '\"") {
			return nil
		}
		val, rest, ok := quotedValue(strings.TrimSpace(rest))
		if !ok {
			return nil
		}
		k, err1 := url.PathUnescape(key)
		v, err2 := url.PathUnescape(val)
		if err1 != nil || err2 != nil {
			return nil
		}
		tags[k] = v
		rest = strings.TrimSpace(rest)
		if rest != "" && rest[0] != ',' {
			return nil
		}
		s = strings.TrimSpace(strings.TrimPrefix(rest, ","))
	}
	return tags
}

// quotedValue reads a single-quoted value at the start of s and returns
// it without its quotes and escapes, and what follows it.
func quotedValue(s string) (val, rest string, ok bool) {
	if s == "" || s[0] != '\'' {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case '\'':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}
