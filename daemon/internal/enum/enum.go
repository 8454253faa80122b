// Package enum turns a declared list of values (dead-letter statuses, bulk
// actions, job statuses, ...) into what the API's messages, the CLI's help
// and completion, the console's options and the docs show, so that each
// list is written once: where its type is declared.
package enum

import "strings"

// Value is a value of an enumeration with what it means, in the words the
// docs use.
type Value[T ~string] struct {
	Value   T
	Meaning string
}

// Strings is the values as strings, in declaration order.
func Strings[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// Values is the values of a described list, in declaration order.
func Values[T ~string](vs []Value[T]) []T {
	out := make([]T, len(vs))
	for i, v := range vs {
		out[i] = v.Value
	}
	return out
}

// Sentence joins values as a message says them: "a, b, c or d" (conj
// "or"), "a" alone, "" for none.
func Sentence[T ~string](vs []T, conj string) string {
	s := Strings(vs)
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " " + conj + " " + s[len(s)-1]
}
