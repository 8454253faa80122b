package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
)

// PostgreSQL compares a tenant column by its type's rules, not byte for
// byte: " 4", "+4" and "04" are all the integer 4, a uuid ignores case, a
// char(n) ignores trailing blanks, citext ignores case. A tenant id that is
// not the one canonical spelling of its value would erase another tenant's
// rows (the tenant whose id is the canonical spelling), so it is refused
// before anything is read or deleted.

var (
	canonicalInt     = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	canonicalNumeric = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$`)
	canonicalUUID    = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

var intBits = map[string]int{"int2": 16, "int4": 32, "int8": 64}

// kind is the comparison rule of a column's base type: the built-in types
// by their pg_catalog name, and citext (an extension, in any schema).
func (c catColumn) kind() string {
	schema, name, _ := strings.Cut(c.base, ".")
	if schema == "pg_catalog" {
		switch name {
		case "text", "varchar", "bpchar", "uuid", "int2", "int4", "int8", "numeric":
			return name
		}
	}
	if name == "citext" {
		return "citext"
	}
	return ""
}

// caseInsensitive reports a column that compares ids regardless of case.
func (c catColumn) caseInsensitive() bool { return c.kind() == "citext" }

// columnProblem says why a column cannot hold tenant ids safely, or "".
func columnProblem(c catColumn) string {
	if c.kind() == "" {
		return fmt.Sprintf("type %s (base type %s) is not supported for the tenant column (text, varchar, char, citext, uuid, smallint, integer, bigint or numeric)", c.typ, c.base)
	}
	if !c.deterministic {
		return "its collation is not deterministic, so different tenant ids can compare equal; use a deterministic collation"
	}
	if !c.equalityVisible {
		return fmt.Sprintf("the = operator of its type %s is not on the deleter's search_path, so \"= $1\" would compare it as text; add its schema to the role's search_path", c.base)
	}
	return ""
}

// checkTenantID refuses an id that is not the canonical text of a value of
// the column's type.
func checkTenantID(id string, t *logicalTable) error {
	c := t.tenant
	where := fmt.Sprintf("%s.%s is %s", t.name(), c.name, c.typ)
	if id == "" {
		return sdk.InvalidArgument("empty tenant id")
	}
	switch c.kind() {
	case "int2", "int4", "int8":
		if !canonicalInt.MatchString(id) || id == "-0" {
			return sdk.InvalidArgument("tenant id %q is not the canonical text of an integer (%s)", id, where)
		}
		if _, err := strconv.ParseInt(id, 10, intBits[c.kind()]); err != nil {
			return sdk.InvalidArgument("tenant id %q is out of range (%s)", id, where)
		}
	case "numeric":
		if !canonicalNumeric.MatchString(id) || id == "-0" {
			return sdk.InvalidArgument("tenant id %q is not the canonical text of a number (%s)", id, where)
		}
	case "uuid":
		if !canonicalUUID.MatchString(id) {
			return sdk.InvalidArgument("tenant id %q is not the canonical text of a UUID (lower case, with hyphens; %s)", id, where)
		}
	case "bpchar":
		if strings.TrimRight(id, " ") != id {
			return sdk.InvalidArgument("tenant id %q ends in blanks, which char(n) ignores (%s): not a canonical tenant id", id, where)
		}
	case "citext":
		if strings.ToLower(id) != id {
			return sdk.InvalidArgument("tenant id %q has upper-case letters, which citext ignores (%s): not a canonical tenant id", id, where)
		}
	}
	if strings.IndexByte(id, 0) >= 0 {
		return sdk.InvalidArgument("tenant id contains a NUL byte, which PostgreSQL text cannot hold")
	}
	return nil
}
