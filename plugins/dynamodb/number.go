package main

import "strings"

// DynamoDB's number limits: 38 significant digits, magnitudes from 1E-130
// to below 1E+126.
const (
	maxSignificantDigits = 38
	maxIntegerDigits     = 126
	maxFractionExponent  = 130
)

// numberProblem says why s is not the canonical text of a DynamoDB number,
// the one spelling a numeric key accepts as a tenant id, or returns "". The
// canonical text is plain decimal: an optional '-', no leading zeros, a
// fraction only when it is not zero and without trailing zeros; no '+',
// exponent, spaces, hex or "-0".
func numberProblem(s string) string {
	digits, negative := strings.CutPrefix(s, "-")
	whole, frac, hasDot := strings.Cut(digits, ".")
	switch {
	case !allDigits(whole) || (hasDot && !allDigits(frac)):
		return "only digits, one optional leading '-' and one '.' between digits; no '+', exponent, spaces or hex"
	case len(whole) > 1 && whole[0] == '0':
		return "a leading zero"
	case hasDot && frac[len(frac)-1] == '0':
		return "a trailing zero after the decimal point"
	case negative && !hasDot && whole == "0":
		return `"-0" is 0`
	}
	if sig := strings.Trim(whole+frac, "0"); len(sig) > maxSignificantDigits {
		return "more than 38 significant digits, which DynamoDB cannot keep"
	}
	if len(whole) > maxIntegerDigits {
		return "larger than DynamoDB's numbers go (below 1E+126)"
	}
	if whole == "0" && hasDot && len(frac)-len(strings.TrimLeft(frac, "0")) >= maxFractionExponent {
		return "smaller than DynamoDB's numbers go (1E-130)"
	}
	return ""
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
