package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/sdk"
)

// MySQL compares strings by their collation, and the usual ones
// (utf8mb4_general_ci, utf8mb4_0900_ai_ci, latin1_swedish_ci, ...) ignore
// case, accents and, for PAD SPACE collations, trailing spaces: with
// "tenant_id = ?" erasing tenant "acme" also erases "ACME", "Acmé" and
// "acme ". Binding the id as a parameter does not help. So the deleter
// compares tenant columns byte for byte in the column's own character set
// (CAST(col AS BINARY) = CAST(CONVERT(? USING cs) AS BINARY)), next to an
// ordinary comparison that lets the server use the column's index.
//
// A byte-for-byte comparison is exact only for ids the column can hold
// exactly. An id with a character its character set lacks would be
// converted with '?' in its place ("Ωmega" becomes "?mega" in latin1) and
// match the tenant literally called "?mega"; a CHAR column drops trailing
// spaces when it stores a value, so "acme " can never be stored as such;
// an integer column compares by value ("04" is 4). Such ids are refused
// before anything is read or deleted.

// columnKind is how a tenant column compares.
type columnKind int

const (
	kindUnsupported columnKind = iota
	kindText                   // char, varchar, text types: compared byte for byte in the column's charset
	kindBytes                  // varbinary, blob types: compared byte for byte
	kindInt                    // integer types: compared by value
)

var intRange = map[string][2]string{
	"tinyint": {"-128", "127"}, "smallint": {"-32768", "32767"}, "mediumint": {"-8388608", "8388607"},
	"int": {"-2147483648", "2147483647"}, "bigint": {"-9223372036854775808", "9223372036854775807"},
}

var uintMax = map[string]uint64{"tinyint": 255, "smallint": 65535, "mediumint": 16777215, "int": 4294967295, "bigint": 18446744073709551615}

func (c catColumn) kind() columnKind {
	switch c.dataType {
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		if c.charset == "" || c.charset == "binary" {
			return kindBytes
		}
		return kindText
	case "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return kindBytes
	case "tinyint", "smallint", "mediumint", "int", "bigint":
		return kindInt
	}
	return kindUnsupported
}

func (c catColumn) unsigned() bool {
	return strings.Contains(strings.ToLower(c.columnType), "unsigned")
}

// columnProblem says why a column cannot hold tenant ids, or "".
func columnProblem(c catColumn) string {
	if c.kind() == kindUnsupported {
		hint := ""
		if c.dataType == "binary" {
			hint = " (BINARY(n) pads values with zero bytes, and a UUID stored as 16 bytes is not its text)"
		}
		return fmt.Sprintf("type %s is not supported for the tenant column%s: use char, varchar, a text type, varbinary or an integer type", c.columnType, hint)
	}
	return ""
}

var canonicalInt = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// tenantArg is the id as the value bound for column c, after refusing what
// c cannot hold exactly. Character sets are checked by the server
// (representable), not here.
func tenantArg(id string, c catColumn, where string) (any, error) {
	switch c.kind() {
	case kindInt:
		if !canonicalInt.MatchString(id) || id == "-0" {
			return nil, sdk.InvalidArgument("tenant id %q is not the canonical text of an integer (%s)", id, where)
		}
		if c.unsigned() {
			v, err := strconv.ParseUint(id, 10, 64)
			if err != nil || v > uintMax[c.dataType] {
				return nil, sdk.InvalidArgument("tenant id %q is out of range (%s)", id, where)
			}
			return v, nil
		}
		v, err := strconv.ParseInt(id, 10, 64)
		lo, _ := strconv.ParseInt(intRange[c.dataType][0], 10, 64)
		hi, _ := strconv.ParseInt(intRange[c.dataType][1], 10, 64)
		if err != nil || v < lo || v > hi {
			return nil, sdk.InvalidArgument("tenant id %q is out of range (%s)", id, where)
		}
		return v, nil
	case kindText:
		if c.dataType == "char" && strings.TrimRight(id, " ") != id {
			return nil, sdk.InvalidArgument("tenant id %q ends in spaces, which a CHAR column drops when it stores a value (%s): no row can hold it", id, where)
		}
		if (c.dataType == "char" || c.dataType == "varchar") && c.maxChars > 0 && int64(utf8.RuneCountInString(id)) > c.maxChars {
			return nil, sdk.InvalidArgument("tenant id %q is longer than %s allows (%s)", id, c.columnType, where)
		}
		return id, nil
	case kindBytes:
		if c.dataType == "char" || c.dataType == "varchar" || strings.HasSuffix(c.dataType, "binary") {
			if c.maxChars > 0 && int64(len(id)) > c.maxChars {
				return nil, sdk.InvalidArgument("tenant id %q is longer than %s allows (%s)", id, c.columnType, where)
			}
		}
		return []byte(id), nil
	}
	return nil, sdk.InvalidArgument("%s cannot hold tenant ids", where)
}
