package main

import (
	"fmt"
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
)

const placeholder = "{tenant}"

// delimiters are the bytes suggested to end a tenant id in a key, in order
// of preference.
const delimiters = ":|/#@!;,=~"

// patternProblem says why pattern (holding {tenant} once) could let one
// tenant's Count or Delete reach keys of another tenant whose id the format
// accepts, or returns "" when it cannot. A key matches a tenant's pattern
// unambiguously when the tenant id starts at a fixed offset (no * before it)
// and ends at a byte no id can hold: then two tenants' patterns never match
// the same key.
func patternProblem(format, pattern string) string {
	at := strings.Index(pattern, placeholder)
	prefix, rest := pattern[:at], pattern[at+len(placeholder):]
	if p := prefixProblem(prefix); p != "" {
		return fmt.Sprintf("%q: %s", pattern, p)
	}
	if rest == "" {
		return ""
	}
	next := rest[0]
	switch next {
	case '*', '?', '[':
		return fmt.Sprintf("%q: %s right after {tenant} is a glob, so tenant \"a\" would also match the keys of tenant \"ab\"; "+
			"put a delimiter that tenant ids cannot contain right after {tenant}%s", pattern, quoteByte(next), suggestDelimiter(format))
	case '\\':
		if len(rest) >= 2 {
			next = rest[1]
		}
	}
	if sdk.TenantIDMayContain(format, next) {
		example := "of tenants whose ids continue past it"
		if next >= 0x20 && next < 0x7f {
			example = fmt.Sprintf("of tenant %q", "a"+string(next)+"b")
		}
		return fmt.Sprintf("%q: the byte %s right after {tenant} can occur inside a tenant id under tenant_id_format %s, "+
			"so tenant \"a\" would also match the keys %s; put a delimiter that tenant ids cannot contain "+
			"right after {tenant}%s, or narrow tenant_id_format", pattern, quoteByte(next), describeFormat(format), example, suggestDelimiter(format))
	}
	return ""
}

// quoteByte quotes a byte as a Go character literal, and one of 0x80 or
// more as '\xNN' rather than as the Latin-1 letter %q would show.
func quoteByte(b byte) string {
	if b >= 0x80 {
		return fmt.Sprintf(`'\x%02x'`, b)
	}
	return fmt.Sprintf("%q", b)
}

// prefixProblem checks the part of a pattern before {tenant}: it must fix
// where the tenant id starts in a key.
func prefixProblem(prefix string) string {
	for i := 0; i < len(prefix); i++ {
		switch prefix[i] {
		case '\\':
			if i+1 == len(prefix) {
				return `a \ right before {tenant} would escape the tenant id's first byte; remove it`
			}
			i++
		case '*':
			return `a * before {tenant} lets the tenant id start anywhere in a key, so one key matches several tenants ` +
				`(with "*:{tenant}:*", "x:a:y:b:1" matches tenant a and tenant b); start the pattern with fixed text, e.g. "session:{tenant}:*"`
		case '[':
			end, ok := setEnd(prefix, i+1)
			if !ok {
				return "{tenant} is inside a [...] set; close the set before {tenant}"
			}
			i = end
		}
	}
	return ""
}

// setEnd returns the index of the ']' that closes a set whose body starts
// at p[i], parsing as Redis does (\ quotes, a-b ranges), and false when the
// set is not closed within p.
func setEnd(p string, i int) (int, bool) {
	if i < len(p) && p[i] == '^' {
		i++
	}
	for i < len(p) {
		switch {
		case p[i] == '\\':
			if i+1 >= len(p) {
				return 0, false
			}
			i += 2
		case p[i] == ']':
			return i, true
		case i+2 < len(p) && p[i+1] == '-':
			i += 3
		default:
			i++
		}
	}
	return 0, false
}

// rangeProblem refuses a set range with a bound at or above 0x80: Redis
// compares range bounds as C chars, signed on x86-64 and unsigned on arm64,
// so what such a range matches depends on the server's build.
func rangeProblem(pattern string) string {
	p := strings.Replace(pattern, placeholder, "", 1)
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			j := i + 1
			if j < len(p) && p[j] == '^' {
				j++
			}
			for j < len(p) && p[j] != ']' {
				switch {
				case p[j] == '\\':
					j += 2
				case j+2 < len(p) && p[j+1] == '-':
					if p[j] >= 0x80 || p[j+2] >= 0x80 {
						return fmt.Sprintf("%q: the range %q has a bound at or above 0x80, which Redis compares as a signed or an unsigned byte "+
							"depending on the platform it was built for; list the bytes instead", pattern, p[j:j+3])
					}
					j += 3
				default:
					j++
				}
			}
			i = j
		}
	}
	return ""
}

func suggestDelimiter(format string) string {
	for i := 0; i < len(delimiters); i++ {
		if !sdk.TenantIDMayContain(format, delimiters[i]) {
			return fmt.Sprintf(" (e.g. %s, which tenant_id_format %s excludes)", quoteByte(delimiters[i]), describeFormat(format))
		}
	}
	return " (tenant_id_format " + describeFormat(format) + " excludes none of " + delimiters + ")"
}

func describeFormat(format string) string {
	if format == "" {
		return sdk.UUIDFormat
	}
	return format
}
