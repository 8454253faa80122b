package receipt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/internal/jcs"
)

// The signed bytes of a receipt are the JSON Canonicalization Scheme of
// RFC 8785 (JCS) applied to the receipt without its "signature" member:
// no whitespace; object members sorted by their names compared as UTF-16
// code units; strings with only '"', '\\' and the control characters
// escaped (\b \t \n \f \r, others as \u00xx in lower-case hex), every
// other character as its UTF-8 bytes; numbers as ECMAScript prints them
// (integers as plain decimals); true, false and null as such. Any RFC 8785
// implementation reproduces them.

// Parse reads one JSON value strictly: valid UTF-8, no duplicate member
// names, nothing but whitespace after it. Objects become map[string]any,
// arrays []any, numbers json.Number.
func Parse(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("data after the JSON value (at byte %d)", dec.InputOffset())
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, endError(err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, endError(err)
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object member name is not a string at byte %d", dec.InputOffset())
				}
				if _, dup := obj[key]; dup {
					return nil, fmt.Errorf("member %q appears twice in one object", key)
				}
				if obj[key], err = parseValue(dec); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, endError(err)
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, endError(err)
			}
			return arr, nil
		default:
			return nil, fmt.Errorf("unexpected %q at byte %d", t, dec.InputOffset())
		}
	default:
		return t, nil // string, json.Number, bool or nil
	}
}

func endError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of JSON (is the file cut short?)")
	}
	return err
}

// Canonical returns the RFC 8785 form of a value encoding/json marshals
// (a Document, or a value Parse returned).
func Canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return CanonicalJSON(b)
}

// CanonicalJSON returns the RFC 8785 form of a JSON text, read with Parse.
func CanonicalJSON(data []byte) ([]byte, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case string:
		jcs.WriteString(buf, x)
	case json.Number:
		s, err := canonicalNumber(x)
		if err != nil {
			return err
		}
		buf.WriteString(s)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return lessUTF16(keys[i], keys[j]) })
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			jcs.WriteString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("cannot canonicalize %T", v)
	}
	return nil
}

// lessUTF16 orders strings by their UTF-16 code units, as RFC 8785 does.
func lessUTF16(a, b string) bool {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

// canonicalNumber prints a JSON number as ECMAScript's Number.prototype.
// toString prints the double it denotes (RFC 8785, section 3.2.2.3).
func canonicalNumber(n json.Number) (string, error) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", fmt.Errorf("number %s is out of the range JSON canonical form allows", n)
	}
	if f == 0 {
		return "0", nil
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// The shortest digits that round-trip, and the decimal exponent.
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddddde±xx
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, p := len(digits), x+1 // digits, and the position of the point: value = 0.digits × 10^p
	switch {
	case k <= p && p <= 21:
		return sign + digits + strings.Repeat("0", p-k), nil
	case 0 < p && p <= 21:
		return sign + digits[:p] + "." + digits[p:], nil
	case -6 < p && p <= 0:
		return sign + "0." + strings.Repeat("0", -p) + digits, nil
	}
	out := digits[:1]
	if k > 1 {
		out += "." + digits[1:]
	}
	es := "+"
	if p-1 < 0 {
		es = "-"
	}
	return sign + out + "e" + es + strconv.Itoa(abs(p-1)), nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
