package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

func checksums(t *testing.T, f *fixture, tenants ...string) map[string]string {
	out := map[string]string{}
	for _, tenant := range tenants {
		out[tenant] = f.Checksum(t, tenant)
	}
	return out
}

// TestPatternWhoseTenantCanHoldTheDelimiterIsRefused is issue 10's case:
// with tenant_id_format "^[a-z:]+$", deleting tenant "a" with
// "session:{tenant}:*" deleted the keys of tenant "a:b" and reported
// success. Configure must refuse the pattern, naming it and the byte.
func TestPatternWhoseTenantCanHoldTheDelimiterIsRefused(t *testing.T) {
	t.Parallel()
	srv := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const format = `^[a-z:]+$`
	colon := newFixture(srv.Addr, c, ":")
	for _, tenant := range []string{"a", "a:b", "b"} {
		colon.Seed(t, tenant, 5)
	}
	before := checksums(t, colon, "a", "a:b", "b")

	d := plugintest.Launch(t, buildPlugin(t), sdk.KindTenantDeleter).Deleter(t)
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "redis:sessions", TenantIDFormat: format,
		Config: map[string]any{"addr": srv.Addr, "patterns": []any{"session:{tenant}:*"}}})
	if err == nil {
		resp, derr := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "a"}, func(int64) {})
		t.Errorf("Configure accepted session:{tenant}:* although tenant ids may contain ':'; Delete(a) then returned %+v, %v, "+
			"and tenant a:b's keys went from checksum %s to %s", resp, derr, before["a:b"], colon.Checksum(t, "a:b"))
	}
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	for _, want := range []string{`patterns[0]`, `session:{tenant}:*`, `':'`, format, "delimiter"} {
		require.Contains(t, err.Error(), want)
	}
	require.Equal(t, before, checksums(t, colon, "a", "a:b", "b"), "a refused Configure touches nothing")

	// The same tenants under a delimiter the format excludes are told apart.
	pipe := newFixture(srv.Addr, c, "|")
	for _, tenant := range []string{"a", "a:b", "b"} {
		pipe.Seed(t, tenant, 5)
	}
	beforePipe := checksums(t, pipe, "a:b", "b")
	_, err = d.Configure(ctx, &sdk.ConfigureRequest{Name: "redis:sessions", TenantIDFormat: format, Config: pipe.Config(t)})
	require.NoError(t, err)
	resp, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "a"}, func(int64) {})
	require.NoError(t, err)
	require.EqualValues(t, 10, resp.DeletedCount)
	require.Zero(t, pipe.Remaining(t, "a"))
	require.Equal(t, beforePipe, checksums(t, pipe, "a:b", "b"))
	require.Equal(t, before, checksums(t, colon, "a", "a:b", "b"), "keys of the other layout are not matched")
}

// TestTenantIDOutsideTheFormatIsRefused: the plugin does not trust the
// daemon. An id the format does not accept (an upper-case UUID under
// "uuid") is refused with a permanent error and nothing is touched.
func TestTenantIDOutsideTheFormatIsRefused(t *testing.T) {
	t.Parallel()
	srv := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const lower = "44444444-dddd-4ddd-8ddd-444444444444"
	upper := strings.ToUpper(lower)
	f := newFixture(srv.Addr, c, ":")
	for _, tenant := range []string{lower, upper, "t1"} {
		f.Seed(t, tenant, 5)
	}
	before := checksums(t, f, lower, upper, "t1")
	d := plugintest.Launch(t, buildPlugin(t), sdk.KindTenantDeleter).Deleter(t)
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "redis:sessions", Config: f.Config(t), TenantIDFormat: "uuid"})
	require.NoError(t, err)
	for _, id := range []string{upper, "t1", " " + lower, lower + " ", "*", lower[:35] + "?"} {
		_, err := d.Count(ctx, &sdk.CountRequest{TenantID: id})
		requireInvalidArgument(t, err, id)
		_, err = d.Delete(ctx, &sdk.DeleteRequest{TenantID: id}, func(int64) {})
		requireInvalidArgument(t, err, id)
		if n, ok := sdk.DeletedBefore(err); ok {
			require.Zero(t, n)
		}
	}
	require.Equal(t, before, checksums(t, f, lower, upper, "t1"))
	n, err := d.Count(ctx, &sdk.CountRequest{TenantID: lower})
	require.NoError(t, err)
	require.EqualValues(t, 10, n.Count)
}

func requireInvalidArgument(t *testing.T, err error, id string) {
	t.Helper()
	var e *sdk.Error
	require.ErrorAs(t, err, &e, "tenant id %q", id)
	require.Equal(t, sdk.CodeInvalidArgument, e.Code, "tenant id %q: %v", id, err)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "tenant id %q: %v", id, err)
}

func TestPatternRules(t *testing.T) {
	t.Parallel()
	const permissive = `^[a-z:]+$`
	tests := map[string]struct {
		format, pattern string
		want            string // a part of the problem; "" when accepted
	}{
		"uuid, colon after":             {"uuid", "session:{tenant}:*", ""},
		"empty format is uuid":          {"", "session:{tenant}:*", ""},
		"uuid, dash after":              {"uuid", "session:{tenant}-*", `the byte '-' right after {tenant} can occur inside a tenant id under tenant_id_format uuid`},
		"uuid, hex digit after":         {"uuid", "session:{tenant}a", `'a'`},
		"ends with {tenant}":            {permissive, "session:{tenant}", ""},
		"only {tenant}":                 {permissive, "{tenant}", ""},
		"starts with {tenant}":          {"uuid", "{tenant}:cart", ""},
		"issue 10: colon in the format": {permissive, "session:{tenant}:*", `the byte ':' right after {tenant} can occur inside a tenant id under tenant_id_format ^[a-z:]+$, so tenant "a" would also match the keys of tenant "a:b"`},
		"suggests a delimiter":          {permissive, "session:{tenant}:*", `(e.g. '|', which tenant_id_format ^[a-z:]+$ excludes)`},
		"pipe is excluded":              {permissive, "session:{tenant}|*", ""},
		"escaped colon is a colon":      {permissive, `session:{tenant}\:*`, `the byte ':'`},
		"escaped colon under uuid":      {"uuid", `session:{tenant}\:*`, ""},
		"star after":                    {"uuid", "session:{tenant}*", `'*' right after {tenant} is a glob, so tenant "a" would also match the keys of tenant "ab"`},
		"question mark after":           {"uuid", "session:{tenant}?", `'?' right after {tenant} is a glob`},
		"set after":                     {"uuid", "session:{tenant}[:]", `'[' right after {tenant} is a glob`},
		"star before":                   {"uuid", "*:{tenant}:*", `a * before {tenant}`},
		"escaped star before":           {"uuid", `a\*:{tenant}:*`, ""},
		"question mark before":          {"uuid", "s?:{tenant}:*", ""},
		"closed set before":             {"uuid", "s[ab]:{tenant}:*", ""},
		"{tenant} inside a set":         {"uuid", "s[a{tenant}]:*", "inside a [...] set"},
		"set with ] escaped":            {"uuid", `s[\]{tenant}]:*`, "inside a [...] set"},
		"backslash escapes the id":      {"uuid", `s\{tenant}:*`, `would escape the tenant id's first byte`},
		"escaped backslash before":      {"uuid", `s\\{tenant}:*`, ""},
		"no delimiter the format lacks": {`^.+$`, "s:{tenant}:*", `excludes none of`},
		"non-ASCII delimiter, uuid":     {"uuid", "s:{tenant}\xc2\xa7*", ""},
		"non-ASCII delimiter, letters":  {`^\p{L}+$`, "s:{tenant}\xc3\xa9*", `the byte '\xc3' right after {tenant}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := patternProblem(tc.format, tc.pattern)
			if tc.want == "" {
				require.Empty(t, got)
				return
			}
			require.Contains(t, got, tc.want)
			require.Contains(t, got, fmt.Sprintf("%q", tc.pattern), "names the pattern")
		})
	}
}

func TestRangeRules(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		pattern, want string
	}{
		"ASCII range":               {"s:{tenant}:[a-z]*", ""},
		"high bound":                {"s:{tenant}:[a-\xff]*", `the range "a-\xff" has a bound at or above 0x80`},
		"high low bound":            {"s[\x80-\x90]:{tenant}:*", `bound at or above 0x80`},
		"negated":                   {"s:{tenant}:[^\xc3-z]", `bound at or above 0x80`},
		"high bytes listed":         {"s:{tenant}:[\xc3\xa9]", ""},
		"escaped bracket":           {`s:{tenant}:\[\xc3-\xff]`, ""},
		"escaped byte in a set":     {"s:{tenant}:[\\\xc3-z]", ""},
		"unterminated set":          {"s:{tenant}:[a-", ""},
		"high bytes outside a set":  {"s\xc3-\xff:{tenant}:*", ""},
		"range right after a caret": {"s:{tenant}:[^a-c]", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := rangeProblem(tc.pattern)
			if tc.want == "" {
				require.Empty(t, got)
				return
			}
			require.Contains(t, got, tc.want)
		})
	}
}
