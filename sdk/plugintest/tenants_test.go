package plugintest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHostileTenantIDs(t *testing.T) {
	tests := map[string]struct {
		victim string
		want   []string
		not    []string
	}{
		"uuid": {
			victim: "4444aaaa-dddd-4ddd-8ddd-444444444444",
			want: []string{"*", "4444AAAA-DDDD-4DDD-8DDD-444444444444", " 4444aaaa-dddd-4ddd-8ddd-444444444444",
				"4444aaaa-dddd-4ddd-8ddd-444444444444 ", "\t4444aaaa-dddd-4ddd-8ddd-444444444444", "4444aaaa-dddd-4ddd-8ddd-444444444444\t",
				"4444aaaa-dddd-4ddd-8ddd-444444444444:x", "4444aaaa-dddd-4ddd-8ddd-444444444444/x",
				"\u00a04444aaaa-dddd-4ddd-8ddd-444444444444", "4444aaaa-dddd-4ddd-8ddd-444444444444\u200b", "4444aaaa-dddd-4ddd-8ddd-444444444444\r"},
			not: []string{"4444aaaa-dddd-4ddd-8ddd-444444444444", "+4444aaaa-dddd-4ddd-8ddd-444444444444"},
		},
		"integer": {
			victim: "4",
			want:   []string{" 4", "4 ", "+4", "04", "4.0", "4e0", "0x4", "4\t", "4:x"},
			not:    []string{"4", "-0"},
		},
		"zero": {
			victim: "0",
			want:   []string{"-0", "+0", "00", "0.0", "0e0"},
		},
		"negative decimal": {
			victim: "-1.5",
			want:   []string{"-1.50", "-01.5", "-1.5e0"},
			not:    []string{"-1.5.0", "+-1.5", "0-1.5"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ids := HostileTenantIDs(tc.victim)
			seen := map[string]bool{}
			for _, id := range ids {
				require.False(t, seen[id], "%q twice", id)
				seen[id] = true
			}
			for _, id := range tc.want {
				require.True(t, seen[id], "%q missing from %q", id, ids)
			}
			for _, id := range tc.not {
				require.False(t, seen[id], "%q in %q", id, ids)
			}
		})
	}
}

func TestBystandersOf(t *testing.T) {
	ids := func(a string) []string {
		var out []string
		for _, b := range bystandersOf(a) {
			require.NotEqual(t, a, b.id)
			require.NotEmpty(t, b.why)
			out = append(out, b.id)
		}
		return out
	}
	require.Equal(t, []string{"AB12", " ab12", "ab12 ", "ab12  ", "\u00a0ab12", "ab12\u00a0", "ab12\u3000",
		"ab12:x", "ab12-x", "ab12_x", "ab12.x", "ab12/x"}, ids("ab12"))
	require.Equal(t, []string{" 1000", "1000 ", "1000  ", "\u00a0" + "1000", "1000\u00a0", "1000\u3000", "1000:x", "1000-x", "1000_x", "1000.x", "1000/x",
		"01000", "1000e0", "1000E0", "+1000", "1000.0", "1000.", "0x1000"}, ids("1000"))
}

func TestVictims(t *testing.T) {
	id, bys := unicodeVictim("t1")
	require.Equal(t, "t1-Caf\u00e9", id)
	var got []string
	for _, b := range bys {
		require.NotEqual(t, id, b.id)
		got = append(got, b.id)
	}
	require.Contains(t, got, "t1-Cafe\u0301", "NFD")
	require.Contains(t, got, "t1-Cafe", "no accent")
	require.Contains(t, got, "T1-CAF\u00c9", "upper case")

	id, bys = numericVictim(4711)
	require.Equal(t, "4711", id)
	got = nil
	for _, b := range bys {
		got = append(got, b.id)
	}
	require.Subset(t, got, []string{" 4711", "4711 ", "04711", "+4711", "4711.0", "4711e0"})
}

func TestDSNPasswords(t *testing.T) {
	tests := map[string][]string{
		"postgres://app:s3cret@db:5432/app":              {"s3cret"},
		"postgres://app:p%40ss@db/app?sslmode=disable":   {"p@ss", "p%40ss"},
		"app:pw-with-@-and-/@tcp(127.0.0.1:3306)/db":     {"pw-with-@-and-/"},
		"root:@tcp(127.0.0.1:3306)/db":                   nil,
		"host=db user=app password='a b c' dbname=x":     {"a b c"},
		"mysql://u@db/x":                                 nil,
		"just text":                                      nil,
		"redis://:tok3n@127.0.0.1:6379/0":                {"tok3n"},
		"u:pw@unix(/run/mysqld/mysqld.sock)/db?tls=true": {"pw"},
	}
	for in, want := range tests {
		require.Equal(t, want, dsnPasswords(in), in)
	}
}
