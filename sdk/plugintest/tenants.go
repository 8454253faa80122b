package plugintest

import (
	"regexp"
	"strings"
)

// HostileTenantIDs are ids that must delete nothing of anyone else: glob,
// SQL and path metacharacters, spaces, and ids built from a real one (the
// victim) by pattern, case, whitespace, a delimiter suffix and, when the
// victim is a number, another spelling of the same number ("04", "4.0",
// "4e0", ...), which a numeric key column or attribute would take for the
// victim.
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
			" "+victim, victim+" ", "\t"+victim, victim+"\t", victim+"\n",
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
// delimiter suffix, by surrounding whitespace or by the spelling of a
// number: the ids a sloppy match (case-insensitive, prefix, trimmed,
// numeric) takes for a.
func bystandersOf(a string) []bystander {
	cands := []bystander{
		{strings.ToUpper(a), "the same id in upper case"},
		{strings.ToLower(a), "the same id in lower case"},
		{" " + a, "the same id with a leading space"},
		{a + " ", "the same id with a trailing space"},
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
