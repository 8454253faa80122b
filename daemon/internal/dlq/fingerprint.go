package dlq

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/sdk/kafkaconv"
)

// Failure groups: dead letters that failed the same way share a group id,
// so that an operator sees "3 things broke" rather than 40,000 messages. The
// fingerprint is the error text with its variable parts replaced by
// placeholders, the original topic and, when a header names one, the
// exception class. It is computed once, at intake, and never changes with
// later attempts: a group is what the message arrived with.

// Group is what a message's failure group is made of.
type Group struct {
	ID             string // 16 lower-case hex digits
	Pattern        string // the normalised error text
	ExceptionClass string // the source's Origin.ErrorClass; "" when none
	// ErrorGroup is ErrorGroupID(Pattern): the groups of one failure seen
	// on several original topics, or through several sources, share it.
	ErrorGroup string
}

// fingerprintVersion changes when the normaliser changes what it produces,
// so that old and new ids never collide by accident.
const fingerprintVersion = "v2"

// Limits: a 64 KiB stack trace costs the normaliser time on every intake,
// and what tells failures apart is at the start.
const (
	maxNormaliseInput = 4096
	maxPatternLength  = 1024
)

// LegacyExceptionClass is the exception class the headers of a message
// stored before sources reported it give, by the Kafka conventions
// (kafkaconv), or "".
func LegacyExceptionClass(hs []Header) string {
	return kafkaconv.Origin(sdkHeaders(hs), "").ErrorClass
}

// groupCache remembers recent groups by their inputs: a storm repeats the
// same error text thousands of times, and normalising it is the costly part
// of intake's fingerprint. Cleared when full rather than evicting one by
// one: the next storm refills it.
var groupCache = struct {
	sync.Mutex
	m map[[3]string]Group
}{m: map[[3]string]Group{}}

const groupCacheSize = 4096

// FailureGroup is the group of a dead letter with this original topic,
// exception class (Origin.ErrorClass) and error text.
func FailureGroup(originalTopic, class, errorMessage string) Group {
	key := [3]string{originalTopic, class, errorMessage}
	if len(errorMessage) <= maxNormaliseInput {
		groupCache.Lock()
		g, ok := groupCache.m[key]
		groupCache.Unlock()
		if ok {
			return g
		}
	}
	g := failureGroup(originalTopic, errorMessage, class)
	if len(errorMessage) <= maxNormaliseInput {
		groupCache.Lock()
		if len(groupCache.m) >= groupCacheSize {
			clear(groupCache.m)
		}
		groupCache.m[key] = g
		groupCache.Unlock()
	}
	return g
}

func failureGroup(originalTopic, errorMessage, class string) Group {
	g := Group{Pattern: NormaliseError(errorMessage), ExceptionClass: class}
	g.ErrorGroup = ErrorGroupID(g.Pattern)
	h := sha256.New()
	for _, part := range []string{fingerprintVersion, originalTopic, g.ExceptionClass, g.Pattern} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	g.ID = hex.EncodeToString(h.Sum(nil))[:16]
	return g
}

// ErrorGroupID is the id of the error group of the failure groups whose
// normalised error text is pattern: one outage seen through Kafka, RabbitMQ
// and a failed-jobs table, each with its own original topic and exception
// class (or none), is one error group. It has the form of a group id, from
// a hash of its own, and depends on the pattern alone: the normaliser's
// version is already in what the pattern looks like.
func ErrorGroupID(pattern string) string {
	h := sha256.Sum256([]byte("error-group\n" + pattern))
	return hex.EncodeToString(h[:])[:16]
}

// ValidGroupID reports whether s has the form of a group id.
func ValidGroupID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// A rule replaces what re matches with repl. The rules run in order: the
// more specific shapes (a timestamp, a UUID) first, before the number rule
// would cut them into pieces.
//
// need is a cheap test that the rule can match at all: Go's regexp costs
// tens of microseconds per rule on a short text even when nothing
// matches, and intake fingerprints every message.
type rule struct {
	re   *regexp.Regexp
	repl string
	need func(string) bool
	// fn, when set, gives each match's replacement instead of repl (a
	// match that turns out not to be one is given back unchanged).
	fn func(string) string
}

func has(sub string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, sub) }
}

// hasMonth: a month's abbreviation and a colon (a time of day).
func hasMonth(s string) bool {
	if !strings.Contains(s, ":") {
		return false
	}
	for _, m := range []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// hasDate: four digits and a dash, the start of an ISO date.
func hasDate(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		switch {
		case isDigit(rune(s[i])):
			run++
		case s[i] == '-' && run >= 4:
			return true
		default:
			run = 0
		}
	}
	return false
}

// hasHexRun: five hex digits in a row.
func hasHexRun(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if c := rune(s[i]); isDigit(c) || isHexLetter(c) {
			if run++; run >= 5 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// hasPodSuffix: a dash, then five characters of podAlphabet that end a word.
func hasPodSuffix(s string) bool {
	for i := strings.IndexByte(s, '-'); i >= 0; {
		run := 0
		for j := i + 1; j < len(s) && strings.IndexByte("bcdfghjklmnpqrstvwxz2456789", s[j]) >= 0; j++ {
			run++
		}
		if run == 5 && (i+6 == len(s) || !isWordByte(s[i+6])) {
			return true
		}
		next := strings.IndexByte(s[i+1:], '-')
		if next < 0 {
			return false
		}
		i += 1 + next
	}
	return false
}

// hasTokenRun: 16 base64 characters in a row with upper case, lower case
// and a digit among them.
func hasTokenRun(s string) bool {
	run, upper, lower, digit := 0, false, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		case isDigit(rune(c)):
			digit = true
		case c == '+' || c == '/' || c == '_' || c == '-':
		default:
			run, upper, lower, digit = 0, false, false, false
			continue
		}
		if run++; run >= 16 && upper && lower && digit {
			return true
		}
	}
	return false
}

// hasUnitAfterDigit: a digit followed by the first letter of a duration unit.
func hasUnitAfterDigit(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if isDigit(rune(s[i])) && strings.IndexByte("numsh\xc2", s[i+1]) >= 0 {
			return true
		}
	}
	return false
}

// podAlphabet is what Kubernetes draws pod-name suffixes and ReplicaSet
// template hashes from (k8s.io/apimachinery/pkg/util/rand: no vowels, no
// 0, 1, 3, so that no word is spelt by chance).
const podAlphabet = `[bcdfghjklmnpqrstvwxz2456789]`

// token gives <token> for m when it reads as random base64: upper case,
// lower case and digits all present, and the class changing between at
// least 40% of neighbouring characters (random base64 about 60%, a
// CamelCase name about 30%).
func token(m string) string {
	class := func(c byte) int {
		switch {
		case c >= 'A' && c <= 'Z':
			return 0
		case c >= 'a' && c <= 'z':
			return 1
		case isDigit(rune(c)):
			return 2
		}
		return 3
	}
	var seen [4]bool
	changes := 0
	for i := 0; i < len(m); i++ {
		seen[class(m[i])] = true
		if i > 0 && class(m[i]) != class(m[i-1]) {
			changes++
		}
	}
	if !seen[0] || !seen[1] || !seen[2] || changes*10 < (len(m)-1)*4 {
		return m
	}
	return "<token>"
}

var (
	month   = `(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*`
	weekday = `(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*`
	rules   = []rule{
		// ISO 8601 / RFC 3339 and SQL timestamps, with optional fraction and zone.
		{regexp.MustCompile(`\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?| ?UTC| ?GMT)?)?`), "<ts>", hasDate, nil},
		// Date(1)/Java Date.toString and RFC 1123 (HTTP Date headers).
		{regexp.MustCompile(`(?:` + weekday + `,? )?(?:\d{1,2} ` + month + ` \d{4}|` + month + ` +\d{1,2}) \d{2}:\d{2}:\d{2}(?: [A-Z]{2,5})?(?: \d{4})?`), "<ts>", hasMonth, nil},
		// A bare time of day.
		{regexp.MustCompile(`\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b`), "<ts>", has(":"), nil},
		{regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<uuid>", func(s string) bool { return strings.Count(s, "-") >= 4 }, nil},
		// ULIDs: 26 Crockford base32 characters, the first 0-7 (the time).
		{regexp.MustCompile(`(?i)\b[0-7][0-9a-hjkmnp-tv-z]{25}\b`), "<id>", func(s string) bool { return len(s) >= 26 }, nil},
		{regexp.MustCompile(`(?i)\b[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b`), "<email>", has("@"), nil},
		// JSON objects quoted inside an error (Jackson's source excerpt,
		// Spring's GenericMessage payload, Elasticsearch bulk answers): the
		// quote rule below cannot pair their inner quotes.
		{regexp.MustCompile(`\{[^{}\n]*"[^{}\n]*\}`), "{<json>}", has("{"), nil},
		{regexp.MustCompile(`\{[^{}\n]*"[^{}\n]*\}`), "{<json>}", has("{"), nil},
		// Quoted values: "..." always, '...' only when the quote opens a
		// value (not the apostrophe of "can't").
		{regexp.MustCompile(`"[^"\n]*"`), `"<v>"`, has(`"`), nil},
		{regexp.MustCompile(`(^|[^\p{L}\p{N}])'[^'\n]*'`), `$1'<v>'`, has("'"), nil},
		// PostgreSQL's detail: Key (col)=(value).
		{regexp.MustCompile(`\)=\([^)\n]*\)`), `)=(<v>)`, has(")=("), nil},
		{regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b`), "<ip>", has("."), nil},
		// Tokens in base64 or base64url (API keys, JWT segments, opaque
		// cursors): 16 or more of its characters that change between
		// upper case, lower case and digits as often as random bytes do,
		// which CamelCase names (OrderCreatedV2Handler) do not.
		{regexp.MustCompile(`[A-Za-z0-9+/_-]{16,}={0,2}`), "", hasTokenRun, token},
		// Prefixed ids (Stripe-like cus_J8k2Lx9, ord_01HZX...): a word, an
		// underscore, then letters and digits with at least one digit.
		{regexp.MustCompile(`\b[A-Za-z]{2,}_(?:[A-Za-z]*[0-9][A-Za-z0-9]*)\b`), "<id>", has("_"), nil},
		{regexp.MustCompile(`(?i)\b0x[0-9a-f]+\b`), "<hex>", func(s string) bool { return strings.Contains(s, "0x") || strings.Contains(s, "0X") }, nil},
		// Go durations: 1.5s, 300ms, 1m30s.
		{regexp.MustCompile(`\b\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h)(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))*\b`), "<dur>", hasUnitAfterDigit, nil},
		// Kubernetes pod names: a Deployment's pod is the name, the
		// ReplicaSet's template hash and a 5-character suffix, both drawn
		// from the alphabet Kubernetes uses for them (no vowels, no 0, 1,
		// 3); a DaemonSet's or Job's has the suffix only, which must then
		// hold a digit for a word like "https" to stay a word.
		{regexp.MustCompile(`\b[a-z0-9]+(?:-[a-z0-9]+)*?-` + podAlphabet + `{6,10}-` + podAlphabet + `{5}\b`), "", hasPodSuffix,
			func(m string) string {
				return m[:strings.LastIndexByte(m[:strings.LastIndexByte(m, '-')], '-')] + "-<pod>"
			}},
		{regexp.MustCompile(`\b[a-z0-9]+(?:-[a-z0-9]+)*-` + podAlphabet + `{5}\b`), "", hasPodSuffix, func(m string) string {
			i := strings.LastIndexByte(m, '-')
			if strings.IndexFunc(m[i+1:], isDigit) < 0 {
				return m
			}
			return m[:i] + "-<pod>"
		}},
	}
	// hexID: eight or more hex digits with both a digit and a letter
	// (object identities like Foo@1b6d3586, git and Mongo ids); all-digit
	// runs are numbers, all-letter runs ("deadbeef", "facade") words.
	hexID = regexp.MustCompile(`(?i)\b[0-9a-f]{5,}\b`)
	// A number in any notation: 42, 3.5, .5, 1,234,567.89, 1.2E+08; a sign
	// is taken by replaceNumbers.
	number = regexp.MustCompile(`(?:\b\d{1,3}(?:,\d{3})+(?:\.\d+)?|\b\d+(?:\.\d+)?|\B\.\d+)(?:[eE][-+]?\d+)?\b`)
	// sciNumber is a number in scientific notation without a fraction
	// (1e100), which the hex id rule must leave to the number rule.
	sciNumber = regexp.MustCompile(`^\d+[eE]\d+$`)
	// An HTTP status after one of these words is what the error is about
	// (503 is not 404), not a variable part.
	statusWord = regexp.MustCompile(`(?i)(?:http(?:/\d(?:\.\d)?)?|status(?: code)?|code|response)[ :=]*$`)
)

// NormaliseError is the error text with its variable parts replaced:
// timestamps (<ts>), UUIDs (<uuid>), e-mail addresses (<email>), quoted
// values ("<v>", '<v>'), IP addresses (<ip>), prefixed and hex ids (<id>,
// <hex>), durations (<dur>) and numbers (<n>) that stand alone (the 64 of
// float64 is part of a word); an HTTP status after "HTTP", "status" or
// "code" is kept. Whitespace runs become one space.
func NormaliseError(s string) string {
	s = cut(s, maxNormaliseInput)
	for _, r := range rules {
		switch {
		case !r.need(s):
		case r.fn != nil:
			s = r.re.ReplaceAllStringFunc(s, r.fn)
		default:
			s = r.re.ReplaceAllString(s, r.repl)
		}
	}
	if hasHexRun(s) {
		s = hexID.ReplaceAllStringFunc(s, func(m string) string {
			if strings.IndexFunc(m, isDigit) >= 0 && strings.IndexFunc(m, isHexLetter) >= 0 && !sciNumber.MatchString(m) {
				return "<hex>"
			}
			return m
		})
	}
	s = replaceNumbers(s)
	s = strings.Join(strings.Fields(s), " ")
	return cut(s, maxPatternLength)
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }
func isWordByte(c byte) bool {
	return c == '_' || isDigit(rune(c)) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isHexLetter(r rune) bool { return r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' }

// replaceNumbers replaces standalone numbers by <n>, except a three-digit
// HTTP status right after a word that announces one.
func replaceNumbers(s string) string {
	var b strings.Builder
	last := 0
	for _, loc := range number.FindAllStringIndex(s, -1) {
		m := s[loc[0]:loc[1]]
		// A sign belongs to the number when it does not join two words
		// (the - of "-3.5e10", not of "abc-3").
		if i := loc[0]; i > 0 && (s[i-1] == '-' || s[i-1] == '+') && (i == 1 || !isWordByte(s[i-2])) {
			loc[0]--
		}
		b.WriteString(s[last:loc[0]])
		last = loc[1]
		if len(m) == 3 && m[0] >= '1' && m[0] <= '5' && statusWord.MatchString(s[max(0, loc[0]-20):loc[0]]) {
			b.WriteString(m)
			continue
		}
		b.WriteString("<n>")
	}
	b.WriteString(s[last:])
	return b.String()
}

// cut shortens s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
