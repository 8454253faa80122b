package adminapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Request bodies are read strictly: unknown fields, anything after the
// object and a member given twice are refused. encoding/json keeps the
// last of two members of one name, and takes a member for a field
// whatever its case ("ACTION" and "action" are one field, as are "ids"
// and "idſ"): {"action": "retry", ..., "ACTION": "delete"} would run the
// second, which a reader of the body may not have seen.

// nestedObject names a member whose value is an object checked for
// repeats too.
type nestedObject struct {
	name string
	// fields: the object is decoded into a struct, whose members are
	// matched to fields without regard to case (as the body's own); a
	// map's keys are data, matched exactly ("Trace" and "trace" are two
	// Kafka headers).
	fields bool
}

// fieldsIn is a member holding an object decoded into a struct (a filter).
func fieldsIn(name string) nestedObject { return nestedObject{name: name, fields: true} }

// keysIn is a member holding an object decoded into a map (headers).
func keysIn(name string) nestedObject { return nestedObject{name: name} }

// strictJSON decodes the JSON object data into v. The members named in
// nested hold objects whose members are checked too; the others' values
// are the caller's data (a payload to replay) and are left as they are. A
// member whose value is null is refused: encoding/json takes it for a
// member left out, and `"topic": null` in a filter is not "every topic"
// to whoever reads it.
func strictJSON(data []byte, v any, shape string, nested ...nestedObject) error {
	return readStrictly(data, v, shape, false, nested)
}

// strictJSONNullable is strictJSON for a body where null is documented as
// "not given" (an edit-and-replay: `"payload": null`, a header set to
// null to leave it out).
func strictJSONNullable(data []byte, v any, shape string, nested ...nestedObject) error {
	return readStrictly(data, v, shape, true, nested)
}

func readStrictly(data []byte, v any, shape string, nullable bool, nested []nestedObject) error {
	// encoding/json turns invalid UTF-8 and a lone surrogate escape into
	// U+FFFD: a header or reason would be stored as other text than sent.
	if !utf8.Valid(data) {
		return invalid("the body must be %s: it is not valid UTF-8", shape)
	}
	if loneSurrogate(data) {
		return invalid("the body must be %s: a \\u escape names half of a UTF-16 surrogate pair", shape)
	}
	w := memberWalk{nullable: nullable, nested: nested}
	if !w.object(json.NewDecoder(bytes.NewReader(data)), "", true, true) && w.problem == "" {
		return invalid("the body must be %s: a JSON object", shape)
	}
	if w.problem != "" {
		return invalidField(w.path, "%s", w.problem)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("the body must be %s: %v", shape, err)
	}
	// dec.More says nothing is left before a '}' or ']', so a body
	// ending `}} {...}` would pass it: only the end of the input will do.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("the body must be %s, once: there is more after it", shape)
	}
	return nil
}

// memberWalk looks through a body's object (and the objects under the
// members nested) for a member given twice, or set to null where null is
// not allowed; the first one found is path, with what is wrong.
type memberWalk struct {
	nullable      bool
	nested        []nestedObject
	path, problem string
}

// object walks the object dec is at; false when dec is not at an object
// or it is malformed (decoding it then says what is wrong) or a problem
// was found.
func (w *memberWalk) object(dec *json.Decoder, prefix string, fields, top bool) bool {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		name, _ := tok.(string)
		key := name
		if fields {
			key = foldName(name)
		}
		if seen[key] {
			w.path, w.problem = prefix+name, "given twice in the body (names differing only in case are one field): give it once"
			return false
		}
		seen[key] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return false
		}
		if !w.nullable && string(value) == "null" {
			w.path, w.problem = prefix+name, "null: give a value, or leave the member out"
			return false
		}
		if !top {
			continue
		}
		for _, n := range w.nested {
			if foldName(n.name) == key && bytes.HasPrefix(value, []byte("{")) &&
				!w.object(json.NewDecoder(bytes.NewReader(value)), prefix+name+".", n.fields, false) && w.problem != "" {
				return false
			}
		}
	}
	return true
}

// foldName folds a member name as encoding/json does when it matches a
// member to a struct field: two names with the same fold are one field.
func foldName(s string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf {
			return unicode.ToUpper(r)
		}
		// The smallest rune of r's fold set, as encoding/json's foldRune.
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				return r2
			}
			r = r2
		}
	}, s)
}

// loneSurrogate reports whether a string in the JSON text data has a
// \uD800-\uDFFF escape that is not a high half followed at once by a low
// half.
func loneSurrogate(data []byte) bool {
	hexAt := func(i int) (rune, bool) {
		if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, c := range data[i+2 : i+6] {
			switch {
			case '0' <= c && c <= '9':
				r = r<<4 | rune(c-'0')
			case 'a' <= c && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case 'A' <= c && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			r, ok := hexAt(i)
			if !ok {
				i++ // an escaped character: skip it (it may be a quote)
				continue
			}
			switch {
			case 0xD800 <= r && r <= 0xDBFF:
				low, ok := hexAt(i + 6)
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return true
				}
				i += 11
			case 0xDC00 <= r && r <= 0xDFFF:
				return true
			default:
				i += 5
			}
		}
	}
	return false
}

// blankJSON reports whether a body is empty or JSON whitespace only (space,
// tab, CR, LF). bytes.TrimSpace would also take U+00A0, U+2028 and the
// like for nothing, and let them pass as an empty body.
func blankJSON(data []byte) bool { return len(bytes.Trim(data, " \t\r\n")) == 0 }
