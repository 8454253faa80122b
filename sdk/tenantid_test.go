package sdk

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckTenantID(t *testing.T) {
	const lower = "44444444-dddd-4ddd-8ddd-444444444444"
	tests := map[string]struct {
		format, id string
		code       Code // CodeUnknown: accepted
		msg        string
	}{
		"uuid, canonical":                 {format: "uuid", id: lower},
		"empty format means uuid":         {format: "", id: lower},
		"uuid, upper case":                {format: "uuid", id: strings.ToUpper(lower), code: CodeInvalidArgument, msg: "canonical lower-case"},
		"uuid, mixed case":                {format: "", id: "44444444-DDDD-4ddd-8ddd-444444444444", code: CodeInvalidArgument},
		"uuid, braces":                    {format: "uuid", id: "{" + lower + "}", code: CodeInvalidArgument},
		"uuid, no dashes":                 {format: "uuid", id: strings.ReplaceAll(lower, "-", ""), code: CodeInvalidArgument},
		"uuid, leading space":             {format: "uuid", id: " " + lower, code: CodeInvalidArgument},
		"uuid, trailing newline":          {format: "uuid", id: lower + "\n", code: CodeInvalidArgument, msg: "control character"},
		"uuid, urn":                       {format: "uuid", id: "urn:uuid:" + lower, code: CodeInvalidArgument},
		"empty id":                        {format: `^.*$`, id: "", code: CodeInvalidArgument, msg: "empty"},
		"too long":                        {format: `^.+$`, id: strings.Repeat("a", 256), code: CodeInvalidArgument, msg: "256 bytes"},
		"longest":                         {format: `^.+$`, id: strings.Repeat("a", 255)},
		"invalid UTF-8":                   {format: `^.+$`, id: "a\xffb", code: CodeInvalidArgument, msg: "UTF-8"},
		"NUL":                             {format: `^.+$`, id: "a\x00b", code: CodeInvalidArgument, msg: "control character"},
		"tab":                             {format: `^.+$`, id: "a\tb", code: CodeInvalidArgument},
		"DEL":                             {format: `^.+$`, id: "a\x7fb", code: CodeInvalidArgument},
		"C1 control":                      {format: `^.+$`, id: "a\u0085b", code: CodeInvalidArgument},
		"regexp matches":                  {format: `^[a-z:]+$`, id: "a:b"},
		"regexp does not match":           {format: `^[a-z:]+$`, id: "A", code: CodeInvalidArgument, msg: "does not match tenant_id_format ^[a-z:]+$"},
		"unanchored regexp matches whole": {format: `[a-z]+`, id: "ab1", code: CodeInvalidArgument},
		"alternation is anchored as one":  {format: `^a$|b`, id: "xb", code: CodeInvalidArgument},
		"non-ASCII letters":               {format: `^\p{L}+$`, id: "Zoë"},
		"space inside allowed by format":  {format: `^[a-z ]+$`, id: "a b"},
		"invalid format":                  {format: `^[a-z$`, id: "a", code: CodeInvalidConfig, msg: "tenant_id_format"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := CheckTenantID(tc.format, tc.id)
			if tc.code == CodeUnknown {
				require.NoError(t, err)
				return
			}
			var e *Error
			require.True(t, errors.As(err, &e), "got %v, want an *sdk.Error", err)
			require.Equal(t, tc.code, e.Code, "%v", err)
			require.Equal(t, ClassPermanent, e.Class, "%v", err)
			require.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestValidateTenantIDFormat(t *testing.T) {
	require.NoError(t, ValidateTenantIDFormat(""))
	require.NoError(t, ValidateTenantIDFormat("uuid"))
	require.NoError(t, ValidateTenantIDFormat(`^[a-z]{3,64}$`))
	err := ValidateTenantIDFormat(`^(a$`)
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Contains(t, err.Error(), "tenant_id_format")
}

func TestTenantIDMayContain(t *testing.T) {
	tests := map[string]struct {
		format string
		b      byte
		want   bool
	}{
		"uuid: hex digit":                   {"uuid", 'a', true},
		"uuid: dash":                        {"uuid", '-', true},
		"uuid: colon":                       {"uuid", ':', false},
		"uuid: upper case":                  {"uuid", 'A', false},
		"uuid: past f":                      {"uuid", 'g', false},
		"uuid: non-ASCII":                   {"uuid", 0xc3, false},
		"empty is uuid":                     {"", ':', false},
		"class with colon":                  {`^[a-z:]+$`, ':', true},
		"class without pipe":                {`^[a-z:]+$`, '|', false},
		"class range end":                   {`^[a-k]{2}x?$`, 'k', true},
		"optional literal":                  {`^[a-k]{2}x?$`, 'x', true},
		"outside range":                     {`^[a-k]{2}x?$`, 'z', false},
		"negated class":                     {`^[^|]+$`, '|', false},
		"negated class, other byte":         {`^[^|]+$`, ':', true},
		"negated class, non-ASCII":          {`^[^|]+$`, 0xc3, true},
		"ASCII class, non-ASCII":            {`^[a-z]+$`, 0x80, false},
		"case folding of a class":           {`(?i)^[a-z]+$`, 'A', true},
		"case folding of a literal":         {`^(?i:ab)c$`, 'B', true},
		"no folding outside the group":      {`^(?i:ab)c$`, 'C', false},
		"Kelvin sign folds with k":          {`(?i)^k+$`, 0xe2, true},
		"no folding, no Kelvin":             {`^k+$`, 0xe2, false},
		"any char":                          {`^.+$`, ':', true},
		"any char, non-ASCII":               {`^.+$`, 0xff, true},
		"word class":                        {`^\w+$`, '_', true},
		"word class, dash":                  {`^\w+$`, '-', false},
		"digits":                            {`^\d+$`, '.', false},
		"letters class, non-ASCII":          {`^\p{L}+$`, 0xc3, true},
		"letters class, colon":              {`^\p{L}+$`, ':', false},
		"alternation":                       {`^(ab|c:d)$`, ':', true},
		"alternation, neither":              {`^(ab|cd)$`, ':', false},
		"escaped literal":                   {`^a\.b$`, '.', true},
		"anchors hold no byte":              {`^\babc\b$`, '^', false},
		"dot-all":                           {`(?s)^.+$`, '|', true},
		"invalid format: unsure, so yes":    {`^[a-z$`, ':', true},
		"control characters never":          {`^.+$`, '\t', false},
		"NUL never":                         {`^[\x00-\x7f]+$`, 0, false},
		"empty repeat is over-approximated": {`^ax{0}$`, 'x', true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, TenantIDMayContain(tc.format, tc.b), "format %q, byte %q", tc.format, tc.b)
		})
	}
}

// TestTenantIDMayContainAgreesWithCheck checks the analysis against the
// matcher: no id CheckTenantID accepts holds a byte the analysis rules out.
func TestTenantIDMayContainAgreesWithCheck(t *testing.T) {
	formats := []string{"uuid", `^[a-z:]+$`, `^[^|]+$`, `(?i)^[a-k]+$`, `^\w{1,8}$`, `^(?i:ab)c$`, `^\p{L}+$`}
	ids := []string{"44444444-dddd-4ddd-8ddd-444444444444", "a:b", "ABC", "a|b", "abc", "ABc", "Zoë", "x_1", "K", "\u212a"}
	for _, f := range formats {
		for _, id := range ids {
			if CheckTenantID(f, id) != nil {
				continue
			}
			for i := 0; i < len(id); i++ {
				require.True(t, TenantIDMayContain(f, id[i]), "format %q accepts %q, whose byte %q the analysis ruled out", f, id, id[i])
			}
		}
	}
}
