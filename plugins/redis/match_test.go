package main

import (
	"context"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, key string
		want         bool
	}{
		{"session:abc:*", "session:abc:1", true},
		{"session:abc:*", "session:abc:", true},
		{"session:abc:*", "session:abcd:1", false},
		{"*", "", false}, // Redis never matches the empty key... there is none
		{"*", "x", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"h[ae]llo", "hallo", true},
		{"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true},
		{"h[^e]llo", "hello", false},
		{"h[a-b]llo", "hbllo", true},
		{"h[b-a]llo", "hallo", true},
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{`\-`, "-", true},
		{"[", "[", false},
		{"[a", "a", true},
		{"*" + globEscape("t-1*") + "*", "session:t-1*:9", true},
		{"*" + globEscape("t-1*") + "*", "session:t-12:9", false},
		{"**a", "xa", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		// Redis compares range bounds as C chars, signed on x86-64: a bound
		// at or above 0x80 is negative, so [a-\xff] is [\xff-a], which
		// holds '0' and 0xff but not 'b' or 0x80.
		{"[a-\xff]", "0", true},
		{"[a-\xff]", "\xff", true},
		{"[a-\xff]", "b", false},
		{"[a-\xff]", "\x80", false},
		{"[\x80-\xbf]", "\xa0", true},
		{"[\x80-\xbf]", "a", false},
		{"[\x01-\xc3]", "\xc4", true}, // [-61, 1]
		{"[\x01-\xc3]", "\xff", true},
		{"[\x01-\xc3]", "\x02", false},
		{"[\x01-\xc3]", "\xc2", false},
		{"[^a-\xff]", "b", true},
		{"x[\xc3]y", "x\xc3y", true},
		{"\xc3*", "\xc3\xa9t\xc3\xa9", true},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, globMatch(tc.pattern, tc.key), "%q ~ %q", tc.pattern, tc.key)
	}
}

// TestGlobMatchRangesAgreeWithRedis matches every single-byte key against
// ranges whose bounds lie on both sides of 0x80, and compares with KEYS.
func TestGlobMatchRangesAgreeWithRedis(t *testing.T) {
	t.Parallel()
	srv := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := map[string]bool{}
	pipe := c.Pipeline()
	for b := 0; b < 256; b++ {
		k := string([]byte{byte(b)})
		keys[k] = true
		pipe.Set(ctx, k, "1", 0)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	bounds := []byte{0x01, '0', 'a', 'z', 0x7f, 0x80, 0xa0, 0xc3, 0xfe, 0xff}
	for _, lo := range bounds {
		for _, hi := range bounds {
			for _, pattern := range []string{
				"[" + string([]byte{lo, '-', hi}) + "]",
				"[^" + string([]byte{lo, '-', hi}) + "]",
				"[" + string([]byte{lo}) + "]",
			} {
				compareWithKeys(t, ctx, c, pattern, keys)
			}
		}
	}
}

// TestGlobMatchNestingLimitAgreesWithRedis: Redis gives up (no match) on a
// pattern that nests more than 1000 stars deep, to protect itself.
func TestGlobMatchNestingLimitAgreesWithRedis(t *testing.T) {
	t.Parallel()
	srv := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := map[string]bool{}
	for _, n := range []int{999, 1000, 1001, 1002, 1100} {
		k := strings.Repeat("a", n)
		keys[k] = true
		require.NoError(t, c.Set(ctx, k, "1", 0).Err())
	}
	for _, n := range []int{999, 1000, 1001, 1002, 1100} {
		compareWithKeys(t, ctx, c, strings.Repeat("a*", n), keys)
		compareWithKeys(t, ctx, c, strings.Repeat("*a", n), keys)
	}
}

func compareWithKeys(t *testing.T, ctx context.Context, c *redis.Client, pattern string, keys map[string]bool) {
	t.Helper()
	want, err := c.Keys(ctx, pattern).Result()
	require.NoError(t, err)
	redisMatches := map[string]bool{}
	for _, k := range want {
		redisMatches[k] = true
	}
	var onlyRedis, onlyOurs []string
	for k := range keys {
		switch ours := globMatch(pattern, k); {
		case ours && !redisMatches[k]:
			onlyOurs = append(onlyOurs, k)
		case !ours && redisMatches[k]:
			onlyRedis = append(onlyRedis, k)
		}
	}
	sort.Strings(onlyRedis)
	sort.Strings(onlyOurs)
	if len(onlyRedis)+len(onlyOurs) > 0 {
		t.Fatalf("pattern %q: Redis matches %q but globMatch does not; globMatch matches %q but Redis does not", pattern, onlyRedis, onlyOurs)
	}
}

// TestGlobMatchAgreesWithRedis compares the matcher with KEYS on a real
// server over random keys and patterns built from glob metacharacters.
func TestGlobMatchAgreesWithRedis(t *testing.T) {
	t.Parallel()
	srv := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	ctx := testsvc.Context(t, 2*time.Minute)
	// Bytes on both sides of 0x80 (and a UTF-8 lead byte) besides the
	// glob metacharacters.
	alphabet := []byte("ab-:*?[]^\\z\x80\xc3\xff")
	rnd := rand.New(rand.NewPCG(1, 2))
	str := func(max int) string {
		n := 1 + rnd.IntN(max)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		return string(b)
	}
	keys := map[string]bool{}
	for len(keys) < 300 {
		keys[str(6)] = true
	}
	pipe := c.Pipeline()
	for k := range keys {
		pipe.Set(ctx, k, "1", 0)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	for i := 0; i < 600; i++ {
		compareWithKeys(t, ctx, c, str(7), keys)
	}
}
