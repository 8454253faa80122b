package dlq

import (
	"strings"
	"unicode/utf8"
)

func utf8Valid(s string) bool   { return utf8.ValidString(s) }
func containsNUL(s string) bool { return strings.ContainsRune(s, 0) }
