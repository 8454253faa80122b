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
// nested hold objects whose members are checked for repeats too; the
// others' values are the caller's data (a payload to replay) and are left
// as they are.
func strictJSON(data []byte, v any, shape string, nested ...nestedObject) error {
	if path := repeatedMember(data, nested); path != "" {
		return invalidField(path, "given twice in the body (names differing only in case are one field): give it once")
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

// repeatedMember is the first member of the object data given twice, or
// of an object under one of the members nested, as "name" or
// "nested.name"; "" when there is none, or when data is not a JSON object
// (decoding it then says what is wrong).
func repeatedMember(data []byte, nested []nestedObject) string {
	return repeatedIn(json.NewDecoder(bytes.NewReader(data)), "", true, nested)
}

func repeatedIn(dec *json.Decoder, prefix string, fields bool, nested []nestedObject) string {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		name, _ := tok.(string)
		key := name
		if fields {
			key = foldName(name)
		}
		if seen[key] {
			return prefix + name
		}
		seen[key] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return ""
		}
		for _, n := range nested {
			if foldName(n.name) != key {
				continue
			}
			if path := repeatedIn(json.NewDecoder(bytes.NewReader(value)), prefix+name+".", n.fields, nil); path != "" {
				return path
			}
		}
	}
	return ""
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
