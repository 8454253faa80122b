package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// typeErrorRE matches BurntSushi/toml's type mismatch, which is not a
// ParseError: `toml: line 3 (last key "admin.socket_mode"): incompatible
// types: TOML value has type int64; destination has type string`.
var typeErrorRE = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): incompatible types: TOML value has type ([^;]+); destination has type (.+)$`)

// decodeError reports a TOML syntax or type error like every other problem:
// the key, its line and what was wanted, in words.
func (r *reporter) decodeError(err error) {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg := pe.Message
		if strings.Contains(msg, "leading zero") && strings.HasSuffix(pe.LastKey, "socket_mode") {
			msg += `; write it as a string: socket_mode = "0660"`
		}
		r.add(pe.Position.Line, pe.LastKey, msg)
		return
	}
	if m := typeErrorRE.FindStringSubmatch(err.Error()); m != nil {
		var line int
		fmt.Sscan(m[1], &line)
		msg := fmt.Sprintf("want %s, got %s", wantType(m[4]), tomlType(m[3]))
		if strings.HasSuffix(m[2], "socket_mode") {
			msg += ` (socket_mode = "0660")`
		}
		r.add(line, m[2], msg)
		return
	}
	r.add(0, "", err.Error())
}

func tomlType(t string) string {
	switch {
	case strings.HasPrefix(t, "int"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number with a fraction"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "map"):
		return "a table"
	case strings.Contains(t, "time"):
		return "a date or time"
	default:
		return t
	}
}

func wantType(t string) string {
	switch {
	case t == "config.Duration":
		return `a duration string such as "30s"`
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool", t == "boolean":
		return "true or false"
	case strings.HasPrefix(t, "[]"), t == "slice", t == "array":
		return "an array"
	case strings.HasPrefix(t, "map"), strings.HasPrefix(t, "config."), t == "struct":
		return "a table"
	default:
		return t
	}
}
