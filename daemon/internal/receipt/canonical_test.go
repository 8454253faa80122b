package receipt

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Vectors from RFC 8785 (appendix B and section 3.2.3) and the cases its
// rules single out.
func TestCanonicalJSON(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"whitespace and order": {`{ "b" : 1 , "a" : [ true , false , null ] }`, `{"a":[true,false,null],"b":1}`},
		"nested objects":       {`{"z":{"y":1,"x":2},"a":{}}`, `{"a":{},"z":{"x":2,"y":1}}`},
		// RFC 8785 3.2.3: sorted by UTF-16 code units, so U+1F600 (a
		// surrogate pair, D83D...) sorts before U+FB33 and after U+0080.
		"utf-16 order": {`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		"string escapes":      {`"\u0041\u00e9\u001f\b\f\n\r\t\"\\/<>&\u2028"`, "\"Aé\\u001f\\b\\f\\n\\r\\t\\\"\\\\/<>&\u2028\""},
		"integers":            {`[0,-0,1,-1,123456789,9007199254740991,1E3,1.0,100e-2]`, `[0,0,1,-1,123456789,9007199254740991,1000,1,1]`},
		"fractions":           {`[0.1,4.5,2e-3,0.000001,1e-7,-1.5e-10]`, `[0.1,4.5,0.002,0.000001,1e-7,-1.5e-10]`},
		"large":               {`[1e21,1e20,123456789012345680000,1.7976931348623157e308]`, `[1e+21,100000000000000000000,123456789012345680000,1.7976931348623157e+308]`},
		"rfc 8785 appendix b": {`[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001]`, `[333333333.3333333,1e+30,4.5,0.002,1e-27]`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tc.in))
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			again, err := CanonicalJSON(got)
			require.NoError(t, err)
			require.Equal(t, string(got), string(again), "the canonical form is its own canonical form")
		})
	}
}

func TestParseRefusesWhatIsNotOneStrictValue(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"duplicate member": {`{"a":1,"a":2}`, `member "a" appears twice`},
		"invalid utf-8":    {"{\"a\":\"\xff\"}", "not valid UTF-8"},
		"cut short":        {`{"a":[1,2`, "end of JSON"},
		"empty":            {``, "end of JSON"},
		"trailing value":   {`{} {}`, "data after the JSON value"},
		"trailing garbage": {`{}x`, "data after the JSON value"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// Every integer a count can be prints as itself.
func TestCanonicalNumberIntegers(t *testing.T) {
	for _, n := range []int64{0, 1, 7, 10, 999, 1000000, 1 << 40, 1<<53 - 1} {
		s, err := canonicalNumber(json.Number(strconv.FormatInt(n, 10)))
		require.NoError(t, err)
		require.Equal(t, strconv.FormatInt(n, 10), s)
	}
	_, err := canonicalNumber(json.Number("1e400"))
	require.Error(t, err)
	s, err := canonicalNumber(json.Number(strconv.FormatFloat(math.SmallestNonzeroFloat64, 'g', -1, 64)))
	require.NoError(t, err)
	require.Equal(t, "5e-324", s)
}

// FuzzCanonical: whatever Parse accepts has a canonical form that is
// stable and parses to the same canonical form.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null]}`, `"x\u0000"`, `[1e21,0.1]`, `{"\ud83d\ude00":{"\u0080":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := CanonicalJSON(data)
		if err != nil {
			return
		}
		again, err := CanonicalJSON(c)
		if err != nil {
			t.Fatalf("canonical form %q does not parse: %v", c, err)
		}
		if string(again) != string(c) {
			t.Fatalf("not stable: %q then %q", c, again)
		}
	})
}
