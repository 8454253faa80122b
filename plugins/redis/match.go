package main

// globMatch reports whether key matches pattern with Redis's glob rules
// (util.c stringmatchlen): * any run, ? any byte, [abc] [^abc] [a-z] sets,
// and \ quoting the next byte. The deleter scans once with a pattern that
// covers all configured patterns and picks keys out with this, so it must
// agree with Redis exactly; TestGlobMatchAgreesWithRedis checks it against a
// real server.
func globMatch(pattern, key string) bool {
	skipLonger := false
	return globMatchFrom(pattern, key, &skipLonger)
}

// at returns p[i], or 0 past the end, where Redis reads the C string's
// terminating NUL.
func at(p string, i int) byte {
	if i < len(p) {
		return p[i]
	}
	return 0
}

func globMatchFrom(p, s string, skipLonger *bool) bool {
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
				if globMatchFrom(p[pi+1:], s[si:], skipLonger) {
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
					lo, hi := p[pi], p[pi+2]
					if lo > hi {
						lo, hi = hi, lo
					}
					pi += 2
					if s[si] >= lo && s[si] <= hi {
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
