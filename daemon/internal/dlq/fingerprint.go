package dlq

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
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
	ExceptionClass string // from a framework header; "" when none
}

// fingerprintVersion changes when the normaliser changes what it produces,
// so that old and new ids never collide by accident.
const fingerprintVersion = "v1"

// Limits: a 64 KiB stack trace costs the normaliser time on every intake,
// and what tells failures apart is at the start.
const (
	maxNormaliseInput = 4096
	maxPatternLength  = 1024
)

// exceptionClassHeaders name the failing exception's class, as Spring Kafka
// (DeadLetterPublishingRecoverer, @RetryableTopic, key deserialisation) and
// Kafka Connect's DLQ reporter write it; the latest one wins.
var exceptionClassHeaders = []string{
	"kafka_dlt-exception-fqcn",
	"kafka_exception-fqcn",
	"__connect.errors.exception.class.name",
	"kafka_dlt-key-exception-fqcn",
	"kafka_key-exception-fqcn",
}

// ExceptionClass is the exception class a header gives, or "".
func ExceptionClass(hs []Header) string {
	for _, name := range exceptionClassHeaders {
		for i := len(hs) - 1; i >= 0; i-- {
			if bytes.EqualFold(hs[i].Key, []byte(name)) {
				if c := sanitize(string(hs[i].Value), maxTopicLength); c != "" {
					return c
				}
				break
			}
		}
	}
	return ""
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
// error text and headers.
func FailureGroup(originalTopic, errorMessage string, hs []Header) Group {
	class := ExceptionClass(hs)
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
	h := sha256.New()
	for _, part := range []string{fingerprintVersion, originalTopic, g.ExceptionClass, g.Pattern} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	g.ID = hex.EncodeToString(h.Sum(nil))[:16]
	return g
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

// hasHexRun: eight hex digits in a row.
func hasHexRun(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if c := rune(s[i]); isDigit(c) || isHexLetter(c) {
			if run++; run >= 8 {
				return true
			}
		} else {
			run = 0
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

var (
	month   = `(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*`
	weekday = `(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*`
	rules   = []rule{
		// ISO 8601 / RFC 3339 and SQL timestamps, with optional fraction and zone.
		{regexp.MustCompile(`\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?| ?UTC| ?GMT)?)?`), "<ts>", hasDate},
		// Date(1)/Java Date.toString and RFC 1123 (HTTP Date headers).
		{regexp.MustCompile(`(?:` + weekday + `,? )?(?:\d{1,2} ` + month + ` \d{4}|` + month + ` +\d{1,2}) \d{2}:\d{2}:\d{2}(?: [A-Z]{2,5})?(?: \d{4})?`), "<ts>", hasMonth},
		// A bare time of day.
		{regexp.MustCompile(`\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b`), "<ts>", has(":")},
		{regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<uuid>", func(s string) bool { return strings.Count(s, "-") >= 4 }},
		{regexp.MustCompile(`(?i)\b[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b`), "<email>", has("@")},
		// JSON objects quoted inside an error (Jackson's source excerpt,
		// Spring's GenericMessage payload, Elasticsearch bulk answers): the
		// quote rule below cannot pair their inner quotes.
		{regexp.MustCompile(`\{[^{}\n]*"[^{}\n]*\}`), "{<json>}", has("{")},
		{regexp.MustCompile(`\{[^{}\n]*"[^{}\n]*\}`), "{<json>}", has("{")},
		// Quoted values: "..." always, '...' only when the quote opens a
		// value (not the apostrophe of "can't").
		{regexp.MustCompile(`"[^"\n]*"`), `"<v>"`, has(`"`)},
		{regexp.MustCompile(`(^|[^\p{L}\p{N}])'[^'\n]*'`), `$1'<v>'`, has("'")},
		// PostgreSQL's detail: Key (col)=(value).
		{regexp.MustCompile(`\)=\([^)\n]*\)`), `)=(<v>)`, has(")=(")},
		{regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b`), "<ip>", has(".")},
		// Prefixed ids (Stripe-like cus_J8k2Lx9, ord_01HZX...): a word, an
		// underscore, then letters and digits with at least one digit.
		{regexp.MustCompile(`\b[A-Za-z]{2,}_(?:[A-Za-z]*[0-9][A-Za-z0-9]*)\b`), "<id>", has("_")},
		{regexp.MustCompile(`(?i)\b0x[0-9a-f]+\b`), "<hex>", func(s string) bool { return strings.Contains(s, "0x") || strings.Contains(s, "0X") }},
		// Go durations: 1.5s, 300ms, 1m30s.
		{regexp.MustCompile(`\b\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h)(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))*\b`), "<dur>", hasUnitAfterDigit},
	}
	// hexID: eight or more hex digits with both a digit and a letter
	// (object identities like Foo@1b6d3586, git and Mongo ids); all-digit
	// runs are numbers, all-letter runs ("deadbeef", "facade") words.
	hexID  = regexp.MustCompile(`(?i)\b[0-9a-f]{8,}\b`)
	number = regexp.MustCompile(`\b\d+(?:\.\d+)?\b`)
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
		if r.need(s) {
			s = r.re.ReplaceAllString(s, r.repl)
		}
	}
	if hasHexRun(s) {
		s = hexID.ReplaceAllStringFunc(s, func(m string) string {
			if strings.IndexFunc(m, isDigit) >= 0 && strings.IndexFunc(m, isHexLetter) >= 0 {
				return "<hex>"
			}
			return m
		})
	}
	s = replaceNumbers(s)
	s = strings.Join(strings.Fields(s), " ")
	return cut(s, maxPatternLength)
}

func isDigit(r rune) bool     { return r >= '0' && r <= '9' }
func isHexLetter(r rune) bool { return r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' }

// replaceNumbers replaces standalone numbers by <n>, except a three-digit
// HTTP status right after a word that announces one.
func replaceNumbers(s string) string {
	var b strings.Builder
	last := 0
	for _, loc := range number.FindAllStringIndex(s, -1) {
		m := s[loc[0]:loc[1]]
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
