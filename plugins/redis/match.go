package main

// globMatch reports whether key matches pattern with Redis's glob rules
// (util.c stringmatchlen): * any run, ? any byte, [abc] [^abc] [a-z] sets,
// and \ quoting the next byte. The deleter scans once with a pattern that
// covers all configured patterns and picks keys out with this, so it must
// agree with Redis exactly, quirks included: range bounds compare as
// signed C chars (signedChar), and a match that nests stars more than
// maxNesting deep fails. TestGlobMatchAgreesWithRedis and its siblings check it against a
// real server.
func globMatch(pattern, key string) bool {
	skipLonger := false
	return globMatchFrom(pattern, key, &skipLonger, 0)
}

// maxNesting is Redis's guard against abusive patterns: a match that
// recurses through more stars than this fails.
const maxNesting = 1000

// signedChar is how Redis reads a byte for a range comparison: `int start
// = pattern[0]` from a `const char *`, and char is signed on x86-64, so
// 0x80..0xff are -128..-1 and [a-\xff] means [\xff-a]. (On arm64 Linux,
// where char is unsigned, Redis would compare them as 128..255; the
// agreement tests run against the server on the test machine.)
func signedChar(b byte) int { return int(int8(b)) }

// at returns p[i], or 0 past the end, where Redis reads the C string's
// terminating NUL.
func at(p string, i int) byte {
	if i < len(p) {
		return p[i]
	}
	return 0
}

func globMatchFrom(p, s string, skipLonger *bool, nesting int) bool {
	if nesting > maxNesting {
		return false
	}
	pi, si := 0, 0
	for pi < len(p) && si < len(s) {
		switch p[pi] {
		case '*':
			for pi < len(p) && at(p, pi+1) == '*' {
				pi++
			}
			if len(p)-pi == 1 {
				return true
			}
			for si < len(s) {
				if globMatchFrom(p[pi+1:], s[si:], skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
				si++
			}
			// No shorter remainder can match either: tell the enclosing
			// stars to stop trying (this keeps matching linear, as in Redis).
			*skipLonger = true
			return false
		case '?':
			si++
		case '[':
			pi++
			not := at(p, pi) == '^'
			if not {
				pi++
			}
			match := false
		set:
			for {
				switch {
				case at(p, pi) == '\\' && len(p)-pi >= 2:
					pi++
					if p[pi] == s[si] {
						match = true
					}
				case at(p, pi) == ']':
					break set
				case pi >= len(p):
					pi-- // unterminated set: end on the pattern's last byte
					break set
				case len(p)-pi >= 3 && p[pi+1] == '-':
					lo, hi, c := signedChar(p[pi]), signedChar(p[pi+2]), signedChar(s[si])
					if lo > hi {
						lo, hi = hi, lo
					}
					pi += 2
					if c >= lo && c <= hi {
						match = true
					}
				default:
					if p[pi] == s[si] {
						match = true
					}
				}
				pi++
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			si++
		case '\\':
			if len(p)-pi >= 2 {
				pi++
			}
			fallthrough
		default:
			if p[pi] != s[si] {
				return false
			}
			si++
		}
		pi++
		if si == len(s) {
			for pi < len(p) && p[pi] == '*' {
				pi++
			}
			break
		}
	}
	return pi == len(p) && si == len(s)
}
