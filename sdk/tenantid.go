package sdk

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sync"
	"unicode"
	"unicode/utf8"
)

// MaxTenantIDLength is the longest tenant id the daemon accepts, in bytes,
// whatever the format.
const MaxTenantIDLength = 255

// UUIDFormat is the default tenant id format: the canonical text of a UUID,
// in lower case, so that one tenant has one spelling.
const UUIDFormat = "uuid"

const canonicalUUID = `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`

var (
	uuidRE      = regexp.MustCompile(canonicalUUID)
	formatCache sync.Map // format -> compiledFormat
)

type compiledFormat struct {
	re  *regexp.Regexp
	err error
}

// formatSource is the regular expression a format stands for.
func formatSource(format string) string {
	if format == "" || format == UUIDFormat {
		return canonicalUUID
	}
	return format
}

// compileFormat compiles a format so that it must match the whole id, even
// when the daemon's anchors were left out: a plugin does not rely on the
// daemon's validation of its own config.
func compileFormat(format string) (*regexp.Regexp, error) {
	if format == "" || format == UUIDFormat {
		return uuidRE, nil
	}
	if c, ok := formatCache.Load(format); ok {
		return c.(compiledFormat).re, c.(compiledFormat).err
	}
	re, err := regexp.Compile(`^(?:` + format + `)$`)
	if err != nil {
		err = InvalidConfig(FieldError{Field: "tenant_id_format", Problem: fmt.Sprintf("%q is not \"uuid\" or a valid regular expression: %v", format, err)})
	}
	formatCache.Store(format, compiledFormat{re, err})
	return re, err
}

// ValidateTenantIDFormat returns an InvalidConfig error when format is
// neither "uuid" (or empty) nor a regular expression. Configure can call it
// to report a bad format at once instead of on every Count and Delete.
func ValidateTenantIDFormat(format string) error {
	_, err := compileFormat(format)
	return err
}

// CheckTenantID returns a permanent InvalidArgument error when id is not a
// tenant id under format (a ConfigureRequest's TenantIDFormat): empty, longer
// than MaxTenantIDLength bytes, not UTF-8, holding a control character (the
// daemon refuses those whatever the format), or not matching the format as a
// whole. With "uuid" only the canonical lower-case text is accepted:
// "44444444-DDDD-4DDD-8DDD-444444444444" names no tenant. An invalid format
// is an InvalidConfig error.
//
// A deleter calls it first thing in Count and Delete: the daemon checks ids
// before calling, but a plugin must not rely on that.
func CheckTenantID(format, id string) error {
	switch {
	case id == "":
		return InvalidArgument("empty tenant id")
	case len(id) > MaxTenantIDLength:
		return InvalidArgument("tenant id is %d bytes long (at most %d)", len(id), MaxTenantIDLength)
	case !utf8.ValidString(id):
		return InvalidArgument("tenant id %q is not valid UTF-8", id)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return InvalidArgument("tenant id %q contains a control character", id)
		}
	}
	re, err := compileFormat(format)
	if err != nil {
		return err
	}
	if !re.MatchString(id) {
		if re == uuidRE {
			return InvalidArgument("tenant id %q is not a UUID in its canonical lower-case form (tenant_id_format = \"uuid\")", id)
		}
		return InvalidArgument("tenant id %q does not match tenant_id_format %s", id, format)
	}
	return nil
}

// TenantIDMayContain reports whether some tenant id that CheckTenantID
// accepts under format can contain byte b. It reads the regular expression's
// syntax (literals with case folding, character classes, any-character) and
// over-approximates: whatever it cannot rule out, it answers true, and a
// byte of 0x80 or more is possible as soon as any non-ASCII character is. A
// deleter uses it to refuse a layout where the byte that ends a tenant id in
// a key or path could also occur inside one ("session:{tenant}:*" when ids
// may contain ':', which lets tenant "a" match the keys of tenant "a:b").
func TenantIDMayContain(format string, b byte) bool {
	if b < 0x20 || b == 0x7f {
		return false // control characters are refused whatever the format
	}
	re, err := syntax.Parse(formatSource(format), syntax.Perl)
	if err != nil {
		return true
	}
	lo, hi := rune(b), rune(b)
	if b >= utf8.RuneSelf {
		lo, hi = utf8.RuneSelf, unicode.MaxRune
	}
	return mayProduce(re, lo, hi)
}

// mayProduce reports whether a string re matches can hold a rune in [lo, hi].
func mayProduce(re *syntax.Regexp, lo, hi rune) bool {
	in := func(r rune) bool { return r >= lo && r <= hi }
	switch re.Op {
	case syntax.OpNoMatch, syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine,
		syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return false
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if in(r) {
				return true
			}
			if re.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					if in(f) {
						return true
					}
				}
			}
		}
		return false
	case syntax.OpCharClass:
		// The parser has already added the case-folded ranges under (?i).
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= hi && re.Rune[i+1] >= lo {
				return true
			}
		}
		return false
	case syntax.OpAnyCharNotNL:
		return !(lo == '\n' && hi == '\n')
	case syntax.OpAnyChar:
		return true
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat,
		syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			if mayProduce(sub, lo, hi) {
				return true
			}
		}
		return false
	default:
		return true
	}
}
