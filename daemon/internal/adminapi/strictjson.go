package adminapi

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Request bodies are read strictly: unknown fields, anything after the
// object and a member given twice are refused. encoding/json keeps the
// last of two members of one name, so {"action": "retry", ..., "action":
// "delete"} would run the second, which a reader of the body may not
// have seen.

// strictJSON decodes the JSON object data into v. Members named in nested
// hold objects whose members are checked for repeats too (a filter, a map
// of headers); the others' values are the caller's data (a payload to
// replay) and are left as they are.
func strictJSON(data []byte, v any, shape string, nested ...string) error {
	if path := repeatedMember(data, nested); path != "" {
		return invalidField(path, "given twice in the body: give it once")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("the body must be %s: %v", shape, err)
	}
	if dec.More() {
		return invalid("the body must be %s, once: there is more after it", shape)
	}
	return nil
}

// repeatedMember is the first member of the object data given twice, or
// of an object under one of the members nested, as "name" or
// "nested.name"; "" when there is none, or when data is not a JSON object
// (decoding it then says what is wrong).
func repeatedMember(data []byte, nested []string) string {
	return repeatedIn(json.NewDecoder(bytes.NewReader(data)), "", nested)
}

func repeatedIn(dec *json.Decoder, prefix string, nested []string) string {
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
		if seen[name] {
			return prefix + name
		}
		seen[name] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return ""
		}
		if slices.Contains(nested, name) {
			if path := repeatedIn(json.NewDecoder(bytes.NewReader(value)), prefix+name+".", nil); path != "" {
				return path
			}
		}
	}
	return ""
}
