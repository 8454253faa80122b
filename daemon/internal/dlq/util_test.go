package dlq

import (
	"strings"
	"time"
	"unicode/utf8"
)

func utf8Valid(s string) bool   { return utf8.ValidString(s) }
func containsNUL(s string) bool { return strings.ContainsRune(s, 0) }

// t0 is a fixed time for the tests of package dlq.
var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
