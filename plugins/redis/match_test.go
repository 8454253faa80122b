package main

import (
	"context"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

func TestGlobMatch(t *testing.T) {
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
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, globMatch(tc.pattern, tc.key), "%q ~ %q", tc.pattern, tc.key)
	}
}

// TestGlobMatchAgreesWithRedis compares the matcher with KEYS on a real
// server over random keys and patterns built from glob metacharacters.
func TestGlobMatchAgreesWithRedis(t *testing.T) {
	srv := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	ctx := context.Background()
	alphabet := []byte(`ab-:*?[]^\`)
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
	for i := 0; i < 400; i++ {
		pattern := str(7)
		want, err := c.Keys(ctx, pattern).Result()
		require.NoError(t, err)
		var got []string
		for k := range keys {
			if globMatch(pattern, k) {
				got = append(got, k)
			}
		}
		sort.Strings(want)
		sort.Strings(got)
		if len(want) == 0 {
			want = nil
		}
		require.Equal(t, want, got, "pattern %q", pattern)
	}
}
