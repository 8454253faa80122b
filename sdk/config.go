package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// DecodeConfig decodes a plugin's config map into dst, a pointer to a struct
// with json tags. Unknown keys and values of the wrong type are reported as
// InvalidConfig with one field problem each, so that operators see every
// mistake in their [*.config] block at once (as far as JSON decoding allows:
// it stops at the first type error).
func DecodeConfig(cfg map[string]any, dst any) error {
	b, err := json.Marshal(cfg)
	if err != nil {
		return InvalidConfig(FieldError{Field: "config", Problem: err.Error()})
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err = dec.Decode(dst)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		return InvalidConfig(FieldError{Field: te.Field, Problem: fmt.Sprintf("must be a %s, not a %s", jsonKind(te.Type.Kind().String()), te.Value)})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return InvalidConfig(FieldError{Field: field, Problem: "unknown key"})
	default:
		return InvalidConfig(FieldError{Field: "config", Problem: err.Error()})
	}
}

func jsonKind(k string) string {
	switch k {
	case "slice", "array":
		return "list"
	case "int", "int32", "int64", "uint", "uint32", "uint64", "float64":
		return "number"
	case "struct", "map":
		return "table"
	default:
		return k
	}
}
