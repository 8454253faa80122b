package sdk

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Fingerprints computes plan fingerprints from lines of text (one fact of
// the schema or config per line: a table and its tenant column, a foreign
// key, a pattern, the store's identity) and remembers the lines of the
// last few it computed, so that a Delete refused for a stale fingerprint
// can say which facts changed instead of only that a hash differs. The
// zero value is ready to use and safe for concurrent use. Lines must not
// hold secrets: they may appear in an error.
type Fingerprints struct {
	mu     sync.Mutex
	recent map[string][]string
	order  []string
}

// fingerprintsKept is how many fingerprints' lines are remembered: the
// daemon checks the plan moments before it calls Delete, so the one it
// sends is among the last few computed unless the plugin restarted.
const fingerprintsKept = 16

// Of returns the fingerprint of lines: "sha256:" and the hex SHA-256 of
// the lines sorted, without duplicates, each length-prefixed. Order
// does not matter, so a fact that depends on order (the delete order) must
// be written into a line of its own.
func (f *Fingerprints) Of(lines []string) string {
	norm := normalLines(lines)
	h := sha256.New()
	for _, l := range norm {
		// Length-prefixed: a line holding a line break is not two lines.
		fmt.Fprintf(h, "%d:%s\n", len(l), l)
	}
	fp := "sha256:" + hex.EncodeToString(h.Sum(nil))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recent == nil {
		f.recent = map[string][]string{}
	}
	if _, ok := f.recent[fp]; !ok {
		f.order = append(f.order, fp)
		if len(f.order) > fingerprintsKept {
			delete(f.recent, f.order[0])
			f.order = f.order[1:]
		}
	}
	f.recent[fp] = norm
	return fp
}

// Check is the start of a Planner's Delete: nil when want is empty (a
// daemon that sends no fingerprint) or equals the fingerprint of lines,
// the facts Delete is about to delete with; otherwise a PlanChanged error
// naming the facts that differ from those want was computed from.
func (f *Fingerprints) Check(want string, lines []string) error {
	if want == "" {
		return nil
	}
	now := f.Of(lines)
	if now == want {
		return nil
	}
	f.mu.Lock()
	was, known := f.recent[want]
	f.mu.Unlock()
	if !known {
		return PlanChanged(want, now, []string{"this plugin process did not compute the checked plan (it restarted since), so it cannot say what changed; " +
			"compare the current plan (lifecycled tenant plan) with the approved one"})
	}
	return PlanChanged(want, now, diffLines(was, normalLines(lines)))
}

// maxChanges bounds how many changed facts an error lists.
const maxChanges = 12

// diffLines says which lines went and which came.
func diffLines(was, now []string) []string {
	in := func(set []string, l string) bool {
		i := sort.SearchStrings(set, l)
		return i < len(set) && set[i] == l
	}
	var out []string
	for _, l := range was {
		if !in(now, l) {
			out = append(out, "gone: "+l)
		}
	}
	for _, l := range now {
		if !in(was, l) {
			out = append(out, "new: "+l)
		}
	}
	if len(out) > maxChanges {
		out = append(out[:maxChanges], fmt.Sprintf("and %d more", len(out)-maxChanges))
	}
	return out
}

func normalLines(lines []string) []string {
	out := append([]string(nil), lines...)
	sort.Strings(out)
	n := 0
	for i, l := range out {
		if i == 0 || l != out[n-1] {
			out[n] = l
			n++
		}
	}
	return out[:n]
}

// PlanChanged is the error a Planner's Delete returns when the fingerprint
// the daemon checked (approved) is not the one of what it would delete with
// now: permanent (the same call cannot succeed until someone looks), with
// the code of a store that no longer matches its config (errors.Is
// ErrInvalidConfig), nothing deleted. changes names what differs. The
// daemon blocks the deleter; the job's next attempt (an operator's retry)
// checks the plan again and waits for its approval.
func PlanChanged(approved, now string, changes []string) error {
	msg := fmt.Sprintf("the plan changed between the daemon's plan check and Delete (checked fingerprint %s, now %s); nothing was deleted",
		approved, now)
	if len(changes) > 0 {
		msg += ": " + strings.Join(changes, "; ")
	}
	return &Error{Class: ClassPermanent, Code: CodeInvalidConfig, Message: msg}
}
