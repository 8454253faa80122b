package plugintest

import (
	"regexp"
	"strconv"
	"strings"
)

// HostileTenantIDs are ids that must delete nothing of anyone else: glob,
// SQL and path metacharacters, spaces, and ids built from a real one (the
// victim) by pattern, case, white space (spaces, tabs, line ends, no-break
// and ideographic spaces, a zero-width space), a delimiter suffix and, when
// the victim is a number, another spelling of the same number ("04",
// "4.0", "4e0", ...), which a numeric key column or attribute would take for
// the victim.
func HostileTenantIDs(victim string) []string {
	ids := []string{"*", "?", "[", "[a-z]*", "'", "' OR '1'='1", "%", "%%", "..", "../..", "a b", " ", `\`, "*:*",
		"'; DELETE FROM x; --", "\x00", "{tenant}"}
	if len(victim) > 2 {
		ids = append(ids,
			victim[:len(victim)-1]+"?",
			victim[:len(victim)-2]+"*",
			victim[:len(victim)-1]+"%",
			victim[:len(victim)-1]+"_",
			"["+victim[:1]+"]"+victim[1:],
			victim+"*",
			"*"+victim[1:],
			"../"+victim,
			victim+"/..",
		)
	}
	if victim != "" {
		ids = append(ids,
			strings.ToUpper(victim),
			strings.ToLower(victim),
			" "+victim, victim+" ", "\t"+victim, victim+"\t", victim+"\n", victim+"\r",
			"\u00a0"+victim, victim+"\u00a0", victim+"\u3000", victim+"\u200b",
		)
		for _, d := range delimiterSuffixes {
			ids = append(ids, victim+d)
		}
		ids = append(ids, numericSpellings(victim)...)
	}
	return dedupe(ids, victim)
}

// delimiterSuffixes make ids that extend a real one past a delimiter
// ("a" -> "a:x"): a key or path layout that does not end the id with a byte
// no id can hold mixes them up.
var delimiterSuffixes = []string{":x", "-x", "_x", ".x", "/x"}

var numberRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// numericSpellings are other texts of the number id is, when it is one.
func numericSpellings(id string) []string {
	if !numberRE.MatchString(id) {
		return nil
	}
	sign := ""
	if strings.HasPrefix(id, "-") {
		sign = "-"
	}
	abs := strings.TrimPrefix(id, "-")
	out := []string{sign + "0" + abs, id + "e0", id + "E0"}
	if sign == "" {
		out = append(out, "+"+id)
	}
	if strings.Contains(id, ".") {
		out = append(out, id+"0")
	} else {
		out = append(out, id+".0", id+".", sign+"0x"+abs)
	}
	if id == "0" {
		out = append(out, "-0", "-0.0")
	}
	return out
}

// bystander is a tenant seeded next to tenant A whose data must survive
// Delete(A) and stay out of Count(A).
type bystander struct {
	id  string
	why string
}

// bystandersOf are tenant ids that differ from a only in case, by a
// delimiter suffix, by surrounding white space or by the spelling of a
// number: the ids a sloppy match (case-insensitive, prefix, trimmed,
// padded with spaces as MySQL's PAD SPACE collations do, numeric) takes for
// a. Tabs and line ends are not among them: no tenant id can hold a control
// character (the hostile ids have them).
func bystandersOf(a string) []bystander {
	cands := []bystander{
		{strings.ToUpper(a), "the same id in upper case"},
		{strings.ToLower(a), "the same id in lower case"},
		{" " + a, "the same id with a leading space"},
		{a + " ", "the same id with a trailing space"},
		{a + "  ", "the same id with two trailing spaces"},
		{"\u00a0" + a, "the same id with a leading no-break space"},
		{a + "\u00a0", "the same id with a trailing no-break space"},
		{a + "\u3000", "the same id with a trailing ideographic space"},
	}
	for _, d := range delimiterSuffixes {
		cands = append(cands, bystander{a + d, "the id with the suffix " + d})
	}
	for _, n := range numericSpellings(a) {
		cands = append(cands, bystander{n, "another spelling of the same number"})
	}
	seen := map[string]bool{a: true}
	var out []bystander
	for _, c := range cands {
		if !seen[c.id] {
			seen[c.id] = true
			out = append(out, c)
		}
	}
	return out
}

func dedupe(ids []string, except string) []string {
	seen := map[string]bool{except: true}
	out := ids[:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// victim is a tenant besides A that the kit deletes, with bystanders of its
// own: one with a non-ASCII id, one with a numeric id.
type victim struct {
	id, why string
	seeded  int64
}

// unicodeVictim is a tenant id with an accented letter (in NFC), and the
// ids a normalising, accent- or case-insensitive match takes for it.
func unicodeVictim(base string) (string, []bystander) {
	id := base + "-Caf\u00e9"
	return id, []bystander{
		{base + "-Cafe\u0301", "the same id in Unicode NFD (e and a combining accent for é)"},
		{base + "-Cafe", "the same id without the accent"},
		{base + "-Caf\u00c9", "the same id with É for é"},
		{strings.ToUpper(id), "the same id in upper case"},
		{strings.ToLower(id), "the same id in lower case"},
		{id + " ", "the same id with a trailing space"},
	}
}

// numericVictim is a numeric tenant id and other spellings of its number.
func numericVictim(n int) (string, []bystander) {
	id := strconv.Itoa(n)
	out := []bystander{{" " + id, "the same number with a leading space"}, {id + " ", "the same number with a trailing space"}}
	for _, s := range numericSpellings(id) {
		out = append(out, bystander{s, "another spelling of the same number"})
	}
	return id, out
}
