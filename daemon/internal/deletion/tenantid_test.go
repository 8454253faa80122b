package deletion_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

func TestCanonicalTenantID(t *testing.T) {
	const lower = "550e8400-e29b-41d4-a716-446655440000"
	tests := map[string]struct {
		id, format string
		want       string // "" when refused
	}{
		"uuid":                      {lower, "uuid", lower},
		"uuid upper case":           {"550E8400-E29B-41D4-A716-446655440000", "uuid", lower},
		"uuid mixed case":           {"550e8400-E29b-41D4-a716-446655440000", "uuid", lower},
		"issue 10 case 5":           {"44444444-DDDD-4DDD-8DDD-444444444444", "uuid", "44444444-dddd-4ddd-8ddd-444444444444"},
		"default format":            {"550E8400-E29B-41D4-A716-446655440000", "", lower},
		"not a uuid":                {"tenant-1", "uuid", ""},
		"uuid without dashes":       {"550e8400e29b41d4a716446655440000", "uuid", ""},
		"uuid in braces":            {"{" + lower + "}", "uuid", ""},
		"urn uuid":                  {"urn:uuid:" + lower, "uuid", ""},
		"uuid with glob":            {"550e8400-e29b-41d4-a716-44665544000*", "uuid", ""},
		"uuid with space":           {" " + lower, "uuid", ""},
		"uuid with trailing nl":     {lower + "\n", "uuid", ""},
		"fullwidth digit uuid":      {"５50e8400-e29b-41d4-a716-446655440000", "uuid", ""},
		"kelvin sign in place of k": {"550e8400-e29b-41d4-a716-44665544000\u212a", "uuid", ""},
		"empty":                     {"", "uuid", ""},
		"10 KB":                     {strings.Repeat("a", 10*1024), "^[a-z]+$", ""},
		"256 bytes":                 {strings.Repeat("a", 256), "^[a-z]+$", ""},
		"255 bytes":                 {strings.Repeat("a", 255), "^[a-z]+$", strings.Repeat("a", 255)},
		"control char":              {"abc\ndef", "^.+$", ""},
		"invalid utf8":              {"\xff\xfe", "^.+$", ""},
		// A regular expression defines its own spelling: nothing is folded.
		"regexp kept as given":  {"Acme-Co", "^[A-Za-z0-9-]{3,64}$", "Acme-Co"},
		"regexp uuid kept":      {"550E8400-E29B-41D4-A716-446655440000", "^[0-9A-Fa-f-]{36}$", "550E8400-E29B-41D4-A716-446655440000"},
		"regexp numeric kept":   {"+4", "^[+0-9]{1,20}$", "+4"},
		"regexp sql quote":      {"acme' OR '1'='1", "^[a-z0-9-]{3,64}$", ""},
		"regexp glob":           {"acme*", "^[a-z0-9-]{3,64}$", ""},
		"regexp dotdot allowed": {"..", "^[a-z0-9.-]{1,64}$", ".."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := deletion.CanonicalTenantID(tc.id, tc.format)
			if tc.want == "" {
				require.ErrorIs(t, err, derrors.ErrInvalid)
				require.Empty(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			again, err := deletion.CanonicalTenantID(got, tc.format)
			require.NoError(t, err)
			require.Equal(t, got, again, "the canonical spelling is its own canonical spelling")
		})
	}
}

func TestCanonicalTenantIDBadFormatIsNotBadInput(t *testing.T) {
	_, err := deletion.CanonicalTenantID("acme", "^[a-z$")
	require.Error(t, err)
	require.False(t, errors.Is(err, derrors.ErrInvalid), "an invalid expression is the config's fault, not the caller's")
	require.Contains(t, err.Error(), "tenant_id_format")
}

func FuzzCanonicalTenantID(f *testing.F) {
	f.Add("550E8400-E29B-41D4-A716-446655440000")
	f.Add("44444444-dddd-4ddd-8ddd-444444444444")
	f.Add("*")
	f.Fuzz(func(t *testing.T, id string) {
		got, err := deletion.CanonicalTenantID(id, "uuid")
		if err != nil {
			require.ErrorIs(t, err, derrors.ErrInvalid)
			return
		}
		require.Equal(t, strings.ToLower(id), got)
		require.Len(t, got, 36)
		again, err := deletion.CanonicalTenantID(got, "uuid")
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
}
