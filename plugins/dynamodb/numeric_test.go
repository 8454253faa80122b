package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// TestNumericKeyRefusesOtherSpellings is issue 10's case: with a numeric
// partition key, the tenant id "1e3" deleted tenant 1000's items, because
// DynamoDB compares numbers by value. Every spelling of a number but the
// canonical one is refused, permanently, and nothing is touched.
func TestNumericKeyRefusesOtherSpellings(t *testing.T) {
	t.Parallel()
	f := setupNumeric(t)
	tenants := []string{"1000", "1", "10", "100", "0", "4", "5", "-5", "1.5", "0.001", "12345678901234567890123456789012345678"}
	for _, tenant := range tenants {
		f.Seed(t, tenant, 7)
	}
	sums := func() map[string]string {
		out := map[string]string{}
		for _, tenant := range tenants {
			out[tenant] = f.Checksum(t, tenant)
		}
		return out
	}
	before := sums()

	d := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter).Deleter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A format that lets every spelling through, so that the plugin's own
	// check is what stands between them and tenant 1000.
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "dynamodb:org_events", Config: f.Config(t), TenantIDFormat: `^.{1,200}$`})
	require.NoError(t, err)

	hostile := []string{
		"1e3", "1E3", "1000e0", "10e2", "1.0e3", "+1000", "01000", "001000", "1000.0", "1000.00", "1000.",
		" 1000", "1000 ", "0x3e8", "1_000", "1,000", "1000.000000000000000000000000000000000001",
		"+4", "04", "4.0", "4e0", " 4", "4 ", "+5", "05", "-05", "-5.0", "-5e0",
		"-0", "-0.0", "0.0", "00", "0e0", "+0",
		"1.50", "01.5", ".001", "0.0010", "1e-3",
		"12345678901234567890123456789012345678.0", "123456789012345678901234567890123456780e-1",
		"123456789012345678901234567890123456789", // 39 significant digits
		"NaN", "Infinity", "-", ".", "", "1-2",
	}
	for _, id := range hostile {
		c, err := d.Count(ctx, &sdk.CountRequest{TenantID: id})
		if err == nil {
			t.Errorf("Count(%q) = %d, want a refusal", id, c.Count)
		} else {
			requirePermanentInvalidArgument(t, err, id)
		}
		resp, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: id}, func(int64) {})
		if err == nil {
			t.Errorf("Delete(%q) deleted %d, want a refusal", id, resp.DeletedCount)
		} else {
			requirePermanentInvalidArgument(t, err, id)
		}
		for tenant, want := range before {
			if got := f.Checksum(t, tenant); got != want {
				t.Fatalf("Count and Delete(%q) changed tenant %s's items", id, tenant)
			}
		}
	}

	// The canonical spelling deletes exactly its own tenant.
	resp, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "1000"}, func(int64) {})
	require.NoError(t, err)
	require.EqualValues(t, 7, resp.DeletedCount)
	require.Zero(t, f.Remaining(t, "1000"))
	after := sums()
	for _, tenant := range tenants {
		if tenant != "1000" {
			require.Equal(t, before[tenant], after[tenant], "tenant %s", tenant)
		}
	}
	for _, tenant := range []string{"-5", "1.5", "0.001", "0", "12345678901234567890123456789012345678"} {
		c, err := d.Count(ctx, &sdk.CountRequest{TenantID: tenant})
		require.NoError(t, err, "tenant %s", tenant)
		require.EqualValues(t, 7, c.Count, "tenant %s", tenant)
	}
}

func requirePermanentInvalidArgument(t *testing.T, err error, id string) {
	t.Helper()
	var e *sdk.Error
	require.ErrorAs(t, err, &e, "tenant id %q", id)
	require.Equal(t, sdk.CodeInvalidArgument, e.Code, "tenant id %q: %v", id, err)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "tenant id %q: %v", id, err)
	if n, ok := sdk.DeletedBefore(err); ok {
		require.Zero(t, n, "tenant id %q", id)
	}
}

// TestStringKeyTakesIDsAsTheyAre: with a string key "1000" and "1e3" are
// two tenants, and the tenant id format decides what reaches the table.
func TestStringKeyTakesIDsAsTheyAre(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tenant := range []string{"1000", "1e3", "01000"} {
		f.Seed(t, tenant, 3)
	}
	other := f.Checksum(t, "1000")
	d := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter).Deleter(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "dynamodb:audit_logs", Config: f.Config(t), TenantIDFormat: `^[0-9a-z]+$`})
	require.NoError(t, err)
	resp, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "1e3"}, func(int64) {})
	require.NoError(t, err)
	require.EqualValues(t, 3, resp.DeletedCount)
	require.Equal(t, other, f.Checksum(t, "1000"))
	require.EqualValues(t, 3, f.Remaining(t, "01000"))
	_, err = d.Count(ctx, &sdk.CountRequest{TenantID: strings.ToUpper("1e3")})
	requirePermanentInvalidArgument(t, err, "1E3")
}

func TestNumberProblem(t *testing.T) {
	t.Parallel()
	tests := map[string]string{ // id -> part of the problem; "" when canonical
		"0": "", "1": "", "1000": "", "-5": "", "1.5": "", "-0.5": "", "0.001": "",
		strings.Repeat("9", 38):                           "",
		strings.Repeat("1", 38) + strings.Repeat("0", 88): "", // 126 digits, 38 significant
		"0." + strings.Repeat("0", 129) + "1":             "", // 1E-130
		"1." + strings.Repeat("0", 36) + "1":              "", // 38 significant
		"1e3":                                             "no '+', exponent",
		"1E3":                                             "exponent",
		"+4":                                              "no '+'",
		" 4":                                              "spaces",
		"4 ":                                              "spaces",
		"0x4":                                             "hex",
		"":                                                "only digits",
		"-":                                               "only digits",
		".5":                                              "only digits",
		"5.":                                              "only digits",
		"1.2.3":                                           "only digits",
		"--1":                                             "only digits",
		"1_000":                                           "only digits",
		"NaN":                                             "only digits",
		"٣":                                               "only digits", // Arabic-Indic three
		"04":                                              "leading zero",
		"-04":                                             "leading zero",
		"00":                                              "leading zero",
		"4.0":                                             "trailing zero",
		"1.50":                                            "trailing zero",
		"0.0":                                             "trailing zero",
		"-0":                                              `"-0" is 0`,
		strings.Repeat("9", 39):                           "more than 38 significant digits",
		"1." + strings.Repeat("0", 37) + "1":              "more than 38 significant digits",
		"1" + strings.Repeat("0", 126):                    "larger than",
		"0." + strings.Repeat("0", 130) + "1":             "smaller than",
	}
	for id, want := range tests {
		got := numberProblem(id)
		if want == "" {
			require.Empty(t, got, "%q", id)
		} else {
			require.Contains(t, got, want, "%q", id)
		}
	}
}
